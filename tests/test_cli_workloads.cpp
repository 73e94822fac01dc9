// SPDX-License-Identifier: Apache-2.0
// The workloads' own options and files through the CLI (what every workload does is
// tests/cli/workloads.cpp's): run's gradient file is bit for bit what the workload's typed C++ API
// returns for the inputs init wrote, with the options that set each workload apart, and the
// problems its library refuses exit with status 2.
#include "cli_fixture.hpp"

#include <tapeflow/workloads/allen_cahn.hpp>
#include <tapeflow/workloads/burgers.hpp>
#include <tapeflow/workloads/gmm.hpp>
#include <tapeflow/workloads/lbm.hpp>
#include <tapeflow/workloads/lstm.hpp>
#include <tapeflow/workloads/rk4.hpp>
#include <tapeflow/workloads/common/segment_trials.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow {
namespace {

namespace wl = workloads;

template <class T>
std::vector<std::vector<T>> parts_of(std::vector<T> const& all, std::vector<std::size_t> const& sizes)
{
  std::vector<std::vector<T>> parts;
  std::size_t at = 0;
  for (std::size_t n : sizes) {
    parts.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(at), all.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  EXPECT_EQ(at, all.size()) << "the file holds " << all.size() << " values, the parts " << at;
  return parts;
}

template <class T>
void expect_same_bits(std::vector<T> const& cli, std::vector<T> const& api, char const* what)
{
  ASSERT_EQ(cli.size(), api.size()) << what;
  EXPECT_EQ(std::memcmp(cli.data(), api.data(), api.size() * sizeof(T)), 0) << what << ": CLI and API differ";
}

template <class T>
std::vector<T> concat(std::vector<std::vector<T> const*> const& parts)
{
  std::vector<T> all;
  for (auto const* p : parts) { all.insert(all.end(), p->begin(), p->end()); }
  return all;
}

TEST_F(Cli, LbmGradientIsTheApiGradient)
{
  ASSERT_EQ(run("init lbm --nx 12 --ny 7 --seed 3 --out " + path("in.bin")), 0) << output_;
  ASSERT_EQ(run("run lbm --nx 12 --ny 7 --steps 5 --tau 0.9 --backend cpu --policy recompute --input " + path("in.bin") +
                " --grad-out " + path("g.bin") + " --json " + path("s.json")),
            0)
    << output_;
  wl::lbm::problem p{12, 7, 5};
  p.tau = 0.9;
  wl::lbm::options o;
  o.kind = backend::cpu;
  o.policy = tape_policy::recompute;
  std::vector<float> const f0 = read<float>("in.bin");
  EXPECT_EQ(f0, wl::lbm::random_state<float>(p, 3));  // init wrote the library's distribution
  expect_same_bits(read<float>("g.bin"), wl::lbm::gradient(p, f0, o).gradient, "lbm");
  EXPECT_NE(text("s.json").find("\"policy\": \"recompute\""), std::string::npos) << text("s.json");
}

TEST_F(Cli, GmmGradientIsTheApiGradient)
{
  ASSERT_EQ(run("init gmm --d 3 --k 4 --points 70 --seed 2 --out " + path("in.bin")), 0) << output_;
  ASSERT_EQ(run("run gmm --d 3 --k 4 --points 70 --gamma 0.5 --m 2 --backend cpu --staging ring --input " +
                path("in.bin") + " --grad-out " + path("g.bin") + " --json " + path("s.json")),
            0)
    << output_;
  wl::gmm::problem p{3, 4, 70};
  p.gamma = 0.5;
  p.m = 2;
  std::vector<std::vector<double>> in = parts_of(read<double>("in.bin"), {4, 12, 24, 210});
  wl::gmm::inputs const inputs{in[0], in[1], in[2], in[3]};
  wl::gmm::options o;
  o.kind = backend::cpu;
  wl::gmm::gradient_result const r = wl::gmm::gradient(p, inputs, o);
  expect_same_bits(read<double>("g.bin"), concat<double>({&r.d_alphas, &r.d_means, &r.d_icf}), "gmm");
  EXPECT_NE(text("s.json").find("\"loss\": "), std::string::npos) << text("s.json");
  EXPECT_NE(text("s.json").find("\"cpu_staging\": \"ring\""), std::string::npos) << text("s.json");
}

TEST_F(Cli, LstmGradientIsTheApiGradient)
{
  std::string const shape = " --batch 3 --steps 4 --input-size 5 --hidden 6";
  ASSERT_EQ(run("init lstm" + shape + " --dtype f64 --out " + path("in.bin")), 0) << output_;
  ASSERT_EQ(run("run lstm" + shape + " --dtype f64 --backend cpu --budget 2K --input " + path("in.bin") +
                " --grad-out " + path("g.bin")),
            0)
    << output_;
  wl::lstm::problem const p{3, 4, 5, 6};
  std::vector<std::vector<double>> in = parts_of(read<double>("in.bin"), {24 * 5, 24 * 6, 24, 4 * 3 * 5, 18, 18});
  wl::lstm::weights<double> const w{in[0], in[1], in[2]};
  wl::lstm::sequence<double> const seq{in[3], in[4], in[5]};
  wl::lstm::options o;
  o.kind = backend::cpu;
  o.budget_bytes = 2048;
  auto const r = wl::lstm::gradient(p, w, seq, o);
  expect_same_bits(read<double>("g.bin"), concat<double>({&r.gradient.w, &r.gradient.u, &r.gradient.b}), "lstm");
}

TEST_F(Cli, PackedLstmGradientIsTheApiGradientAndItsPlanListsEveryLayer)
{
  std::string const shape = " --batch 3 --steps 4 --input-size 5 --hidden 6";
  ASSERT_EQ(run("init lstm" + shape + " --dtype f64 --out " + path("in.bin")), 0) << output_;
  ASSERT_EQ(run("run lstm" + shape + " --lengths 4,2,1 --dtype f64 --backend cpu --input " + path("in.bin") +
                " --grad-out " + path("g.bin") + " --json " + path("s.json")),
            0)
    << output_;
  EXPECT_NE(output_.find("packed: lengths 4 down to 1, 7 sequence steps of 12"), std::string::npos) << output_;
  EXPECT_NE(text("s.json").find("\"lengths\": [4, 2, 1]"), std::string::npos) << text("s.json");
  wl::lstm::problem p{3, 4, 5, 6};
  p.lengths = {4, 2, 1};
  std::vector<std::vector<double>> in = parts_of(read<double>("in.bin"), {24 * 5, 24 * 6, 24, 4 * 3 * 5, 18, 18});
  wl::lstm::weights<double> const w{in[0], in[1], in[2]};
  wl::lstm::sequence<double> const seq{in[3], in[4], in[5]};
  wl::lstm::options o;
  o.kind = backend::cpu;
  auto const r = wl::lstm::gradient(p, w, seq, o);
  expect_same_bits(read<double>("g.bin"), concat<double>({&r.gradient.w, &r.gradient.u, &r.gradient.b}), "lstm");
  // Layers of 3, 2, 1, 1 sequences of 6 cells.
  ASSERT_EQ(run("plan lstm" + shape + " --lengths 4,2,1 --backend cpu --json " + path("p.json")), 0) << output_;
  EXPECT_NE(output_.find("tape 4 layers of up to"), std::string::npos) << output_;
  EXPECT_NE(text("p.json").find("\"records_per_step\": [18, 12, 6, 6]"), std::string::npos) << text("p.json");
  // Measured costs over those layers: one entry per step in the run's JSON, the same bits.
  ASSERT_EQ(run("run lstm" + shape + " --lengths 4,2,1 --dtype f64 --backend cpu --budget 2K --measure-steps --input " +
                path("in.bin") + " --grad-out " + path("g.bin") + " --json " + path("m.json")),
            0)
    << output_;
  std::string const measured = text("m.json");
  std::size_t const every = measured.find("\"step_costs_per_step\"");
  ASSERT_NE(every, std::string::npos) << measured;
  std::size_t entries = 0;
  for (std::size_t at = measured.find("\"reverse_ms\"", every); at != std::string::npos && at < measured.find(']', every);
       at = measured.find("\"reverse_ms\"", at + 1)) {
    ++entries;
  }
  EXPECT_EQ(entries, 4u) << measured;
  expect_same_bits(read<double>("g.bin"), concat<double>({&r.gradient.w, &r.gradient.u, &r.gradient.b}), "lstm");
}

TEST_F(Cli, Rk4PlansAnArenaOfMillionsOfSlotsWithoutMakingIt)
{
  // 2^25 device slots of one 32-lane chunk each: the plan made the arena, and its three events a
  // slot (7 GB, then out of memory).
  ASSERT_EQ(run("plan rk4 --particles 1 --max-steps 2147483647 --chunk-steps 1 --budget 32G --backend cpu"), 0)
    << output_;
  EXPECT_NE(output_.find("33554432 device slots"), std::string::npos) << output_;
}

TEST_F(Cli, Rk4GradientIsTheApiGradient)
{
  std::string const shape = " --particles 40 --max-steps 30 --dt 0.02";
  ASSERT_EQ(run("init rk4" + shape + " --out " + path("in.bin")), 0) << output_;
  for (std::string const tape : {"arena", "global-stack"}) {
    std::string const chunks = tape == "arena" ? " --chunk-steps 8" : "";  // the arena's own flag
    ASSERT_EQ(run("run rk4" + shape + " --backend cpu --tape " + tape + chunks + " --input " + path("in.bin") +
                  " --grad-out " + path("g.bin") + " --json " + path("s.json")),
              0)
      << output_;
    wl::rk4::problem p;
    p.particles = 40;
    p.max_steps = 30;
    p.dt = 0.02;
    std::vector<std::vector<float>> in = parts_of(read<float>("in.bin"), {240, 40});
    wl::rk4::options o;
    o.kind = backend::cpu;
    o.tape = tape == "arena" ? wl::rk4::method::arena : wl::rk4::method::global_stack;
    o.chunk_steps = 8;
    auto const r = wl::rk4::gradient(p, in[0], in[1], o);
    expect_same_bits(read<float>("g.bin"), r.gradient, tape.c_str());
    EXPECT_NE(text("s.json").find("\"tape\": \"" + tape + "\""), std::string::npos) << text("s.json");
    EXPECT_EQ(text("s.json").find("\"arena\": ") != std::string::npos, tape == "arena") << text("s.json");
  }
}

TEST_F(Cli, BurgersGradientIsTheApiGradient)
{
  ASSERT_EQ(run("init burgers --n 301 --seed 8 --out " + path("in.bin")), 0) << output_;
  ASSERT_EQ(run("run burgers --n 301 --steps 7 --a 0.05 --b 0.3 --backend cpu --staging ring --tile-records 9 --input " +
                path("in.bin") + " --grad-out " + path("g.bin") + " --json " + path("s.json")),
            0)
    << output_;
  wl::burgers::problem const p{301, 7, 0.05, 0.3};
  wl::burgers::options o;
  o.kind = backend::cpu;  // in place: the ring with its halo gives the same bits
  expect_same_bits(read<float>("g.bin"), wl::burgers::gradient(p, read<float>("in.bin"), o).gradient, "burgers");
  EXPECT_NE(text("s.json").find("\"halo_records\": 1"), std::string::npos) << text("s.json");
  EXPECT_NE(text("s.json").find("\"staged_tiles\": 63"), std::string::npos) << text("s.json");  // 9 tiles x 7 layers
}

TEST_F(Cli, AllenCahnSegmentsAreTheApiSegmentsAndThePlanShowsThem)
{
  ASSERT_EQ(run("init allen-cahn --n 40 --seed 5 --out " + path("in.bin")), 0) << output_;
  ASSERT_EQ(run("run allen-cahn --n 40 --steps 9 --segment 4 --backend cpu --input " + path("in.bin") + " --grad-out " +
                path("g.bin") + " --json " + path("s.json")),
            0)
    << output_;
  wl::allen_cahn::options o;
  o.kind = backend::cpu;
  o.segment = 4;
  std::vector<float> const u0 = read<float>("in.bin");
  wl::allen_cahn::gradient_result<float> const api = wl::allen_cahn::gradient(wl::allen_cahn::problem{40, 9}, u0, o);
  expect_same_bits(read<float>("g.bin"), api.gradient, "allen-cahn --segment 4");
  EXPECT_EQ(api.chain.steps, 3u) << "segments of 4, 4 and 1 steps";
  EXPECT_NE(text("s.json").find("\"segment_steps\": 4"), std::string::npos) << text("s.json");
  ASSERT_EQ(run("plan allen-cahn --n 40 --steps 9 --segment auto --backend cpu"), 0) << output_;
  EXPECT_NE(output_.find("stencil: segments of "), std::string::npos) << output_;
  EXPECT_NE(output_.find("states moved per step"), std::string::npos) << output_;
  // Every stencil workload's plan shows its segments (the wave's did not), in 2-D and 3-D.
  for (auto const& [args, says] : std::vector<std::pair<std::string, std::string>>{
         {"plan lbm --nx 16 --ny 16 --steps 9 --segment 2 --backend cpu", "stencil: segments of 2 steps"},
         {"plan wave --nx 16 --ny 16 --steps 9 --segment 2 --backend cpu", "stencil: segments of 2 steps"},
         {"plan wave --nx 8 --ny 8 --nz 8 --steps 9 --segment 3 --backend cpu", "stencil: segments of 3 steps"},
       }) {
    ASSERT_EQ(run(args), 0) << args << "\n" << output_;
    EXPECT_NE(output_.find(says), std::string::npos) << args << "\n" << output_;
  }
  // On the CPU a tile's share of the cache is the same with or without the GPU's opt-in.
  ASSERT_EQ(run("plan burgers --n 4000 --steps 9 --segment auto --shared-opt-in --backend cpu"), 0) << output_;
  EXPECT_NE(output_.find("stencil: segments of "), std::string::npos) << output_;
  // A GPU's block size for a tile; the CPU runs a tile on one thread.
  ASSERT_EQ(run("plan allen-cahn --n 40 --steps 9 --segment 4 --segment-threads 128 --backend cpu"), 0) << output_;
  EXPECT_NE(output_.find("stencil: segments of 4 steps"), std::string::npos) << output_;
  for (auto const& [args, says] : std::vector<std::pair<std::string, std::string>>{
         {"plan allen-cahn --n 40 --steps 9 --segment 2 --tape partials", "--tape values"},
         {"plan allen-cahn --n 40 --steps 9 --segment 10", "longer than the 9 steps"},
         {"plan allen-cahn --n 40 --steps 9 --segment 17", "between 1 and 16"},
         {"plan allen-cahn --n 40 --steps 9 --shared-opt-in", "--segment K (K > 1) or --segment auto"},
         {"plan lbm --nx 8 --ny 8 --steps 9 --shared-opt-in", "--segment K (K > 1) or --segment auto"},
         {"plan allen-cahn --n 40 --steps 9 --segment-threads 128", "--segment K (K > 1) or --segment auto"},
         {"plan wave --nx 8 --ny 8 --steps 9 --segment 2 --segment-threads 100", "multiple of 32"},
         {"plan burgers --n 64 --steps 9 --segment 2 --segment-threads 2048", "between 32 and 1024"},
       }) {
    EXPECT_EQ(run(args), 2) << args;
    EXPECT_NE(output_.find(says), std::string::npos) << args << "\n" << output_;
  }
}

TEST(SegmentTrials, CandidatesAreOneStepTwoToFourAndThePlannersNeighboursWithinTheSteps)
{
  using v = std::vector<int>;
  EXPECT_EQ(wl::segment_candidates(0, 100), (v{1, 2, 3, 4})) << "auto runs one step per layer";
  EXPECT_EQ(wl::segment_candidates(3, 100), (v{1, 2, 3, 4}));
  EXPECT_EQ(wl::segment_candidates(5, 100), (v{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(wl::segment_candidates(9, 100), (v{1, 2, 3, 4, 8, 9, 10}));
  EXPECT_EQ(wl::segment_candidates(16, 100), (v{1, 2, 3, 4, 15, 16})) << "none past stencil::max_segment_steps";
  EXPECT_EQ(wl::segment_candidates(2, 3), (v{1, 2, 3})) << "none longer than the gradient";
  EXPECT_EQ(wl::segment_candidates(0, 1), (v{1}));
}

TEST(SegmentTrials, TheFastestWinsAndATieGoesToTheShorterSegment)
{
  EXPECT_EQ(wl::fastest_segment({{1, 9.0}, {2, 7.5}, {3, 8.0}}), 2);
  EXPECT_EQ(wl::fastest_segment({{1, 7.0}, {2, 7.5}, {4, 9.0}}), 1);
  EXPECT_EQ(wl::fastest_segment({{1, 8.0}, {2, 7.0}, {3, 7.0}}), 2);
  EXPECT_EQ(wl::fastest_segment({{1, 9.0}, {2, 9.5}, {10, 3.0}}), 10);
  EXPECT_THROW(static_cast<void>(wl::fastest_segment({})), logic_error);
}

TEST_F(Cli, SegmentMeasureTimesTheCandidatesAndRunsTheFastestWithTheOneStepBits)
{
  std::string const problem = " wave --nx 12 --ny 10 --nz 6 --steps 7 ";
  ASSERT_EQ(run("init" + problem + "--seed 3 --out " + path("in.bin")), 0) << output_;
  ASSERT_EQ(run("run" + problem + "--backend cpu --input " + path("in.bin") + " --grad-out " + path("one.bin")), 0)
    << output_;
  ASSERT_EQ(run("run" + problem + "--segment measure --backend cpu --input " + path("in.bin") + " --grad-out " +
                path("g.bin") + " --json " + path("s.json")),
            0)
    << output_;
  EXPECT_NE(output_.find("trials: --segment 1: "), std::string::npos) << output_;
  expect_same_bits(read<float>("g.bin"), read<float>("one.bin"), "wave --segment measure");
  // The JSON names the chosen length, and the run ran it: in segments, its plan says so.
  std::string const stats = text("s.json");
  std::string const key = "\"segment_trials\": {\"chosen\": ";
  std::size_t const at = stats.find(key);
  ASSERT_NE(at, std::string::npos) << stats;
  int const chosen = std::stoi(stats.substr(at + key.size()));
  EXPECT_NE(stats.find("\"segment\": " + std::to_string(chosen) + ", \"ms_per_step\""), std::string::npos) << stats;
  if (chosen > 1) {
    EXPECT_NE(output_.find("stencil: segments of " + std::to_string(chosen) + " steps"), std::string::npos) << output_;
  } else {
    EXPECT_EQ(output_.find("stencil: segments of "), std::string::npos) << output_;
  }
  ASSERT_EQ(run("plan" + problem + "--segment measure --backend cpu --json -"), 0) << output_;
  EXPECT_NE(output_.find("\"segment_trials\": {\"chosen\": "), std::string::npos) << output_;
  ASSERT_EQ(run("bench" + problem + "--segment measure --backend cpu --warmup 0 --repeats 1 --json " + path("b.json")),
            0)
    << output_;
  EXPECT_NE(text("b.json").find("\"variant\": \"tapeflow-store-segment-measured\""), std::string::npos) << text("b.json");
  EXPECT_NE(text("b.json").find("\"segment_trials\": {\"chosen\": "), std::string::npos) << text("b.json");
  for (auto const& [args, says] : std::vector<std::pair<std::string, std::string>>{
         {"plan" + problem + "--segment mesure", "K (1 to 16), auto or measure, got 'mesure'"},
         {"plan" + problem + "--segment -2", "auto or measure"},
         {"plan allen-cahn --n 40 --steps 9 --segment measure --tape partials", "--tape values"},
       }) {
    EXPECT_EQ(run(args), 2) << args;
    EXPECT_NE(output_.find(says), std::string::npos) << args << "\n" << output_;
  }
}

TEST_F(Cli, ProblemsTheLibraryRefusesAreBadInput)
{
  // Problems the library refuses are bad input too: (arguments, what the message says).
  std::string const lstm = "plan lstm --batch 2 --steps 3 --input-size 4 --hidden 5";
  for (auto const& [args, says] : std::vector<std::pair<std::string, std::string>>{
         {"plan lbm --nx 8 --ny 6 --steps 3 --tau 0.5", "tau > 0.5"},
         {"plan burgers --n 10 --steps 3 --b 0.7", "(0, 1/2]"},
         {"plan burgers --n 10 --steps 3 --backend cpu --a nan", "finite number"},
         {lstm + " --lengths 3,1,1", "the batch has B = 2"},
         {lstm + " --lengths 1,3", "must run all T = 3"},
         {lstm + " --lengths 3,", "'--lengths'"},
         // Sizes within each flag's range whose product wraps around 64 bits: refused by the
         // problem's own check, before init writes a file or run reads one.
         {"plan wave --nx 1229673 --ny 7623851 --nz 3935371 --steps 1", "is too large"},
         {"init wave --nx 1229673 --ny 7623851 --nz 3935371 --steps 1 --out " + path("w.bin"), "is too large"},
         {"init lstm --batch 3935371 --steps 7623851 --input-size 1229673 --hidden 1 --out " + path("l.bin"),
          "fit a 32-bit int"},
         {"plan gmm --d 3 --k 4 --points 20 --tile-records 4294967296", "at most 1048576 records"},
         {"plan rk4 --particles 64 --tape global-stack --budget 1M", "applies to the arena only"},
       }) {
    EXPECT_EQ(run(args), 2) << args;
    EXPECT_NE(output_.find(says), std::string::npos) << args << "\n" << output_;
  }
  EXPECT_FALSE(std::ifstream(path("w.bin")).good()) << "init wrote a file for a problem run refuses";
  // One step, packed: a chain of one layer (a single per-step record count, once read as none).
  EXPECT_EQ(run("plan lstm --batch 2 --steps 1 --input-size 3 --hidden 4 --lengths 1,1 --backend cpu"), 0) << output_;
  // Its reverse runs cuBLAS, which no captured program replays: the flag is not the LSTM's.
  EXPECT_EQ(run(lstm + " --capture-reverse --backend cpu"), 2);
  EXPECT_NE(output_.find("'--capture-reverse' does not apply to 'plan lstm'"), std::string::npos) << output_;
}

}  // namespace
}  // namespace tapeflow

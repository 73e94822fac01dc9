// SPDX-License-Identifier: Apache-2.0
// The tapeflow CLI end to end: files in, gradient out, exit status 2 on bad usage or input.
#include "cli_fixture.hpp"
#include "reference.hpp"

#include <tapeflow/workloads/allen_cahn.hpp>

#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

namespace tapeflow {
namespace {

TEST_F(Cli, F64GradientMatchesTheIndependentImplementation)
{
  std::size_t const n = 19;
  std::size_t const steps = 8;
  std::vector<double> const u0 = testing::random_state<double>(n * n, testing::fresh_seed());
  write("u0.bin", u0);
  ASSERT_EQ(run("run allen-cahn --n 19 --steps 8 --dtype f64 --backend cpu --input " + path("u0.bin") +
                " --grad-out " + path("g.bin") + " --json " + path("stats.json")),
            0)
    << output_;
  std::vector<double> const g = read<double>("g.bin");
  ASSERT_EQ(g.size(), n * n);
  EXPECT_LT(testing::relative_error(g, testing::reference_gradient(testing::widen(u0), {n, steps})), 1e-10);
  EXPECT_NE(output_.find("loss:"), std::string::npos) << output_;
  EXPECT_NE(output_.find("plan:"), std::string::npos) << output_;
  EXPECT_EQ(output_.find('\r'), std::string::npos) << "no progress bar when piped";
  std::ifstream json(path("stats.json"));
  std::string const stats((std::istreambuf_iterator<char>(json)), std::istreambuf_iterator<char>());
  EXPECT_NE(stats.find("\"peak_tape_bytes\": " + std::to_string(steps * ((n * n + 1) / 2) * 16)), std::string::npos)
    << stats;
  EXPECT_NE(stats.find("\"policy\": \"store\""), std::string::npos) << stats;
}

TEST_F(Cli, F32GradientFromAnInitFileMatchesTheReference)
{
  ASSERT_EQ(run("init allen-cahn --n 24 --seed 5 --out " + path("u0.bin")), 0) << output_;
  std::vector<float> const u0 = read<float>("u0.bin");
  ASSERT_EQ(u0.size(), 24u * 24u);
  ASSERT_EQ(run("run allen-cahn --n 24 --steps 10 --input " + path("u0.bin") + " --grad-out " + path("g.bin") +
                " --backend cpu --policy store --budget 1M --stages 3 --tile-records 5"),
            0)
    << output_;
  std::vector<float> const g = read<float>("g.bin");
  EXPECT_LT(testing::relative_error(g, testing::reference_gradient(testing::widen(u0), {24, 10})), 1e-4);
}

TEST_F(Cli, EveryPolicyWritesTheSameGradientBits)
{
  ASSERT_EQ(run("init allen-cahn --n 40 --seed 9 --out " + path("u0.bin")), 0) << output_;
  std::string const common = "run allen-cahn --n 40 --steps 16 --backend cpu --input " + path("u0.bin");
  ASSERT_EQ(run(common + " --policy store --grad-out " + path("store.bin")), 0) << output_;
  std::vector<float> const store = read<float>("store.bin");
  // 40 x 40 f32: 400 records of 16 B a layer, 6400 B; the whole tape is 102400 B.
  for (std::string const policy : {"auto", "offload", "recompute"}) {
    ASSERT_EQ(run(common + " --policy " + policy + " --budget 25K --grad-out " + path(policy + ".bin") + " --json " +
                  path(policy + ".json")),
              0)
      << output_;
    std::vector<float> const g = read<float>(policy + ".bin");
    ASSERT_EQ(g.size(), store.size());
    EXPECT_EQ(std::memcmp(g.data(), store.data(), g.size() * sizeof(float)), 0) << policy;
    std::ifstream json(path(policy + ".json"));
    std::string const stats((std::istreambuf_iterator<char>(json)), std::istreambuf_iterator<char>());
    auto const at = stats.find("\"peak_tape_bytes\": ");
    ASSERT_NE(at, std::string::npos) << stats;
    EXPECT_LE(std::stoul(stats.substr(at + 19)), 25u * 1024) << stats;
  }
}

TEST_F(Cli, PartialsOnTheTapeGiveTheSameGradient)
{
  std::vector<double> const u0 = testing::random_state<double>(21 * 21, testing::fresh_seed());
  write("u0.bin", u0);
  std::string const common = "run allen-cahn --n 21 --steps 9 --dtype f64 --backend cpu --input " + path("u0.bin");
  // --bulk-copy is a preference: the CPU backend keeps its staging ring and the same gradient.
  ASSERT_EQ(run(common + " --tape partials --bulk-copy --grad-out " + path("g.bin") + " --json " + path("stats.json")),
            0)
    << output_;
  std::vector<double> const g = read<double>("g.bin");
  EXPECT_LT(testing::relative_error(g, testing::reference_gradient(testing::widen(u0), {21, 9})), 1e-10);
  std::ifstream json(path("stats.json"));
  std::string const stats((std::istreambuf_iterator<char>(json)), std::istreambuf_iterator<char>());
  EXPECT_NE(stats.find("\"tape\": \"partials\""), std::string::npos) << stats;
}

TEST_F(Cli, PlanPrintsTheTiersWithoutRunning)
{
  ASSERT_EQ(run("plan allen-cahn --n 1024 --steps 20 --backend cpu --budget 40M --policy offload"), 0) << output_;
  EXPECT_NE(output_.find("policy offload"), std::string::npos) << output_;
  EXPECT_NE(output_.find("ring of"), std::string::npos) << output_;
  EXPECT_NE(output_.find("layers 10..: h"), std::string::npos) << output_;
  ASSERT_EQ(run("plan allen-cahn --n 1024 --steps 20 --backend cpu --budget 20M --policy recompute"), 0) << output_;
  EXPECT_NE(output_.find("Revolve with 4 snapshots"), std::string::npos) << output_;
  EXPECT_EQ(run("plan allen-cahn --n 1024 --steps 20 --backend cpu --budget 20M --policy store"), 2);
  EXPECT_NE(output_.find("does not fit"), std::string::npos) << output_;
  EXPECT_EQ(run("plan allen-cahn --n 1024 --backend cpu"), 2);
  // A budget holding a hundred thousand snapshots plans (Revolve recursed as deep as its
  // snapshots and overflowed the stack), and a long chain's tiers print in a few lines.
  ASSERT_EQ(run("plan allen-cahn --n 8 --steps 100000 --backend cpu --budget 1G --policy recompute"), 0) << output_;
  EXPECT_NE(output_.find("Revolve with 100000 snapshots, 99999 untaped steps"), std::string::npos) << output_;
  EXPECT_NE(output_.find("        layers 0..: r r r r r r r r r r\n        layers 10..99999: the same\n"),
            std::string::npos)
    << output_;
  EXPECT_LT(std::count(output_.begin(), output_.end(), '\n'), 12) << output_;
}

std::size_t count(std::string const& text, std::string const& what)
{
  std::size_t found = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) { ++found; }
  return found;
}

TEST_F(Cli, PlanJsonPrintsTheScheduleAndRunJsonTheMeasuredTimeBesideThePrediction)
{
  // 16 KiB layers and states: 40K holds the working layer and one checkpoint of the state.
  std::string const problem = "allen-cahn --n 64 --steps 20 --backend cpu --budget 40K --host-budget 1M";
  ASSERT_EQ(run("plan " + problem + " --json -"), 0) << output_;
  EXPECT_EQ(output_.front(), '{') << "with --json -, standard output is the JSON alone: " << output_;
  EXPECT_NE(output_.find("\"policy\": \"mixed\""), std::string::npos) << output_;
  EXPECT_NE(output_.find("\"schedule\": {"), std::string::npos) << output_;
  EXPECT_EQ(count(output_, "\"step\": "), 20u) << output_;
  EXPECT_GT(count(output_, "\"tape\": \"recompute\""), 0u) << output_;
  EXPECT_EQ(count(output_, "\"tape\": \"host\""), 0u) << "auto never offloads on the CPU backend: " << output_;
  EXPECT_NE(output_.find("\"device_stores\": 1"), std::string::npos) << output_;
  EXPECT_NE(output_.find("\"actions\": [\"store 0 on device\""), std::string::npos) << output_;
  EXPECT_NE(output_.find("\"predicted_ms\": "), std::string::npos) << output_;

  ASSERT_EQ(run("plan " + problem + " --json " + path("plan.json")), 0) << output_;
  EXPECT_NE(output_.find("plan:"), std::string::npos) << output_;
  std::ifstream plan_file(path("plan.json"));
  std::string const plan((std::istreambuf_iterator<char>(plan_file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(count(plan, "\"step\": "), 20u) << plan;

  write("u0.bin", testing::random_state<float>(64 * 64, testing::fresh_seed()));
  ASSERT_EQ(run("run " + problem + " --input " + path("u0.bin") + " --grad-out " + path("g.bin") + " --json " +
                path("stats.json")),
            0)
    << output_;
  std::ifstream stats_file(path("stats.json"));
  std::string const stats((std::istreambuf_iterator<char>(stats_file)), std::istreambuf_iterator<char>());
  for (char const* key : {"\"predicted_ms\": ", "\"measured_ms\": ", "\"schedule\": {", "\"policy\": \"mixed\""}) {
    EXPECT_NE(stats.find(key), std::string::npos) << key << " in " << stats;
  }
  EXPECT_EQ(count(stats, "\"step\": "), 20u) << stats;

  // Where the tape fits, the schedule is every layer on the device.
  ASSERT_EQ(run("plan allen-cahn --n 64 --steps 5 --backend cpu --json -"), 0) << output_;
  EXPECT_EQ(count(output_, "\"tape\": \"device\""), 5u) << output_;
  EXPECT_EQ(count(output_, "\"recomputed\": 0"), 5u) << output_;
  // A Revolve schedule shows its device checkpoints.
  ASSERT_EQ(run("plan allen-cahn --n 64 --steps 20 --backend cpu --budget 64K --policy recompute --json -"), 0)
    << output_;
  EXPECT_NE(output_.find("\"device_stores\": 1"), std::string::npos) << output_;
}

/// The number after the first `"key": ` in `json`.
double number_after(std::string const& json, std::string const& key)
{
  std::size_t const at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) { return -1; }
  return std::strtod(json.c_str() + at + key.size() + 4, nullptr);
}

TEST_F(Cli, MeasuredStepCostsReachThePlanner)
{
  // 20 steps that do not fit: every step is taped and reversed once, and some are recomputed, so
  // the prediction is at least 20 x (taped forward + reverse) of whatever costs the plan is given.
  std::string const problem = "allen-cahn --n 64 --steps 20 --backend cpu --budget 40K";
  ASSERT_EQ(run("plan " + problem + " --step-costs 1,2,3 --json -"), 0) << output_;
  EXPECT_NE(output_.find("\"step_costs\": {\"forward_ms\": 1, \"aug_forward_ms\": 2, \"reverse_ms\": 3}"),
            std::string::npos)
    << output_;
  double const given = number_after(output_, "predicted_ms");
  EXPECT_GE(given, 20 * (2.0 + 3.0)) << output_;
  ASSERT_EQ(run("plan " + problem + " --step-costs 10,20,30 --json -"), 0) << output_;
  EXPECT_GE(number_after(output_, "predicted_ms"), 9.9 * given) << output_;
  // Without them the plan is estimated from the traffic: no step_costs in the JSON.
  ASSERT_EQ(run("plan " + problem + " --json -"), 0) << output_;
  EXPECT_EQ(output_.find("\"step_costs\""), std::string::npos) << output_;

  // run --measure-steps times the step and plans with what it measured.
  write("u0.bin", testing::random_state<float>(64 * 64, testing::fresh_seed()));
  ASSERT_EQ(run("run " + problem + " --measure-steps --input " + path("u0.bin") + " --grad-out " + path("g.bin") +
                " --json " + path("stats.json")),
            0)
    << output_;
  std::ifstream stats_file(path("stats.json"));
  std::string const stats((std::istreambuf_iterator<char>(stats_file)), std::istreambuf_iterator<char>());
  std::size_t const costs = stats.find("\"step_costs\": {");
  ASSERT_NE(costs, std::string::npos) << stats;
  for (char const* key : {"forward_ms", "aug_forward_ms", "reverse_ms"}) {
    EXPECT_GT(number_after(stats.substr(costs), key), 0.0) << key << " in " << stats;
  }
}

TEST_F(Cli, BadUsageAndInputExitWithStatus2)
{
  write("u0.bin", std::vector<float>(16, 0.25f));
  std::vector<float> with_nan(16, 0.25f);
  with_nan[5] = std::nanf("");
  write("nan.bin", with_nan);
  std::string const ok = "run allen-cahn --n 4 --steps 3 --input " + path("u0.bin") + " --grad-out " + path("g.bin");
  EXPECT_EQ(run(ok + " --backend cpu"), 0) << output_;
  struct bad_case {
    std::string args;
    std::string says;
  };
  std::vector<bad_case> const cases{
    {"", "usage"},
    {"frobnicate", "unknown command"},
    {"run", "needs a workload"},
    {"run heat --n 4", "unknown workload"},
    {ok + " --colour red", "unknown option"},
    {"run allen-cahn --steps 3 --input x --grad-out y", "missing required option '--n"},
    {ok + " --n 4", "given twice"},
    {"run allen-cahn --n 5 --steps 3 --input " + path("u0.bin") + " --grad-out " + path("g.bin"), "needs 100"},
    {"run allen-cahn --n 4 --steps 3 --input " + path("missing.bin") + " --grad-out " + path("g.bin"), "cannot open"},
    {ok + " --dtype f16", "f32 or f64"},
    {ok + " --dtype f64", "needs 128"},
    {ok + " --backend tpu", "--backend"},
    {ok + " --backend hip", "not available"},
    {ok + " --policy keep", "--policy"},
    {ok + " --policy mixed", "--policy"},
    {"plan allen-cahn --n 4 --steps 3 --json", "needs a value"},
    {"plan gmm --json -", "does not apply"},
    {ok + " --tape derivatives", "--tape must be values or partials"},
    {ok + " --budget 10 --backend cpu", "smaller than the least a layer's reverse runs in"},
    {ok + " --budget 100 --policy store --tile-records 1 --stages 2 --backend cpu", "does not fit the device budget"},
    {ok + " --budget 12Q", "non-negative integer"},
    {ok + " --steps 0", "given twice"},
    {"run allen-cahn --n 4 --steps 0 --input " + path("u0.bin") + " --grad-out " + path("g.bin"), "between 1 and"},
    {ok + " --stages 9", "between 2 and 8"},
    {ok + " --tile-records 0", "between 1 and"},
    {ok + " --backend cpu --grad-out /nonexistent/dir/g.bin", "given twice"},
    {"run allen-cahn --n 4 --steps 3 --input " + path("u0.bin") + " --backend cpu --grad-out /nonexistent/dir/g.bin",
     "cannot open output"},
    {"init allen-cahn --n 0 --out " + path("x.bin"), "between 1"},
    {"info --verbose", "takes no options"},
    {ok + " --step-costs 1,2", "--step-costs must be three positive numbers"},
    {ok + " --step-costs 1,x,3", "--step-costs must be three positive numbers"},
    {ok + " --step-costs 0,1,1", "--step-costs must be three positive numbers"},
    {ok + " --step-costs 1,2,3,4", "--step-costs must be three positive numbers"},
    {"plan allen-cahn --n 4 --steps 3 --measure-steps", "--measure-steps"},
    {ok + " --ranks-grid 2x2", "arranges 4 ranks; the run has 1 (run it under mpirun)"},
    {ok + " --ranks-grid 2by2", "--ranks-grid must be PYxPX"},
    {ok + " --ranks-grid 0x1", "--ranks-grid must be PYxPX"},
    {ok + " --ranks-grid 65536x65536", "arranges 4294967296 ranks"},  // not a product wrapped in an int
    {ok + " --budget 0", "--budget 0 leaves the tape no room"},      // the library reads 0 as no limit
    {ok + " --host-budget 0", "--host-budget 0 leaves the tape no room"},
    {ok + " --step-costs 1e300,1,1", "up to 1e9"},
    {ok + " --json " + path("g.bin"), "--grad-out and --json name the same file"},
    {ok + " --json -", "only plan writes to standard output"},
    {"run allen-cahn --n 4 --steps 3 --input " + path("u0.bin") + " --grad-out --json", "needs a value"},
    {"run allen-cahn --n 4 --steps 3 --input " + dir_ + " --grad-out " + path("g.bin"), "not a regular file"},
    {"run allen-cahn --n 4 --steps 3 --input " + path("nan.bin") + " --grad-out " + path("g.bin"),
     "holds NaN at value 5"},
    {"plan allen-cahn --n 4 --steps 3 --capture-reverse --policy recompute", "capture_reverse needs every layer"},
  };
  for (bad_case const& c : cases) {
    EXPECT_EQ(run(c.args), 2) << c.args << "\n" << output_;
    EXPECT_NE(output_.find(c.says), std::string::npos) << c.args << "\n" << output_;
  }
}

TEST_F(Cli, AnUnwritableOutputIsRefusedBeforeAnyWork)
{
  ASSERT_EQ(run("init allen-cahn --n 4 --seed 2 --out " + path("u0.bin")), 0) << output_;
  std::string const in = " --input " + path("u0.bin");
  std::string const nowhere = "/nonexistent/dir/out";
  for (std::string const& args :
       {"run allen-cahn --n 4 --steps 3 --backend cpu" + in + " --grad-out " + nowhere,
        "run allen-cahn --n 4 --steps 3 --backend cpu" + in + " --grad-out " + path("g.bin") + " --json " + nowhere,
        "plan allen-cahn --n 4 --steps 3 --backend cpu --json " + nowhere,
        "bench allen-cahn --n 4 --steps 3 --backend cpu --repeats 1 --json " + nowhere,
        "init allen-cahn --n 4 --out " + nowhere}) {
    EXPECT_EQ(run(args), 2) << args << "\n" << output_;
    EXPECT_NE(output_.find("cannot open output file '" + nowhere + "'"), std::string::npos) << args << "\n" << output_;
    for (char const* work : {"plan:", "loss:", "forward", "wrote"}) {
      EXPECT_EQ(output_.find(work), std::string::npos) << "refused after work began: " << args << "\n" << output_;
    }
  }
  // The check neither creates a file nor changes one: a run refused later leaves both as they were.
  { std::ofstream(path("kept.bin"), std::ios::binary) << "kept"; }
  EXPECT_EQ(run("run allen-cahn --n 4 --steps 3 --backend cpu --input " + path("missing.bin") + " --grad-out " +
                path("kept.bin") + " --json " + path("absent.json")),
            2)
    << output_;
  std::ifstream kept(path("kept.bin"), std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "kept");
  EXPECT_FALSE(std::ifstream(path("absent.json")).good()) << "the check created the file it checked";
}

TEST_F(Cli, BenchReportsMediansAndARow)
{
  ASSERT_EQ(run("bench allen-cahn --n 64 --steps 5 --backend cpu --warmup 1 --repeats 3 --json " + path("row.json")), 0)
    << output_;
  EXPECT_NE(output_.find("gradient/primal"), std::string::npos) << output_;
  std::ifstream json(path("row.json"));
  std::string const row((std::istreambuf_iterator<char>(json)), std::istreambuf_iterator<char>());
  for (char const* key : {"\"primal_ms\"", "\"grad_ms\"", "\"grad_over_primal\"", "\"tape_bytes\": 81920"}) {
    EXPECT_NE(row.find(key), std::string::npos) << key << " in " << row;
  }
  EXPECT_EQ(run("bench allen-cahn --n 64 --steps 5 --repeats 0"), 2);
  EXPECT_NE(output_.find("--repeats"), std::string::npos) << output_;
  EXPECT_EQ(run("bench allen-cahn --n 64"), 2);
}

TEST_F(Cli, HelpAndInfoSucceed)
{
  EXPECT_EQ(run("--help"), 0);
  EXPECT_NE(output_.find("run <workload>"), std::string::npos) << output_;
  EXPECT_NE(output_.find("allen-cahn"), std::string::npos) << output_;
  EXPECT_EQ(run("run --help"), 0);
  EXPECT_NE(output_.find("workloads: allen-cahn, lbm, gmm, lstm, rk4, burgers"), std::string::npos) << output_;
  EXPECT_EQ(run("run allen-cahn --help"), 0);
  EXPECT_NE(output_.find("--budget BYTES"), std::string::npos) << output_;
  for (char const* command : {"info", "init", "run", "plan", "bench"}) {
    EXPECT_EQ(run(std::string{command} + " --help"), 0) << command;
    EXPECT_NE(output_.find("usage: tapeflow"), std::string::npos) << command << ": " << output_;
  }
  EXPECT_EQ(run("info"), 0);
  EXPECT_NE(output_.find("cpu   available"), std::string::npos) << output_;
}

}  // namespace
}  // namespace tapeflow

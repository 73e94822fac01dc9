// SPDX-License-Identifier: Apache-2.0
// Every registered workload through the CLI, from its description: init writes its inputs in the
// documented format, run's gradient file is bit for bit what its session computes from them, plan
// and bench run and bench writes a row of the results format, every command has its help, bad
// usage and input exit with status 2, and the progress bar appears on a terminal (and only there).
#include "../cli_fixture.hpp"

#include "../workloads/registered.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace tapeflow {
namespace {

namespace wl = workloads;


template <class D>
class CliWorkload : public Cli {
 protected:
  using described = wl::described<D>;
  /// The test problem as flags; `shape_only`: those init takes.
  static std::string flags(bool shape_only = false)
  {
    std::vector<cli::flag_spec> const specs = described::problem_flags();
    std::string out;
    for (auto const& [name, value] : described::flags_of(D::test_problem())) {
      bool shape = false;
      for (cli::flag_spec const& s : specs) { shape = shape || (s.name == name && s.shape); }
      if (!shape_only || shape) { out += " --" + name + " " + value; }
    }
    return out;
  }
  static std::string name() { return D::text.name; }
  static std::string dtype() { return D::precisions == wl::precision::f64_only ? "f64" : "f32"; }
};
TYPED_TEST_SUITE_P(CliWorkload);

TYPED_TEST_P(CliWorkload, GradientFileIsTheSessionsGradient)
{
  using D = TypeParam;
  using T = std::conditional_t<D::precisions == wl::precision::f64_only, double, float>;
  std::string const w = this->name();
  ASSERT_EQ(this->run("init " + w + this->flags(true) + " --seed 4 --out " + this->path("in.bin")), 0) << this->output_;
  ASSERT_EQ(this->run("run " + w + this->flags() + " --backend cpu --input " + this->path("in.bin") + " --grad-out " +
                      this->path("g.bin") + " --json " + this->path("s.json")),
            0)
    << this->output_;
  auto const p = D::test_problem();
  std::vector<std::vector<T>> const x = wl::split_values(this->template read<T>("in.bin"), D::inputs(p));
  EXPECT_EQ(x, D::template random_inputs<T>(p, 4)) << "init wrote the description's distribution";
  typename D::options o;
  o.kind = backend::cpu;
  wl::outcome<T> const r = wl::gradient_of(*D::template open<T>(p, o), wl::views_of(x), {});
  std::vector<T> expect;
  for (auto const& g : r.gradients) { expect.insert(expect.end(), g.begin(), g.end()); }
  std::vector<T> const got = this->template read<T>("g.bin");
  ASSERT_EQ(got.size(), expect.size());
  EXPECT_EQ(std::memcmp(got.data(), expect.data(), got.size() * sizeof(T)), 0) << "the CLI and the session differ";
  std::string const stats = this->text("s.json");
  EXPECT_NE(stats.find("\"workload\": \"" + w + "\""), std::string::npos) << stats;
  EXPECT_NE(stats.find("\"loss\": "), std::string::npos) << stats;
  EXPECT_NE(this->output_.find("loss:"), std::string::npos) << this->output_;
}

TYPED_TEST_P(CliWorkload, PlansAndBenchesWithAJsonRow)
{
  std::string const w = this->name();
  EXPECT_EQ(this->run("plan " + w + this->flags() + " --backend cpu"), 0) << this->output_;
  EXPECT_NE(this->output_.find("plan:"), std::string::npos) << this->output_;
  ASSERT_EQ(this->run("bench " + w + this->flags() + " --backend cpu --warmup 1 --repeats 3 --json " +
                      this->path("row.json")),
            0)
    << this->output_;
  std::string const row = this->text("row.json");
  for (char const* key : {"\"primal_ms\": ", "\"grad_ms\": ", "\"grad_over_primal\": ", "\"timing\": ",
                          "\"tape_bytes\": ", "\"repeat_allocations\": 0"}) {
    EXPECT_NE(row.find(key), std::string::npos) << key << " in " << row;
  }
  EXPECT_NE(row.find("\"workload\": \"" + w + "\""), std::string::npos) << row;
}

TYPED_TEST_P(CliWorkload, EveryCommandHasHelpWithItsFiles)
{
  std::string const w = this->name();
  EXPECT_EQ(this->run("--help"), 0);
  EXPECT_NE(this->output_.find("  " + w + " "), std::string::npos) << this->output_;
  for (std::string const command : {"init", "run", "plan", "bench"}) {
    ASSERT_EQ(this->run(command + " " + w + " --help"), 0) << command;
    EXPECT_NE(this->output_.find("usage: tapeflow " + command + " " + w), std::string::npos) << this->output_;
    EXPECT_NE(this->output_.find("--backend") == std::string::npos, command != "init") << command;
    bool const has_files = command == "init" || command == "run";
    EXPECT_EQ(this->output_.find("IN.bin") != std::string::npos, has_files) << command << "\n" << this->output_;
    EXPECT_EQ(this->output_.find("G.bin") != std::string::npos, has_files) << command;
  }
}

TYPED_TEST_P(CliWorkload, BadUsageAndInputExitWithStatus2)
{
  using D = TypeParam;
  std::string const w = this->name();
  std::string const problem = this->flags();
  this->write("tiny.bin", std::vector<float>(3, 0.5f));
  std::string const io = " --input " + this->path("tiny.bin") + " --grad-out " + this->path("g.bin");
  std::vector<std::pair<std::string, std::string>> cases{
    {"run " + w + problem + io + " --backend cpu", "input file"},  // wrong size
    {"run " + w + problem + " --input " + this->path("none.bin") + " --grad-out " + this->path("g.bin"), "cannot open"},
    {"run " + w + io, "missing required option"},
    {"run " + w + problem + io + " --colour red", "unknown option"},
    {"plan " + w + problem + " --backend tpu", "--backend"},
    {"plan " + w + problem + " --backend hip", "not available"},
    {"bench " + w + problem + " --repeats 0", "--repeats"},
    {"init " + w + this->flags(true), "missing required option '--out"},
    {"plan " + w + problem + " --dtype f16", "--dtype"},
  };
  if constexpr (D::tape != wl::tape_kind::chain) {
    cases.push_back({"plan " + w + problem + " --policy store", "does not apply to 'plan " + w});
    cases.push_back({"run " + w + problem + io + " --capture-reverse", "does not apply"});
  }
  if constexpr (D::tape == wl::tape_kind::arena) { cases.push_back({"plan " + w + problem + " --tile-records 4", "does not apply"}); }
  if constexpr (D::precisions == wl::precision::f64_only) { cases.push_back({"plan " + w + problem + " --dtype f32", "f64"}); }
  for (auto const& [args, says] : cases) {
    EXPECT_EQ(this->run(args), 2) << args << "\n" << this->output_;
    EXPECT_NE(this->output_.find(says), std::string::npos) << args << "\n" << this->output_;
  }
  // A wrong-sized input file's message names the input's parts.
  EXPECT_EQ(this->run("run " + w + problem + io + " --backend cpu"), 2);
  EXPECT_NE(this->output_.find(D::inputs(D::test_problem()).back().name), std::string::npos) << this->output_;
}

TYPED_TEST_P(CliWorkload, DrawsItsProgressBarOnATerminalOnly)
{
  std::string const w = this->name();
  ASSERT_EQ(this->run("init " + w + this->flags(true) + " --out " + this->path("in.bin")), 0) << this->output_;
  std::string const args =
    "run " + w + this->flags() + " --backend cpu --input " + this->path("in.bin") + " --grad-out " + this->path("g.bin");
  ASSERT_EQ(this->run_on_terminal(args), 0) << this->output_;
  EXPECT_NE(this->output_.find("\r  forward  ["), std::string::npos) << this->output_;
  EXPECT_NE(this->output_.find("\r  reverse  ["), std::string::npos) << this->output_;
  ASSERT_EQ(this->run_on_terminal(args + " --no-progress"), 0);
  EXPECT_EQ(this->output_.find("forward  ["), std::string::npos) << this->output_;
  ASSERT_EQ(this->run(args), 0);  // piped
  EXPECT_EQ(this->output_.find('\r'), std::string::npos) << this->output_;
}

REGISTER_TYPED_TEST_SUITE_P(CliWorkload, GradientFileIsTheSessionsGradient, PlansAndBenchesWithAJsonRow,
                            EveryCommandHasHelpWithItsFiles, BadUsageAndInputExitWithStatus2,
                            DrawsItsProgressBarOnATerminalOnly);


INSTANTIATE_TYPED_TEST_SUITE_P(Registered, CliWorkload, testing::gtest_types<wl::registered_workloads>::type, testing::description_name);

}  // namespace
}  // namespace tapeflow

// SPDX-License-Identifier: Apache-2.0
// tapeflow's NVTX ranges, checked without a GPU or a profiler: CTest points NVTX_INJECTION64_PATH
// at tapeflow_nvtx_recorder (tests/nvtx/), an NVTX injection library that records every range
// push and pop; these tests run Allen–Cahn on the CPU backend and check the recorded ranges'
// names, domain, nesting and counts against docs/profiling.md.
#include "nvtx/nvtx_recorder.h"

#include <tapeflow/workloads/allen_cahn.hpp>
#include <tapeflow/workloads/allen_cahn/description.hpp>
#include <tapeflow/workloads/common/segment_trials.hpp>
#include <tapeflow/tiers.hpp>

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow {
namespace {

namespace ac = workloads::allen_cahn;

// ---- the recorder, opened by path: dlopen returns the instance NVTX loaded (or will load) ----

struct recorder {
  bool loaded{false};
  std::string reason;  // why not, when not loaded
  tapeflow_nvtx_recorder_attachments_fn attachments{nullptr};
  tapeflow_nvtx_recorder_size_fn size{nullptr};
  tapeflow_nvtx_recorder_get_fn get{nullptr};
  tapeflow_nvtx_recorder_clear_fn clear{nullptr};
  tapeflow_nvtx_recorder_thread_fn thread{nullptr};

  static recorder const& instance()
  {
    static recorder const r = open();
    return r;
  }

 private:
  template <class F>
  static F symbol(void* handle, char const* name)
  {
    return reinterpret_cast<F>(dlsym(handle, name));
  }

  static recorder open()
  {
    recorder r;
#if !defined(TAPEFLOW_NVTX)
    r.reason = "tapeflow was built without NVTX (TAPEFLOW_ENABLE_NVTX=OFF or no NVTX3 headers): no ranges to record";
    return r;
#else
    char const* path = std::getenv("NVTX_INJECTION64_PATH");
    if (path == nullptr || *path == '\0') {
      r.reason = "NVTX_INJECTION64_PATH is not set: run through ctest, or set it to the path of "
                 "libtapeflow_nvtx_recorder.so";
      return r;
    }
    void* handle = dlopen(path, RTLD_NOW);
    if (handle == nullptr) {
      char const* error = dlerror();
      r.reason = std::string{"cannot load the NVTX recorder "} + path + ": " + (error != nullptr ? error : "?");
      return r;
    }
    r.attachments = symbol<tapeflow_nvtx_recorder_attachments_fn>(handle, "tapeflow_nvtx_recorder_attachments");
    r.size = symbol<tapeflow_nvtx_recorder_size_fn>(handle, "tapeflow_nvtx_recorder_size");
    r.get = symbol<tapeflow_nvtx_recorder_get_fn>(handle, "tapeflow_nvtx_recorder_get");
    r.clear = symbol<tapeflow_nvtx_recorder_clear_fn>(handle, "tapeflow_nvtx_recorder_clear");
    r.thread = symbol<tapeflow_nvtx_recorder_thread_fn>(handle, "tapeflow_nvtx_recorder_thread");
    if (!r.attachments || !r.size || !r.get || !r.clear || !r.thread) {
      r.reason = std::string{path} + " is not the tapeflow NVTX recorder (missing tapeflow_nvtx_recorder_* symbols)";
      return r;
    }
    r.loaded = true;
    return r;
#endif
  }
};

/// Declares `rec`, the recorder with an empty log, or skips the test saying why there is none.
#define TAPEFLOW_REQUIRE_RECORDER()                                                  \
  recorder const& rec = recorder::instance();                                        \
  if (!rec.loaded) { GTEST_SKIP() << "NVTX recorder not loaded: " << rec.reason; } \
  rec.clear()

std::vector<tapeflow_nvtx_event> recorded(recorder const& rec)
{
  std::vector<tapeflow_nvtx_event> events(rec.size());
  for (std::size_t i = 0; i < events.size(); ++i) { EXPECT_EQ(rec.get(i, &events[i]), 1); }
  return events;
}

// ---- ranges as trees ----

struct range {
  std::string name;
  bool registered{false};
  std::vector<range> children;
};

std::vector<std::string> names(std::vector<range> const& ranges)
{
  std::vector<std::string> out;
  for (range const& r : ranges) { out.push_back(r.name); }
  return out;
}

std::vector<std::string> repeat(std::string const& name, std::size_t count)
{
  return std::vector<std::string>(count, name);
}

/// The ranges of the domain `domain` pushed on thread `thread`, as a forest. Fails the test on a
/// pop without a push, a range left open or a level that disagrees with the nesting.
std::vector<range> forest(std::vector<tapeflow_nvtx_event> const& events, std::uint64_t thread,
                          std::string const& domain)
{
  std::vector<range> roots;
  std::vector<range> open;
  for (tapeflow_nvtx_event const& e : events) {
    if (e.thread != thread || domain != e.domain) { continue; }
    if (e.kind == TAPEFLOW_NVTX_PUSH) {
      EXPECT_EQ(e.level, static_cast<int>(open.size())) << "push of " << e.message;
      open.push_back(range{e.message, e.registered != 0, {}});
      continue;
    }
    EXPECT_EQ(e.level, static_cast<int>(open.size()) - 1) << "pop";
    if (open.empty()) {
      ADD_FAILURE() << "a pop in domain '" << domain << "' with no open range";
      continue;
    }
    range done = std::move(open.back());
    open.pop_back();
    (open.empty() ? roots : open.back().children).push_back(std::move(done));
  }
  for (range const& r : open) { ADD_FAILURE() << "range '" << r.name << "' was never popped"; }
  return roots;
}

void expect_all_registered(std::vector<range> const& ranges)
{
  for (range const& r : ranges) {
    EXPECT_TRUE(r.registered) << r.name << " was not pushed with a registered string";
    expect_all_registered(r.children);
  }
}

template <class T>
std::vector<T> initial_state(std::size_t n)
{
  std::vector<T> u(n * n);
  for (std::size_t i = 0; i < u.size(); ++i) { u[i] = static_cast<T>(0.5 * std::sin(0.37 * static_cast<double>(i))); }
  return u;
}

ac::options store_on_cpu()
{
  ac::options o;
  o.kind = backend::cpu;
  o.policy = tape_policy::store;  // every layer on the device, no budget: the planner needs no costs
  return o;
}

/// A tiered run: `policy` under a device budget, with fixed copy bandwidths so that planning
/// does not measure them (plan_chain opens tapeflow::measure_bandwidths when it does).
ac::options tiered_on_cpu(tape_policy policy, std::size_t budget_bytes)
{
  ac::options o = store_on_cpu();
  o.policy = policy;
  o.budget_bytes = budget_bytes;
  o.bw = bandwidths{10.0, 10.0, 100.0};
  return o;
}

/// Records one CPU gradient and returns the tapeflow ranges of the calling thread; `result`
/// receives the gradient's result when given.
template <class T>
std::vector<range> gradient_ranges(recorder const& rec, std::size_t n, std::size_t steps,
                                   ac::options const& options = store_on_cpu(),
                                   ac::gradient_result<T>* result = nullptr)
{
  rec.clear();
  ac::gradient_result<T> const r = ac::gradient(ac::problem{n, steps}, initial_state<T>(n), options);
  if (result != nullptr) { *result = r; }
  EXPECT_TRUE(std::isfinite(static_cast<double>(r.loss)));
  EXPECT_GT(rec.attachments(), 0) << "the recorder is loaded but NVTX never attached it: tapeflow's NVTX calls "
                                     "did not reach an injection library";
  std::vector<tapeflow_nvtx_event> const events = recorded(rec);
  for (tapeflow_nvtx_event const& e : events) {
    if (std::string{e.domain} == "tapeflow") {
      EXPECT_EQ(e.thread, rec.thread()) << "a tapeflow range on another thread: " << e.message;
    }
  }
  return forest(events, rec.thread(), "tapeflow");
}

/// The children of `parent` named `name`, in order.
std::vector<range const*> children_named(range const& parent, std::string const& name)
{
  std::vector<range const*> out;
  for (range const& c : parent.children) {
    if (c.name == name) { out.push_back(&c); }
  }
  return out;
}

/// Checks the part every tier shares and returns {forward, reverse}: one gradient root holding
/// plan_chain (plan_pipeline, plan_tiers), chain::forward and chain::reverse.
std::pair<range const*, range const*> expect_gradient_frame(std::vector<range> const& roots)
{
  EXPECT_EQ(names(roots), std::vector<std::string>{"tapeflow::workloads::gradient"});
  if (roots.size() != 1 || roots[0].children.size() != 3) {
    ADD_FAILURE() << "no gradient frame";
    return {nullptr, nullptr};
  }
  range const& gradient = roots[0];
  EXPECT_EQ(names(gradient.children),
            (std::vector<std::string>{"tapeflow::plan_chain", "tapeflow::chain::forward", "tapeflow::chain::reverse"}));
  EXPECT_EQ(names(gradient.children[0].children),
            (std::vector<std::string>{"tapeflow::plan_pipeline", "tapeflow::plan_tiers"}));
  expect_all_registered(roots);
  return {&gradient.children[1], &gradient.children[2]};
}

/// The documented structure of one gradient of `steps` steps with the store policy
/// (docs/profiling.md).
void expect_gradient_structure(std::vector<range> const& roots, std::size_t steps)
{
  auto const [forward, reverse] = expect_gradient_frame(roots);
  ASSERT_NE(forward, nullptr);
  ASSERT_EQ(names(forward->children), repeat("tapeflow::layer::forward", steps));
  for (range const& layer : forward->children) {
    // Allen–Cahn's record is its input state: the tape adopts the state's buffer as the layer.
    ASSERT_EQ(names(layer.children), std::vector<std::string>{"tapeflow::tape::adopt"});
    EXPECT_TRUE(layer.children[0].children.empty());
  }
  ASSERT_EQ(names(reverse->children), repeat("tapeflow::layer::reverse", steps));
  for (range const& layer : reverse->children) {
    ASSERT_EQ(names(layer.children), std::vector<std::string>{"tapeflow::tape::pop"});
    EXPECT_TRUE(layer.children[0].children.empty());
  }
}

struct shape {
  std::size_t n;
  std::size_t steps;
};

void PrintTo(shape const& s, std::ostream* os) { *os << "n = " << s.n << ", T = " << s.steps; }

class NvtxGradient : public ::testing::TestWithParam<shape> {};

TEST_P(NvtxGradient, F32RangesNestAsDocumented)
{
  TAPEFLOW_REQUIRE_RECORDER();
  auto const [n, steps] = GetParam();
  expect_gradient_structure(gradient_ranges<float>(rec, n, steps), steps);
}

TEST_P(NvtxGradient, F64RangesNestAsDocumented)
{
  TAPEFLOW_REQUIRE_RECORDER();
  auto const [n, steps] = GetParam();
  expect_gradient_structure(gradient_ranges<double>(rec, n, steps), steps);
}

TEST(NvtxSegments, MeasuredTrialsAreOneRangeOfTheirPlansAndGradients)
{
  TAPEFLOW_REQUIRE_RECORDER();
  ac::problem const p{24, 6};
  ac::options o = store_on_cpu();
  o.measure_segment = true;  // --segment measure
  workloads::segment_measurement m;
  static_cast<void>(workloads::settle_segment<ac::description, float>(p, o, &m));
  ASSERT_FALSE(m.trials.empty());
  std::vector<tapeflow_nvtx_event> const events = recorded(rec);
  std::vector<range> const roots = forest(events, rec.thread(), "tapeflow");
  ASSERT_EQ(names(roots), std::vector<std::string>{"tapeflow::segment_trials"});
  // auto's plan and each candidate's plan, then per candidate its session's forwards and reverses.
  std::size_t forwards = 0;
  for (range const& c : roots[0].children) {
    EXPECT_TRUE(c.name == "tapeflow::plan_chain" || c.name == "tapeflow::chain::forward" ||
                c.name == "tapeflow::chain::reverse")
      << c.name;
    forwards += c.name == "tapeflow::chain::forward" ? 1 : 0;
  }
  EXPECT_EQ(forwards, m.trials.size() * static_cast<std::size_t>(workloads::segment_trial_warmup +
                                                                 workloads::segment_trial_repeats));
}

INSTANTIATE_TEST_SUITE_P(Shapes, NvtxGradient, ::testing::Values(shape{8, 1}, shape{8, 3}, shape{24, 7}),
                         [](auto const& param_info) {
                           return "n" + std::to_string(param_info.param.n) + "_T" + std::to_string(param_info.param.steps);
                         });

TEST(NvtxTiers, OffloadedLayersOpenOffloadAndPrefetchRanges)
{
  // 64 x 64 f32: layers of 1024 records x 16 B = 16 KiB; a 32 KiB budget holds a ring, not the tape.
  TAPEFLOW_REQUIRE_RECORDER();
  std::size_t const steps = 6;
  ac::gradient_result<float> r;
  std::vector<range> const roots =
    gradient_ranges<float>(rec, 64, steps, tiered_on_cpu(tape_policy::offload, 32 << 10), &r);
  ASSERT_EQ(r.chain.policy, tape_policy::offload);
  std::vector<tier> const& tiers = r.chain.tiers.tiers;
  ASSERT_EQ(tiers.size(), steps);
  std::size_t const host = r.chain.tiers.count(tier::host);
  ASSERT_GT(host, 0u);
  auto const [forward, reverse] = expect_gradient_frame(roots);
  ASSERT_NE(forward, nullptr);

  // Forward: one layer::forward per step, holding host_tier::offload (host tier) or tape::adopt.
  ASSERT_EQ(names(forward->children), repeat("tapeflow::layer::forward", steps));
  for (std::size_t t = 0; t < steps; ++t) {
    std::string const expected = tiers[t] == tier::host ? "tapeflow::host_tier::offload" : "tapeflow::tape::adopt";
    EXPECT_EQ(names(forward->children[t].children), std::vector<std::string>{expected}) << "step " << t;
  }

  // Reverse: one layer::reverse per step; the host tier's layers come back through exactly one
  // host_tier::prefetch each, issued ahead (directly in chain::reverse before the first layer,
  // then inside the layer::reverse that runs prefetch-distance layers earlier).
  EXPECT_EQ(children_named(*reverse, "tapeflow::layer::reverse").size(), steps);
  std::size_t prefetches = children_named(*reverse, "tapeflow::host_tier::prefetch").size();
  std::size_t pops = 0;
  for (range const& c : reverse->children) {
    EXPECT_TRUE(c.name == "tapeflow::layer::reverse" || c.name == "tapeflow::host_tier::prefetch") << c.name;
    for (range const& g : c.children) {
      EXPECT_TRUE(g.name == "tapeflow::host_tier::prefetch" || g.name == "tapeflow::tape::pop") << g.name;
      EXPECT_TRUE(g.children.empty()) << g.name;
      prefetches += g.name == "tapeflow::host_tier::prefetch" ? 1 : 0;
      pops += g.name == "tapeflow::tape::pop" ? 1 : 0;
    }
  }
  EXPECT_EQ(prefetches, host);
  EXPECT_EQ(prefetches, r.chain.prefetches);
  EXPECT_EQ(pops, steps - host);

  // Ahead of use: before the k-th host layer's reverse begins, the prefetches of that layer and
  // of the next distance - 1 are already queued (at the start of the reverse, or inside the
  // reverse of an earlier host layer). A chain that prefetched each layer only when it reads it
  // would open its prefetch inside that layer's own reverse.
  std::size_t const distance = r.chain.tiers.prefetch_distance;
  ASSERT_GE(distance, 1u);
  std::size_t issued = 0;
  std::size_t host_reversed = 0;
  std::size_t t = steps;
  for (range const& c : reverse->children) {
    if (c.name == "tapeflow::host_tier::prefetch") {
      ++issued;
      continue;
    }
    --t;
    if (tiers[t] == tier::host) {
      ++host_reversed;
      EXPECT_GE(issued, std::min(host_reversed + distance - 1, host)) << "step " << t;
    }
    issued += children_named(c, "tapeflow::host_tier::prefetch").size();
  }
  EXPECT_EQ(t, 0u);
}

TEST(NvtxTiers, RecomputedLayersAreTapedOneAtATimeBeforeTheirReverse)
{
  TAPEFLOW_REQUIRE_RECORDER();
  std::size_t const steps = 6;
  ac::gradient_result<float> r;
  std::vector<range> const roots =
    gradient_ranges<float>(rec, 64, steps, tiered_on_cpu(tape_policy::recompute, 32 << 10), &r);
  ASSERT_EQ(r.chain.policy, tape_policy::recompute);
  ASSERT_GT(r.chain.recompute_steps, 0u);
  auto const [forward, reverse] = expect_gradient_frame(roots);
  ASSERT_NE(forward, nullptr);

  // Revolve: untaped runs are tapeflow::recompute ranges (nothing inside); every step is taped
  // exactly once, in a layer::forward holding its tape::adopt, right before the layer::reverse
  // holding its tape::pop. The forward ends with the taped run of the last step.
  std::vector<std::string> layers;
  std::size_t recomputes = 0;
  for (range const* phase : {forward, reverse}) {
    for (range const& c : phase->children) {
      if (c.name == "tapeflow::recompute") {
        EXPECT_TRUE(c.children.empty());
        ++recomputes;
        continue;
      }
      layers.push_back(c.name);
      if (c.name == "tapeflow::layer::forward") {
        EXPECT_EQ(names(c.children), std::vector<std::string>{"tapeflow::tape::adopt"});
      } else if (c.name == "tapeflow::layer::reverse") {
        EXPECT_EQ(names(c.children), std::vector<std::string>{"tapeflow::tape::pop"});
      } else {
        ADD_FAILURE() << "unexpected range " << c.name << " in " << phase->name;
      }
    }
  }
  std::vector<std::string> alternating;
  for (std::size_t t = 0; t < steps; ++t) {
    alternating.push_back("tapeflow::layer::forward");
    alternating.push_back("tapeflow::layer::reverse");
  }
  EXPECT_EQ(layers, alternating);
  EXPECT_GE(recomputes, 1u);
  ASSERT_FALSE(forward->children.empty());
  EXPECT_EQ(forward->children.back().name, "tapeflow::layer::forward");
  EXPECT_EQ(children_named(*forward, "tapeflow::layer::forward").size(), 1u);
}

TEST(NvtxTiers, PlanningMeasuresBandwidthsOnlyWhenTheTiersNeedCosts)
{
  TAPEFLOW_REQUIRE_RECORDER();
  ac::options o = store_on_cpu();
  o.policy = tape_policy::offload;
  o.budget_bytes = 32 << 10;  // o.bw left at zero: the planner measures the copy bandwidths
  chain_stats const stats = ac::plan<float>(ac::problem{64, 6}, o);
  EXPECT_EQ(stats.policy, tape_policy::offload);
  std::vector<range> const roots = forest(recorded(rec), rec.thread(), "tapeflow");
  ASSERT_EQ(names(roots), std::vector<std::string>{"tapeflow::plan_chain"});
  EXPECT_EQ(names(roots[0].children), (std::vector<std::string>{"tapeflow::plan_pipeline", "tapeflow::measure_bandwidths",
                                                                "tapeflow::plan_tiers"}));
  expect_all_registered(roots);
}

TEST(Nvtx, RangesAreInTheTapeflowDomainOnly)
{
  TAPEFLOW_REQUIRE_RECORDER();
  static_cast<void>(gradient_ranges<float>(rec, 8, 2));
  std::vector<tapeflow_nvtx_event> const events = recorded(rec);
  ASSERT_FALSE(events.empty());
  for (tapeflow_nvtx_event const& e : events) {
    EXPECT_STREQ(e.domain, "tapeflow") << (e.kind == TAPEFLOW_NVTX_PUSH ? e.message : "a pop");
  }
}

TEST(Nvtx, SecondGradientRecordsTheSameRanges)
{
  // Registered string handles are created once per process; later runs must reuse them.
  TAPEFLOW_REQUIRE_RECORDER();
  std::vector<range> const first = gradient_ranges<float>(rec, 16, 4);
  std::vector<range> const second = gradient_ranges<float>(rec, 16, 4);
  expect_gradient_structure(first, 4);
  expect_gradient_structure(second, 4);
}

TEST(Nvtx, PlanOnlyOpensThePlanningRanges)
{
  TAPEFLOW_REQUIRE_RECORDER();
  chain_stats const stats = ac::plan<float>(ac::problem{32, 5}, store_on_cpu());
  EXPECT_EQ(stats.steps, 5u);
  std::vector<range> const roots = forest(recorded(rec), rec.thread(), "tapeflow");
  ASSERT_EQ(names(roots), std::vector<std::string>{"tapeflow::plan_chain"});
  EXPECT_EQ(names(roots[0].children), (std::vector<std::string>{"tapeflow::plan_pipeline", "tapeflow::plan_tiers"}));
  expect_all_registered(roots);
}

TEST(Nvtx, PrimalIsOneRangeWithoutATape)
{
  TAPEFLOW_REQUIRE_RECORDER();
  std::vector<double> const u = ac::primal(ac::problem{8, 4}, initial_state<double>(8), store_on_cpu());
  EXPECT_EQ(u.size(), 64u);
  std::vector<range> const roots = forest(recorded(rec), rec.thread(), "tapeflow");
  ASSERT_EQ(names(roots), std::vector<std::string>{"tapeflow::workloads::primal"});
  EXPECT_TRUE(roots[0].children.empty());
  expect_all_registered(roots);
}

}  // namespace
}  // namespace tapeflow

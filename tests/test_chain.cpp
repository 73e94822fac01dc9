// SPDX-License-Identifier: Apache-2.0
// The chain scheduler with a toy step x' = x + x^2/2 (elementwise), whose gradient is known.
#include "toy_step.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/reverse.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <thread>

namespace tapeflow {
namespace {

/// dL/dx0 of L = Σ x_T through `c`. A schedule's reverse never swaps the caller's adjoint buffer
/// for the chain's.
template <class Step>
std::vector<double> run(chain<Step>& c, std::vector<double> const& x0)
{
  std::size_t const bytes = x0.size() * sizeof(double);
  device_buffer state(backend::cpu, bytes, {});
  state.upload(x0.data(), bytes, {});
  c.forward(state);
  device_buffer adjoint(backend::cpu, bytes, {});
  std::vector<double> ones(x0.size(), 1.0);
  adjoint.upload(ones.data(), bytes, {});
  void const* const caller = adjoint.data();
  c.reverse(adjoint);
  if (!c.stats().tiers.mixed.actions.empty()) { EXPECT_EQ(adjoint.data(), caller); }
  std::vector<double> g(x0.size());
  adjoint.download(g.data(), bytes, {});
  return g;
}

TEST(Chain, GradientOfAToyChainMatchesTheChainRule)
{
  std::vector<double> const x0{0.1, -0.2, 0.3, 0.05, -0.4};
  chain_options o;
  o.poison = true;
  std::size_t reported = 0;
  o.progress = [&](chain_phase, std::size_t done, std::size_t total) {
    EXPECT_LE(done, total);
    ++reported;
  };
  chain<toy_step> c(toy_step{x0.size()}, 6, o);
  std::vector<double> const g = run(c, x0);
  for (std::size_t k = 0; k < x0.size(); ++k) {
    double x = x0[k];
    double expect = 1.0;
    for (int s = 0; s < 6; ++s) {
      expect *= 1.0 + x;
      x = x + 0.5 * x * x;
    }
    EXPECT_NEAR(g[k], expect, 1e-14 * std::fabs(expect));
  }
  EXPECT_EQ(reported, 12u);
  EXPECT_EQ(*c.step().reverse_calls, 6u);
  EXPECT_EQ(c.stats().tape_bytes, 6 * 3 * sizeof(toy_step::record_type));
  EXPECT_EQ(c.stats().peak_tape_bytes, c.stats().tape_bytes);
  EXPECT_EQ(c.stats().policy, tape_policy::store);
  EXPECT_TRUE(c.recorded().empty());
}

// The caller's buffers stay the caller's: the chain ping-pongs through its own scratch and copies
// a result that ends there back, so the allocation a caller passed (and the stream it is ordered
// on) is the one it gets back. A chain that swapped buffers would free the caller's allocation
// on its own stream, while the caller's stream might still be using it (issue 16, item 10).
TEST(Chain, TheCallersBuffersAreNeverSwappedForTheChains)
{
  std::vector<double> const x0{0.3, -0.1, 0.7, 0.2};
  std::size_t const bytes = x0.size() * sizeof(double);
  for (tape_policy policy : {tape_policy::store, tape_policy::offload, tape_policy::recompute}) {
    for (std::size_t steps : {1u, 2u, 5u}) {
      SCOPED_TRACE(std::string{to_string(policy)} + ", " + std::to_string(steps) + " steps");
      chain_options o;
      o.policy = policy;
      o.poison = true;
      if (policy != tape_policy::store) { o.budget_bytes = 2 * 2 * sizeof(toy_step::record_type); }
      chain<toy_step> c(toy_step{x0.size()}, steps, o);
      device_buffer state(backend::cpu, bytes, {});
      state.upload(x0.data(), bytes, {});
      void const* const state_memory = state.data();
      c.forward(state);
      EXPECT_EQ(state.data(), state_memory);
      std::vector<double> x(x0.size());
      state.download(x.data(), bytes, {});
      device_buffer adjoint(backend::cpu, bytes, {});
      std::vector<double> const ones(x0.size(), 1.0);
      adjoint.upload(ones.data(), bytes, {});
      void const* const adjoint_memory = adjoint.data();
      c.reverse(adjoint);
      EXPECT_EQ(adjoint.data(), adjoint_memory);
      std::vector<double> g(x0.size());
      adjoint.download(g.data(), bytes, {});
      for (std::size_t k = 0; k < x0.size(); ++k) {
        double u = x0[k];
        double expect = 1.0;
        for (std::size_t t = 0; t < steps; ++t) {
          expect *= 1.0 + u;
          u = u + 0.5 * u * u;
        }
        EXPECT_DOUBLE_EQ(x[k], u) << k;
        EXPECT_NEAR(g[k], expect, 1e-14 * std::fabs(expect)) << k;
      }
    }
  }
}

// A step whose record is its input state: wherever a layer stays on the device, the chain keeps
// x_t's own buffer as the layer (augmented_forward is never called for it) and runs the untaped
// forward — the same bits as the copy, under every policy, with the last record's padding (an odd
// state) and poisoned working buffers.
TEST(Chain, AStepThatTapesItsStateGivesItsBufferAsTheLayer)
{
  std::vector<double> const x0{0.3, -0.1, 0.7, 0.2, -0.45};
  std::size_t const bytes = x0.size() * sizeof(double);
  std::size_t const steps = 7;
  std::size_t const layer = 3 * sizeof(toy_step::record_type);
  for (tape_policy policy : {tape_policy::store, tape_policy::offload, tape_policy::recompute, tape_policy::automatic}) {
    SCOPED_TRACE(to_string(policy));
    chain_options o;
    o.policy = policy;
    o.poison = true;
    o.host_tier_on_cpu = true;
    if (policy != tape_policy::store) { o.budget_bytes = 3 * layer; }
    auto forward_and_reverse = [&](bool record_is_state, std::size_t* augmented, chain_stats* stats) {
      toy_step step{x0.size()};
      step.record_is_state = record_is_state;
      chain<toy_step> c(step, steps, o);
      device_buffer state(backend::cpu, bytes, {});
      state.upload(x0.data(), bytes, {});
      void const* const memory = state.data();
      std::vector<double> result = run(c, x0);  // a first gradient, then a second on kept buffers
      c.forward(state);
      EXPECT_EQ(state.data(), memory);
      std::vector<double> x(x0.size());
      state.download(x.data(), bytes, {});
      result.insert(result.end(), x.begin(), x.end());
      *augmented = *c.step().augmented_calls;
      *stats = c.stats();
      return result;
    };
    std::size_t copied_calls = 0;
    std::size_t adopted_calls = 0;
    chain_stats copied;
    chain_stats adopted;
    EXPECT_EQ(forward_and_reverse(true, &adopted_calls, &adopted), forward_and_reverse(false, &copied_calls, &copied));
    EXPECT_EQ(adopted.tiers.describe(), copied.tiers.describe());
    EXPECT_EQ(adopted.tape_bytes, copied.tape_bytes);
    std::size_t host_layers = 0;
    for (schedule_action const& a : chain_actions(adopted.tiers, steps)) {
      host_layers += a.kind == action_kind::taped && a.where == level::host ? 1 : 0;
    }
    EXPECT_GT(copied_calls, 0u);
    // two forwards: the host tier's layers are written by augmented_forward, no device layer is
    EXPECT_EQ(adopted_calls, 2 * host_layers);
    if (policy == tape_policy::offload) { EXPECT_GT(host_layers, 0u); }
    if (policy == tape_policy::store || policy == tape_policy::recompute) { EXPECT_EQ(host_layers, 0u); }
  }
}

// A step that tapes its state writes ceil(state / values per record) records per step; a plan of
// any other size is a typed error.
TEST(Chain, AStepThatTapesItsStateMustWriteItsStateInRecords)
{
  struct wide_step : toy_step {
    [[nodiscard]] std::size_t records_per_step() const noexcept { return size; }
  };
  wide_step step;
  step.size = 4;
  step.record_is_state = true;
  EXPECT_THROW((chain<wide_step>(step, 3, chain_options{})), logic_error);
  step.record_is_state = false;
  EXPECT_NO_THROW((chain<wide_step>(step, 3, chain_options{})));
}

TEST(Chain, MisuseIsATypedErrorAndTheChainStaysUsable)
{
  std::vector<double> const x0{0.5, 0.25, -0.125};
  memory_usage const before = device_memory_usage(backend::cpu);
  {
    chain<toy_step> c(toy_step{x0.size()}, 3, chain_options{});
    device_buffer adjoint(backend::cpu, x0.size() * sizeof(double), {});
    EXPECT_THROW(c.reverse(adjoint), logic_error);  // nothing recorded
    device_buffer wrong(backend::cpu, 2 * sizeof(double), {});
    EXPECT_THROW(c.forward(wrong), logic_error);    // wrong state size
    device_buffer state(backend::cpu, x0.size() * sizeof(double), {});
    state.upload(x0.data(), x0.size() * sizeof(double), {});
    c.forward(state);
    EXPECT_THROW(c.forward(state), logic_error);    // tape still pending
    c.reverse(adjoint);
    EXPECT_THROW(c.reverse(adjoint), logic_error);  // reversed twice
    EXPECT_NO_THROW(run(c, x0));                    // and still usable
  }
  EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, before.current_bytes);
}

TEST(Chain, BadConfigurationsAreTypedErrors)
{
  EXPECT_THROW(chain<toy_step>(toy_step{4}, 0, chain_options{}), logic_error);
  EXPECT_THROW(chain<toy_step>(toy_step{0}, 3, chain_options{}), logic_error);
  chain_options budget;
  budget.policy = tape_policy::store;
  budget.budget_bytes = 2 * 2 * sizeof(toy_step::record_type);  // two of three layers
  EXPECT_THROW(chain<toy_step>(toy_step{4}, 3, budget), budget_error);
  budget.budget_bytes = 3 * 2 * sizeof(toy_step::record_type);
  EXPECT_NO_THROW(chain<toy_step>(toy_step{4}, 3, budget));
  chain_options stages;
  stages.pipeline.stages = 1;
  EXPECT_THROW(chain<toy_step>(toy_step{4}, 3, stages), logic_error);
  EXPECT_THROW(chain<toy_step>(toy_step{4}, static_cast<std::size_t>(-1) / 8, chain_options{}), logic_error);
  // Sizes whose bytes wrap: refused before any arithmetic on them (a state of SIZE_MAX bytes made
  // the optimiser divide by zero; SIZE_MAX / 2 values reported SIZE_MAX - 7 bytes).
  EXPECT_THROW(chain<toy_step>(toy_step{static_cast<std::size_t>(-1) / 2}, 3, chain_options{}), logic_error);
  chain_options priced;
  priced.policy = tape_policy::automatic;
  priced.budget_bytes = std::size_t{1} << 20;
  EXPECT_THROW(static_cast<void>(plan_chain(16, 1000, 100, static_cast<std::size_t>(-1), priced)), logic_error);
  EXPECT_THROW(static_cast<void>(plan_chain(16, 10, 0, 40, chain_options{})), logic_error) << "no steps";
  try {
    chain<toy_step> none(toy_step{4}, 0, chain_options{});
    ADD_FAILURE() << "a chain of no steps";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("a chain needs at least one step"), std::string::npos) << e.what();
  }
  // Below one tile times the pipeline depth (staged), or one tile (read in place), nothing can
  // run, whatever the policy.
  for (tape_policy p : {tape_policy::automatic, tape_policy::store, tape_policy::offload, tape_policy::recompute}) {
    chain_options tiny;
    tiny.policy = p;
    tiny.pipeline.tile_records = 2;
    tiny.pipeline.stages = 4;
    tiny.pipeline.staging = cpu_staging::ring;
    tiny.budget_bytes = 4 * 2 * sizeof(toy_step::record_type) - 1;
    EXPECT_THROW(chain<toy_step>(toy_step{40}, 3, tiny), budget_error) << to_string(p);
    tiny.pipeline.staging = cpu_staging::in_place;
    tiny.budget_bytes = 2 * sizeof(toy_step::record_type) - 1;
    EXPECT_THROW(chain<toy_step>(toy_step{40}, 3, tiny), budget_error) << to_string(p);
  }
}

TEST(Chain, CapturedReverseReplaysOverAResidentTape)
{
  std::vector<double> const x0{0.1, -0.2, 0.3, 0.05, -0.4};
  chain_options plain;
  plain.policy = tape_policy::store;
  chain<toy_step> reference(toy_step{x0.size()}, 9, plain);
  std::vector<double> const expect = run(reference, x0);

  chain_options o = plain;
  o.capture_reverse = true;
  o.poison = true;
  chain<toy_step> c(toy_step{x0.size()}, 9, o);
  std::size_t resident = 0;
  for (int iteration = 0; iteration < 5; ++iteration) {
    std::vector<double> const g = run(c, x0);
    EXPECT_EQ(g, expect) << iteration;
    EXPECT_EQ(c.stats().program_launches, static_cast<std::size_t>(iteration + 1));
    EXPECT_EQ(c.stats().peak_tape_bytes, c.stats().tape_bytes);
    EXPECT_EQ(*c.step().reverse_calls, 9u * static_cast<std::size_t>(iteration + 1));
    // The tape and the adjoints stay allocated between iterations, and nothing else is.
    std::size_t const held = device_memory_usage(backend::cpu).current_bytes;
    if (iteration == 0) { resident = held; }
    EXPECT_EQ(held, resident) << iteration;
  }
  EXPECT_GE(resident, c.stats().tape_bytes);
  EXPECT_FALSE(c.stats().graph_captured);  // the CPU backend replays by running the steps again

  chain_options offload = o;
  offload.policy = tape_policy::offload;
  EXPECT_THROW(chain<toy_step>(toy_step{x0.size()}, 9, offload), logic_error);
}

/// Layers of different sizes: step t is nonlinear (x + x^2/2, its x on the tape) on its first
/// width(t) values and linear (2x, nothing on the tape) on the rest, so step t writes
/// records_per_step(t) = width(t) / 2 records.
struct unequal_step {
  using value_type = double;
  using record_type = value_record<double, 2>;

  std::size_t size;
  /// How often each step's reverse ran.
  std::shared_ptr<std::map<std::size_t, std::size_t>> reversed = std::make_shared<std::map<std::size_t, std::size_t>>();
  /// Step 0's forward (taped or not) takes at least this long.
  std::chrono::milliseconds first_takes{0};

  [[nodiscard]] std::size_t width(std::size_t t) const noexcept { return std::min(size, 2 + 4 * (t % 4)); }
  [[nodiscard]] std::size_t state_size() const noexcept { return size; }
  [[nodiscard]] std::size_t records_per_step(std::size_t t) const noexcept { return (width(t) + 1) / 2; }

  void forward(std::size_t t, double const* in, double* out, stream_view) const
  {
    if (t == 0) { std::this_thread::sleep_for(first_takes); }
    for (std::size_t k = 0; k < size; ++k) { out[k] = k < width(t) ? in[k] + 0.5 * in[k] * in[k] : 2.0 * in[k]; }
  }

  void augmented_forward(std::size_t t, double const* in, double* out, tape_writer<record_type> tape,
                         stream_view) const
  {
    EXPECT_EQ(tape.size(), records_per_step(t));
    for (std::size_t r = 0; r < tape.size(); ++r) {
      record_type rec{};
      for (std::size_t c = 0; c < 2 && 2 * r + c < width(t); ++c) { rec.values[c] = in[2 * r + c]; }
      tape.write(r, rec);
    }
    forward(t, in, out, {});
  }

  void reverse(std::size_t t, tape_reader<record_type> tape, pipeline_plan const& plan, double const* g_out,
               double* g_in, stream_view) const
  {
    EXPECT_EQ(plan.records, records_per_step(t));
    ++(*reversed)[t];
    for (std::size_t k = width(t); k < size; ++k) { g_in[k] = 2.0 * g_out[k]; }
    cpu::reverse_tiles(tape, plan, [&](std::size_t, record_type const* staged, std::size_t first, std::size_t count) {
      for (std::size_t i = 0; i < count; ++i) {
        for (std::size_t c = 0; c < 2 && 2 * (first + i) + c < width(t); ++c) {
          std::size_t const k = 2 * (first + i) + c;
          g_in[k] = g_out[k] * (1.0 + staged[i].values[c]);
        }
      }
    });
  }
};

static_assert(is_step_v<unequal_step>, "records_per_step(step) meets the Step contract");

/// `store` over unequal steps: poisoned buffers, tiles of 2 records, host copies at `copy_GBps`.
chain_options unequal_store(double copy_GBps)
{
  chain_options o;
  o.poison = true;
  o.bw = {copy_GBps, copy_GBps, 20.0};
  o.pipeline.tile_records = 2;
  o.policy = tape_policy::store;
  return o;
}

/// dL/dx0 through a chain of `steps` unequal steps under `o`; its stats into `stats` when given.
std::vector<double> unequal_gradient(std::vector<double> const& x0, std::size_t steps, chain_options const& o,
                                     chain_stats* stats)
{
  chain<unequal_step> c(unequal_step{x0.size()}, steps, o);
  std::vector<double> g = run(c, x0);
  if (stats != nullptr) { *stats = c.stats(); }
  return g;
}

TEST(Chain, LayersOfDifferentSizesUnderEveryPolicyGiveTheSameBits)
{
  std::vector<double> const x0{0.1, -0.2, 0.3, 0.05, -0.4, 0.2, 0.15, -0.1, 0.25, -0.3, 0.12, 0.02, -0.05, 0.3};
  std::size_t const steps = 13;  // an odd count: the chain's own adjoint buffers would end on the other one
  auto gradient = [&](chain_options const& o, chain_stats* stats) { return unequal_gradient(x0, steps, o, stats); };
  chain_options const base = unequal_store(50.0);
  chain_stats stored;
  std::vector<double> const expect = gradient(base, &stored);
  // The chain rule, step by step.
  unequal_step const u{x0.size()};
  for (std::size_t k = 0; k < x0.size(); ++k) {
    double x = x0[k];
    double d = 1.0;
    for (std::size_t t = 0; t < steps; ++t) {
      bool const nonlinear = k < u.width(t);
      d *= nonlinear ? 1.0 + x : 2.0;
      x = nonlinear ? x + 0.5 * x * x : 2.0 * x;
    }
    EXPECT_NEAR(expect[k], d, 1e-12 * std::fabs(d)) << k;
  }
  std::size_t tape = 0;
  for (std::size_t t = 0; t < steps; ++t) { tape += u.records_per_step(t) * sizeof(unequal_step::record_type); }
  EXPECT_EQ(stored.tape_bytes, tape);
  ASSERT_EQ(stored.step_plans.size(), steps);
  EXPECT_EQ(stored.step_plans[2].records, u.records_per_step(2));
  EXPECT_EQ(stored.layer_bytes, 7 * sizeof(unequal_step::record_type));  // the largest

  for (tape_policy p : {tape_policy::automatic, tape_policy::offload, tape_policy::recompute}) {
    chain_options o = base;
    o.policy = p;
    o.host_tier_on_cpu = true;
    o.budget_bytes = tape / 3;
    chain_stats stats;
    std::vector<double> const g = gradient(o, &stats);
    SCOPED_TRACE(std::string{to_string(p)} + ": " + stats.tiers.describe());
    EXPECT_EQ(g, expect);
    EXPECT_LE(stats.peak_tape_bytes, o.budget_bytes);
    if (p != tape_policy::offload) { EXPECT_GT(stats.recompute_steps, 0u); }
    EXPECT_EQ(stats.recompute_steps, stats.tiers.recompute_steps);
  }

  // measure_steps over layers of different sizes times the step with the largest layer (step 3,
  // 7 records) and the one with the smallest (step 0, 1 record), a warm-up and three runs each,
  // and gives every step costs linear in its layer's size through those two. Step 0 takes at
  // least 3 ms, and its costs are what was timed: no less.
  chain_options o = base;
  o.policy = tape_policy::automatic;
  o.budget_bytes = tape / 3;
  o.measure_steps = true;
  unequal_step slow_first{x0.size()};
  slow_first.first_takes = std::chrono::milliseconds{3};
  chain<unequal_step> measured(slow_first, steps, o);
  std::map<std::size_t, std::size_t> const timed{{0, 4}, {3, 4}};
  EXPECT_EQ(*measured.step().reversed, timed);
  std::vector<step_cost> const& costs = measured.stats().step_costs;
  ASSERT_EQ(costs.size(), steps);
  for (std::size_t t = 0; t < steps; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    EXPECT_EQ(costs[t].layer_bytes, u.records_per_step(t) * sizeof(unequal_step::record_type));
    double const w = static_cast<double>(u.records_per_step(t) - 1) / 6.0;  // 1 record: step 0's; 7: step 3's
    auto const line = [&](double step_cost::*field) {
      return std::max(0.0, costs[0].*field + (costs[3].*field - costs[0].*field) * w);
    };
    EXPECT_NEAR(costs[t].forward_ms, line(&step_cost::forward_ms), 1e-12);
    EXPECT_NEAR(costs[t].aug_forward_ms, line(&step_cost::aug_forward_ms), 1e-12);
    EXPECT_NEAR(costs[t].reverse_ms, line(&step_cost::reverse_ms), 1e-12);
    EXPECT_EQ(costs[t].reverse_ms, costs[t % 4].reverse_ms) << "equal layers, equal costs";
  }
  EXPECT_GE(costs[0].forward_ms, 3.0);
  EXPECT_GE(costs[0].aug_forward_ms, 3.0);
  EXPECT_GT(costs[3].reverse_ms, 0.0);
  EXPECT_EQ(gradient(o, nullptr), expect);
}

TEST(Chain, MeasuredStepCostsShapeThePlan)
{
  std::vector<double> const x0(64, 0.25);
  std::size_t const layer = 32 * sizeof(toy_step::record_type);
  chain_options o;
  o.bw = {1.0, 1.0, 20.0};  // 512-byte layers copy in 0.5 us
  o.budget_bytes = 5 * layer;
  o.host_tier_on_cpu = true;
  // Steps far slower than a layer's copy: the copies hide, layers go to the host.
  o.step_costs = {step_cost{1.0, 1.0, 1.0, layer}};
  chain<toy_step> slow_steps(toy_step{x0.size()}, 20, o);
  EXPECT_GT(slow_steps.stats().tiers.count(tier::host), 0u) << slow_steps.stats().tiers.describe();
  EXPECT_EQ(slow_steps.stats().tiers.count(tier::recompute), 0u) << slow_steps.stats().tiers.describe();
  // Steps far faster than a copy: recomputing is cheaper than waiting for the host.
  o.step_costs = {step_cost{1e-6, 1e-6, 1e-6, layer}};
  chain<toy_step> fast_steps(toy_step{x0.size()}, 20, o);
  EXPECT_EQ(fast_steps.stats().tiers.count(tier::host), 0u) << fast_steps.stats().tiers.describe();
  EXPECT_GT(fast_steps.stats().tiers.count(tier::recompute), 0u) << fast_steps.stats().tiers.describe();
  o.step_costs.assign(3, step_cost{});  // neither one nor one per step
  EXPECT_THROW(chain<toy_step>(toy_step{x0.size()}, 20, o), logic_error);

  // measure_steps times the step (a warm-up and three runs of each part) and plans with that.
  o.step_costs.clear();
  o.measure_steps = true;
  o.poison = true;
  chain<toy_step> measured(toy_step{x0.size()}, 20, o);
  EXPECT_EQ(*measured.step().reverse_calls, 4u);
  EXPECT_GT(measured.stats().tiers.predicted_ms, 0.0);
  chain_options store;
  store.policy = tape_policy::store;
  chain<toy_step> reference(toy_step{x0.size()}, 20, store);
  EXPECT_EQ(run(measured, x0), run(reference, x0));
  EXPECT_LE(measured.stats().peak_tape_bytes, o.budget_bytes);
}

TEST(Chain, ChainsLongerThanTheOptimisersTablesRunTheirMixedScheduleToTheSameBits)
{
  // 450 unequal steps (beyond the 400 whose tables the optimiser solves): planned in blocks and
  // by the long-chain candidates, run with host layers and checkpoints (the host tier on the
  // CPU), the same bits as keeping every layer, within both budgets.
  std::vector<double> x0(14);
  for (std::size_t k = 0; k < x0.size(); ++k) { x0[k] = 0.01 * static_cast<double>(k % 5) - 0.02; }
  std::size_t const steps = 450;
  unequal_step const u{x0.size()};
  std::size_t tape = 0;
  for (std::size_t t = 0; t < steps; ++t) { tape += u.records_per_step(t) * sizeof(unequal_step::record_type); }
  auto gradient = [&](chain_options const& o, chain_stats* stats) { return unequal_gradient(x0, steps, o, stats); };
  chain_options o = unequal_store(0.5);
  chain_stats stored;
  std::vector<double> const expect = gradient(o, &stored);
  o.policy = tape_policy::automatic;
  o.host_tier_on_cpu = true;
  o.budget_bytes = tape / 4;
  o.host_budget_bytes = tape / 3;
  // Steps of a millisecond: a copy to the host is far cheaper than running one again.
  o.step_costs = {step_cost{1.0, 1.2, 2.0, 7 * sizeof(unequal_step::record_type)}};
  chain_stats mixed;
  EXPECT_EQ(gradient(o, &mixed), expect);
  SCOPED_TRACE(mixed.tiers.describe());
  EXPECT_EQ(mixed.policy, tape_policy::mixed);
  EXPECT_FALSE(mixed.tiers.mixed.actions.empty());
  EXPECT_GT(mixed.tiers.count(tier::host), 0u);
  EXPECT_GT(mixed.tiers.count(tier::recompute), 0u);
  EXPECT_EQ(mixed.recompute_steps, mixed.tiers.recompute_steps);
  EXPECT_LE(mixed.peak_tape_bytes, o.budget_bytes);
  EXPECT_LE(mixed.host_tape_bytes, o.host_budget_bytes);
}

TEST(Policy, NamesRoundTrip)
{
  for (tape_policy p : {tape_policy::automatic, tape_policy::store, tape_policy::offload, tape_policy::recompute}) {
    EXPECT_EQ(parse_policy(to_string(p)), p);
  }
  EXPECT_THROW(static_cast<void>(parse_policy("keep")), logic_error);
  EXPECT_EQ(to_string(tape_policy::mixed), "mixed");
  EXPECT_THROW(static_cast<void>(parse_policy("mixed")), logic_error);  // a result of auto, not a choice
}

TEST(Chain, ALayerSmallerThanItsStagingRingNeedsABudgetOfItsOwnBytesOnly)
{
  // A ring of 4 stages of 2-record tiles stages 128 bytes, but a 2-record (32-byte) layer's
  // reverse stages only the layer (docs/tiers.md: one tile times the depth, or one layer if
  // smaller): a budget of the three layers (96 bytes) holds the whole tape.
  std::vector<double> const x0{0.1, -0.2, 0.3, 0.05};
  chain_options o;
  o.policy = tape_policy::store;
  o.pipeline.tile_records = 2;
  o.pipeline.stages = 4;
  o.pipeline.staging = cpu_staging::ring;
  o.budget_bytes = 3 * 2 * sizeof(toy_step::record_type);
  chain<toy_step> c(toy_step{x0.size()}, 3, o);
  chain<toy_step> reference(toy_step{x0.size()}, 3, chain_options{});
  EXPECT_EQ(run(c, x0), run(reference, x0));
  EXPECT_LE(c.stats().peak_tape_bytes, o.budget_bytes);
}

TEST(Chain, OneMeasuredStepScalesTheTapedForwardAndReverseWithTheLayer)
{
  // Layers of 10 and 20 records, one step measured at 20 records: the first runs at half its
  // costs. Planned as store, the prediction is the taped forwards and reverses.
  chain_options o;
  o.policy = tape_policy::store;
  o.step_costs = {step_cost{1.0, 2.0, 3.0, 20 * 16}};
  chain_stats const s = plan_chain(16, std::vector<std::size_t>{10, 20}, 64, o);
  EXPECT_DOUBLE_EQ(s.tiers.predicted_ms, 0.5 * (2.0 + 3.0) + 1.0 * (2.0 + 3.0));
}

}  // namespace
}  // namespace tapeflow

// SPDX-License-Identifier: Apache-2.0
// Tape memory from chain-lifetime pools (a second forward and reverse allocates nothing and faults
// in no fresh pages, under every policy) and parameter adjoints (dL/dθ against finite differences
// in long double, the same bits under every policy, zeroed at each reverse).
#include "toy_step.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/reverse.hpp>
#include <tapeflow/cpu/tape_store.hpp>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace tapeflow {
namespace {

std::vector<tape_policy> const every_policy{tape_policy::store, tape_policy::offload, tape_policy::recompute,
                                            tape_policy::automatic};

/// Budgets under which each policy is what runs for `steps` layers of `layer` bytes over a state of
/// `state` bytes (offload: a ring of two slots; recompute: one layer and three snapshots; auto:
/// half the tape on the device and half in the host tier).
chain_options options_for(tape_policy p, std::size_t layer, std::size_t state, std::size_t steps)
{
  chain_options o;
  o.policy = p;
  o.bw = {5.0, 5.0, 20.0};
  if (p == tape_policy::offload) { o.budget_bytes = 2 * layer; }
  if (p == tape_policy::recompute) { o.budget_bytes = layer + 3 * state; }
  if (p == tape_policy::automatic) {
    o.budget_bytes = steps * layer / 2;
    o.bw = {50.0, 50.0, 20.0};  // copies hide behind compute: the planner keeps half, offloads half
    o.host_tier_on_cpu = true;  // auto leaves host memory out on the CPU; let it in to mix tiers
  }
  return o;
}

/// The plan is the policy asked for; `automatic` mixes the device and host tiers (the mixed
/// schedule, with its checkpoints).
void expect_policy(chain_stats const& stats, tape_policy p)
{
  if (p == tape_policy::automatic) {
    EXPECT_GT(stats.tiers.count(tier::device), 0u);
    EXPECT_GT(stats.tiers.count(tier::host), 0u);
  } else {
    EXPECT_EQ(stats.policy, p);
  }
}

struct allocation_count {
  std::size_t device_calls, device_bytes, host_calls, host_bytes;
};

allocation_count allocations_now(backend kind)
{
  memory_usage const d = device_memory_usage(kind);
  memory_usage const h = host_memory_usage(kind);
  return {d.allocations, d.allocated_bytes, h.allocations, h.allocated_bytes};
}

template <class Chain>
void gradient(Chain& c, device_buffer& state, device_buffer& adjoint, std::vector<double> const& x0)
{
  state.upload(x0.data(), state.size(), {});
  c.forward(state);
  adjoint.copy_from(state, {});
  c.reverse(adjoint);
}

TEST(TapePools, ASecondForwardAndReverseAllocateNothingUnderEveryPolicy)
{
  std::vector<double> const x0{0.1, -0.2, 0.3, 0.05, -0.4, 0.25, -0.15};
  std::size_t const bytes = x0.size() * sizeof(double);
  std::size_t const layer = 4 * sizeof(toy_step::record_type);
  constexpr std::size_t steps = 12;
  for (tape_policy p : every_policy) {
    for (bool capture : {false, true}) {
      if (capture && p != tape_policy::store) { continue; }
      SCOPED_TRACE(std::string{to_string(p)} + (capture ? ", captured reverse" : ""));
      chain_options o = options_for(p, layer, bytes, steps);
      o.capture_reverse = capture;
      chain<toy_step> c(toy_step{x0.size()}, steps, o);
      expect_policy(c.stats(), p);
      device_buffer state(backend::cpu, bytes, {});
      device_buffer adjoint(backend::cpu, bytes, {});
      allocation_count const before = allocations_now(backend::cpu);
      gradient(c, state, adjoint, x0);
      allocation_count const first = allocations_now(backend::cpu);
      EXPECT_GT(first.device_calls, before.device_calls) << "the first gradient allocates its tape";
      std::vector<double> g1(x0.size());
      adjoint.download(g1.data(), bytes, {});
      for (int again = 0; again < 3; ++again) {
        gradient(c, state, adjoint, x0);
        allocation_count const now = allocations_now(backend::cpu);
        EXPECT_EQ(now.device_calls, first.device_calls) << "iteration " << again + 2;
        EXPECT_EQ(now.device_bytes, first.device_bytes) << "iteration " << again + 2;
        EXPECT_EQ(now.host_calls, first.host_calls) << "iteration " << again + 2;
        EXPECT_EQ(now.host_bytes, first.host_bytes) << "iteration " << again + 2;
        std::vector<double> g(x0.size());
        adjoint.download(g.data(), bytes, {});
        EXPECT_EQ(std::memcmp(g.data(), g1.data(), bytes), 0) << "iteration " << again + 2;
      }
      if (p != tape_policy::automatic) {
        EXPECT_EQ(c.stats().policy == tape_policy::offload, c.stats().prefetches > 0);
        EXPECT_EQ(c.stats().policy == tape_policy::recompute, c.stats().recompute_steps > 0);
      }
    }
  }
}

TEST(TapePools, TheChainGivesEverythingBackWhenItGoes)
{
  std::vector<double> const x0{0.1, -0.2, 0.3, 0.05, -0.4};
  std::size_t const bytes = x0.size() * sizeof(double);
  std::size_t const layer = 3 * sizeof(toy_step::record_type);
  for (tape_policy p : every_policy) {
    SCOPED_TRACE(to_string(p));
    std::size_t const device_before = device_memory_usage(backend::cpu).current_bytes;
    std::size_t const host_before = host_memory_usage(backend::cpu).current_bytes;
    {
      chain<toy_step> c(toy_step{x0.size()}, 8, options_for(p, layer, bytes, 8));
      device_buffer state(backend::cpu, bytes, {});
      device_buffer adjoint(backend::cpu, bytes, {});
      gradient(c, state, adjoint, x0);
      // Between gradients the chain holds its tape memory (at most its peak) ...
      EXPECT_GT(device_memory_usage(backend::cpu).current_bytes, device_before + 2 * bytes);
    }
    // ... and gives it all back when it goes.
    EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, device_before);
    EXPECT_EQ(host_memory_usage(backend::cpu).current_bytes, host_before);
  }
}

TEST(TapePools, ASecondGradientFaultsInNoFreshPages)
{
  // 16 layers of 1 MiB (4096 pages). The CPU backend's process-wide cache is emptied between
  // the gradients, so only the chain's own pool can keep the second from faulting its tape in.
  std::size_t const n = std::size_t{1} << 17;
  std::vector<double> x0(n);
  for (std::size_t k = 0; k < n; ++k) { x0[k] = 0.3 * std::sin(0.01 * static_cast<double>(k)); }
  std::size_t const bytes = n * sizeof(double);
  constexpr std::size_t steps = 16;
  std::size_t const layer = (n / 2) * sizeof(toy_step::record_type);
  for (tape_policy p : every_policy) {
    SCOPED_TRACE(to_string(p));
    chain<toy_step> c(toy_step{n}, steps, options_for(p, layer, bytes, steps));
    device_buffer state(backend::cpu, bytes, {});
    device_buffer adjoint(backend::cpu, bytes, {});
    gradient(c, state, adjoint, x0);
    static_cast<void>(cpu::release_cached_memory());
    rusage before{};
    rusage after{};
    getrusage(RUSAGE_SELF, &before);
    gradient(c, state, adjoint, x0);
    getrusage(RUSAGE_SELF, &after);
    long const faults = after.ru_minflt - before.ru_minflt;
    // One layer alone is 256 pages; a few stray pages (thread stacks, the allocator) are not tape.
    EXPECT_LT(faults, 128) << "minor page faults in the second gradient";
  }
}

TEST(TapeStore, StreamingStoresWriteTheSameBytesAsACopyAtEveryAlignmentAndLength)
{
  std::vector<unsigned char> src(700);
  for (std::size_t k = 0; k < src.size(); ++k) { src[k] = static_cast<unsigned char>(k * 37 + 11); }
  alignas(64) unsigned char dst[800];
  for (std::size_t offset = 0; offset < 16; ++offset) {
    for (std::size_t bytes : {0, 1, 15, 16, 63, 64, 65, 79, 128, 200, 511, 640}) {
      std::memset(dst, 0xAB, sizeof dst);
      cpu::store_to_tape(dst + offset, src.data() + (offset * 3) % 7, bytes);
      ASSERT_EQ(std::memcmp(dst + offset, src.data() + (offset * 3) % 7, bytes), 0) << offset << " " << bytes;
      for (std::size_t k = 0; k < sizeof dst; ++k) {
        if (k < offset || k >= offset + bytes) { ASSERT_EQ(dst[k], 0xAB) << "wrote outside, at " << k; }
      }
    }
  }
  std::vector<float> values(1000);
  for (std::size_t k = 0; k < values.size(); ++k) { values[k] = 0.25f * static_cast<float>(k); }
  std::vector<float> taped(values.size() + 1);
  cpu::store_to_tape(taped.data() + 1, values.data(), values.size());
  EXPECT_EQ(std::memcmp(taped.data() + 1, values.data(), values.size() * sizeof(float)), 0);
}

// ---------------------------------------------------------------------------------------------
// A step with parameters θ = (a, b): x' = x + a sin x + b x²/2 elementwise, two values a record.
// Its reverse adds Σ g' sin x and Σ g' x²/2 to the parameter adjoint, summed in index order (the
// tiles' per-element partials first, then one ordered sum), so the bits do not depend on threads.
struct theta_step {
  using value_type = double;
  using record_type = value_record<double, 2>;

  std::size_t size;
  double a;
  double b;
  std::shared_ptr<std::vector<double>> partial = std::make_shared<std::vector<double>>(2 * size);

  [[nodiscard]] std::size_t state_size() const noexcept { return size; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return (size + 1) / 2; }
  [[nodiscard]] std::size_t parameter_size() const noexcept { return 2; }

  [[nodiscard]] double next(double x) const noexcept { return x + a * std::sin(x) + b * 0.5 * x * x; }

  void forward(std::size_t, double const* in, double* out, stream_view) const
  {
    for (std::size_t k = 0; k < size; ++k) { out[k] = next(in[k]); }
  }

  void augmented_forward(std::size_t, double const* in, double* out, tape_writer<record_type> tape, stream_view) const
  {
    for (std::size_t r = 0; r < tape.size(); ++r) {
      record_type rec{};
      for (std::size_t c = 0; c < 2 && 2 * r + c < size; ++c) {
        rec.values[c] = in[2 * r + c];
        out[2 * r + c] = next(in[2 * r + c]);
      }
      tape.write(r, rec);
    }
  }

  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const& plan, double const* g_out,
               double* g_in, double* g_theta, stream_view) const
  {
    std::vector<double>& part = *partial;
    cpu::reverse_tiles(tape, plan, [&](std::size_t, record_type const* staged, std::size_t first, std::size_t count) {
      for (std::size_t i = 0; i < count; ++i) {
        for (std::size_t c = 0; c < 2 && 2 * (first + i) + c < size; ++c) {
          std::size_t const k = 2 * (first + i) + c;
          double const x = staged[i].values[c];
          g_in[k] = g_out[k] * (1.0 + a * std::cos(x) + b * x);
          part[2 * k] = g_out[k] * std::sin(x);
          part[2 * k + 1] = g_out[k] * 0.5 * x * x;
        }
      }
    });
    double da = 0;
    double db = 0;
    for (std::size_t k = 0; k < size; ++k) {
      da += part[2 * k];
      db += part[2 * k + 1];
    }
    g_theta[0] += da;
    g_theta[1] += db;
  }
};

static_assert(has_parameters_v<theta_step>);
static_assert(!has_parameters_v<toy_step>);

/// L = ½ Σ x_T² in long double.
long double loss_of(std::vector<double> const& x0, long double a, long double b, std::size_t steps)
{
  long double sum = 0;
  for (double v : x0) {
    long double x = v;
    for (std::size_t t = 0; t < steps; ++t) { x = x + a * std::sin(x) + b * 0.5L * x * x; }
    sum += 0.5L * x * x;
  }
  return sum;
}

struct param_result {
  std::vector<double> theta;
  std::vector<double> state;
};

param_result param_gradient(chain<theta_step>& c, std::vector<double> const& x0)
{
  std::size_t const bytes = x0.size() * sizeof(double);
  device_buffer state(backend::cpu, bytes, {});
  device_buffer adjoint(backend::cpu, bytes, {});
  gradient(c, state, adjoint, x0);  // dL/dx_T = x_T
  param_result r{std::vector<double>(c.parameter_size()), std::vector<double>(x0.size())};
  c.parameter_adjoint().download(r.theta.data(), r.theta.size() * sizeof(double), {});
  adjoint.download(r.state.data(), bytes, {});
  return r;
}

TEST(ParameterAdjoints, MatchFiniteDifferencesAndGiveTheSameBitsUnderEveryPolicy)
{
  std::vector<double> x0(37);
  for (std::size_t k = 0; k < x0.size(); ++k) { x0[k] = 0.4 * std::sin(1.7 * static_cast<double>(k) + 0.3); }
  double const a = 0.05;
  double const b = -0.08;
  constexpr std::size_t steps = 20;
  std::size_t const bytes = x0.size() * sizeof(double);
  std::size_t const layer = ((x0.size() + 1) / 2) * sizeof(theta_step::record_type);
  // Central differences in long double (a 64-bit mantissa): truncation O(h²), rounding ~1e-19/h.
  long double const h = 1e-6L;
  long double const fd_a = (loss_of(x0, a + h, b, steps) - loss_of(x0, a - h, b, steps)) / (2 * h);
  long double const fd_b = (loss_of(x0, a, b + h, steps) - loss_of(x0, a, b - h, steps)) / (2 * h);

  std::vector<param_result> results;
  for (tape_policy p : every_policy) {
    for (bool capture : {false, true}) {
      if (capture && p != tape_policy::store) { continue; }
      SCOPED_TRACE(std::string{to_string(p)} + (capture ? ", captured reverse" : ""));
      chain_options o = options_for(p, layer, bytes, steps);
      o.capture_reverse = capture;
      o.poison = true;
      o.pipeline.tile_records = 4;  // several tiles a layer, spread over the CPU threads
      chain<theta_step> c(theta_step{x0.size(), a, b}, steps, o);
      expect_policy(c.stats(), p);
      ASSERT_EQ(c.parameter_size(), 2u);
      EXPECT_EQ(c.parameter_adjoint().size(), 0u) << "allocated by the first reverse";
      param_result const r = param_gradient(c, x0);
      ASSERT_EQ(c.parameter_adjoint().size(), 2 * sizeof(double));
      EXPECT_NEAR(r.theta[0], static_cast<double>(fd_a), 1e-9 * std::fabs(static_cast<double>(fd_a)));
      EXPECT_NEAR(r.theta[1], static_cast<double>(fd_b), 1e-9 * std::fabs(static_cast<double>(fd_b)));
      // Zeroed at each reverse: a second gradient is the same, not twice the first.
      param_result const again = param_gradient(c, x0);
      EXPECT_EQ(std::memcmp(again.theta.data(), r.theta.data(), 2 * sizeof(double)), 0);
      results.push_back(r);
    }
  }
  for (std::size_t k = 1; k < results.size(); ++k) {
    EXPECT_EQ(std::memcmp(results[k].theta.data(), results[0].theta.data(), 2 * sizeof(double)), 0) << k;
    EXPECT_EQ(std::memcmp(results[k].state.data(), results[0].state.data(), bytes), 0) << k;
  }
}

TEST(ParameterAdjoints, AStepWithoutParametersHasAnEmptyAdjoint)
{
  chain<toy_step> c(toy_step{3}, 2, chain_options{});
  device_buffer state(backend::cpu, 3 * sizeof(double), {});
  device_buffer adjoint(backend::cpu, 3 * sizeof(double), {});
  gradient(c, state, adjoint, {0.1, 0.2, 0.3});
  EXPECT_EQ(c.parameter_size(), 0u);
  EXPECT_EQ(c.parameter_adjoint().size(), 0u);
}

}  // namespace
}  // namespace tapeflow

// SPDX-License-Identifier: Apache-2.0
// Reliability on the CPU backend: determinism, injected faults, soak.
#include "gpu_backend.hpp"
#include "reference.hpp"
#include "toy_step.hpp"

#include <tapeflow/workloads/allen_cahn.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/fault.hpp>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace tapeflow {
namespace {

namespace ac = workloads::allen_cahn;

constexpr std::size_t grid = 24;        // 576 cells: 144 f32 records, 2304-byte layers
constexpr std::size_t steps = 10;
constexpr std::size_t layer = 144 * 16;
constexpr std::size_t state_bytes = grid * grid * sizeof(float);

/// Cycles of a soak: 1000, or TAPEFLOW_SOAK_CYCLES (the ASan preset's 100: under the sanitizer
/// the emulated device's thousand gradients a policy took most of the stage's test time, and
/// its leak check at exit holds the soak to the same account over fewer cycles).
int soak_cycles()
{
  char const* const asked = std::getenv("TAPEFLOW_SOAK_CYCLES");
  if (asked == nullptr) { return 1000; }
  char* end = nullptr;
  long const cycles = std::strtol(asked, &end, 10);
  if (end == asked || *end != '\0' || cycles < 2 || cycles > 1000000) {
    ADD_FAILURE() << "TAPEFLOW_SOAK_CYCLES=" << asked << ": a soak runs 2 to 1000000 cycles";
    return 1000;
  }
  return static_cast<int>(cycles);
}

/// Options under which each policy is what runs (the budgets force the tiers).
ac::options options_for(tape_policy policy, backend kind = backend::cpu)
{
  ac::options o;
  o.kind = kind;
  o.policy = policy;
  o.poison = true;
  o.bw = {50.0, 50.0, 20.0};  // copies hide behind compute: auto keeps half and offloads half
  o.pipeline.tile_records = 16;
  o.pipeline.stages = 2;
  if (policy == tape_policy::offload) { o.budget_bytes = 3 * layer; }
  if (policy == tape_policy::recompute) { o.budget_bytes = layer + 3 * state_bytes; }
  if (policy == tape_policy::automatic) { o.budget_bytes = steps * layer / 2; }
  return o;
}

std::vector<tape_policy> const every_policy{tape_policy::store, tape_policy::automatic, tape_policy::offload,
                                            tape_policy::recompute};

void expect_no_bytes_held(backend kind = backend::cpu)
{
  EXPECT_EQ(device_memory_usage(kind).current_bytes, 0u);
  EXPECT_EQ(host_memory_usage(kind).current_bytes, 0u);
}

/// The CPU backend always runs; the CUDA cases run where a device is present.
#define SKIP_WITHOUT(kind) TAPEFLOW_REQUIRE_DEVICE(kind)

std::string backend_name(::testing::TestParamInfo<backend> const& param_info)
{
  return std::string{to_string(param_info.param)};
}

class Determinism : public ::testing::TestWithParam<backend> {};

TEST_P(Determinism, TenRunsOfEachPolicyGiveTheSameBits)
{
  backend const kind = GetParam();
  SKIP_WITHOUT(kind);
  std::vector<float> const u0 = testing::random_state<float>(grid * grid, testing::fresh_seed());
  std::vector<float> const store =
    ac::gradient(ac::problem{grid, steps}, u0, options_for(tape_policy::store, kind)).gradient;
  for (tape_policy p : every_policy) {
    for (int run = 0; run < 10; ++run) {
      std::vector<float> const g = ac::gradient(ac::problem{grid, steps}, u0, options_for(p, kind)).gradient;
      ASSERT_EQ(std::memcmp(g.data(), store.data(), g.size() * sizeof(float)), 0)
        << to_string(p) << ", run " << run;
    }
  }
  expect_no_bytes_held(kind);
}

INSTANTIATE_TEST_SUITE_P(Backends, Determinism, ::testing::Values(backend::cpu, backend::cuda), backend_name);

TEST(DeterminismStress, TheHostTierHasNoRaceBetweenItsCopyStreamsAndTheReverse)
{

  // The host tier's copy threads race the compute thread; hundreds of short runs exercise the
  // orderings (this caught a prefetch that read a pinned copy still being written).
  std::vector<float> const u0 = testing::random_state<float>(grid * grid, testing::fresh_seed());
  ac::options o = options_for(tape_policy::offload);
  o.budget_bytes = 0;  // ring sized by the cost model
  std::vector<float> const store = ac::gradient(ac::problem{grid, 12}, u0, options_for(tape_policy::store)).gradient;
  for (int run = 0; run < 300; ++run) {
    std::vector<float> const g = ac::gradient(ac::problem{grid, 12}, u0, o).gradient;
    ASSERT_EQ(std::memcmp(g.data(), store.data(), g.size() * sizeof(float)), 0) << "run " << run;
  }
}

// ---------------------------------------------------------------------------------------------
struct fault_case {
  tape_policy policy;
  fault::site site;
  backend kind{backend::cpu};
};

std::string site_name(fault::site s)
{
  switch (s) {
    case fault::site::device_allocation: return "device_allocation";
    case fault::site::host_allocation: return "host_allocation";
    case fault::site::copy: return "copy";
  }
  return "unknown";
}

class InjectedFaults : public ::testing::TestWithParam<fault_case> {};

TEST_P(InjectedFaults, EveryFailurePointGivesATypedErrorOrAFallbackAndReleasesEverything)
{
  fault_case const c = GetParam();
  SKIP_WITHOUT(c.kind);
  std::vector<float> const u0 = testing::random_state<float>(grid * grid, testing::fresh_seed());
  ac::options const o = options_for(c.policy, c.kind);
  std::vector<float> const expect =
    ac::gradient(ac::problem{grid, steps}, u0, options_for(tape_policy::store, c.kind)).gradient;
  std::size_t failures = 0;
  std::size_t fallbacks = 0;
  // Fail the n-th operation at the site for every n until a run completes untouched.
  for (std::size_t n = 1;; ++n) {
    std::size_t const before = fault::injected(c.site);
    try {
      fault::scoped_failure const armed(c.site, n);
      ac::gradient_result<float> const r = ac::gradient(ac::problem{grid, steps}, u0, o);
      EXPECT_EQ(std::memcmp(r.gradient.data(), expect.data(), expect.size() * sizeof(float)), 0) << "n " << n;
      if (fault::injected(c.site) == before) { break; }  // the n-th operation never came
      ++fallbacks;
      EXPECT_FALSE(r.chain.fallback.empty()) << "n " << n;
      EXPECT_EQ(r.chain.policy, tape_policy::recompute);
    } catch (out_of_memory const&) {
      EXPECT_NE(c.site, fault::site::copy);
      ++failures;
    } catch (platform_error const& e) {
      EXPECT_EQ(c.site, fault::site::copy);
      EXPECT_EQ(e.name(), "tapeflow_injected_copy_fault");
      ++failures;
    }
    expect_no_bytes_held(c.kind);
    ASSERT_LT(n, 10000u);
  }
  EXPECT_GT(failures + fallbacks, 0u) << "no operation at this site ran";
  if (c.site == fault::site::host_allocation && c.policy == tape_policy::offload) {
    EXPECT_GT(fallbacks, 0u) << "the planner should fall back to recomputation";
  }
  // The runtime works afterwards.
  ac::gradient_result<float> const after = ac::gradient(ac::problem{grid, steps}, u0, o);
  EXPECT_EQ(std::memcmp(after.gradient.data(), expect.data(), expect.size() * sizeof(float)), 0);
  expect_no_bytes_held(c.kind);
}

INSTANTIATE_TEST_SUITE_P(
  SitesAndPolicies, InjectedFaults,
  ::testing::Values(fault_case{tape_policy::store, fault::site::device_allocation},
                    fault_case{tape_policy::store, fault::site::copy},
                    fault_case{tape_policy::offload, fault::site::device_allocation},
                    fault_case{tape_policy::offload, fault::site::host_allocation},
                    fault_case{tape_policy::offload, fault::site::copy},
                    fault_case{tape_policy::recompute, fault::site::device_allocation},
                    fault_case{tape_policy::recompute, fault::site::copy},
                    fault_case{tape_policy::automatic, fault::site::device_allocation},
                    fault_case{tape_policy::automatic, fault::site::copy},
                    fault_case{tape_policy::store, fault::site::device_allocation, backend::cuda},
                    fault_case{tape_policy::store, fault::site::copy, backend::cuda},
                    fault_case{tape_policy::offload, fault::site::device_allocation, backend::cuda},
                    fault_case{tape_policy::offload, fault::site::host_allocation, backend::cuda},
                    fault_case{tape_policy::offload, fault::site::copy, backend::cuda},
                    fault_case{tape_policy::recompute, fault::site::device_allocation, backend::cuda},
                    fault_case{tape_policy::recompute, fault::site::copy, backend::cuda}),
  [](auto const& param_info) {
    return std::string{to_string(param_info.param.kind)} + "_" + std::string{to_string(param_info.param.policy)} +
           "_" + site_name(param_info.param.site);
  });

TEST(InjectedFaultsFallback, NoHostMemoryAndNoRoomToRecomputeIsATypedError)
{
  std::vector<float> const u0 = testing::random_state<float>(grid * grid, testing::fresh_seed());
  ac::options o = options_for(tape_policy::offload);
  o.budget_bytes = layer;  // one ring slot: recomputation needs a layer and a snapshot
  fault::scoped_failure const armed(fault::site::host_allocation, 1);
  EXPECT_THROW(static_cast<void>(ac::gradient(ac::problem{grid, steps}, u0, o)), out_of_memory);
  expect_no_bytes_held();
}

// ---------------------------------------------------------------------------------------------
TEST(Soak, AThousandGradientsOfEachPolicyOnTheGpuReturnToTheBaseline)
{
  SKIP_WITHOUT(backend::cuda);
  std::vector<float> const u0 = testing::random_state<float>(grid * grid, testing::fresh_seed());
  for (tape_policy p : every_policy) {
    ac::options const o = options_for(p, backend::cuda);
    ac::gradient_result<float> const first = ac::gradient(ac::problem{grid, steps}, u0, o);
    for (int cycle = 0, cycles = soak_cycles(); cycle < cycles; ++cycle) {
      ac::gradient_result<float> const r = ac::gradient(ac::problem{grid, steps}, u0, o);
      ASSERT_EQ(std::memcmp(r.gradient.data(), first.gradient.data(), u0.size() * sizeof(float)), 0) << cycle;
      ASSERT_EQ(r.chain.peak_tape_bytes, first.chain.peak_tape_bytes) << cycle;
      ASSERT_EQ(device_memory_usage(backend::cuda).current_bytes, 0u) << cycle;
      ASSERT_EQ(host_memory_usage(backend::cuda).current_bytes, 0u) << cycle;
    }
  }
}

TEST(Soak, AThousandCyclesOfEachPolicyReturnToTheBaseline)
{
  std::vector<double> const x0{0.1, -0.2, 0.3, 0.05, -0.4, 0.25, -0.15};
  std::size_t const bytes = x0.size() * sizeof(double);
  std::size_t const record = sizeof(toy_step::record_type);
  for (tape_policy p : every_policy) {
    SCOPED_TRACE(to_string(p));
    chain_options o;
    o.policy = p;
    o.bw = {5.0, 5.0, 20.0};
    if (p == tape_policy::offload) { o.budget_bytes = 2 * 4 * record; }
    if (p == tape_policy::recompute) { o.budget_bytes = 4 * record + 3 * bytes; }
    if (p == tape_policy::automatic) { o.budget_bytes = 6 * 4 * record; }
    memory_usage const device_before = device_memory_usage(backend::cpu);
    memory_usage const host_before = host_memory_usage(backend::cpu);
    {
      chain<toy_step> c(toy_step{x0.size()}, 12, o);
      device_buffer state(backend::cpu, bytes, {});
      device_buffer adjoint(backend::cpu, bytes, {});
      std::vector<double> first;
      std::size_t held = 0;  // the chain keeps its tape memory from the first gradient on
      std::size_t host_held = 0;
      for (int cycle = 0, cycles = soak_cycles(); cycle < cycles; ++cycle) {
        state.upload(x0.data(), bytes, {});
        c.forward(state);
        adjoint.copy_from(state, {});
        c.reverse(adjoint);
        std::vector<double> g(x0.size());
        adjoint.download(g.data(), bytes, {});
        if (cycle == 0) {
          first = g;
          held = device_memory_usage(backend::cpu).current_bytes;
          host_held = host_memory_usage(backend::cpu).current_bytes;
        }
        ASSERT_EQ(std::memcmp(g.data(), first.data(), bytes), 0) << "cycle " << cycle;
        ASSERT_EQ(device_memory_usage(backend::cpu).current_bytes, held) << "cycle " << cycle;
        ASSERT_EQ(host_memory_usage(backend::cpu).current_bytes, host_held) << "cycle " << cycle;
        ASSERT_LE(c.stats().peak_tape_bytes, o.budget_bytes == 0 ? c.stats().tape_bytes : o.budget_bytes);
        ASSERT_EQ(c.stats().prefetches, c.stats().tiers.count(tier::host));
      }
      EXPECT_EQ(c.stats().policy == tape_policy::offload, host_held > host_before.current_bytes);
    }
    EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, device_before.current_bytes);
    EXPECT_EQ(host_memory_usage(backend::cpu).current_bytes, host_before.current_bytes);
  }
}

}  // namespace
}  // namespace tapeflow

// SPDX-License-Identifier: Apache-2.0
// Enzyme interop: per-thread slots of a run-time size, staged back whole, under every policy; on the
// CPU backend always, on the GPU where one is present.
#include "gpu_backend.hpp"
#include "reference.hpp"

#include <tapeflow/workloads/enzyme_example.hpp>
#include <tapeflow/workloads/enzyme_example/math.hpp>
#include <tapeflow/enzyme.hpp>
#include <tapeflow/error.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace tapeflow {
namespace {

namespace ex = workloads::enzyme_example;
using testing::real;

/// x_T by the primal in long double, and L.
real reference_loss(std::vector<real> x, ex::problem const& p)
{
  for (std::size_t s = 0; s < p.steps; ++s) {
    for (real& v : x) {
      for (std::size_t k = 0; k < p.inner; ++k) { v = std::sin(v) + static_cast<real>(p.a) * v; }
    }
  }
  real sum = 0;
  for (real v : x) { sum += v * v; }
  return sum / 2;
}

TEST(EnzymeSlots, ASlotsPaddingIsZeroedAndItsTapeAndItsNeighboursAreLeftAlone)
{
  // Slots are staged and copied in whole chunks: the bytes past Enzyme's tape must be written
  // (compute-sanitizer's initcheck on the H100 counted 10 144 reads and copies of them).
  for (std::size_t bytes : {8u, 24u, 40u, 48u}) {
    std::size_t const per_slot = enzyme::slot_chunks(bytes);
    std::vector<enzyme::chunk> layer(3 * per_slot);
    std::memset(layer.data(), 0xAB, layer.size() * sizeof(enzyme::chunk));
    tape_writer<enzyme::chunk> const writer{layer.data(), tile_layout{layer.size(), layer.size()}};
    void* const slot = enzyme::slot(writer, bytes, 1);
    auto const* const all = reinterpret_cast<unsigned char const*>(layer.data());
    ASSERT_EQ(static_cast<unsigned char const*>(slot), all + per_slot * sizeof(enzyme::chunk));
    for (std::size_t k = 0; k < layer.size() * sizeof(enzyme::chunk); ++k) {
      std::size_t const in_slot = k - per_slot * sizeof(enzyme::chunk);
      bool const padding = k >= per_slot * sizeof(enzyme::chunk) && k < 2 * per_slot * sizeof(enzyme::chunk) &&
                           in_slot >= bytes;
      ASSERT_EQ(all[k], padding ? 0 : 0xAB) << "tape of " << bytes << " bytes, byte " << k;
    }
  }
}

TEST(EnzymeCache, AnOverflowedBlockOfSlotZeroIsNotReadAsARegionsBlock)
{
  // Slot 0's region starts at the layer's base, which is also the overflow sink. Reallocating the
  // sink must overflow again, not read (and write) a header 16 bytes before the layer.
  alignas(16) unsigned char memory[16 + 4 * 64] = {};
  unsigned char* const base = memory + 16;
  std::size_t const before_the_layer = 64;  // a header that would grow the sink in place
  std::memcpy(memory, &before_the_layer, sizeof before_the_layer);
  enzyme::cache_status status{};
  enzyme::cache_view const layer{base, 64, 4, &status};
  enzyme::cache_cursor slot0 = layer.cursor(0);
  void* const sink = slot0.allocate(72);  // 16 + 80 bytes: past the 64-byte region
  EXPECT_EQ(sink, base);
  EXPECT_EQ(slot0.reallocate(sink, 32), base);
  EXPECT_EQ(status.overflows, 2u);
  std::size_t header = 0;
  std::memcpy(&header, memory, sizeof header);
  EXPECT_EQ(header, before_the_layer);
  // A block of the region itself still grows in place.
  enzyme::cache_cursor slot1 = layer.cursor(1);
  void* const block = slot1.allocate(8);
  EXPECT_EQ(block, base + 64 + 16);
  EXPECT_EQ(slot1.reallocate(block, 40), block);
  EXPECT_EQ(slot1.used(), 64u);
  EXPECT_EQ(status.overflows, 2u);
}

TEST(EnzymeSlots, SizesRoundToWholeChunksAndTilesHoldWholeSlots)
{
  EXPECT_EQ(enzyme::slot_bytes(1), 16u);
  EXPECT_EQ(enzyme::slot_bytes(24), 32u);
  EXPECT_EQ(enzyme::slot_bytes(48), 48u);
  EXPECT_EQ(enzyme::slot_chunks(40), 3u);
  device_limits const cpu = query_device_limits(backend::cpu);
  for (std::size_t bytes : {8u, 24u, 40u, 1000u}) {
    pipeline_request const r = enzyme::slot_pipeline(cpu, bytes, 777);
    EXPECT_EQ(r.tile_records % enzyme::slot_chunks(bytes), 0u) << bytes;
    EXPECT_GT(r.tile_records, 0u);
  }
  EXPECT_THROW(static_cast<void>(enzyme::slot_pipeline(cpu, 0, 10)), logic_error);
  EXPECT_THROW(static_cast<void>(enzyme::slot_pipeline(cpu, 16, 0)), logic_error);
  // A slot larger than the staging ring's slots: refused where tiles are staged, fine in place.
  pipeline_request ring;
  ring.staging = cpu_staging::ring;
  EXPECT_THROW(static_cast<void>(enzyme::slot_pipeline(cpu, std::size_t{1} << 30, 10, ring)), logic_error);
  EXPECT_NO_THROW(static_cast<void>(enzyme::slot_pipeline(cpu, std::size_t{1} << 30, 10)));
}

class EnzymeExample : public ::testing::TestWithParam<backend> {};

TEST_P(EnzymeExample, GradientMatchesFiniteDifferencesForRunTimeTapeSizes)
{
  backend const kind = GetParam();
  TAPEFLOW_REQUIRE_DEVICE(kind);
  for (std::size_t inner : {1u, 3u, 5u}) {  // 8, 24, 40-byte tapes: 1, 2, 3 chunks a slot
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("inner " + std::to_string(inner) + ", seed " + std::to_string(seed));
    ex::problem const p{301, 4, inner, 0.5};
    std::vector<double> const x0 = testing::random_state<double>(p.n, seed);
    ex::options o;
    o.kind = kind;
    o.poison = true;
    ex::result const r = ex::gradient(p, x0, o);
    EXPECT_EQ(r.chain.plan.tile_records % enzyme::slot_chunks(ex::tape_bytes({inner, 0.5})), 0u);
    std::vector<real> x = testing::widen(x0);
    // Independent of the tape: forward-mode derivative (a dual number by hand) in long double.
    std::vector<real> exact(p.n);
    for (std::size_t i = 0; i < p.n; ++i) {
      real v = x[i];
      real d = 1;
      for (std::size_t k = 0; k < p.steps * p.inner; ++k) {
        d *= std::cos(v) + static_cast<real>(p.a);
        v = std::sin(v) + static_cast<real>(p.a) * v;
      }
      exact[i] = v * d;  // dL/dx0 = x_T * dx_T/dx0
    }
    EXPECT_LT(testing::relative_error(r.gradient, exact), 1e-12);
    // And central differences (truncation ~ h^2 times a third derivative that grows with K).
    std::vector<real> fd(p.n);
    real const h = 1e-8L;  // long double: rounding ~1e-19 / h, far below the truncation
    for (std::size_t i = 0; i < p.n; ++i) {
      // Elements are independent: perturb one, the loss changes by its own term only.
      real const saved = x[i];
      std::vector<real> one{saved + h};
      real const up = reference_loss(one, p);
      one[0] = saved - h;
      real const down = reference_loss(one, p);
      fd[i] = (up - down) / (2 * h);
    }
    EXPECT_LT(testing::relative_error(r.gradient, fd), 1e-6);
    EXPECT_NEAR(r.loss, static_cast<double>(reference_loss(x, p)), 1e-12 * r.loss);
  }
}

TEST_P(EnzymeExample, EveryPolicyGivesTheSameBits)
{
  backend const kind = GetParam();
  TAPEFLOW_REQUIRE_DEVICE(kind);
  ex::problem const p{500, 8, 3, 0.5};
  std::vector<double> const x0 = testing::random_state<double>(p.n, testing::fresh_seed());
  ex::options o;
  o.kind = kind;
  o.policy = tape_policy::store;
  o.bw = {5.0, 5.0, 20.0};
  ex::result const store = ex::gradient(p, x0, o);
  std::size_t const layer = store.chain.layer_bytes;
  for (tape_policy policy : {tape_policy::offload, tape_policy::recompute, tape_policy::automatic}) {
    o.policy = policy;
    o.budget_bytes = policy == tape_policy::recompute ? layer + 3 * p.n * sizeof(double) : 3 * layer;
    ex::result const r = ex::gradient(p, x0, o);
    EXPECT_EQ(std::memcmp(r.gradient.data(), store.gradient.data(), p.n * sizeof(double)), 0) << to_string(policy);
    EXPECT_LE(r.chain.peak_tape_bytes, o.budget_bytes);
  }
  EXPECT_THROW(static_cast<void>(ex::gradient(ex::problem{10, 2, 0, 0.5}, std::vector<double>(10, 0.1), o)),
               logic_error);
  EXPECT_THROW(static_cast<void>(ex::gradient(ex::problem{10, 2, 3, 0.5}, std::vector<double>(9, 0.1), o)),
               logic_error);
}

INSTANTIATE_TEST_SUITE_P(Backends, EnzymeExample, ::testing::Values(backend::cpu, testing::gpu),
                         [](auto const& param_info) { return std::string{to_string(param_info.param)}; });

}  // namespace
}  // namespace tapeflow

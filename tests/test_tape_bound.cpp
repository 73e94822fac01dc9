// SPDX-License-Identifier: Apache-2.0
// The tape-bound microbenchmark's variants on the CPU backend: every way of reading the tape gives
// the reference adjoint bit for bit, and the math is the derivative it claims to be.
#include "reference.hpp"

#include <tapeflow/workloads/tape_bound.hpp>
#include <tapeflow/error.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace tapeflow {
namespace {

namespace tb = workloads::tape_bound;
using testing::real;

std::vector<float> random_values(std::size_t n, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.5F, 1.5F);
  std::vector<float> v(n);
  for (float& x : v) { x = dist(rng); }
  return v;
}

/// The forward's value chain in long double: d/du of sum_k v_k(u) / (k + 1) is what the reverse
/// multiplies by only if v_k are the *local* partials; here the benchmark defines the local
/// derivative as that sum, so check the sum against an independent long-double evaluation.
real reference_derivative(float u)
{
  real v = u;
  real d = v;
  for (int k = 1; k < 8; ++k) {
    v = 0.5L * static_cast<real>(u) * v + 0.25L;
    d += v / static_cast<real>(k + 1);
  }
  return d;
}

TEST(TapeBound, EveryCpuVariantGivesTheReferenceAdjointBitForBit)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::size_t const n = 10007;  // not a multiple of any tile
  std::vector<float> const u = random_values(n, seed);
  std::vector<float> const g_out = random_values(n, seed + 1);
  std::vector<float> const expect = tb::gradient(u, g_out, tb::variant::recompute, backend::cpu);
  for (std::size_t r = 0; r < n; ++r) {
    real const want = reference_derivative(u[r]) * static_cast<real>(g_out[r]);
    ASSERT_NEAR(static_cast<double>(expect[r]), static_cast<double>(want), 1e-5 * (1 + std::fabs(static_cast<double>(want))))
      << "region " << r;
  }
  for (tb::variant v : tb::all_variants) {
    SCOPED_TRACE(std::string{tb::to_string(v)});
    pipeline_request request;
    request.tile_records = 97;
    std::vector<float> const got = tb::gradient(u, g_out, v, backend::cpu, request);
    ASSERT_EQ(got.size(), n);
    EXPECT_EQ(std::memcmp(got.data(), expect.data(), n * sizeof(float)), 0);
  }
}

TEST(TapeBound, BadInputThrows)
{
  EXPECT_THROW(static_cast<void>(tb::gradient({}, {}, tb::variant::staged, backend::cpu)), logic_error);
  EXPECT_THROW(static_cast<void>(tb::gradient({1.0F, 2.0F}, {1.0F}, tb::variant::staged, backend::cpu)), logic_error);
  EXPECT_EQ(tb::to_string(tb::variant::naive_soa), "naive-soa");
  EXPECT_EQ(tb::to_string(tb::variant::bulk), "staged-bulk");
}

}  // namespace
}  // namespace tapeflow

// SPDX-License-Identifier: Apache-2.0
// The tape-bound microbenchmark's GPU reverse variants against the CPU reference: the naive SoA
// tape, direct AoS reads, the cp.async and register pipelines, sm_90 bulk copies and recompute all
// give the same adjoint. Skipped (with the reason) when no device is present.
#include "gpu_backend.hpp"
#include "reference.hpp"

#include <tapeflow/workloads/tape_bound.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace tapeflow {
namespace {

namespace tb = workloads::tape_bound;

TEST(GpuTapeBound, EveryVariantMatchesTheCpuReference)
{
  TAPEFLOW_REQUIRE_DEVICE(testing::gpu);
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.5F, 1.5F);
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{1} << 20, (std::size_t{1} << 20) + 333}) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> u(n), g_out(n);
    for (std::size_t i = 0; i < n; ++i) {
      u[i] = dist(rng);
      g_out[i] = dist(rng);
    }
    std::vector<float> const expect = tb::gradient(u, g_out, tb::variant::recompute, backend::cpu);
    for (tb::variant v : tb::all_variants) {
      SCOPED_TRACE(std::string{tb::to_string(v)});
      if (!tb::supported(v, testing::gpu)) {
        std::printf("[ INFO ] %s does not run on this device; not checked\n", std::string{tb::to_string(v)}.c_str());
        continue;
      }
      for (int stages : {0, 2, 4}) {
        pipeline_request request;
        request.stages = stages;
        std::vector<float> const got = tb::gradient(u, g_out, v, testing::gpu, request);
        ASSERT_EQ(got.size(), n);
        // Same math on the same values; the device may contract a*b+c into an FMA, so compare
        // to rounding rather than bit for bit.
        EXPECT_LT(testing::relative_error(got, expect), 1e-6) << "stages " << stages;
      }
    }
  }
}

}  // namespace
}  // namespace tapeflow

// SPDX-License-Identifier: Apache-2.0
// Real Enzyme-generated device code on a CUDA GPU: the Enzyme example's cubins (clang-15, Enzyme's
// plugin, tapeflow's passes, ptxas; kernels/CMakeLists.txt) loaded through the driver API and run
// as the steps of tapeflow chains under every policy, against the hand-written CUDA kernels, the
// exact derivative and finite differences in long double; Enzyme's loop caches in a bounded
// cache_pool (no device heap), the heap-caching control, and the pool's overflow error. Skips,
// saying why, where no CUDA device is. The cubins are looked for in $TAPEFLOW_ENZYME_CUBIN_DIR,
// else where the build put them.
#include "../gpu_backend.hpp"
#include "../reference.hpp"

#include <tapeflow/workloads/enzyme_example/enzyme_device.hpp>
#include <tapeflow/error.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace tapeflow {
namespace {

namespace ex = workloads::enzyme_example;
using testing::real;

class EnzymeGpu : public ::testing::Test {
 protected:
  void SetUp() override { TAPEFLOW_REQUIRE_DEVICE(backend::cuda); }
};

/// dL/dx0 of L = 0.5 sum x_T^2 exactly (long double), and by central differences.
struct references {
  std::vector<real> exact;
  std::vector<real> fd;
};

references references_of(std::vector<double> const& x0, ex::problem const& p)
{
  references r{std::vector<real>(x0.size()), std::vector<real>(x0.size())};
  auto xT = [&](real v, real* d) {
    for (std::size_t k = 0; k < p.steps * p.inner; ++k) {
      if (d != nullptr) { *d *= std::cos(v) + static_cast<real>(p.a); }
      v = std::sin(v) + static_cast<real>(p.a) * v;
    }
    return v;
  };
  for (std::size_t i = 0; i < x0.size(); ++i) {
    real d = 1;
    real const v = xT(x0[i], &d);
    r.exact[i] = v * d;
    real const h = 1e-7L;
    real const up = xT(x0[i] + h, nullptr);
    real const down = xT(x0[i] - h, nullptr);
    r.fd[i] = (up * up - down * down) / (4 * h);
  }
  return r;
}

ex::result enzyme_gradient(ex::enzyme_module const& m, std::shared_ptr<enzyme::cache_pool> pool, ex::problem const& p,
                           std::vector<double> const& x0, ex::options const& o)
{
  return ex::gradient(*ex::open_enzyme(m, std::move(pool), p, x0, o));
}

/// Store on the CUDA backend, the policy the other policies are checked against.
ex::options store_on_cuda(bool poison)
{
  ex::options o;
  o.kind = backend::cuda;
  o.policy = tape_policy::store;
  o.poison = poison;
  return o;
}

bool same_bits(std::vector<double> const& a, std::vector<double> const& b)
{
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

TEST_F(EnzymeGpu, ExampleChainEveryPolicyAgainstHandWrittenExactAndFiniteDifferences)
{
  ex::enzyme_module const m(ex::enzyme_cubin_dir(), ex::enzyme_caches::pool);
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + m.path());
  for (std::size_t inner : {3u, 20u}) {  // run-time trip counts: Enzyme caches in the pool
    SCOPED_TRACE("inner " + std::to_string(inner));
    ex::problem const p{4099, 4, inner, 0.5};  // n: not a whole number of blocks
    std::vector<double> const x0 = testing::random_state<double>(p.n, seed + inner);
    auto pool = std::make_shared<enzyme::cache_pool>(backend::cuda, p.steps, p.n, ex::enzyme_region_bytes(inner));
    ex::options o = store_on_cuda(true);  // poisoned: every slot byte Enzyme's reverse reads, its forward wrote
    ex::result const store = enzyme_gradient(m, pool, p, x0, o);

    references const ref = references_of(x0, p);
    EXPECT_LT(testing::relative_error(store.gradient, ref.exact), 1e-13);
    EXPECT_LT(testing::relative_error(store.gradient, ref.fd), 1e-7);

    // The hand-written CUDA pair (nvcc) computes the same function: the loss and gradient within
    // rounding; how close they are is recorded (the same bits where the arithmetic is the same).
    ex::result const hand = ex::gradient(p, x0, o);
    EXPECT_NEAR(store.loss, hand.loss, 1e-14 * std::fabs(hand.loss));
    double const gap = testing::relative_error(store.gradient, hand.gradient);
    EXPECT_LT(gap, 1e-12);
    std::printf("inner %zu, Enzyme against the hand-written kernels: loss %s, gradient %s (relative %.3g)\n", inner,
                store.loss == hand.loss ? "same bits" : "differs", same_bits(store.gradient, hand.gradient) ? "same bits" : "differs",
                gap);

    std::size_t const layer = store.chain.layer_bytes;
    for (tape_policy policy : {tape_policy::offload, tape_policy::recompute, tape_policy::automatic}) {
      SCOPED_TRACE(to_string(policy));
      o.policy = policy;
      o.budget_bytes = policy == tape_policy::recompute ? layer + 3 * p.n * sizeof(double) : 3 * layer;
      ex::result const r = enzyme_gradient(m, pool, p, x0, o);
      EXPECT_TRUE(same_bits(r.gradient, store.gradient));
      EXPECT_EQ(r.loss, store.loss);
      EXPECT_LE(r.chain.peak_tape_bytes, o.budget_bytes);
      if (policy == tape_policy::recompute) { EXPECT_GT(r.chain.recompute_steps, 0u); }
    }
  }
}

TEST_F(EnzymeGpu, EnzymesOwnHeapCachesGiveTheSameGradient)
{
  // The control: the same kernels without tapeflow's cache pass malloc their caches on the device
  // heap and free them in the reverse (8 MiB by default: enough for these 4 x 4099 threads).
  ex::enzyme_module const pooled(ex::enzyme_cubin_dir(), ex::enzyme_caches::pool);
  ex::enzyme_module const heap(ex::enzyme_cubin_dir(), ex::enzyme_caches::heap);
  ex::problem const p{4099, 4, 20, 0.5};
  std::vector<double> const x0 = testing::random_state<double>(p.n, testing::fresh_seed());
  ex::options const o = store_on_cuda(true);
  auto pool = std::make_shared<enzyme::cache_pool>(backend::cuda, p.steps, p.n, ex::enzyme_region_bytes(p.inner));
  ex::result const a = enzyme_gradient(pooled, pool, p, x0, o);
  ex::result const b = enzyme_gradient(heap, nullptr, p, x0, o);
  EXPECT_TRUE(same_bits(a.gradient, b.gradient));
  EXPECT_THROW(static_cast<void>(ex::open_enzyme(heap, pool, p, x0, o)), logic_error);
  EXPECT_THROW(static_cast<void>(ex::open_enzyme(pooled, nullptr, p, x0, o)), logic_error);
}

TEST_F(EnzymeGpu, CachePoolOverflowIsABudgetErrorNamingTheBytesARegionNeeds)
{
  ex::enzyme_module const m(ex::enzyme_cubin_dir(), ex::enzyme_caches::pool);
  ex::problem const p{1000, 2, 20, 0.5};
  std::vector<double> const x0 = testing::random_state<double>(p.n, testing::fresh_seed());
  ex::options const o = store_on_cuda(false);
  std::size_t need = 0;
  try {
    static_cast<void>(enzyme_gradient(m, std::make_shared<enzyme::cache_pool>(backend::cuda, p.steps, p.n, 16), p,
                                      x0, o));
    FAIL() << "a 16-byte region cannot hold Enzyme's caches of 20 iterations";
  } catch (budget_error const& e) {
    EXPECT_NE(std::string(e.what()).find("needs at least"), std::string::npos) << e.what();
    need = e.requested_bytes();
  }
  EXPECT_GT(need, 16u);
  EXPECT_LE(need, ex::enzyme_region_bytes(p.inner));
  // A region of the bytes the error named is enough, and gives the gradient of a roomy one.
  auto const exact_fit = std::make_shared<enzyme::cache_pool>(backend::cuda, p.steps, p.n, (need + 15) / 16 * 16);
  auto const roomy = std::make_shared<enzyme::cache_pool>(backend::cuda, p.steps, p.n, 4 * need);
  ex::result const a = enzyme_gradient(m, exact_fit, p, x0, o);
  ex::result const b = enzyme_gradient(m, roomy, p, x0, o);
  EXPECT_TRUE(same_bits(a.gradient, b.gradient));
}

}  // namespace
}  // namespace tapeflow

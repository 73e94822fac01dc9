// SPDX-License-Identifier: Apache-2.0
// GMM on the backend under test (tests/target.hpp): every tiling, bad input; on the CPU backend
// also the objective and every gradient entry against an independent long-double implementation of
// ADBench's objective and central finite differences of it; on a GPU also the CPU backend's
// objective and gradient at every size, and reproducible runs. The GPU path is CUDA only (CUB):
// skipped in a HIP build.
#include "common.hpp"

#include <tapeflow/workloads/gmm.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace tapeflow {
namespace {

namespace gm = workloads::gmm;

gm::options on(backend kind) { return testing::options_on<gm::options>(kind); }

class Gmm : public testing::on_target<::testing::Test, testing::gpu_path::cuda_only> {};

bool all_finite(gm::gradient_result const& r)
{
  return testing::all_finite(r.d_alphas) && testing::all_finite(r.d_means) && testing::all_finite(r.d_icf) &&
         std::isfinite(r.objective);
}

/// The same objective (to 1e-12) and gradient (to `tolerance`, dL/dalpha to `alphas_tolerance`).
void expect_close(gm::gradient_result const& got, gm::gradient_result const& want, double tolerance,
                  double alphas_tolerance)
{
  EXPECT_NEAR(got.objective, want.objective, 1e-12 * std::max(1.0, std::fabs(want.objective)));
  EXPECT_LT(testing::relative_error(got.d_alphas, want.d_alphas), alphas_tolerance);
  EXPECT_LT(testing::relative_error(got.d_means, want.d_means), tolerance);
  EXPECT_LT(testing::relative_error(got.d_icf, want.d_icf), tolerance);
}

struct shape {
  std::size_t d, k, n;
};

TEST_F(Gmm, EveryPipelineVariantAgrees)
{
  using v = testing::pipeline_variant;
  // CPU: tiles (multiples of 32) and stages over N = 301 (151 records per component: no tile
  // divides them), each against the default tiling; GPU: also register double-buffering, over
  // N = 3001, each against the CPU backend.
  std::vector<v> const variants =
    testing::on_gpu
      ? std::vector<v>{v{32, 2}, v{96, 3}, v{256, 4}, v{64, 8}, v{0, 0, 0, true}, v{128, 2, 0, true}}
      : std::vector<v>{v{32, 2}, v{64, 3}, v{160, 8}, v{512, 2}};
  gm::problem const p = testing::on_gpu ? gm::problem{9, 4, 3001} : gm::problem{4, 3, 301};
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  gm::inputs const in = gm::random_inputs(p, seed);
  gm::gradient_result const reference = gm::gradient(p, in, on(backend::cpu));
  for (v const& variant : variants) {
    if (!variant.runs_on_target()) { continue; }
    SCOPED_TRACE("tiles of " + std::to_string(variant.tile) + ", " + std::to_string(variant.stages) + " stages" +
                 (variant.plain ? ", plain" : ""));
    gm::options o = on(testing::target);
    variant.apply(o.pipeline);
    gm::gradient_result const r = gm::gradient(p, in, o);
    ASSERT_TRUE(all_finite(r));
#if defined(TAPEFLOW_TEST_ON_GPU)
    EXPECT_EQ(r.plan.async_copy, !variant.plain);
    expect_close(r, reference, 1e-10, 1e-10);
#else
    std::size_t const per_component = (151 + variant.tile - 1) / variant.tile;
    EXPECT_EQ(r.plan.tile_records, variant.tile);
    EXPECT_EQ(r.plan.records, p.k * per_component * variant.tile);
    EXPECT_EQ(r.tape_bytes, r.plan.records * 16);
    EXPECT_EQ(r.staging.tiles, p.k * per_component);
    EXPECT_LE(r.staging.max_in_flight, static_cast<std::size_t>(variant.stages));
    EXPECT_EQ(r.objective, reference.objective);  // the forward does not depend on the tiling
    // Each tiling sums the N = 301 per-point terms in another order. dL/dalpha_k = sum_i r_ik -
    // N softmax(alpha)_k cancels terms of size ~N/K down to O(1), so its rounding differences are
    // ~N eps relative to the result (seen up to 2e-13); the other gradients do not cancel.
    expect_close(r, reference, 1e-13, 1e-11);
#endif
  }
}

TEST_F(Gmm, BadInputIsATypedErrorAndLeavesTheRuntimeUsable)
{
  gm::problem const p{4, 3, 100};
  gm::inputs const in = gm::random_inputs(p, testing::fresh_seed());
  gm::options const o = on(testing::target);
  auto throws = [&](gm::problem const& q, gm::inputs const& values) {
    EXPECT_THROW(static_cast<void>(gm::gradient(q, values, o)), logic_error);
    EXPECT_THROW(static_cast<void>(gm::objective(q, values, o)), logic_error);
  };
  throws({0, 3, 100}, in);
  throws({4, 0, 100}, in);
  throws({4, 3, 0}, in);
  gm::problem bad_gamma = p;
  bad_gamma.gamma = 0;
  throws(bad_gamma, in);
  bad_gamma.gamma = -1;
  throws(bad_gamma, in);
  for (int which = 0; which < 4; ++which) {  // alphas, means, icf and x, one value over and one short
    gm::inputs wrong = in;
    std::vector<double>* values[] = {&wrong.alphas, &wrong.means, &wrong.icf, &wrong.x};
    values[which]->push_back(0.5);
    throws(p, wrong);
    values[which]->resize(values[which]->size() - 2);
    throws(p, wrong);
  }
  gm::options tiles = o;
  tiles.pipeline.tile_records = 48;  // not a multiple of 32
  EXPECT_THROW(static_cast<void>(gm::gradient(p, in, tiles)), logic_error);
  tiles.pipeline.tile_records = (std::size_t{1} << 20) + 32;  // past the largest tile: 16 MiB of padding a component
  EXPECT_THROW(static_cast<void>(gm::gradient(p, in, tiles)), logic_error);
#if defined(TAPEFLOW_TEST_ON_GPU)
  gm::options threads = o;
  threads.pipeline.block_threads = 128;
  EXPECT_THROW(static_cast<void>(gm::gradient(p, in, threads)), logic_error);
  gm::options huge = o;
  huge.pipeline.tile_records = 1 << 12;  // 64 KiB tiles: no room in shared memory
  huge.pipeline.stages = 4;
  EXPECT_THROW(static_cast<void>(gm::gradient(p, in, huge)), logic_error);
#else
  gm::options hip = o;
  hip.kind = backend::hip;
  EXPECT_THROW(static_cast<void>(gm::gradient(p, in, hip)), unavailable_error);
#endif
  // Nothing leaked, and the runtime works afterwards.
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
  EXPECT_NO_THROW(static_cast<void>(gm::gradient(p, in, o)));
}

#if !defined(TAPEFLOW_TEST_ON_GPU)
// ---- the CPU backend ---------------------------------------------------------------------------
using testing::real;

/// ADBench's objective straight from its definition, in long double: dense Q_k, no tape, none of
/// the workload's code. Parameters are one flat vector [alphas | means | icf].
real reference_objective(gm::problem const& p, std::vector<real> const& theta, std::vector<double> const& x)
{
  std::size_t const d = p.d;
  std::size_t const sz = d * (d + 1) / 2;
  real const* alphas = theta.data();
  real const* means = alphas + p.k;
  real const* icf = means + p.k * d;
  auto lse = [](std::vector<real> const& v) {
    real mx = v[0];
    for (real e : v) { mx = std::max(mx, e); }
    real s = 0;
    for (real e : v) { s += std::exp(e - mx); }
    return std::log(s) + mx;
  };
  real const pi = 3.141592653589793238462643383279502884L;
  real err = -static_cast<real>(p.n * d) / 2 * std::log(2 * pi);
  err -= static_cast<real>(p.n) * lse(std::vector<real>(alphas, alphas + p.k));
  std::vector<std::vector<real>> q(p.k, std::vector<real>(d * d, 0));
  std::vector<real> sum_q(p.k, 0);
  for (std::size_t k = 0; k < p.k; ++k) {
    std::size_t e = d;
    for (std::size_t c = 0; c < d; ++c) {
      q[k][c * d + c] = std::exp(icf[k * sz + c]);
      sum_q[k] += icf[k * sz + c];
      for (std::size_t r = c + 1; r < d; ++r) { q[k][r * d + c] = icf[k * sz + e++]; }
    }
  }
  for (std::size_t i = 0; i < p.n; ++i) {
    std::vector<real> terms(p.k);
    for (std::size_t k = 0; k < p.k; ++k) {
      real sq = 0;
      for (std::size_t r = 0; r < d; ++r) {
        real v = 0;
        for (std::size_t c = 0; c < d; ++c) { v += q[k][r * d + c] * (x[i * d + c] - means[k * d + c]); }
        sq += v * v;
      }
      terms[k] = alphas[k] + sum_q[k] - sq / 2;
    }
    err += lse(terms);
  }
  real const g = p.gamma;
  real const dof = static_cast<real>(d) + p.m + 1;
  real lgd = static_cast<real>(d * (d - 1)) / 4 * std::log(pi);
  for (std::size_t j = 1; j <= d; ++j) { lgd += std::lgamma(dof / 2 + (1 - static_cast<real>(j)) / 2); }
  real const cw = dof * static_cast<real>(d) * (std::log(g) - std::log(2.0L) / 2) - lgd;
  for (std::size_t k = 0; k < p.k; ++k) {
    real frob = 0;
    for (std::size_t r = 0; r < d; ++r) {
      for (std::size_t c = 0; c <= r; ++c) { frob += q[k][r * d + c] * q[k][r * d + c]; }
    }
    err += g * g / 2 * frob - p.m * sum_q[k] - cw;
  }
  return err;
}

std::vector<real> flatten(gm::inputs const& in)
{
  std::vector<real> theta(in.alphas.begin(), in.alphas.end());
  theta.insert(theta.end(), in.means.begin(), in.means.end());
  theta.insert(theta.end(), in.icf.begin(), in.icf.end());
  return theta;
}

void PrintTo(shape const& s, std::ostream* os) { *os << "d = " << s.d << ", K = " << s.k << ", N = " << s.n; }

class GmmShapes : public testing::on_target<::testing::TestWithParam<shape>> {};

TEST_P(GmmShapes, GradientMatchesCentralFiniteDifferencesInLongDouble)
{
  auto const [d, k, n] = GetParam();
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  gm::problem p{d, k, n};
  p.m = static_cast<int>(seed % 3);  // the Wishart m enters the prior and the constant
  p.gamma = 0.5 + static_cast<double>(seed % 7) / 4;
  gm::inputs const in = gm::random_inputs(p, seed);
  gm::gradient_result const r = gm::gradient(p, in, on(testing::target));

  std::vector<real> theta = flatten(in);
  real const f0 = reference_objective(p, theta, in.x);
  EXPECT_NEAR(r.objective, static_cast<double>(f0), 1e-12 * std::max<double>(1, std::fabs(static_cast<double>(f0))));
  EXPECT_EQ(gm::objective(p, in, on(testing::target)), r.objective);

  std::vector<real> fd(theta.size());
  real const h = 1e-6L;
  for (std::size_t j = 0; j < theta.size(); ++j) {
    real const saved = theta[j];
    theta[j] = saved + h;
    real const up = reference_objective(p, theta, in.x);
    theta[j] = saved - h;
    real const down = reference_objective(p, theta, in.x);
    theta[j] = saved;
    fd[j] = (up - down) / (2 * h);
  }
  std::vector<double> grad(r.d_alphas);
  grad.insert(grad.end(), r.d_means.begin(), r.d_means.end());
  grad.insert(grad.end(), r.d_icf.begin(), r.d_icf.end());
  ASSERT_EQ(grad.size(), fd.size());
  EXPECT_LT(testing::relative_error(grad, fd), 1e-8);
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GmmShapes,
                         ::testing::Values(shape{2, 1, 1}, shape{2, 3, 7}, shape{3, 1, 7}, shape{3, 3, 1},
                                           shape{5, 3, 7}, shape{5, 1, 1}),
                         [](auto const& param_info) {
                           return "d" + std::to_string(param_info.param.d) + "_K" + std::to_string(param_info.param.k) + "_N" +
                                  std::to_string(param_info.param.n);
                         });

TEST_F(Gmm, ObjectiveMatchesTheIndependentImplementationAtLargerSizes)
{
  for (shape s : {shape{10, 25, 300}, shape{7, 4, 1001}}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("d " + std::to_string(s.d) + ", seed " + std::to_string(seed));
    gm::problem const p{s.d, s.k, s.n};
    gm::inputs const in = gm::random_inputs(p, seed);
    real const expect = reference_objective(p, flatten(in), in.x);
    EXPECT_NEAR(gm::objective(p, in, on(testing::target)), static_cast<double>(expect),
                1e-12 * std::fabs(static_cast<double>(expect)));
  }
}

#else
// ---- a GPU -------------------------------------------------------------------------------------

TEST_F(Gmm, ObjectiveAndGradientMatchTheCpuReference)
{
  // d > 64 and d > 128 cover several blocks of S_k; N not a multiple of any tile.
  for (shape s : {shape{2, 1, 1}, shape{3, 3, 7}, shape{5, 3, 7}, shape{2, 5, 1000}, shape{10, 25, 1000},
                  shape{64, 4, 777}, shape{70, 3, 300}, shape{130, 2, 201}}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("d " + std::to_string(s.d) + " K " + std::to_string(s.k) + " N " + std::to_string(s.n) +
                 ", seed " + std::to_string(seed));
    gm::problem p{s.d, s.k, s.n};
    p.m = static_cast<int>(seed % 3);
    gm::inputs const in = gm::random_inputs(p, seed);
    gm::gradient_result const gpu = gm::gradient(p, in, on(testing::target));
    gm::gradient_result const cpu = gm::gradient(p, in, on(backend::cpu));
    ASSERT_TRUE(all_finite(gpu)) << "a value was never written";
    expect_close(gpu, cpu, 1e-10, 1e-10);
    EXPECT_NEAR(gm::objective(p, in, on(testing::target)), cpu.objective,
                1e-12 * std::max(1.0, std::fabs(cpu.objective)));
    EXPECT_EQ(gpu.tape_bytes, gpu.plan.records * 16);
  }
}

TEST_F(Gmm, RunsAreBitwiseReproducibleAndReleaseTheirMemory)
{
  gm::problem const p{20, 50, 2000};
  gm::inputs const in = gm::random_inputs(p, testing::fresh_seed());
  std::size_t const baseline = device_memory_usage(testing::target).current_bytes;
  gm::gradient_result const first = gm::gradient(p, in, on(testing::target));
  for (int i = 0; i < 3; ++i) {
    gm::gradient_result const again = gm::gradient(p, in, on(testing::target));
    EXPECT_EQ(again.objective, first.objective);
    EXPECT_TRUE(testing::same_bits(again.d_icf, first.d_icf));
    EXPECT_TRUE(testing::same_bits(again.d_means, first.d_means));
    EXPECT_TRUE(testing::same_bits(again.d_alphas, first.d_alphas));
  }
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, baseline);
  EXPECT_GE(first.peak_device_bytes, first.tape_bytes);
}
#endif

}  // namespace
}  // namespace tapeflow

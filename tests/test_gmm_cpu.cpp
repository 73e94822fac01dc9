// SPDX-License-Identifier: Apache-2.0
// GMM on the CPU backend against an independent long-double implementation of ADBench's objective
// and central finite differences of it.
#include "reference.hpp"

#include <tapeflow/workloads/gmm.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tapeflow {
namespace {

namespace gm = workloads::gmm;
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

gm::options cpu_options()
{
  gm::options o;
  o.kind = backend::cpu;
  o.poison = true;
  return o;
}

struct shape {
  std::size_t d, k, n;
};

void PrintTo(shape const& s, std::ostream* os) { *os << "d = " << s.d << ", K = " << s.k << ", N = " << s.n; }

class GmmCpu : public ::testing::TestWithParam<shape> {};

TEST_P(GmmCpu, GradientMatchesCentralFiniteDifferencesInLongDouble)
{
  auto const [d, k, n] = GetParam();
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  gm::problem p{d, k, n};
  p.m = static_cast<int>(seed % 3);  // the Wishart m enters the prior and the constant
  p.gamma = 0.5 + static_cast<double>(seed % 7) / 4;
  gm::inputs const in = gm::random_inputs(p, seed);
  gm::gradient_result const r = gm::gradient(p, in, cpu_options());

  std::vector<real> theta = flatten(in);
  real const f0 = reference_objective(p, theta, in.x);
  EXPECT_NEAR(r.objective, static_cast<double>(f0), 1e-12 * std::max<double>(1, std::fabs(static_cast<double>(f0))));
  EXPECT_EQ(gm::objective(p, in, cpu_options()), r.objective);

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
  EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, 0u);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GmmCpu,
                         ::testing::Values(shape{2, 1, 1}, shape{2, 3, 7}, shape{3, 1, 7}, shape{3, 3, 1},
                                           shape{5, 3, 7}, shape{5, 1, 1}),
                         [](auto const& param_info) {
                           return "d" + std::to_string(param_info.param.d) + "_K" + std::to_string(param_info.param.k) + "_N" +
                                  std::to_string(param_info.param.n);
                         });

TEST(GmmCpuReference, ObjectiveMatchesTheIndependentImplementationAtLargerSizes)
{
  for (shape s : {shape{10, 25, 300}, shape{7, 4, 1001}}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("d " + std::to_string(s.d) + ", seed " + std::to_string(seed));
    gm::problem const p{s.d, s.k, s.n};
    gm::inputs const in = gm::random_inputs(p, seed);
    real const expect = reference_objective(p, flatten(in), in.x);
    EXPECT_NEAR(gm::objective(p, in, cpu_options()), static_cast<double>(expect),
                1e-12 * std::fabs(static_cast<double>(expect)));
  }
}

TEST(GmmCpuReference, EveryTilingAgreesAndDescribesTheTape)
{
  gm::problem const p{4, 3, 301};  // 151 records per component: no tile divides them
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  gm::inputs const in = gm::random_inputs(p, seed);
  gm::gradient_result const base = gm::gradient(p, in, cpu_options());
  for (auto [tile, stages] : {std::pair<std::size_t, int>{32, 2}, {64, 3}, {160, 8}, {512, 2}}) {
    gm::options o = cpu_options();
    o.pipeline.tile_records = tile;
    o.pipeline.stages = stages;
    gm::gradient_result const r = gm::gradient(p, in, o);
    std::size_t const per_component = (151 + tile - 1) / tile;
    EXPECT_EQ(r.plan.tile_records, tile);
    EXPECT_EQ(r.plan.records, p.k * per_component * tile);
    EXPECT_EQ(r.tape_bytes, r.plan.records * 16);
    EXPECT_EQ(r.staging.tiles, p.k * per_component);
    EXPECT_LE(r.staging.max_in_flight, static_cast<std::size_t>(stages));
    EXPECT_EQ(r.objective, base.objective);  // the forward does not depend on the tiling
    // Each tiling sums the N = 301 per-point terms in another order. dL/dalpha_k = sum_i r_ik -
    // N softmax(alpha)_k cancels terms of size ~N/K down to O(1), so its rounding differences are
    // ~N eps relative to the result (seen up to 2e-13); the other gradients do not cancel.
    EXPECT_LT(testing::relative_error(r.d_icf, base.d_icf), 1e-13) << "tiles of " << tile;
    EXPECT_LT(testing::relative_error(r.d_means, base.d_means), 1e-13);
    EXPECT_LT(testing::relative_error(r.d_alphas, base.d_alphas), 1e-11);
  }
}

TEST(GmmCpuErrors, BadInputIsATypedError)
{
  gm::problem const p{3, 2, 5};
  gm::inputs const in = gm::random_inputs(p, testing::fresh_seed());
  gm::options const o = cpu_options();
  auto throws = [&](gm::problem const& q, gm::inputs const& v) {
    EXPECT_THROW(static_cast<void>(gm::gradient(q, v, o)), logic_error);
    EXPECT_THROW(static_cast<void>(gm::objective(q, v, o)), logic_error);
  };
  throws({0, 2, 5}, in);
  throws({3, 0, 5}, in);
  throws({3, 2, 0}, in);
  gm::problem bad_gamma = p;
  bad_gamma.gamma = 0;
  throws(bad_gamma, in);
  bad_gamma.gamma = -1;
  throws(bad_gamma, in);
  for (int which = 0; which < 4; ++which) {
    gm::inputs wrong = in;
    std::vector<double>* v[] = {&wrong.alphas, &wrong.means, &wrong.icf, &wrong.x};
    v[which]->push_back(0.5);
    throws(p, wrong);
    v[which]->resize(v[which]->size() - 2);
    throws(p, wrong);
  }
  gm::options tiles = o;
  tiles.pipeline.tile_records = 48;  // not a multiple of 32
  EXPECT_THROW(static_cast<void>(gm::gradient(p, in, tiles)), logic_error);
  gm::options hip = o;
  hip.kind = backend::hip;
  EXPECT_THROW(static_cast<void>(gm::gradient(p, in, hip)), unavailable_error);
  // Nothing leaked, and the runtime works afterwards.
  EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, 0u);
  EXPECT_NO_THROW(static_cast<void>(gm::gradient(p, in, o)));
}

}  // namespace
}  // namespace tapeflow

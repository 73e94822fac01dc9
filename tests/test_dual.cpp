// SPDX-License-Identifier: Apache-2.0
// Forward mode: dual numbers against analytic derivatives and long-double central differences,
// on fresh random inputs; and Allen–Cahn's "partials on tape" variant against the values variant.
#include "reference.hpp"

#include <tapeflow/workloads/allen_cahn.hpp>
#include <tapeflow/workloads/allen_cahn/math.hpp>
#include <tapeflow/dual.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tapeflow {
namespace {

namespace ac = workloads::allen_cahn;
using testing::real;

// (1 + x^2)^1.25, through dual<T>'s pow for duals and std::pow for the reference.
real power(real base) { return std::pow(base, 1.25L); }
dual<double> power(dual<double> base) { return tapeflow::pow(base, 1.25); }
dual<float> power(dual<float> base) { return tapeflow::pow(base, 1.25F); }

/// A broadcast-style expression using every operation and elementary function dual<T> has.
template <class U>
U mixed(U x)
{
  using std::cos;
  using std::exp;
  using std::log;
  using std::sin;
  using std::sqrt;
  using std::tanh;
  U const a = sin(x) * exp(x / U(3)) - cos(x * x) / (U(2) + tanh(x));
  U const b = log(U(1.5) + x * x) + sqrt(U(2) + x) - (-x);
  return a * b + power(U(1) + x * x) / U(4);
}

template <class T>
void check_mixed(double tolerance)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.2, 1.9);
  for (int trial = 0; trial < 200; ++trial) {
    T const x = static_cast<T>(dist(rng));
    dual<T> const d = differentiate([](auto v) { return mixed(v); }, x);
    real const h = 1e-6L;
    real const xr = static_cast<real>(x);
    real const fd = (mixed<real>(xr + h) - mixed<real>(xr - h)) / (2 * h);
    EXPECT_NEAR(static_cast<double>(d.value), static_cast<double>(mixed<real>(xr)),
                tolerance * (1 + std::fabs(static_cast<double>(mixed<real>(xr)))))
      << "x = " << x;
    EXPECT_NEAR(static_cast<double>(d.derivative), static_cast<double>(fd), tolerance * (1 + std::fabs(static_cast<double>(fd))))
      << "x = " << x;
  }
}

TEST(Dual, F64MatchesCentralDifferencesOfEveryOperation) { check_mixed<double>(1e-9); }
TEST(Dual, F32MatchesCentralDifferencesOfEveryOperation) { check_mixed<float>(2e-5); }

TEST(Dual, ArithmeticFollowsTheProductAndQuotientRules)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(0.3, 2.0);
  double const a = dist(rng), da = dist(rng), b = dist(rng), db = dist(rng);
  dual<double> const x{a, da}, y{b, db};
  EXPECT_DOUBLE_EQ((x * y).derivative, da * b + a * db);
  EXPECT_DOUBLE_EQ((x / y).value, a / b);
  EXPECT_NEAR((x / y).derivative, (da * b - a * db) / (b * b), 1e-14);
  EXPECT_DOUBLE_EQ((x - y).derivative, da - db);
  EXPECT_DOUBLE_EQ((3.0 * x).derivative, 3 * da);  // constants have derivative 0
  dual<double> z = x;
  z *= y;
  z += x;
  EXPECT_DOUBLE_EQ(z.derivative, da * b + a * db + da);
}

TEST(Dual, ReactionPartialIsTheIssuesLocalDerivative)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<double> const u = testing::random_state<double>(100, seed);
  ac::coefficients<double> const k{0.05, 1.0};
  for (double v : u) {
    EXPECT_NEAR(ac::taped_value(v, k, ac::tape_content::partials), 1 + 0.05 * (1 - 3 * v * v), 1e-15);
    EXPECT_EQ(ac::taped_value(v, k, ac::tape_content::values), v);
  }
}

ac::options options_for(tape_policy policy, ac::tape_content content)
{
  ac::options o;
  o.kind = backend::cpu;
  o.poison = true;
  o.policy = policy;
  o.content = content;
  if (policy != tape_policy::store) { o.budget_bytes = 3 * 16 * 16 * 8; }  // 3 of 12 layers
  return o;
}

TEST(AllenCahnPartials, EveryPolicyGivesTheValuesGradient)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  ac::problem const p{16, 12};
  std::vector<double> const u0 = testing::random_state<double>(p.n * p.n, seed);
  std::vector<real> const expect = testing::reference_gradient(testing::widen(u0), {p.n, p.steps});
  ac::gradient_result<double> const values =
    ac::gradient(p, u0, options_for(tape_policy::store, ac::tape_content::values));
  for (tape_policy policy : {tape_policy::store, tape_policy::offload, tape_policy::recompute}) {
    SCOPED_TRACE(to_string(policy));
    ac::gradient_result<double> const r = ac::gradient(p, u0, options_for(policy, ac::tape_content::partials));
    EXPECT_EQ(r.chain.policy, policy);
    EXPECT_LT(testing::relative_error(r.gradient, expect), 1e-10);
    EXPECT_LT(testing::relative_error(r.gradient, values.gradient), 1e-12);
    EXPECT_EQ(r.loss, values.loss);
  }
}

TEST(AllenCahnPartials, F32AgreesWithTheLongDoubleReference)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  ac::problem const p{24, 10};
  std::vector<float> const u0 = testing::random_state<float>(p.n * p.n, seed);
  std::vector<real> const expect = testing::reference_gradient(testing::widen(u0), {p.n, p.steps});
  ac::gradient_result<float> const r =
    ac::gradient(p, u0, options_for(tape_policy::store, ac::tape_content::partials));
  EXPECT_LT(testing::relative_error(r.gradient, expect), 1e-5);
}

}  // namespace
}  // namespace tapeflow

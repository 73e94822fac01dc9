// SPDX-License-Identifier: Apache-2.0
// The LSTM on the backend under test (tests/target.hpp): every policy, for fixed and packed
// variable-length sequences, giving the store policy's bits within its budget, every tiling, bad
// input; on the CPU backend also the cell's adjoint and the whole gradient dL/d(W, U, b) against
// central finite differences of an independent long-double LSTM, the tape's stats, and packed
// sequences (layer sizes, each sequence alone, the primal's carried state, the rules of lengths);
// on a GPU (cuBLAS and tapeflow's cell kernels) also the CPU backend's gradient, loss and primal.
// The LSTM's GPU path is CUDA only (cuBLAS): skipped in a HIP build.
#include "common.hpp"

#include <tapeflow/workloads/lstm.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#if !defined(TAPEFLOW_TEST_ON_GPU)
#include <tapeflow/workloads/lstm/math.hpp>
#endif

namespace tapeflow {
namespace {

namespace ls = workloads::lstm;

ls::options on(backend kind)
{
  ls::options o = testing::options_on<ls::options>(kind);
  o.bw = {5.0, 5.0, 20.0};  // fixed, so the plans do not depend on the machine
  return o;
}

class Lstm : public testing::on_target<::testing::Test, testing::gpu_path::cuda_only> {};

/// Random weights and inputs of a problem, and optionally a random initial state: values uniform
/// in [-0.9, 0.9], the weights and biases scaled by 1/sqrt(fan-in), as PyTorch initialises them, so
/// that the gates stay out of saturation.
template <class T>
struct instance {
  ls::weights<T> params;
  ls::sequence<T> seq;
};

template <class T>
instance<T> random_instance(ls::problem const& p, std::uint64_t seed, bool initial_state)
{
  auto scaled = [](std::vector<T> v, T k) {
    for (T& e : v) { e *= k; }
    return v;
  };
  std::size_t const G = 4 * p.hidden;
  T const kw = T(1) / static_cast<T>(std::sqrt(static_cast<double>(p.input)));
  T const ku = T(1) / static_cast<T>(std::sqrt(static_cast<double>(p.hidden)));
  instance<T> in;
  in.params.w = scaled(testing::random_state<T>(G * p.input, seed), kw);
  in.params.u = scaled(testing::random_state<T>(G * p.hidden, seed + 1), ku);
  in.params.b = scaled(testing::random_state<T>(G, seed + 2), ku);
  in.seq.x = testing::random_state<T>(p.steps * p.batch * p.input, seed + 3);
  if (initial_state) {
    in.seq.h0 = testing::random_state<T>(p.batch * p.hidden, seed + 4);
    in.seq.c0 = testing::random_state<T>(p.batch * p.hidden, seed + 5);
  }
  return in;
}

/// The same bits: what the chain promises across policies and tilings (the same kernels and GEMMs,
/// with the same shapes and one stream, in the same order; cuBLAS is bitwise reproducible on one GPU).
template <class T>
void expect_same_bits(ls::gradient_result<T> const& got, ls::gradient_result<T> const& want)
{
  EXPECT_TRUE(testing::same_bits(got.gradient.w, want.gradient.w)) << "dL/dW differs";
  EXPECT_TRUE(testing::same_bits(got.gradient.u, want.gradient.u)) << "dL/dU differs";
  EXPECT_TRUE(testing::same_bits(got.gradient.b, want.gradient.b)) << "dL/db differs";
  EXPECT_EQ(got.loss, want.loss) << "the loss differs";
}

/// Every element written, and the gradient and loss within `tolerance` of `want`'s.
template <class T>
void expect_close(ls::gradient_result<T> const& got, ls::gradient_result<T> const& want, double tolerance)
{
  ASSERT_TRUE(testing::all_finite(got.gradient.w) && testing::all_finite(got.gradient.u) &&
              testing::all_finite(got.gradient.b))
    << "an element was never written";
  EXPECT_LT(testing::relative_error(got.gradient.w, want.gradient.w), tolerance);
  EXPECT_LT(testing::relative_error(got.gradient.u, want.gradient.u), tolerance);
  EXPECT_LT(testing::relative_error(got.gradient.b, want.gradient.b), tolerance);
  EXPECT_NEAR(static_cast<double>(got.loss), static_cast<double>(want.loss),
              tolerance * (1 + std::fabs(static_cast<double>(want.loss))));
}

// ---- policies and tilings ---------------------------------------------------------------------
TEST_F(Lstm, EveryPolicyGivesTheStoreBitsWithinItsBudget)
{
  for (bool const packed : {false, true}) {
    // CPU: B = 3, T = 9, in tiles of 4 records and two stages, or packed sequences of 12, 12, 9, 6,
    // 3 and 1 steps; GPU: B = 50, T = 10 and H = 40, or 37 packed sequences of 11 down to 1 steps.
    ls::problem p = testing::on_gpu ? ls::problem{50, 10, 20, 40} : ls::problem{3, 9, 4, 5};
    if (packed) {
#if defined(TAPEFLOW_TEST_ON_GPU)
      p = ls::problem{37, 11, 9, 24};
      for (std::size_t b = 0; b < p.batch; ++b) { p.lengths.push_back(p.steps - (b * p.steps) / p.batch); }
#else
      p = ls::problem{6, 12, 4, 5};
      p.lengths = {12, 12, 9, 6, 3, 1};
#endif
    }
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE(std::string{packed ? "packed" : "fixed"} + " sequences, seed " + std::to_string(seed));
    instance<float> const in = random_instance<float>(p, seed, true);
    ls::options base = on(testing::target);
    base.policy = tape_policy::store;
#if !defined(TAPEFLOW_TEST_ON_GPU)
    base.pipeline.tile_records = 4;
    base.pipeline.stages = 2;
#endif
    ls::gradient_result<float> const reference = ls::gradient(p, in.params, in.seq, base);
    EXPECT_EQ(reference.chain.step_plans.size(), packed ? p.steps : 0u);  // each unequal layer tiled on its own
    std::vector<std::pair<tape_policy, int>> const cases =
      packed ? std::vector<std::pair<tape_policy, int>>{{tape_policy::offload, 30}, {tape_policy::recompute, 40},
                                                        {tape_policy::automatic, 40}}
             : std::vector<std::pair<tape_policy, int>>{{tape_policy::store, 100},    {tape_policy::offload, 100},
                                                        {tape_policy::offload, 30},   {tape_policy::recompute, 100},
                                                        {tape_policy::recompute, 40}, {tape_policy::automatic, 40}};
    for (auto [policy, percent] : cases) {  // the device budget as a share of the whole tape
      ls::options o = base;
      o.policy = policy;
      o.budget_bytes = reference.chain.tape_bytes * static_cast<std::size_t>(percent) / 100;
      // Forced offload keeps every layer on the host; `auto` may put a quarter of the tape there
      // (on the CPU backend only when asked: host_tier_on_cpu) and resolves to the mixed schedule.
      o.host_budget_bytes = policy == tape_policy::automatic ? reference.chain.tape_bytes / 4 : 0;
      o.host_tier_on_cpu = policy == tape_policy::automatic;
      ls::gradient_result<float> const r = ls::gradient(p, in.params, in.seq, o);
      SCOPED_TRACE(std::string{to_string(policy)} + " at " + std::to_string(percent) +
                   " %: " + r.chain.tiers.describe());
      EXPECT_EQ(r.chain.policy, policy == tape_policy::automatic ? tape_policy::mixed : policy);
      expect_same_bits(r, reference);
      EXPECT_LE(r.chain.peak_tape_bytes, o.budget_bytes);
      if (policy == tape_policy::recompute) { EXPECT_GT(r.chain.recompute_steps, 0u); }
      if (policy == tape_policy::offload) { EXPECT_EQ(r.chain.prefetches, r.chain.tiers.count(tier::host)); }
      EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
    }
  }
}

TEST_F(Lstm, EveryPipelineVariantAgrees)
{
  using v = testing::pipeline_variant;
  // CPU: tiles and stages over 35 records a layer (no tile divides them), the same bits as the
  // default tiling; GPU: the cp.async pipeline and register double-buffering (exactly two stages)
  // in blocks of 64 threads, to rounding of the default's (the reductions' order may differ).
  std::vector<v> const variants = testing::on_gpu ? std::vector<v>{v{37, 3, 64}, v{37, 2, 64, true}}
                                                  : std::vector<v>{v{1, 2}, v{6, 3}, v{16, 8}, v{100, 2}};
  ls::problem const p = testing::on_gpu ? ls::problem{50, 10, 20, 40} : ls::problem{5, 3, 6, 7};
  instance<float> const in = random_instance<float>(p, testing::fresh_seed(), false);
  ls::options base = on(testing::target);
  base.policy = tape_policy::store;
  ls::gradient_result<float> const reference = ls::gradient(p, in.params, in.seq, base);
  for (v const& variant : variants) {
    if (!variant.runs_on_target()) { continue; }
    SCOPED_TRACE("tiles of " + std::to_string(variant.tile) + ", " + std::to_string(variant.stages) + " stages" +
                 (variant.plain ? ", register double-buffering" : ""));
    ls::options o = base;
    variant.apply(o.pipeline);
    ls::gradient_result<float> const r = ls::gradient(p, in.params, in.seq, o);
#if defined(TAPEFLOW_TEST_ON_GPU)
    expect_close(r, reference, 1e-6);
#else
    EXPECT_EQ(r.chain.plan.tile_records, variant.tile);
    EXPECT_EQ(r.staging.tiles, p.steps * r.chain.plan.tiles);
    expect_same_bits(r, reference);
#endif
  }
}

TEST_F(Lstm, BadInputIsATypedErrorAndLeavesTheRuntimeUsable)
{
  ls::problem const p{3, 4, 4, 5};
  instance<float> const in = random_instance<float>(p, testing::fresh_seed(), false);
  ls::options const o = on(testing::target);
  auto run = [&](ls::problem const& q, ls::weights<float> const& w, ls::sequence<float> const& s, ls::options const& op) {
    static_cast<void>(ls::gradient(q, w, s, op));
  };
  for (ls::problem q : {ls::problem{0, 4, 4, 5}, ls::problem{3, 0, 4, 5}, ls::problem{3, 4, 0, 5},
                        ls::problem{3, 4, 4, 0}, ls::problem{3, 4, 4, 6}, ls::problem{3, 5, 4, 5}}) {
    EXPECT_THROW(run(q, in.params, in.seq, o), logic_error)
      << q.batch << " " << q.steps << " " << q.input << " " << q.hidden;
  }
  ls::weights<float> short_u = in.params;
  short_u.u.pop_back();
  EXPECT_THROW(run(p, short_u, in.seq, o), logic_error);
  ls::sequence<float> bad_h0 = in.seq;
  bad_h0.h0.assign(p.batch * p.hidden + 1, 0.5f);
  EXPECT_THROW(run(p, in.params, bad_h0, o), logic_error);
  EXPECT_THROW(static_cast<void>(ls::plan<float>(ls::problem{1, 1, 1, std::size_t{1} << 62}, o)), logic_error);
  EXPECT_THROW(static_cast<void>(ls::plan<float>(ls::problem{std::size_t{1} << 20, std::size_t{1} << 12, 1, 1}, o)),
               logic_error);  // T B beyond cuBLAS's int
  ls::options budget = o;
  budget.policy = tape_policy::store;
  budget.budget_bytes = 100;  // less than one 480-byte layer
  EXPECT_THROW(run(p, in.params, in.seq, budget), budget_error);
#if !defined(TAPEFLOW_TEST_ON_GPU)
  ls::options hip = o;
  hip.kind = backend::hip;
  EXPECT_THROW(run(p, in.params, in.seq, hip), unavailable_error);
  EXPECT_THROW(static_cast<void>(ls::primal(p, in.params, in.seq, hip)), unavailable_error);
  ls::options captured = o;
  captured.capture_reverse = true;
  EXPECT_THROW(run(p, in.params, in.seq, captured), logic_error);
  ls::options stages = o;
  stages.pipeline.stages = 9;
  EXPECT_THROW(run(p, in.params, in.seq, stages), logic_error);
#endif
  // Nothing leaked, and the runtime works afterwards.
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
  EXPECT_NO_THROW(run(p, in.params, in.seq, o));
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
}

#if !defined(TAPEFLOW_TEST_ON_GPU)
// ---- the CPU backend ---------------------------------------------------------------------------
using testing::real;

/// B = 5 sequences of lengths 7, 5, 5, 2, 1 (T = 7): steps advance 5, 4, 3, 3, 3, 1, 1 of them.
ls::problem packed_problem()
{
  ls::problem p{5, 7, 4, 6};
  p.lengths = {7, 5, 5, 2, 1};
  return p;
}

// ---- an independent long-double LSTM (no tape, none of the library's code) -------------------
struct reference_lstm {
  ls::problem p;
  std::vector<real> w, u, b, x, h0, c0;
};

real sigmoid_ld(real v) { return 1 / (1 + std::exp(-v)); }

/// L = Σ h_T of the reference, gate order i, f, g, o; with lengths, sequence b stops after
/// lengths[b] steps and its last h counts.
real reference_loss(reference_lstm const& m)
{
  std::size_t const B = m.p.batch, I = m.p.input, H = m.p.hidden, G = 4 * H;
  std::vector<real> h = m.h0.empty() ? std::vector<real>(B * H, 0) : m.h0;
  std::vector<real> c = m.c0.empty() ? std::vector<real>(B * H, 0) : m.c0;
  std::vector<real> z(G);
  for (std::size_t t = 0; t < m.p.steps; ++t) {
    std::vector<real> h_next = h, c_next = c;  // a sequence that has ended keeps its state
    for (std::size_t bb = 0; bb < B; ++bb) {
      if (!m.p.lengths.empty() && m.p.lengths[bb] <= t) { continue; }
      for (std::size_t r = 0; r < G; ++r) {
        real acc = m.b[r];
        for (std::size_t i = 0; i < I; ++i) { acc += m.w[r * I + i] * m.x[(t * B + bb) * I + i]; }
        for (std::size_t j = 0; j < H; ++j) { acc += m.u[r * H + j] * h[bb * H + j]; }
        z[r] = acc;
      }
      for (std::size_t j = 0; j < H; ++j) {
        real const ig = sigmoid_ld(z[j]), fg = sigmoid_ld(z[H + j]), gg = std::tanh(z[2 * H + j]),
                   og = sigmoid_ld(z[3 * H + j]);
        c_next[bb * H + j] = fg * c[bb * H + j] + ig * gg;
        h_next[bb * H + j] = og * std::tanh(c_next[bb * H + j]);
      }
    }
    h = std::move(h_next);
    c = std::move(c_next);
  }
  real sum = 0;
  for (real v : h) { sum += v; }
  return sum;
}

/// Central differences of the reference's loss for every entry of `param` (h = 1e-6: truncation
/// ~1e-12, rounding ~1e-13 in long double).
std::vector<real> finite_differences(reference_lstm m, std::vector<real> reference_lstm::*param)
{
  std::vector<real>& v = m.*param;
  std::vector<real> fd(v.size());
  real const h = 1e-6L;
  for (std::size_t k = 0; k < v.size(); ++k) {
    real const saved = v[k];
    v[k] = saved + h;
    real const up = reference_loss(m);
    v[k] = saved - h;
    real const down = reference_loss(m);
    v[k] = saved;
    fd[k] = (up - down) / (2 * h);
  }
  return fd;
}

template <class T>
reference_lstm widen(ls::problem const& p, instance<T> const& in)
{
  return {p,
          testing::widen(in.params.w),
          testing::widen(in.params.u),
          testing::widen(in.params.b),
          testing::widen(in.seq.x),
          testing::widen(in.seq.h0),
          testing::widen(in.seq.c0)};
}

// ---- the cell -------------------------------------------------------------------------------
TEST(LstmCell, AdjointMatchesFiniteDifferencesInLongDouble)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<double> const draws = testing::random_state<double>(7 * 20, seed);
  for (std::size_t k = 0; k < 20; ++k) {
    double const* d = draws.data() + 7 * k;
    // Pre-activations in [-2.7, 2.7], the cell state in [-0.9, 0.9], adjoints in [-0.9, 0.9].
    real const z[4] = {3 * real(d[0]), 3 * real(d[1]), 3 * real(d[2]), 3 * real(d[3])};
    real const c_prev = d[4];
    real const g_h = d[5];
    real const g_c = d[6];
    // φ = g_h h' + g_c c': its gradient is the cell's adjoint.
    auto phi = [&](real const* zz, real c) {
      ls::cell_state<real> const s = ls::cell_forward(zz[0], zz[1], zz[2], zz[3], c);
      return g_h * s.h + g_c * s.c;
    };
    ls::cell_state<real> const s = ls::cell_forward(z[0], z[1], z[2], z[3], c_prev);
    ls::cell_adjoint<real> const a = ls::cell_reverse(s.i, s.f, s.g, s.o, c_prev, g_h, g_c);
    real const got[5] = {a.dz_i, a.dz_f, a.dz_g, a.dz_o, a.g_c_prev};
    real const h = 1e-7L;
    for (int v = 0; v < 5; ++v) {
      real up[4] = {z[0], z[1], z[2], z[3]};
      real down[4] = {z[0], z[1], z[2], z[3]};
      real c_up = c_prev, c_down = c_prev;
      if (v < 4) {
        up[v] += h;
        down[v] -= h;
      } else {
        c_up += h;
        c_down -= h;
      }
      real const fd = (phi(up, c_up) - phi(down, c_down)) / (2 * h);
      EXPECT_NEAR(static_cast<double>(got[v]), static_cast<double>(fd), 1e-10) << "draw " << k << ", input " << v;
    }
  }
}

TEST(LstmCell, RecordIsTwoChunksOfEightValues)
{
  static_assert(is_record_v<ls::record<float>>);
  static_assert(sizeof(ls::record<float>) == 32 && alignof(ls::record<float>) == 16);
  static_assert(sizeof(ls::record<double>) == 64);
  EXPECT_EQ(ls::layer_bytes<float>(ls::problem{3, 4, 4, 5}), 3u * 5 * 32);
}

// ---- the whole gradient -----------------------------------------------------------------------
struct fd_case {
  bool initial_state;
  bool packed{false};  ///< B = 5 sequences of 7, 5, 5, 2 and 1 steps (packed_problem)
};

void PrintTo(fd_case const& c, std::ostream* os)
{
  *os << (c.initial_state ? "random h0, c0" : "h0 = c0 = 0") << (c.packed ? ", packed" : "");
}

class LstmGradient : public testing::on_target<::testing::TestWithParam<fd_case>> {
 protected:
  static ls::problem problem() { return GetParam().packed ? packed_problem() : ls::problem{3, 4, 4, 5}; }
};

TEST_P(LstmGradient, F64MatchesCentralFiniteDifferencesOfTheReference)
{
  ls::problem const p = problem();
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  instance<double> const in = random_instance<double>(p, seed, GetParam().initial_state);
  ls::gradient_result<double> const r = ls::gradient(p, in.params, in.seq, on(testing::target));
  reference_lstm const ref = widen(p, in);
  EXPECT_LT(testing::relative_error(r.gradient.w, finite_differences(ref, &reference_lstm::w)), 1e-8);
  EXPECT_LT(testing::relative_error(r.gradient.u, finite_differences(ref, &reference_lstm::u)), 1e-8);
  EXPECT_LT(testing::relative_error(r.gradient.b, finite_differences(ref, &reference_lstm::b)), 1e-8);
  real const loss = reference_loss(ref);
  EXPECT_NEAR(r.loss, static_cast<double>(loss), 1e-12 * (1 + std::fabs(static_cast<double>(loss))));
  EXPECT_EQ(r.chain.tape_bytes, ls::plan<double>(p, on(testing::target)).tape_bytes);
}

TEST_P(LstmGradient, F32MatchesTheF64ReferenceTo1e4)
{
  ls::problem const p = problem();
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  instance<float> const in = random_instance<float>(p, seed, GetParam().initial_state);
  ls::gradient_result<float> const r = ls::gradient(p, in.params, in.seq, on(testing::target));
  reference_lstm const ref = widen(p, in);
  EXPECT_LT(testing::relative_error(r.gradient.w, finite_differences(ref, &reference_lstm::w)), 1e-4);
  EXPECT_LT(testing::relative_error(r.gradient.u, finite_differences(ref, &reference_lstm::u)), 1e-4);
  EXPECT_LT(testing::relative_error(r.gradient.b, finite_differences(ref, &reference_lstm::b)), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(InitialState, LstmGradient,
                         ::testing::Values(fd_case{false}, fd_case{true}, fd_case{true, true}),
                         [](auto const& param_info) {
                           return std::string{param_info.param.initial_state ? "given" : "zero"} +
                                  (param_info.param.packed ? "_packed" : "");
                         });

TEST_F(Lstm, PrimalMatchesTheReferenceAndTheGradientRunsLoss)
{
  ls::problem const p{4, 6, 3, 5};
  instance<double> const in = random_instance<double>(p, testing::fresh_seed(), true);
  ls::final_state<double> const s = ls::primal(p, in.params, in.seq, on(testing::target));
  ASSERT_EQ(s.h.size(), p.batch * p.hidden);
  ASSERT_EQ(s.c.size(), p.batch * p.hidden);
  real const expect = reference_loss(widen(p, in));
  EXPECT_NEAR(ls::loss(s.h), static_cast<double>(expect), 1e-12 * (1 + std::fabs(static_cast<double>(expect))));
  EXPECT_EQ(ls::loss(s.h), ls::gradient(p, in.params, in.seq, on(testing::target)).loss);
}

TEST_F(Lstm, StatsDescribeTheTape)
{
  ls::problem const p{6, 5, 3, 4};
  instance<float> const in = random_instance<float>(p, testing::fresh_seed(), false);
  ls::gradient_result<float> const r = ls::gradient(p, in.params, in.seq, on(testing::target));
  EXPECT_EQ(r.chain.steps, 5u);
  EXPECT_EQ(r.chain.plan.records, 24u);  // B x H
  EXPECT_EQ(r.chain.plan.record_bytes, 32u);
  EXPECT_EQ(r.chain.layer_bytes, 24u * 32);
  EXPECT_EQ(r.chain.tape_bytes, 5 * 24u * 32);
  EXPECT_GE(r.peak_device_bytes, r.chain.tape_bytes);
  chain_stats const planned = ls::plan<float>(p, on(testing::target));
  EXPECT_EQ(planned.tape_bytes, r.chain.tape_bytes);
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
}

// ---- packed variable-length sequences ---------------------------------------------------------
/// Sequence b of a packed instance as a problem and instance of its own: batch 1, its own length.
template <class T>
std::pair<ls::problem, instance<T>> sequence_alone(ls::problem const& p, instance<T> const& in, std::size_t b)
{
  ls::problem q{1, p.lengths[b], p.input, p.hidden};
  instance<T> one;
  one.params = in.params;
  for (std::size_t t = 0; t < q.steps; ++t) {
    auto const first = in.seq.x.begin() + static_cast<std::ptrdiff_t>((t * p.batch + b) * p.input);
    one.seq.x.insert(one.seq.x.end(), first, first + static_cast<std::ptrdiff_t>(p.input));
  }
  auto const state = static_cast<std::ptrdiff_t>(b * p.hidden);
  auto const hidden = static_cast<std::ptrdiff_t>(p.hidden);
  one.seq.h0.assign(in.seq.h0.begin() + state, in.seq.h0.begin() + state + hidden);
  one.seq.c0.assign(in.seq.c0.begin() + state, in.seq.c0.begin() + state + hidden);
  return {q, one};
}

TEST_F(Lstm, PackedActiveSequencesAndLayerSizesFollowTheLengths)
{
  ls::problem const p = packed_problem();
  std::vector<std::size_t> active;
  for (std::size_t t = 0; t < p.steps; ++t) { active.push_back(ls::active_sequences(p, t)); }
  EXPECT_EQ(active, (std::vector<std::size_t>{5, 4, 3, 3, 3, 1, 1}));
  EXPECT_EQ(ls::layer_bytes<float>(p, 2), 3u * 6 * 32);
  EXPECT_EQ(ls::active_sequences(ls::problem{5, 7, 4, 6}, 6), 5u);
  chain_stats const planned = ls::plan<float>(p, on(testing::target));
  EXPECT_EQ(planned.tape_bytes, (5 + 4 + 3 + 3 + 3 + 1 + 1) * 6u * 32);
  EXPECT_EQ(planned.layer_bytes, 5u * 6 * 32);  // the largest layer
  ASSERT_EQ(planned.step_plans.size(), p.steps);
  EXPECT_EQ(planned.step_plans[2].records, 3u * 6);
  EXPECT_EQ(planned.step_plans[6].records, 6u);
}

TEST_F(Lstm, ALongPackedBatchKeepsLayersOnTheDeviceUnderABudgetAndRunsThatSchedule)
{
  // 300 layers of unequal size: the planner's tables for unequal steps need a coarse memory unit,
  // in which a checkpoint costs a share of the budget; the plan must still keep a good part of
  // the tape on the device (before the equal-steps relaxation it kept one layer and recomputed 299).
  ls::problem p{64, 300, 8, 16};
  for (std::size_t b = 0; b < p.batch; ++b) { p.lengths.push_back(p.steps - (b * (3 * p.steps / 4)) / p.batch); }
  ls::options o = on(testing::target);
  chain_stats const whole = ls::plan<float>(p, o);
  o.policy = tape_policy::automatic;
  o.budget_bytes = whole.tape_bytes * 2 / 5;
  chain_stats const planned = ls::plan<float>(p, o);
  SCOPED_TRACE(planned.tiers.describe());
  EXPECT_EQ(planned.policy, tape_policy::mixed);
  EXPECT_GE(planned.tiers.count(tier::device), p.steps / 4);
  EXPECT_LE(planned.tiers.recompute_steps, p.steps);
  // And the chain runs that schedule: the same bits as keeping every layer, within the budget.
  instance<float> const in = random_instance<float>(p, testing::fresh_seed(), true);
  ls::gradient_result<float> const r = ls::gradient(p, in.params, in.seq, o);
  ls::gradient_result<float> const store = ls::gradient(p, in.params, in.seq, on(testing::target));
  EXPECT_EQ(r.chain.recompute_steps, planned.tiers.recompute_steps);
  EXPECT_LE(r.chain.peak_tape_bytes, o.budget_bytes);
  expect_same_bits(r, store);
}

TEST_F(Lstm, PackedGradientIsTheSumOfEverySequenceRunAlone)
{
  // The loss is a sum over sequences that share the weights, so the packed gradient is the sum of
  // each sequence's gradient in a batch of its own, of its own length: no padding, no packing.
  ls::problem const p = packed_problem();
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  instance<double> const in = random_instance<double>(p, seed, true);
  ls::gradient_result<double> const packed = ls::gradient(p, in.params, in.seq, on(testing::target));
  ls::weights<double> sum{std::vector<double>(in.params.w.size()), std::vector<double>(in.params.u.size()),
                          std::vector<double>(in.params.b.size())};
  double loss = 0;
  for (std::size_t b = 0; b < p.batch; ++b) {
    auto const [q, one] = sequence_alone(p, in, b);
    ls::gradient_result<double> const r = ls::gradient(q, one.params, one.seq, on(testing::target));
    for (std::size_t k = 0; k < sum.w.size(); ++k) { sum.w[k] += r.gradient.w[k]; }
    for (std::size_t k = 0; k < sum.u.size(); ++k) { sum.u[k] += r.gradient.u[k]; }
    for (std::size_t k = 0; k < sum.b.size(); ++k) { sum.b[k] += r.gradient.b[k]; }
    loss += r.loss;
  }
  EXPECT_LT(testing::relative_error(packed.gradient.w, sum.w), 1e-12);
  EXPECT_LT(testing::relative_error(packed.gradient.u, sum.u), 1e-12);
  EXPECT_LT(testing::relative_error(packed.gradient.b, sum.b), 1e-12);
  EXPECT_NEAR(packed.loss, loss, 1e-12 * (1 + std::fabs(loss)));
}

TEST_F(Lstm, PackedPrimalCarriesEndedSequences)
{
  ls::problem const p = packed_problem();
  instance<double> const in = random_instance<double>(p, testing::fresh_seed(), true);
  ls::final_state<double> const s = ls::primal(p, in.params, in.seq, on(testing::target));
  real const expect = reference_loss(widen(p, in));
  EXPECT_NEAR(ls::loss(s.h), static_cast<double>(expect), 1e-12 * (1 + std::fabs(static_cast<double>(expect))));
  // Sequence 4 ran one step: its final state is its state after that step, alone.
  auto const [q, one] = sequence_alone(p, in, 4);
  ls::final_state<double> const alone = ls::primal(q, one.params, one.seq, on(testing::target));
  for (std::size_t j = 0; j < p.hidden; ++j) {
    EXPECT_EQ(s.h[4 * p.hidden + j], alone.h[j]) << j;
    EXPECT_EQ(s.c[4 * p.hidden + j], alone.c[j]) << j;
  }
}

TEST_F(Lstm, PackedSequencesOfOneStepAreTheUnpackedProblem)
{
  // T = 1: every length is 1, one layer of every sequence — the packed chain plans one step (a
  // single per-step record count once read as "every step, of a count not given").
  ls::problem p{3, 1, 4, 5};
  instance<double> const in = random_instance<double>(p, testing::fresh_seed(), true);
  ls::gradient_result<double> const unpacked = ls::gradient(p, in.params, in.seq, on(testing::target));
  p.lengths = {1, 1, 1};
  EXPECT_EQ(ls::plan<double>(p, on(testing::target)).steps, 1U);
  ls::gradient_result<double> const packed = ls::gradient(p, in.params, in.seq, on(testing::target));
  EXPECT_EQ(packed.loss, unpacked.loss);
  EXPECT_EQ(packed.gradient.w, unpacked.gradient.w);
  EXPECT_EQ(packed.gradient.u, unpacked.gradient.u);
  EXPECT_EQ(packed.gradient.b, unpacked.gradient.b);
}

TEST_F(Lstm, PackedBadLengthsAreTypedErrorsNamingTheRule)
{
  ls::problem const good = packed_problem();
  instance<float> const in = random_instance<float>(good, testing::fresh_seed(), false);
  auto message = [&](std::vector<std::size_t> lengths) -> std::string {
    ls::problem p = good;
    p.lengths = std::move(lengths);
    try {
      static_cast<void>(ls::gradient(p, in.params, in.seq, on(testing::target)));
    } catch (logic_error const& e) {
      EXPECT_THROW(static_cast<void>(ls::plan<float>(p, on(testing::target))), logic_error);
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message({7, 5, 5, 2}).find("batch has B = 5"), std::string::npos);
  EXPECT_NE(message({6, 5, 5, 2, 1}).find("must run all T = 7"), std::string::npos);
  EXPECT_NE(message({7, 5, 5, 2, 0}).find("lengths[4] is 0"), std::string::npos);
  EXPECT_NE(message({7, 2, 5, 2, 1}).find("non-increasing"), std::string::npos);
  EXPECT_NE(message({8, 5, 5, 2, 1}).find("must run all T = 7"), std::string::npos);
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
}

#else
// ---- a GPU -------------------------------------------------------------------------------------

TEST_F(Lstm, F32GradientAndLossMatchTheCpuReference)
{
  for (ls::problem p : {ls::problem{3, 4, 4, 5}, ls::problem{17, 6, 13, 33}, ls::problem{64, 5, 16, 32},
                        ls::problem{100, 12, 30, 48}}) {
    std::uint64_t const seed = testing::fresh_seed();
    SCOPED_TRACE("B " + std::to_string(p.batch) + " T " + std::to_string(p.steps) + " I " + std::to_string(p.input) +
                 " H " + std::to_string(p.hidden) + ", seed " + std::to_string(seed));
    instance<float> const in = random_instance<float>(p, seed, p.batch % 2 == 1);
    ls::gradient_result<float> const gpu = ls::gradient(p, in.params, in.seq, on(testing::target));
    ls::gradient_result<float> const cpu = ls::gradient(p, in.params, in.seq, on(backend::cpu));
    expect_close(gpu, cpu, 1e-4);
  }
}

TEST_F(Lstm, F64GradientMatchesTheCpuReference)
{
  ls::problem const p{31, 7, 11, 20};
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  instance<double> const in = random_instance<double>(p, seed, true);
  expect_close(ls::gradient(p, in.params, in.seq, on(testing::target)),
               ls::gradient(p, in.params, in.seq, on(backend::cpu)), 1e-11);
}

TEST_F(Lstm, PrimalMatchesTheCpuReference)
{
  ls::problem const p{40, 9, 12, 24};
  instance<float> const in = random_instance<float>(p, testing::fresh_seed(), true);
  ls::final_state<float> const gpu = ls::primal(p, in.params, in.seq, on(testing::target));
  ls::final_state<float> const cpu = ls::primal(p, in.params, in.seq, on(backend::cpu));
  EXPECT_LT(testing::relative_error(gpu.h, cpu.h), 1e-5);
  EXPECT_LT(testing::relative_error(gpu.c, cpu.c), 1e-5);
}

TEST_F(Lstm, PackedSequencesMatchTheCpuReference)
{
  // Layers of unequal size (B_t H records at step t): each tiled on its own, the products over the
  // first B_t columns, the ended sequences' state and adjoint carried by the cell kernels. (Every
  // policy on them: EveryPolicyGivesTheStoreBitsWithinItsBudget.)
  ls::problem p{37, 11, 9, 24};
  p.lengths.resize(p.batch);
  for (std::size_t b = 0; b < p.batch; ++b) { p.lengths[b] = p.steps - (b * p.steps) / p.batch; }  // 11 down to 1
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  instance<double> const in64 = random_instance<double>(p, seed, true);
  expect_close(ls::gradient(p, in64.params, in64.seq, on(testing::target)),
               ls::gradient(p, in64.params, in64.seq, on(backend::cpu)), 1e-11);

  instance<float> const in = random_instance<float>(p, seed, true);
  ls::options base = on(testing::target);
  base.policy = tape_policy::store;
  ls::gradient_result<float> const reference = ls::gradient(p, in.params, in.seq, base);
  ASSERT_EQ(reference.chain.step_plans.size(), p.steps);
  expect_close(reference, ls::gradient(p, in.params, in.seq, on(backend::cpu)), 1e-4);
  // Planned with measured step costs: the steps with the largest and the smallest layer timed on
  // the device, every step's costs in between.
  ls::options measured = base;
  measured.policy = tape_policy::automatic;
  measured.budget_bytes = reference.chain.tape_bytes * 40 / 100;
  measured.measure_steps = true;
  ls::gradient_result<float> const timed = ls::gradient(p, in.params, in.seq, measured);
  EXPECT_EQ(timed.chain.step_costs.size(), p.steps);
  EXPECT_LE(timed.chain.peak_tape_bytes, measured.budget_bytes);
  expect_same_bits(timed, reference);
  ls::final_state<float> const gpu = ls::primal(p, in.params, in.seq, on(testing::target));
  ls::final_state<float> const cpu = ls::primal(p, in.params, in.seq, on(backend::cpu));
  EXPECT_LT(testing::relative_error(gpu.h, cpu.h), 1e-5);
  EXPECT_LT(testing::relative_error(gpu.c, cpu.c), 1e-5);
  EXPECT_EQ(device_memory_usage(testing::target).current_bytes, 0u);
}
#endif

}  // namespace
}  // namespace tapeflow

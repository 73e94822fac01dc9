// SPDX-License-Identifier: Apache-2.0
// Real Enzyme-generated split-mode code (enzyme_functions.cpp, compiled through clang-15, Enzyme's
// plugin and tapeflow's cache pass) run on the CPU backend: per call against the hand-written
// reverse, exact derivatives and long-double finite differences; through tapeflow chains under
// every policy (slots staged by the tile ring, loop caches in a cache_pool); and the pool's bound.
#include "enzyme_functions.hpp"
#include "../reference.hpp"

#include <tapeflow/workloads/allen_cahn.hpp>
#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/enzyme.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

namespace tapeflow {
namespace {

namespace fn = testing::enzyme_functions;
namespace ex = workloads::enzyme_example;
namespace ac = workloads::allen_cahn;
using testing::real;

/// What the reverse must be given again: Enzyme's split-mode reverse takes the primal arguments as
/// well as its tape, so a slot holds the active inputs, then Enzyme's tape.
template <std::size_t Inputs, std::size_t TapeBytes>
struct slot_layout {
  static constexpr std::size_t input_bytes = (Inputs * sizeof(double) + 15) / 16 * 16;
  static constexpr std::size_t bytes = input_bytes + TapeBytes;
  static constexpr std::size_t chunks = enzyme::slot_chunks(bytes);
  static double* inputs(void* slot) { return static_cast<double*>(slot); }
  static double const* inputs(void const* slot) { return static_cast<double const*>(slot); }
  static void* tape(void* slot) { return static_cast<unsigned char*>(slot) + input_bytes; }
  static void const* tape(void const* slot) { return static_cast<unsigned char const*>(slot) + input_bytes; }
};
using example_slot = slot_layout<1, fn::example_tape_bytes>;
using cell_slot = slot_layout<5, fn::cell_tape_bytes>;

/// Bytes of a cache region that holds the example's caches for `inner` iterations. How many values
/// Enzyme caches depends on the optimised loop (clang unrolls it; Enzyme caches per unrolled
/// iteration and recomputes the rest), so this is a bound: two arrays of `inner` doubles.
std::size_t example_region(std::size_t inner) { return 2 * enzyme::cache_block_bytes(inner * sizeof(double)); }

/// Bytes Enzyme's caches take for one call of the example, measured.
std::size_t example_cache_use(ex::params const& p)
{
  std::vector<unsigned char> region(example_region(p.inner));
  enzyme::cache_status status{};
  enzyme::cache_cursor cache(region.data(), region.size(), region.data(), region.size(), &status);
  alignas(16) unsigned char tape[fn::example_tape_bytes];
  static_cast<void>(fn::example_augmented(0.25, p, tape, cache));
  return cache.used();
}

TEST(EnzymeReal, ExampleMatchesHandWrittenReverseExactAndFiniteDifferences)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<double> const xs = testing::random_state<double>(64, seed);
  for (std::size_t inner : {1u, 3u, 7u, 20u}) {  // run-time trip counts: Enzyme caches in the pool
    ex::params const p{inner, 0.5};
    SCOPED_TRACE("inner " + std::to_string(inner));
    std::vector<unsigned char> region(example_region(inner));
    enzyme::cache_status status{};
    for (double x : xs) {
      alignas(16) unsigned char tape[fn::example_tape_bytes];
      std::memset(tape, 0xFF, sizeof tape);  // Enzyme must write what its reverse reads
      enzyme::cache_cursor cache(region.data(), region.size(), region.data(), region.size(), &status);
      double const y = fn::example_augmented(x, p, tape, cache);
      EXPECT_EQ(y, ex::iterate(x, p));
      EXPECT_GT(cache.used(), 0u) << "Enzyme's loop caches did not come from the region";
      EXPECT_LE(cache.used(), example_region(inner));
      double const dy = 1.25;
      double const dx = fn::example_reverse(x, p, tape, dy);
      // The hand-written split pair of math.hpp.
      std::vector<double> hand_tape(inner);
      static_cast<void>(ex::augmented_forward(x, p, hand_tape.data()));
      EXPECT_NEAR(dx, ex::reverse(dy, p, hand_tape.data()), 1e-14 * std::fabs(dx));
      // Exact, in long double.
      real v = x;
      real d = dy;
      for (std::size_t k = 0; k < inner; ++k) {
        d *= std::cos(v) + static_cast<real>(p.a);
        v = std::sin(v) + static_cast<real>(p.a) * v;
      }
      EXPECT_NEAR(dx, static_cast<double>(d), 1e-13 * std::fabs(static_cast<double>(d)));
      // Central differences in long double.
      auto f = [&](real t) {
        for (std::size_t k = 0; k < inner; ++k) { t = std::sin(t) + static_cast<real>(p.a) * t; }
        return t;
      };
      real const h = 1e-7L;
      real const fd = dy * (f(x + h) - f(x - h)) / (2 * h);
      // Truncation ~h^2 relative; long double rounding ~1e-19 / h absolute.
      EXPECT_NEAR(dx, static_cast<double>(fd), 1e-7 * std::fabs(static_cast<double>(fd)) + 1e-11);
    }
    EXPECT_EQ(status.overflows, 0u);
  }
}

// ---------------------------------------------------------------------------------------------
// The example through a chain: slot = {x, Enzyme's tape}, caches in a pool, every policy.

struct example_step {
  using value_type = double;
  using record_type = enzyme::chunk;
  std::size_t n;
  ex::params p;
  std::shared_ptr<enzyme::cache_pool> pool;

  [[nodiscard]] std::size_t state_size() const noexcept { return n; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return n * example_slot::chunks; }

  void forward(std::size_t, double const* in, double* out, stream_view) const
  {
    for (std::size_t i = 0; i < n; ++i) { out[i] = ex::iterate(in[i], p); }
  }
  void augmented_forward(std::size_t step, double const* in, double* out, tape_writer<record_type> tape,
                         stream_view) const
  {
    enzyme::cache_view const caches = pool->view(step);
    for (std::size_t i = 0; i < n; ++i) {
      void* const slot = tape.data() + i * example_slot::chunks;
      example_slot::inputs(slot)[0] = in[i];
      enzyme::cache_cursor cache = caches.cursor(i);
      out[i] = fn::example_augmented(in[i], p, example_slot::tape(slot), cache);
    }
  }
  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const& plan, double const* g_out,
               double* g_in, stream_view) const
  {
    cpu::tile_ring<record_type> ring(plan);
    ring.reverse(tape, [&](std::size_t, record_type const* staged, std::size_t first, std::size_t count) {
      for (std::size_t s = 0; s < count / example_slot::chunks; ++s) {
        std::size_t const i = first / example_slot::chunks + s;
        void const* const slot = staged + s * example_slot::chunks;  // a staged copy of the slot
        g_in[i] = fn::example_reverse(example_slot::inputs(slot)[0], p, example_slot::tape(slot), g_out[i]);
      }
    });
  }
};

struct chain_run {
  double loss;
  std::vector<double> gradient;
  chain_stats stats;
};

template <class Step>
chain_run run_chain(Step step, std::size_t steps, std::vector<double> const& x0, enzyme::cache_pool& pool,
                    chain_options o, std::size_t slot_bytes)
{
  std::size_t const n = x0.size();
  o.pipeline = enzyme::slot_pipeline(query_device_limits(o.kind), slot_bytes, step.records_per_step() /
                                       enzyme::slot_chunks(slot_bytes), o.pipeline);
  chain<Step> ch(std::move(step), steps, o);
  std::size_t const bytes = n * sizeof(double);
  device_buffer state(o.kind, bytes, {});
  state.upload(x0.data(), bytes, {});
  ch.forward(state);
  pool.check();  // a slot whose caches did not fit: budget_error, before the reverse uses them
  chain_run r;
  std::vector<double> xT(n);
  state.download(xT.data(), bytes, {});
  r.loss = 0.5 * std::inner_product(xT.begin(), xT.end(), xT.begin(), 0.0);
  device_buffer adjoint(o.kind, bytes, {});
  adjoint.copy_from(state, {});  // dL/dx_T = x_T
  ch.reverse(adjoint);
  pool.check();  // the recompute tier runs augmented forwards inside the reverse
  r.gradient.resize(n);
  adjoint.download(r.gradient.data(), bytes, {});
  r.stats = ch.stats();
  return r;
}

TEST(EnzymeReal, ExampleChainEveryPolicyAgainstExactAndFiniteDifferences)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::size_t const n = 301;
  std::size_t const steps = 4;
  ex::params const p{5, 0.5};
  std::vector<double> const x0 = testing::random_state<double>(n, seed);
  auto pool = std::make_shared<enzyme::cache_pool>(backend::cpu, steps, n, example_region(p.inner));
  chain_options o;
  o.kind = backend::cpu;
  o.policy = tape_policy::store;
  o.poison = true;
  o.bw = {5.0, 5.0, 20.0};
  chain_run const store = run_chain(example_step{n, p, pool}, steps, x0, *pool, o, example_slot::bytes);

  std::vector<real> exact(n), fd(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto xT = [&](real v, real* d) {
      for (std::size_t k = 0; k < steps * p.inner; ++k) {
        if (d != nullptr) { *d *= std::cos(v) + static_cast<real>(p.a); }
        v = std::sin(v) + static_cast<real>(p.a) * v;
      }
      return v;
    };
    real d = 1;
    real const v = xT(x0[i], &d);
    exact[i] = v * d;  // dL/dx0 = x_T dx_T/dx0
    real const h = 1e-7L;
    real const up = xT(x0[i] + h, nullptr);
    real const down = xT(x0[i] - h, nullptr);
    fd[i] = (up * up - down * down) / (4 * h);
  }
  EXPECT_LT(testing::relative_error(store.gradient, exact), 1e-13);
  EXPECT_LT(testing::relative_error(store.gradient, fd), 1e-7);

  std::size_t const layer = store.stats.layer_bytes;
  for (tape_policy policy : {tape_policy::offload, tape_policy::recompute, tape_policy::automatic}) {
    SCOPED_TRACE(to_string(policy));
    o.policy = policy;
    o.budget_bytes = policy == tape_policy::recompute ? layer + 3 * n * sizeof(double) : 3 * layer;
    chain_run const r = run_chain(example_step{n, p, pool}, steps, x0, *pool, o, example_slot::bytes);
    EXPECT_EQ(std::memcmp(r.gradient.data(), store.gradient.data(), n * sizeof(double)), 0);
    EXPECT_LE(r.stats.peak_tape_bytes, o.budget_bytes);
  }
}

TEST(EnzymeReal, CachePoolOverflowIsABudgetErrorNamingTheBytesNeeded)
{
  std::size_t const n = 40;
  std::size_t const steps = 2;
  ex::params const p{20, 0.5};
  std::size_t const need = example_cache_use(p);
  ASSERT_GT(need, 16u);
  std::vector<double> const x0 = testing::random_state<double>(n, testing::fresh_seed());
  auto pool = std::make_shared<enzyme::cache_pool>(backend::cpu, steps, n, 16);
  chain_options o;
  o.kind = backend::cpu;
  o.policy = tape_policy::store;
  try {
    static_cast<void>(run_chain(example_step{n, p, pool}, steps, x0, *pool, o, example_slot::bytes));
    FAIL() << "a cache region of 16 bytes cannot hold " << need;
  } catch (budget_error const& e) {
    EXPECT_NE(std::string(e.what()).find("needs at least"), std::string::npos) << e.what();
    EXPECT_EQ(e.requested_bytes(), need) << e.what();
  }
  // After the error the pool is usable again, and a region of the right size passes.
  auto fits = std::make_shared<enzyme::cache_pool>(backend::cpu, steps, n, (need + 15) / 16 * 16);
  EXPECT_NO_THROW(static_cast<void>(run_chain(example_step{n, p, fits}, steps, x0, *fits, o, example_slot::bytes)));
  EXPECT_THROW(enzyme::cache_pool(backend::cpu, 1, 1, 24), logic_error);  // not whole 16-byte blocks
  EXPECT_THROW(enzyme::cache_pool(backend::cpu, 0, 1, 16), logic_error);
}

TEST(EnzymeRealDeathTest, ARequestLargerThanTheWholeLayerStopsWithAMessage)
{
  ex::params const p{64, 0.5};  // 512-byte caches, a layer of 2 x 32 bytes
  std::vector<unsigned char> region(64);
  enzyme::cache_status status{};
  alignas(16) unsigned char tape[fn::example_tape_bytes];
  EXPECT_DEATH(
    {
      enzyme::cache_cursor cache(region.data(), 32, region.data(), region.size(), &status);
      static_cast<void>(fn::example_augmented(0.3, p, tape, cache));
    },
    "larger than its layer's whole cache pool");
}

// ---------------------------------------------------------------------------------------------
// Allen–Cahn with Enzyme's derivative of the per-cell function: slot = the cell's five inputs and
// Enzyme's tape; the reverse scatters the five adjoints.

struct cell_step {
  using value_type = double;
  using record_type = enzyme::chunk;
  std::size_t n;  // grid side
  ac::coefficients<double> k;
  std::shared_ptr<enzyme::cache_pool> pool;

  [[nodiscard]] std::size_t state_size() const noexcept { return n * n; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return n * n * cell_slot::chunks; }

  [[nodiscard]] std::size_t neighbour(std::size_t c, int which) const noexcept
  {
    auto const [i, j] = ac::locate(c, n);
    switch (which) {
      case 1: return ac::wrap_prev(i, n) * n + j;
      case 2: return ac::wrap_next(i, n) * n + j;
      case 3: return i * n + ac::wrap_prev(j, n);
      default: return i * n + ac::wrap_next(j, n);
    }
  }
  void forward(std::size_t, double const* in, double* out, stream_view) const
  {
    for (std::size_t c = 0; c < n * n; ++c) { out[c] = ac::step_at(in, n, c, k); }
  }
  void augmented_forward(std::size_t step, double const* in, double* out, tape_writer<record_type> tape,
                         stream_view) const
  {
    enzyme::cache_view const caches = pool->view(step);
    for (std::size_t c = 0; c < n * n; ++c) {
      void* const slot = tape.data() + c * cell_slot::chunks;
      double* const u = cell_slot::inputs(slot);
      u[0] = in[c];
      for (int w = 1; w <= 4; ++w) { u[w] = in[neighbour(c, w)]; }
      enzyme::cache_cursor cache = caches.cursor(c);
      double const(&inputs)[5] = *reinterpret_cast<double const(*)[5]>(u);
      out[c] = fn::cell_augmented(inputs, k, cell_slot::tape(slot), cache);
    }
  }
  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const& plan, double const* g_out,
               double* g_in, stream_view) const
  {
    std::fill(g_in, g_in + n * n, 0.0);
    cpu::tile_ring<record_type> ring(plan);
    ring.reverse(tape, [&](std::size_t, record_type const* staged, std::size_t first, std::size_t count) {
      for (std::size_t s = 0; s < count / cell_slot::chunks; ++s) {
        std::size_t const c = first / cell_slot::chunks + s;
        void const* const slot = staged + s * cell_slot::chunks;
        double const(&inputs)[5] = *reinterpret_cast<double const(*)[5]>(cell_slot::inputs(slot));
        fn::cell_adjoint const a = fn::cell_reverse(inputs, k, cell_slot::tape(slot), g_out[c]);
        g_in[c] += a.c;
        g_in[neighbour(c, 1)] += a.up;
        g_in[neighbour(c, 2)] += a.down;
        g_in[neighbour(c, 3)] += a.left;
        g_in[neighbour(c, 4)] += a.right;
      }
    });
  }
};

TEST(EnzymeReal, AllenCahnCellChainMatchesTheCpuReferenceUnderEveryPolicy)
{
  std::uint64_t const seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::size_t const n = 24;
  std::size_t const steps = 6;
  ac::coefficients<double> const k{0.05, 1.0};
  std::vector<double> const u0 = testing::random_state<double>(n * n, seed);
  auto pool = std::make_shared<enzyme::cache_pool>(backend::cpu, steps, n * n, 16);  // Enzyme caches nothing here
  chain_options o;
  o.kind = backend::cpu;
  o.policy = tape_policy::store;
  o.poison = true;
  o.bw = {5.0, 5.0, 20.0};
  chain_run const store = run_chain(cell_step{n, k, pool}, steps, u0, *pool, o, cell_slot::bytes);

  // The project's hand-written CPU gradient, and the independent long-double reference.
  ac::problem problem{};
  problem.n = n;
  problem.steps = steps;
  ac::options ao;
  ao.kind = backend::cpu;
  auto const hand = ac::gradient<double>(problem, u0, ao);
  EXPECT_LT(testing::relative_error(store.gradient, hand.gradient), 1e-13);
  testing::reference_problem const ref{n, steps};
  std::vector<real> const exact = testing::reference_gradient(testing::widen(u0), ref);
  EXPECT_LT(testing::relative_error(store.gradient, exact), 1e-13);
  // Central differences in long double on a few cells.
  for (std::size_t c : {std::size_t{0}, n + 3, n * n - 1}) {
    std::vector<real> up = testing::widen(u0);
    std::vector<real> down = up;
    real const h = 1e-6L;
    up[c] += h;
    down[c] -= h;
    real const fd = (testing::reference_loss(up, ref) - testing::reference_loss(down, ref)) / (2 * h);
    EXPECT_NEAR(store.gradient[c], static_cast<double>(fd), 1e-7 * std::fabs(static_cast<double>(fd))) << c;
  }

  std::size_t const layer = store.stats.layer_bytes;
  for (tape_policy policy : {tape_policy::offload, tape_policy::recompute, tape_policy::automatic}) {
    SCOPED_TRACE(to_string(policy));
    o.policy = policy;
    o.budget_bytes = policy == tape_policy::recompute ? layer + 3 * n * n * sizeof(double) : 3 * layer;
    chain_run const r = run_chain(cell_step{n, k, pool}, steps, u0, *pool, o, cell_slot::bytes);
    EXPECT_EQ(std::memcmp(r.gradient.data(), store.gradient.data(), n * n * sizeof(double)), 0);
    EXPECT_LE(r.stats.peak_tape_bytes, o.budget_bytes);
  }
}

}  // namespace
}  // namespace tapeflow

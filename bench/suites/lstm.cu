// SPDX-License-Identifier: Apache-2.0
// The LSTM of Futhark's AD evaluation on one GPU: one layer, f32, loss Σ h_T, gradient dL/d(W, U,
// b); matrix products on cuBLAS in full fp32 (no TF32), the cells in tapeflow's kernels, the tape
// in the store tier. Rows: workload "lstm", variant "tapeflow", sizes "B1024 T20 I300 H192",
// "B1024 T300 I80 H256" and "B1024 T300 I80 H256 packed" (the same batch as packed variable-length
// sequences, packed_lengths below); the peers in bench/peers/lstm_{torch,jax}.py write the same
// strings (the packed size: cuDNN, eager PyTorch and JAX's masked scan).
#include "../harness.hpp"

#include <lstm/cuda_step.cuh>
#include <lstm/driver.hpp>
#include <tapeflow/chain.hpp>
#include <tapeflow/memory.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace tapeflow;
namespace ls = tapeflow::workloads::lstm;

std::string size_of(ls::problem const& p)
{
  return "B" + std::to_string(p.batch) + " T" + std::to_string(p.steps) + " I" + std::to_string(p.input) + " H" +
         std::to_string(p.hidden) + (p.lengths.empty() ? "" : " packed");
}

/// The packed size's lengths: L_b = T - floor(b floor(3T/4) / B), from T down to about T/4, mean
/// about 5T/8 (bench/peers/lstm_torch.py's packed_lengths is the same formula).
std::vector<std::size_t> packed_lengths(std::size_t batch, std::size_t steps)
{
  std::vector<std::size_t> lengths(batch);
  for (std::size_t b = 0; b < batch; ++b) { lengths[b] = steps - (b * (3 * steps / 4)) / batch; }
  return lengths;
}

/// Weights uniform in ±1/sqrt(H) (PyTorch's initialisation), inputs uniform in ±1, h0 = c0 = 0.
void random_problem(ls::problem const& p, std::uint64_t seed, ls::weights<float>& w, ls::sequence<float>& seq)
{
  std::mt19937_64 rng(seed);
  float const k = 1.0f / std::sqrt(static_cast<float>(p.hidden));
  std::uniform_real_distribution<float> weight(-k, k);
  std::uniform_real_distribution<float> input(-1.0f, 1.0f);
  std::size_t const G = 4 * p.hidden;
  w.w.resize(G * p.input);
  w.u.resize(G * p.hidden);
  w.b.resize(G);
  seq.x.resize(p.steps * p.batch * p.input);
  for (float& v : w.w) { v = weight(rng); }
  for (float& v : w.u) { v = weight(rng); }
  for (float& v : w.b) { v = weight(rng); }
  for (float& v : seq.x) { v = input(rng); }
}

/// Floating-point operations of one gradient: the input projection (over the padded T x B inputs),
/// then per step the recurrent GEMM, the three parameter/adjoint GEMMs and the bias GEMV over the
/// B_t sequences it advances (the cells are not counted).
double gradient_flops(ls::problem const& p)
{
  double const G = 4.0 * static_cast<double>(p.hidden);
  double const T = static_cast<double>(p.steps);
  double const I = static_cast<double>(p.input);
  double const H = static_cast<double>(p.hidden);
  double steps = 0;  // Σ_t B_t
  for (std::size_t t = 0; t < p.steps; ++t) { steps += static_cast<double>(ls::active_sequences(p, t)); }
  return 2 * G * T * static_cast<double>(p.batch) * I + steps * (2 * G * H + 2 * I * G + 2 * H * G + 2 * H * G + 2 * G);
}

void run_one(bench::context& ctx, ls::problem const& p)
{
  ls::weights<float> params;
  ls::sequence<float> seq;
  random_problem(p, 20261124, params, seq);
  ls::validate(p, params, seq);
  std::size_t const cells = p.batch * p.hidden;
  std::size_t const state_bytes = 2 * cells * sizeof(float);
  int const sms = ctx.device().multiprocessors;

  reset_device_memory_peak(ctx.kind());
  ls::detail::workspace<float> ws(ctx.kind(), p, true, {});
  ws.upload(params, seq, {});
  tapeflow::device::blas_handle const blas;
  ls::detail::cuda_step<float> const step{p, ws.buffers(), &blas, sms};
  device_buffer a(ctx.kind(), state_bytes, {});
  device_buffer b(ctx.kind(), state_bytes, {});

  // primal: the input projection and T untaped steps.
  double const primal = ctx
                          .measure([&](bench::stopwatch& sw) {
                            a.fill(0, {});  // h0 = c0 = 0
                            sw.start();
                            step.project_inputs({});
                            for (std::size_t t = 0; t < p.steps; ++t) {
                              step.forward(t, a.data_as<float>(), b.data_as<float>(), {});
                              std::swap(a, b);
                            }
                            sw.lap();
                          })
                          .total_ms;

  // gradient: the input projection and the augmented forward; then the seed (g_h = 1, g_c = 0)
  // and the reverse with every parameter gradient (the chain zeroes its parameter adjoint).
  chain_options o;
  o.kind = ctx.kind();
  o.policy = tape_policy::store;
  chain<ls::detail::cuda_step<float>> c(step, p.steps, o);
  device_buffer& state = a;
  device_buffer& adjoint = b;
  bench::timing const t = ctx.measure([&](bench::stopwatch& sw) {
    state.fill(0, {});
    sw.start();
    step.project_inputs({});
    c.forward(state);
    sw.lap();
    ls::detail::fill(adjoint.data_as<float>(), cells, 1.0f, sms, {});
    ls::detail::fill(adjoint.data_as<float>() + cells, cells, 0.0f, sms, {});
    c.reverse(adjoint);
    sw.lap();
  });

  bench::row r{"lstm", "tapeflow", size_of(p)};
  r.primal_ms = primal;
  r.grad_ms = t.total_ms;
  r.forward_ms = t.laps_ms[0];
  r.reverse_ms = t.laps_ms[1];
  r.tape_bytes = c.stats().tape_bytes;
  r.peak_device_bytes = device_memory_usage(ctx.kind()).peak_bytes;
  r.extra.add("plan", c.stats().plan.describe())
    .add("math", "fp32, cuBLAS CUBLAS_DEFAULT_MATH (no TF32)")
    .add("gemm_TFLOPS", gradient_flops(p) / (r.grad_ms * 1e9))
    .add("targets", p.lengths.empty() ? "grad_ms <= 1.25x cudnn, <= 0.5x jax-jit" : "grad_ms <= 1.25x cudnn (packed)");
  ctx.add(std::move(r));
}

void run_lstm(bench::context& ctx)
{
  std::vector<ls::problem> const full{{1024, 20, 300, 192}, {1024, 300, 80, 256}};
  std::vector<std::string> done;
  for (ls::problem const& f : full) {
    ls::problem const p{ctx.size("lstm.B", f.batch, 64), ctx.size("lstm.T", f.steps, 5),
                        ctx.size("lstm.I", f.input, 16), ctx.size("lstm.H", f.hidden, 32)};
    if (std::find(done.begin(), done.end(), size_of(p)) != done.end()) { continue; }  // --quick: one size
    done.push_back(size_of(p));
    run_one(ctx, p);
  }
  // The longer size again as packed variable-length sequences (--quick: the quick size).
  ls::problem packed{ctx.size("lstm.B", full[1].batch, 64), ctx.size("lstm.T", full[1].steps, 5),
                     ctx.size("lstm.I", full[1].input, 16), ctx.size("lstm.H", full[1].hidden, 32)};
  packed.lengths = packed_lengths(packed.batch, packed.steps);
  run_one(ctx, packed);
}

}  // namespace

TAPEFLOW_BENCH_SUITE(lstm, 60, "LSTM (B1024 T20 I300 H192; B1024 T300 I80 H256): cuBLAS + tapeflow tape, fp32",
                     run_lstm);

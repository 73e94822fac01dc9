// SPDX-License-Identifier: Apache-2.0
// GMM's CUDA kernels and engine (driver.hpp's Engine), shared by the workload (cuda.cu) and the
// benchmark suite. CUDA only: the reductions go through CUB.
//
//   prep       block per component: dense Q_k, sum_j q_kj and prior_k (device::block_reduce: CUB's)
//   forward    block per (64 points, component): Q_k (x_i - mu_k) as a tiled triangular product,
//              main_ik; the augmented forward also writes the tape records
//   lse_i      a segmented reduction (device/reduce.cuh: CUB's) with the log-sum-exp monoid over each point's K terms;
//              the sums over N and K through device-wide reductions
//   reverse    persistent grid (K x splits, lower blocks of S_k) reading the tape only through
//              device::tile_pipeline: each block accumulates one 64 x 64 block of
//              S_k = sum_i r_ik xc xc^T (and t_k, R_k) over its tiles, in registers, and writes it
//              once; a fold kernel sums the blocks of one component (the splits) in a fixed order
//   finalize   block per component: M_k = Q_k S_k, d q, d L, d mu, d alpha (math.hpp)
#pragma once

#include "driver.hpp"
#include "gmm.hpp"
#include "math.hpp"

#include <tapeflow/device/block_reduce.cuh>
#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/reduce.cuh>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/tile_pipeline.cuh>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>


#include <algorithm>
#include <cmath>
#include <cstddef>

namespace tapeflow::workloads::gmm::detail {

inline constexpr int gpu_threads = 256;
/// Forward tile: 64 points x 64 rows of Q_k per pass, 16 columns per step (4 x 4 per thread).
inline constexpr int fwd_points = 64;
inline constexpr int fwd_rows = 64;
inline constexpr int fwd_cols = 16;
/// Reverse: points per step of the S_k accumulation.
inline constexpr int rev_points = 16;
/// Static shared memory of the reverse kernel besides the staged tiles (with room for the pipeline's state).
inline constexpr std::size_t reverse_static_smem = (2 * rev_points * 64 + rev_points) * sizeof(double) + 256;
/// Values of one (component, S block) partial: the 64 x 64 block, t_k's 64 entries, R_k.
inline constexpr std::size_t partial_width = s_block * s_block + s_block + 1;

struct device_problem {
  int d;
  int k;
  long long n;
  double gamma;
  double m;
};

/// acc[m][c] += a[ty + 16 m] * b[tx + 16 c]: a thread's 4 x 4 share of the outer product of two
/// staged 64-value rows, its (ty, tx) in the block's 16 x 16.
__device__ __forceinline__ void add_outer_4x4(double const* a, double const* b, int ty, int tx, double (&acc)[4][4])
{
  double u[4];
  double v[4];
TAPEFLOW_UNROLL
  for (int m = 0; m < 4; ++m) {
    u[m] = a[ty + 16 * m];
    v[m] = b[tx + 16 * m];
  }
TAPEFLOW_UNROLL
  for (int m = 0; m < 4; ++m) {
TAPEFLOW_UNROLL
    for (int c = 0; c < 4; ++c) { acc[m][c] = fma(u[m], v[c], acc[m][c]); }
  }
}

// The kernels are templates (Unused) so that this header can be included by several translation
// units (the workload, the benchmark) without multiple definitions.
template <int Unused = 0>
__global__ void prep_kernel(device_problem p, double const* __restrict__ icf, double* __restrict__ qmat,
                            double* __restrict__ sum_q, double* __restrict__ prior)
{
  using reduce = device::block_reduce<double, gpu_threads>;
  __shared__ typename reduce::TempStorage temp;
  std::size_t const d = static_cast<std::size_t>(p.d);
  std::size_t const k = blockIdx.x;
  double const* c = icf + k * icf_size(d);
  double q = 0;
  double pr = 0;
  for (std::size_t j = threadIdx.x; j < d; j += blockDim.x) {
    q += c[j];
    pr += prior_diag(c[j], p.gamma, p.m);
  }
  for (std::size_t e = d + threadIdx.x; e < icf_size(d); e += blockDim.x) { pr += prior_ltri(c[e], p.gamma); }
  double* const out = qmat + k * d * d;
  for (std::size_t e = threadIdx.x; e < d * d; e += blockDim.x) {
    std::size_t const j = e / d;
    std::size_t const l = e - j * d;
    out[e] = j == l ? exp(c[j]) : l < j ? c[ltri_index(d, j, l)] : 0.0;
  }
  double const q_total = reduce(temp).Sum(q);
  __syncthreads();  // temp is reused
  double const prior_total = reduce(temp).Sum(pr);
  if (threadIdx.x == 0) {
    sum_q[k] = q_total;
    prior[k] = prior_total;
  }
}

/// main_ik for 64 points of component blockIdx.y: |Q_k xc|^2 as a tiled product (rows of Q_k in
/// passes of 64, only the columns up to the pass's last row), each thread 4 rows x 4 points.
template <bool Taped>
__global__ void __launch_bounds__(gpu_threads) forward_kernel(device_problem p, double const* __restrict__ x,
                                                             double const* __restrict__ means,
                                                             double const* __restrict__ alphas,
                                                             double const* __restrict__ qmat,
                                                             double const* __restrict__ sum_q,
                                                             double* __restrict__ main_terms,
                                                             tape_writer<record> tape, std::size_t points_per_tile)
{
  __shared__ double xs[fwd_cols][fwd_points + 1];
  __shared__ double qs[fwd_cols][fwd_rows + 1];
  __shared__ double red[16][fwd_points];
  int const d = p.d;
  std::size_t const k = blockIdx.y;
  std::size_t const i0 = static_cast<std::size_t>(blockIdx.x) * fwd_points;
  int const tid = threadIdx.x;
  int const ty = tid / 16;
  int const tx = tid % 16;
  double const* const mu = means + k * d;
  double const* const q = qmat + k * static_cast<std::size_t>(d) * d;

  double norm[4] = {0, 0, 0, 0};
  for (int j0 = 0; j0 < d; j0 += fwd_rows) {
    double acc[4][4] = {};
    int const cols = min(d, j0 + fwd_rows);
    for (int l0 = 0; l0 < cols; l0 += fwd_cols) {
      for (int e = tid; e < fwd_cols * fwd_points; e += gpu_threads) {
        int const l = e % fwd_cols;
        int const pt = e / fwd_cols;
        std::size_t const i = i0 + pt;
        int const col = l0 + l;
        xs[l][pt] = (i < static_cast<std::size_t>(p.n) && col < d) ? x[i * d + col] - mu[col] : 0.0;
      }
      for (int e = tid; e < fwd_cols * fwd_rows; e += gpu_threads) {
        int const l = e % fwd_cols;
        int const row = j0 + e / fwd_cols;
        int const col = l0 + l;
        qs[l][e / fwd_cols] = (row < d && col < d) ? q[static_cast<std::size_t>(row) * d + col] : 0.0;
      }
      __syncthreads();
TAPEFLOW_UNROLL
      for (int l = 0; l < fwd_cols; ++l) { add_outer_4x4(qs[l], xs[l], ty, tx, acc); }
      __syncthreads();
    }
TAPEFLOW_UNROLL
    for (int c = 0; c < 4; ++c) {
TAPEFLOW_UNROLL
      for (int m = 0; m < 4; ++m) { norm[c] = fma(acc[m][c], acc[m][c], norm[c]); }
    }
  }
TAPEFLOW_UNROLL
  for (int c = 0; c < 4; ++c) { red[ty][tx + 16 * c] = norm[c]; }
  __syncthreads();
  __shared__ double mains[fwd_points];
  if (tid < fwd_points) {
    double sq = 0;
    for (int r = 0; r < 16; ++r) { sq += red[r][tid]; }
    std::size_t const i = i0 + tid;
    bool const real_point = i < static_cast<std::size_t>(p.n);
    double const v = real_point ? main_term(alphas[k], sum_q[k], sq) : 0.0;
    mains[tid] = v;
    if (real_point) { main_terms[i * p.k + k] = v; }
  }
  if constexpr (Taped) {
    __syncthreads();
    if (tid < fwd_points / static_cast<int>(points_per_record)) {
      std::size_t const i = i0 + static_cast<std::size_t>(tid) * points_per_record;
      std::size_t const tl = i / points_per_tile;
      std::size_t const rec = (tl * p.k + k) * tape.layout().tile_records + (i % points_per_tile) / points_per_record;
      record r;
      r.values[0] = mains[2 * tid];
      r.values[1] = mains[2 * tid + 1];
      tape.write(rec, r);
    }
  }
}

struct lse_of_op {
  __host__ __device__ lse_pair operator()(double v) const noexcept { return lse_of(v); }
};
template <int Unused = 0>
__global__ void lse_values_kernel(lse_pair const* __restrict__ pairs, double* __restrict__ lse, std::size_t n)
{
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    lse[i] = lse_value(pairs[i]);
  }
}
struct times_op {
  long long factor;
  __host__ __device__ long long operator()(long long v) const noexcept { return v * factor; }
};

template <int Unused = 0>
__global__ void assemble_kernel(double constant, double n, double const* sum_lse, double const* prior_sum,
                                lse_pair const* lse_alpha_pair, double* lse_alpha, double* objective)
{
  double const la = lse_value(*lse_alpha_pair);
  *lse_alpha = la;
  *objective = constant + *sum_lse - n * la + *prior_sum;
}

/// Block (b, sb): the S_k block sb (rows jb, columns lb <= jb) summed over the tiles of block b,
/// which all belong to component (tiles - 1 - b) mod K.
template <int Stages>
__global__ void __launch_bounds__(gpu_threads) reverse_kernel(tape_reader<record> tape, device_problem p,
                                                             double const* __restrict__ x,
                                                             double const* __restrict__ means,
                                                             double const* __restrict__ lse,
                                                             double* __restrict__ partial, std::size_t points_per_tile)
{
  __shared__ double xj[rev_points][s_block];
  __shared__ double xl[rev_points][s_block];
  __shared__ double rs[rev_points];
  int const d = p.d;
  std::size_t const components = static_cast<std::size_t>(p.k);
  int const sb = static_cast<int>(blockIdx.y);
  int jb = 0;
  while ((jb + 1) * (jb + 2) / 2 <= sb) { ++jb; }
  int const lb = sb - jb * (jb + 1) / 2;
  bool const diagonal = jb == lb;
  std::size_t const k = (tape.tiles() - 1 - blockIdx.x) % components;
  int const tid = threadIdx.x;
  int const ty = tid / 16;
  int const tx = tid % 16;
  double const* const mu = means + k * d;

  double acc[4][4] = {};
  double t_acc = 0;
  double r_acc = 0;
  device::tile_pipeline<record, Stages>::reverse(
    tape, [&](std::size_t tile, record const* staged, std::size_t, std::size_t count) {
      std::size_t const first_point = tile / components * points_per_tile;
      std::size_t const points = count * points_per_record;
      for (std::size_t c0 = 0; c0 < points; c0 += rev_points) {
        if (tid < rev_points) {
          std::size_t const pl = c0 + tid;
          std::size_t const i = first_point + pl;
          rs[tid] = (pl < points && i < static_cast<std::size_t>(p.n))
                      ? responsibility(staged[pl / points_per_record].values[pl % points_per_record], lse[i])
                      : 0.0;
        }
        __syncthreads();
        for (int e = tid; e < rev_points * static_cast<int>(s_block); e += gpu_threads) {
          int const pt = e / static_cast<int>(s_block);
          int const c = e % static_cast<int>(s_block);
          std::size_t const i = first_point + c0 + pt;
          bool const in = c0 + pt < points && i < static_cast<std::size_t>(p.n);
          int const row = jb * static_cast<int>(s_block) + c;
          int const col = lb * static_cast<int>(s_block) + c;
          xj[pt][c] = (in && row < d) ? x[i * d + row] - mu[row] : 0.0;
          xl[pt][c] = (in && col < d) ? rs[pt] * (x[i * d + col] - mu[col]) : 0.0;
        }
        __syncthreads();
TAPEFLOW_UNROLL_BY(unroll 4)
        for (int pt = 0; pt < rev_points; ++pt) { add_outer_4x4(xj[pt], xl[pt], ty, tx, acc); }
        if (diagonal && tid < static_cast<int>(s_block)) {
          for (int pt = 0; pt < rev_points; ++pt) { t_acc += xl[pt][tid]; }
        }
        if (sb == 0 && tid == 0) {
          for (int pt = 0; pt < rev_points; ++pt) { r_acc += rs[pt]; }
        }
        __syncthreads();
      }
    });

  // partial[split][k][sb][w]: split 0 alone is already the sum when there is one split.
  std::size_t const split = blockIdx.x / components;
  double* const out = partial + ((split * components + k) * gridDim.y + sb) * partial_width;
  auto at = [&](std::size_t w) -> double& { return out[w]; };
TAPEFLOW_UNROLL
  for (int m = 0; m < 4; ++m) {
TAPEFLOW_UNROLL
    for (int c = 0; c < 4; ++c) { at((ty + 16 * m) * s_block + tx + 16 * c) = acc[m][c]; }
  }
  if (tid < static_cast<int>(s_block)) { at(s_block * s_block + tid) = t_acc; }
  if (tid == 0) { at(s_block * s_block + s_block) = r_acc; }
}

/// reduced[v] = sum over the splits of partial[split][v], in split order (fixed: reproducible).
template <int Unused = 0>
__global__ void fold_kernel(double const* __restrict__ partial, double* __restrict__ reduced, std::size_t values,
                            std::size_t splits)
{
  for (std::size_t v = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; v < values;
       v += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    double acc = 0;
    for (std::size_t split = 0; split < splits; ++split) { acc += partial[split * values + v]; }
    reduced[v] = acc;
  }
}

/// Block per component: the gradient from the summed S_k, t_k, R_k (math.hpp's adjoint).
template <int Unused = 0>
__global__ void finalize_kernel(device_problem p, double const* __restrict__ alphas,
                                double const* __restrict__ icf, double const* __restrict__ qmat,
                                double const* __restrict__ reduced, double const* __restrict__ lse_alpha,
                                double* __restrict__ d_alphas, double* __restrict__ d_means,
                                double* __restrict__ d_icf, int s_blocks)
{
  double* const u = device::dynamic_shared<double>();  // d values: Q_k t_k
  std::size_t const d = static_cast<std::size_t>(p.d);
  std::size_t const k = blockIdx.x;
  double const* const red = reduced + k * s_blocks * partial_width;
  double const* const q = qmat + k * d * d;
  double const* const c = icf + k * icf_size(d);
  double* const g = d_icf + k * icf_size(d);
  auto block_of = [](std::size_t jb, std::size_t lb) { return jb * (jb + 1) / 2 + lb; };
  auto s_at = [&](std::size_t a, std::size_t b) {
    if (a < b) {
      std::size_t const t = a;
      a = b;
      b = t;
    }
    return red[block_of(a / s_block, b / s_block) * partial_width + (a % s_block) * s_block + b % s_block];
  };
  auto t_at = [&](std::size_t a) {
    return red[block_of(a / s_block, a / s_block) * partial_width + s_block * s_block + a % s_block];
  };
  auto q_at = [&](std::size_t j, std::size_t l) { return q[j * d + l]; };
  double const r_sum = red[s_block * s_block + s_block];

  for (std::size_t e = threadIdx.x; e < d * d; e += blockDim.x) {
    std::size_t const j = e / d;
    std::size_t const l = e - j * d;
    if (l > j) { continue; }
    double const m_jl = qs_entry(j, l, q_at, s_at);
    if (j == l) {
      g[j] = diag_adjoint(r_sum, c[j], m_jl, p.gamma, p.m);
    } else {
      std::size_t const idx = ltri_index(d, j, l);
      g[idx] = ltri_adjoint(m_jl, c[idx], p.gamma);
    }
  }
  for (std::size_t j = threadIdx.x; j < d; j += blockDim.x) {
    double acc = 0;
    for (std::size_t l = 0; l <= j; ++l) { acc += q_at(j, l) * t_at(l); }
    u[j] = acc;
  }
  __syncthreads();
  for (std::size_t l = threadIdx.x; l < d; l += blockDim.x) {
    double acc = 0;
    for (std::size_t j = l; j < d; ++j) { acc += q_at(j, l) * u[j]; }
    d_means[k * d + l] = acc;
  }
  if (threadIdx.x == 0) { d_alphas[k] = alpha_adjoint(r_sum, alphas[k], *lse_alpha, static_cast<double>(p.n)); }
}

/// The CUDA engine of driver.hpp: device buffers sized once, the work enqueued on a stream.
class gpu_engine {
 public:
  /// Whether the code loaded for the reverse kernel runs the sm_90 bulk-copy pipeline.
  [[nodiscard]] static bool bulk_copy_runs()
  {
    return device::bulk_copy_runs([](auto stages) { return reverse_kernel<decltype(stages)::value>; });
  }

  gpu_engine(problem const& p, layout const& l, stream_view s)
    : p_(p), l_(l), dp_{static_cast<int>(p.d), static_cast<int>(p.k), static_cast<long long>(p.n), p.gamma,
                        static_cast<double>(p.m)},
      constant_(objective_constant(p.d, p.k, p.n, p.gamma, p.m)), alphas_(gpu_backend, p.k * sizeof(double), s),
      means_(gpu_backend, p.k * p.d * sizeof(double), s), icf_(gpu_backend, p.k * icf_size(p.d) * sizeof(double), s),
      x_(gpu_backend, p.n * p.d * sizeof(double), s),
      qmat_(gpu_backend, p.k * p.d * p.d * sizeof(double), s), sum_q_(gpu_backend, p.k * sizeof(double), s),
      prior_(gpu_backend, p.k * sizeof(double), s), main_(gpu_backend, p.n * p.k * sizeof(double), s),
      lse_pairs_(gpu_backend, p.n * sizeof(lse_pair), s), lse_(gpu_backend, p.n * sizeof(double), s), scalars_(gpu_backend, 8 * sizeof(double), s),
      partial_(gpu_backend, l.splits * p.k * l.s_blocks * partial_width * sizeof(double), s),
      reduced_(l.splits > 1 ? device_buffer(gpu_backend, p.k * l.s_blocks * partial_width * sizeof(double), s)
                            : device_buffer()),
      d_alphas_(gpu_backend, p.k * sizeof(double), s), d_means_(gpu_backend, p.k * p.d * sizeof(double), s),
      d_icf_(gpu_backend, p.k * icf_size(p.d) * sizeof(double), s)
  {
    multiprocessors_ = query_device_limits(gpu_backend).multiprocessors;
    TAPEFLOW_EXPECTS(p.k <= 65535, "the GMM GPU kernels take at most 65535 components");
    TAPEFLOW_EXPECTS(p.d <= 4096, "the GMM GPU kernels take at most 4096 dimensions");
    std::size_t const staged = l.plan.smem_bytes + reverse_static_smem;
    TAPEFLOW_EXPECTS(staged <= query_device_limits(gpu_backend).shared_mem_per_block,
                     "the GMM reverse needs " + std::to_string(staged) +
                       " bytes of shared memory per block with this tiling; choose smaller tiles or fewer stages");
    std::size_t need = 0;
    for (int which = 0; which < 4; ++which) { need = std::max(need, reduction(which, nullptr, 0, s)); }
    temp_ = device_buffer(gpu_backend, std::max<std::size_t>(need, 16), s);
  }

  /// Uploads alphas, means, icf and x (their sizes checked by the session).
  void load(std::vector<host_array<double>> const& in, stream_view s)
  {
    device_buffer* const to[] = {&alphas_, &means_, &icf_, &x_};
    for (std::size_t i = 0; i < 4; ++i) { to[i]->upload(in[i].data, in[i].size * sizeof(double), s); }
  }

  void objective(stream_view s) { forward<false>(tape_writer<record>{}, s); }

  void augmented_forward(tape_writer<record> tape, stream_view s) { forward<true>(tape, s); }

  void reverse(tape_reader<record> tape, pipeline_plan const& plan, stream_view s)
  {
    TAPEFLOW_EXPECTS(static_cast<std::size_t>(plan.grid_blocks) == p_.k * l_.splits,
                     "the GMM reverse grid must be K x splits blocks");
    device::with_tile_pipeline<record>(plan, [&](auto stages) {
      constexpr int S = decltype(stages)::value;
      dim3 const grid(static_cast<unsigned>(plan.grid_blocks), static_cast<unsigned>(l_.s_blocks));
      device::launch(reverse_kernel<S>, grid, plan.block_threads, plan.smem_bytes, s, tape, dp_, x_.data_as<double>(),
        means_.data_as<double>(), lse_.data_as<double>(), partial_.data_as<double>(), l_.points_per_tile);
    });
    std::size_t const values = p_.k * l_.s_blocks * partial_width;
    double const* sums = partial_.data_as<double>();
    if (l_.splits > 1) {
      device::launch(fold_kernel<>, device::grid_for(values, gpu_threads, multiprocessors_), gpu_threads, 0, s,
        partial_.data_as<double>(), reduced_.data_as<double>(), values, l_.splits);
      sums = reduced_.data_as<double>();
    }
    device::launch(finalize_kernel<>, static_cast<unsigned>(p_.k), gpu_threads, p_.d * sizeof(double), s, dp_,
      alphas_.data_as<double>(), icf_.data_as<double>(), qmat_.data_as<double>(), sums, scalar(lse_alpha_slot),
      d_alphas_.data_as<double>(), d_means_.data_as<double>(), d_icf_.data_as<double>(), static_cast<int>(l_.s_blocks));
  }

  double read_objective(stream_view s) const
  {
    double v = 0;
    scalars_.download(&v, sizeof v, s, objective_slot * sizeof(double));
    return v;
  }

  void read_gradient(gradient_result& out, stream_view s) const
  {
    out.objective = read_objective(s);
    out.d_alphas.resize(p_.k);
    out.d_means.resize(p_.k * p_.d);
    out.d_icf.resize(p_.k * icf_size(p_.d));
    d_alphas_.download(out.d_alphas.data(), d_alphas_.size(), s);
    d_means_.download(out.d_means.data(), d_means_.size(), s);
    d_icf_.download(out.d_icf.data(), d_icf_.size(), s);
  }

 private:
  // Slots of scalars_: lse pair of alpha (2), sum of lse_i, sum of prior_k, lse(alpha), objective.
  static constexpr std::size_t lse_alpha_pair_slot = 0;
  static constexpr std::size_t sum_lse_slot = 2;
  static constexpr std::size_t prior_sum_slot = 3;
  static constexpr std::size_t lse_alpha_slot = 4;
  static constexpr std::size_t objective_slot = 5;

  double* scalar(std::size_t slot) noexcept { return scalars_.data_as<double>() + slot; }

  template <bool Taped>
  void forward(tape_writer<record> tape, stream_view s)
  {
    device::launch(prep_kernel<>, static_cast<unsigned>(p_.k), gpu_threads, 0, s, dp_, icf_.data_as<double>(),
      qmat_.data_as<double>(), sum_q_.data_as<double>(), prior_.data_as<double>());
    std::size_t const points = Taped ? l_.padded_points() : p_.n;
    dim3 const grid(static_cast<unsigned>((points + fwd_points - 1) / fwd_points), static_cast<unsigned>(p_.k));
    device::launch(forward_kernel<Taped>, grid, gpu_threads, 0, s, dp_, x_.data_as<double>(), means_.data_as<double>(),
      alphas_.data_as<double>(), qmat_.data_as<double>(), sum_q_.data_as<double>(), main_.data_as<double>(), tape,
      l_.points_per_tile);
    reduction(0, temp_.data(), temp_.size(), s);
    device::launch(lse_values_kernel<>, device::grid_for(p_.n, gpu_threads, multiprocessors_), gpu_threads, 0, s,
      lse_pairs_.data_as<lse_pair>(), lse_.data_as<double>(), p_.n);
    for (int which = 1; which < 4; ++which) { reduction(which, temp_.data(), temp_.size(), s); }
    device::launch(assemble_kernel<>, 1, 1, 0, s, constant_, static_cast<double>(p_.n), scalar(sum_lse_slot),
      scalar(prior_sum_slot), reinterpret_cast<lse_pair const*>(scalar(lse_alpha_pair_slot)), scalar(lse_alpha_slot),
      scalar(objective_slot));
  }

  /// The device-wide reductions: 0 lse_i per point (its log-sum-exp pair), 1 sum of lse_i, 2 sum of
  /// prior_k, 3 lse(alpha). With temp == nullptr: the temp bytes it needs.
  std::size_t reduction(int which, void* temp, std::size_t bytes, stream_view s)
  {
    std::size_t const n = p_.n;
    lse_pair const init{-INFINITY, 0.0};
    switch (which) {
      case 0: {
        auto in = device::make_transform_iterator(main_.data_as<double>(), lse_of_op{});
        auto* out = lse_pairs_.data_as<lse_pair>();
        auto begin = device::make_transform_iterator(device::make_counting_iterator<long long>(0),
                                                     times_op{static_cast<long long>(p_.k)});
        auto end = device::make_transform_iterator(device::make_counting_iterator<long long>(1),
                                                   times_op{static_cast<long long>(p_.k)});
        TAPEFLOW_CUDA_TRY(device::segmented_reduce(temp, bytes, in, out, static_cast<std::int64_t>(n), begin, end,
                                                   lse_op{}, init, s));
        break;
      }
      case 1:
        TAPEFLOW_CUDA_TRY(
          device::sum(temp, bytes, lse_.data_as<double>(), scalar(sum_lse_slot), static_cast<std::int64_t>(n), s));
        break;
      case 2:
        TAPEFLOW_CUDA_TRY(device::sum(temp, bytes, prior_.data_as<double>(), scalar(prior_sum_slot),
                                      static_cast<std::int64_t>(p_.k), s));
        break;
      case 3: {
        auto in = device::make_transform_iterator(alphas_.data_as<double>(), lse_of_op{});
        TAPEFLOW_CUDA_TRY(device::reduce(temp, bytes, in, reinterpret_cast<lse_pair*>(scalar(lse_alpha_pair_slot)),
                                         static_cast<std::int64_t>(p_.k), lse_op{}, init, s));
        break;
      }
      default: break;
    }
    return bytes;
  }

  problem p_;
  layout l_;
  device_problem dp_;
  double constant_;
  device_buffer alphas_, means_, icf_, x_;
  device_buffer qmat_, sum_q_, prior_, main_, lse_pairs_, lse_, scalars_;
  int multiprocessors_;
  device_buffer partial_, reduced_;
  device_buffer d_alphas_, d_means_, d_icf_;
  device_buffer temp_;
};

}  // namespace tapeflow::workloads::gmm::detail

// SPDX-License-Identifier: Apache-2.0
// GMM on the CPU reference backend: plain loops over the same math, the same tape layout and plan
// as the GPU, the reverse fed tile by tile by the worker-thread staging ring.
#include "backends.hpp"
#include "driver.hpp"
#include "math.hpp"

#include <tapeflow/cpu/tile_ring.hpp>

#include <cmath>
#include <memory>
#include <vector>

namespace tapeflow::workloads::gmm::detail {
namespace {

class cpu_engine {
 public:
  cpu_engine(problem const& p, inputs const& in, layout const& l, stream_view)
    : p_(p), in_(in), l_(l), main_(p.n * p.k), lse_(p.n)
  {
  }

  void objective(stream_view) { forward(nullptr); }

  void augmented_forward(tape_writer<record> tape, stream_view) { forward(&tape); }

  void reverse(tape_reader<record> tape, pipeline_plan const& plan, stream_view)
  {
    std::size_t const d = p_.d;
    s_.assign(p_.k * d * d, 0.0);
    t_.assign(p_.k * d, 0.0);
    r_.assign(p_.k, 0.0);
    if (!ring_) { ring_ = std::make_unique<cpu::tile_ring<record>>(plan); }
    std::vector<double> xc(d);
    ring_->reverse(tape, [&](std::size_t tile, record const* staged, std::size_t, std::size_t count) {
      std::size_t const k = tile % p_.k;
      std::size_t const first_point = tile / p_.k * l_.points_per_tile;
      double* const s = &s_[k * d * d];
      double* const t = &t_[k * d];
      for (std::size_t q = 0; q < count; ++q) {
        for (std::size_t slot = 0; slot < points_per_record; ++slot) {
          std::size_t const i = first_point + q * points_per_record + slot;
          if (i >= p_.n) { continue; }  // padding
          double const r = responsibility(staged[q].values[slot], lse_[i]);
          for (std::size_t j = 0; j < d; ++j) { xc[j] = in_.x[i * d + j] - in_.means[k * d + j]; }
          for (std::size_t j = 0; j < d; ++j) {
            double const rj = r * xc[j];
            t[j] += rj;
            for (std::size_t c = 0; c <= j; ++c) { s[j * d + c] += rj * xc[c]; }
          }
          r_[k] += r;
        }
      }
    });
    finalize();
  }

  double read_objective(stream_view) const { return objective_; }

  void read_gradient(gradient_result& out, stream_view) const
  {
    out.objective = objective_;
    out.d_alphas = d_alphas_;
    out.d_means = d_means_;
    out.d_icf = d_icf_;
    if (ring_) { out.staging = ring_->stats(); }
  }

 private:
  /// main_ik for every pair (and the records, when taping), lse_i, the objective.
  void forward(tape_writer<record> const* tape)
  {
    std::size_t const d = p_.d;
    std::size_t const sz = icf_size(d);
    std::vector<double> xc(d);
    std::vector<double> qxc(d);
    double prior = 0;
    for (std::size_t k = 0; k < p_.k; ++k) {
      double const* icf = &in_.icf[k * sz];
      double sum_q = 0;
      for (std::size_t j = 0; j < d; ++j) {
        sum_q += icf[j];
        prior += prior_diag(icf[j], p_.gamma, p_.m);
      }
      for (std::size_t e = d; e < sz; ++e) { prior += prior_ltri(icf[e], p_.gamma); }
      for (std::size_t i = 0; i < p_.n; ++i) {
        for (std::size_t j = 0; j < d; ++j) { xc[j] = in_.x[i * d + j] - in_.means[k * d + j]; }
        q_times(d, icf, xc.data(), qxc.data());
        double sq = 0;
        for (std::size_t j = 0; j < d; ++j) { sq += qxc[j] * qxc[j]; }
        main_[i * p_.k + k] = main_term(in_.alphas[k], sum_q, sq);
      }
    }
    if (tape != nullptr) {
      std::size_t const tiles = l_.plan.tiles;
      for (std::size_t tile = 0; tile < tiles; ++tile) {
        std::size_t const k = tile % p_.k;
        std::size_t const first_point = tile / p_.k * l_.points_per_tile;
        for (std::size_t q = 0; q < l_.plan.tile_records; ++q) {
          record rec{};
          for (std::size_t slot = 0; slot < points_per_record; ++slot) {
            std::size_t const i = first_point + q * points_per_record + slot;
            rec.values[slot] = i < p_.n ? main_[i * p_.k + k] : 0.0;
          }
          tape->write(tile * l_.plan.tile_records + q, rec);
        }
      }
    }
    double sum_lse = 0;
    for (std::size_t i = 0; i < p_.n; ++i) {
      lse_pair acc{-INFINITY, 0.0};
      for (std::size_t k = 0; k < p_.k; ++k) { acc = lse_combine(acc, lse_of(main_[i * p_.k + k])); }
      lse_[i] = lse_value(acc);
      sum_lse += lse_[i];
    }
    lse_pair a{-INFINITY, 0.0};
    for (double alpha : in_.alphas) { a = lse_combine(a, lse_of(alpha)); }
    lse_alpha_ = lse_value(a);
    objective_ = objective_constant(d, p_.k, p_.n, p_.gamma, p_.m) + sum_lse -
                 static_cast<double>(p_.n) * lse_alpha_ + prior;
  }

  /// d alpha, d mu, d icf from S_k, t_k, R_k (math.hpp).
  void finalize()
  {
    std::size_t const d = p_.d;
    std::size_t const sz = icf_size(d);
    d_alphas_.resize(p_.k);
    d_means_.resize(p_.k * d);
    d_icf_.resize(p_.k * sz);
    std::vector<double> u(d);
    for (std::size_t k = 0; k < p_.k; ++k) {
      double const* icf = &in_.icf[k * sz];
      double const* s = &s_[k * d * d];
      auto q_at = [&](std::size_t j, std::size_t c) {
        return j == c ? std::exp(icf[j]) : c < j ? icf[ltri_index(d, j, c)] : 0.0;
      };
      auto s_at = [&](std::size_t a, std::size_t b) { return a >= b ? s[a * d + b] : s[b * d + a]; };
      double* const g = &d_icf_[k * sz];
      for (std::size_t j = 0; j < d; ++j) {
        g[j] = diag_adjoint(r_[k], icf[j], qs_entry(j, j, q_at, s_at), p_.gamma, p_.m);
        for (std::size_t c = 0; c < j; ++c) {
          std::size_t const e = ltri_index(d, j, c);
          g[e] = ltri_adjoint(qs_entry(j, c, q_at, s_at), icf[e], p_.gamma);
        }
      }
      q_times(d, icf, &t_[k * d], u.data());  // u = Q t; d mu = Q^T u
      for (std::size_t c = 0; c < d; ++c) {
        double acc = 0;
        for (std::size_t j = c; j < d; ++j) { acc += q_at(j, c) * u[j]; }
        d_means_[k * d + c] = acc;
      }
      d_alphas_[k] = alpha_adjoint(r_[k], in_.alphas[k], lse_alpha_, static_cast<double>(p_.n));
    }
  }

  problem p_;
  inputs const& in_;
  layout l_;
  std::vector<double> main_;  // N x K, point-major
  std::vector<double> lse_;   // N
  double lse_alpha_{0};
  double objective_{0};
  std::vector<double> s_, t_, r_;
  std::vector<double> d_alphas_, d_means_, d_icf_;
  std::unique_ptr<cpu::tile_ring<record>> ring_;
};

}  // namespace

double objective_cpu(problem const& p, inputs const& in, options const& o)
{
  return run_objective<cpu_engine>(p, in, o);
}

gradient_result gradient_cpu(problem const& p, inputs const& in, options const& o)
{
  return run_gradient<cpu_engine>(p, in, o);
}

bench_result benchmark_cpu(problem const& p, inputs const& in, options const& o, int warmup, int repeats)
{
  return run_benchmark<cpu_engine>(p, in, o, warmup, repeats);
}

}  // namespace tapeflow::workloads::gmm::detail

// SPDX-License-Identifier: Apache-2.0
// GMM on the CPU reference backend: plain loops over the same math, the same tape layout and plan
// as the GPU. The loops run on the CPU backend's threads, split by what they write: components in
// the forward's main terms and the reverse (a component's tiles are summed by one thread, last
// first, in the order the staging ring would hand them over), points in the log-sum-exps. Sums
// across components or points are formed per component or point and added in order, so the
// result does not depend on the thread count.
#include "backends.hpp"
#include "driver.hpp"
#include "math.hpp"

#include <tapeflow/cpu/reverse.hpp>
#include <tapeflow/cpu/thread_pool.hpp>

#include <cmath>
#include <memory>
#include <vector>

namespace tapeflow::workloads::gmm::detail {
namespace {

class cpu_engine {
 public:
  cpu_engine(problem const& p, layout const& l, stream_view) : p_(p), l_(l), main_(p.n * p.k), lse_(p.n) {}

  /// Copies alphas, means, icf and x (their sizes checked by the session).
  void load(std::vector<host_array<double>> const& in, stream_view)
  {
    std::vector<double>* const to[] = {&in_.alphas, &in_.means, &in_.icf, &in_.x};
    for (std::size_t i = 0; i < 4; ++i) { to[i]->assign(in[i].data, in[i].data + in[i].size); }
  }

  void objective(stream_view) { forward(nullptr); }

  void augmented_forward(tape_writer<record> tape, stream_view) { forward(&tape); }

  void reverse(tape_reader<record> tape, pipeline_plan const& plan, stream_view)
  {
    std::size_t const d = p_.d;
    s_.assign(p_.k * d * d, 0.0);
    t_.assign(p_.k * d, 0.0);
    r_.assign(p_.k, 0.0);
    if (plan.staging == cpu_staging::ring) {
      std::vector<double> xc(d);
      cpu::reverse_tiles(
        tape, plan,
        [&](std::size_t tile, record const* staged, std::size_t, std::size_t count) {
          accumulate(tile, staged, count, xc.data());
        },
        &staging_);
    } else {
      // In place: a thread per component walks its tiles last first.
      cpu::parallel_for(p_.k, 1, [&](std::size_t k_begin, std::size_t k_end) {
        std::vector<double> xc(d);
        for (std::size_t k = k_begin; k < k_end; ++k) {
          for (std::size_t tl = l_.tiles_per_component; tl-- > 0;) {
            std::size_t const tile = tl * p_.k + k;
            accumulate(tile, tape.tile(tile), tape.tile_size(tile), xc.data());
          }
        }
      });
      staging_.tiles += tape.tiles();
    }
    finalize();
  }

  double read_objective(stream_view) const { return objective_; }

  void read_gradient(gradient_result& out, stream_view) const
  {
    out.objective = objective_;
    out.d_alphas = d_alphas_;
    out.d_means = d_means_;
    out.d_icf = d_icf_;
  }

  [[nodiscard]] cpu::ring_stats const& staging() const noexcept { return staging_; }

 private:
  /// S_k, t_k and R_k of the tile's component from one tile's records (`xc`: d doubles of scratch).
  void accumulate(std::size_t tile, record const* staged, std::size_t count, double* xc)
  {
    std::size_t const d = p_.d;
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
  }

  /// main_ik for every pair (and the records, when taping), lse_i, the objective.
  void forward(tape_writer<record> const* tape)
  {
    std::size_t const d = p_.d;
    std::size_t const sz = icf_size(d);
    std::vector<double> prior_of(p_.k);
    cpu::parallel_for(p_.k, 1, [&](std::size_t k_begin, std::size_t k_end) {
      std::vector<double> xc(d);
      std::vector<double> qxc(d);
      for (std::size_t k = k_begin; k < k_end; ++k) {
        double const* icf = &in_.icf[k * sz];
        double sum_q = 0;
        double prior = 0;
        for (std::size_t j = 0; j < d; ++j) {
          sum_q += icf[j];
          prior += prior_diag(icf[j], p_.gamma, p_.m);
        }
        for (std::size_t e = d; e < sz; ++e) { prior += prior_ltri(icf[e], p_.gamma); }
        prior_of[k] = prior;
        for (std::size_t i = 0; i < p_.n; ++i) {
          for (std::size_t j = 0; j < d; ++j) { xc[j] = in_.x[i * d + j] - in_.means[k * d + j]; }
          q_times(d, icf, xc.data(), qxc.data());
          double sq = 0;
          for (std::size_t j = 0; j < d; ++j) { sq += qxc[j] * qxc[j]; }
          main_[i * p_.k + k] = main_term(in_.alphas[k], sum_q, sq);
        }
      }
    });
    double prior = 0;
    for (double v : prior_of) { prior += v; }
    if (tape != nullptr) {
      std::size_t const tiles = l_.plan.tiles;
      cpu::parallel_for(tiles, cpu::grain_for(tiles), [&](std::size_t begin, std::size_t end) {
        for (std::size_t tile = begin; tile < end; ++tile) {
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
      });
    }
    cpu::parallel_for(p_.n, cpu::grain_for(p_.n, 64), [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        lse_pair acc{-INFINITY, 0.0};
        for (std::size_t k = 0; k < p_.k; ++k) { acc = lse_combine(acc, lse_of(main_[i * p_.k + k])); }
        lse_[i] = lse_value(acc);
      }
    });
    double sum_lse = 0;
    for (std::size_t i = 0; i < p_.n; ++i) { sum_lse += lse_[i]; }
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
    cpu::parallel_for(p_.k, 1, [&](std::size_t k_begin, std::size_t k_end) {
      std::vector<double> u(d);
      for (std::size_t k = k_begin; k < k_end; ++k) {
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
    });
  }

  problem p_;
  inputs in_;
  layout l_;
  std::vector<double> main_;  // N x K, point-major
  std::vector<double> lse_;   // N
  double lse_alpha_{0};
  double objective_{0};
  std::vector<double> s_, t_, r_;
  std::vector<double> d_alphas_, d_means_, d_icf_;
  cpu::ring_stats staging_{};
};

}  // namespace

std::unique_ptr<session<double>> open_cpu(problem const& p, options const& o)
{
  return std::make_unique<gmm_session<cpu_engine>>(p, o);
}

}  // namespace tapeflow::workloads::gmm::detail

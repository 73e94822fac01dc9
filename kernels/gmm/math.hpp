// SPDX-License-Identifier: Apache-2.0
// The GMM objective of ADBench (microsoft/ADBench, src/cpp/shared/gmm.h) and its adjoint, written
// once for the CPU reference and the GPU kernels.
//
//   Q_k = diag(exp(q_k)) + L_k  (L_k strictly lower, packed column by column after q_k in icf_k)
//   main_ik = alpha_k + sum_j q_kj - 0.5 |Q_k (x_i - mu_k)|^2
//   err = C - N lse(alpha) + sum_i lse_k(main_ik) + sum_k prior_k - K C_w
//   prior_k = 0.5 gamma^2 (|exp(q_k)|^2 + |L_k|_F^2) - m sum_j q_kj
//
// The adjoint, with r_ik = exp(main_ik - lse_i) and xc = x_i - mu_k. Every derivative of a pair
// (i,k) is linear in r_ik xc xc^T, so the sums over i are taken first:
//   S_k = sum_i r_ik xc xc^T (symmetric),  t_k = sum_i r_ik xc,  R_k = sum_i r_ik,
//   M_k = Q_k S_k = sum_i r_ik (Q_k xc) xc^T,
//   d alpha_k  = R_k - N softmax(alpha)_k
//   d mu_k     = Q_k^T Q_k t_k                         (= sum_i r_ik Q_k^T Qxc)
//   d q_kj     = R_k - e^{q_kj} M_k[j][j] + gamma^2 e^{2 q_kj} - m
//   d L_k[j][l]= -M_k[j][l] + gamma^2 L_k[j][l]         (j > l)
// which is the per-pair adjoint of the brief (dq_kj += r (1 - Qxc_j xc_j e^{q_kj}), dL += -r Qxc_j
// xc_l, d mu += r Q^T Qxc) summed over i, without recomputing Qxc in the reverse.
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/record.hpp>

#include <cmath>
#include <cstddef>

namespace tapeflow::workloads::gmm {

// The C library's exp and log (host and device), found here before tapeflow::exp and log of dual
// numbers (tapeflow/dual.hpp) in an enclosing namespace would hide them.
using ::exp;
using ::log;

/// One tape record: the main terms of two consecutive points of one component (16 bytes). The
/// reverse needs nothing else per pair: r_ik = exp(main_ik - lse_i) with lse_i from the forward.
using record = value_record<double, 2>;
inline constexpr std::size_t points_per_record = 2;

/// Values of one component's icf: d log-diagonal entries, then d(d-1)/2 strictly-lower ones.
TAPEFLOW_HOST_DEVICE constexpr std::size_t icf_size(std::size_t d) noexcept { return d * (d + 1) / 2; }

/// Position of L[j][l] (j > l) in an icf: after q, column l's entries l+1..d-1 in order.
TAPEFLOW_HOST_DEVICE constexpr std::size_t ltri_index(std::size_t d, std::size_t j, std::size_t l) noexcept
{
  return d + l * (2 * d - l - 1) / 2 + (j - l - 1);
}

/// out = Q x for Q = diag(exp(q)) + L, icf packed as ADBench packs it (O(d^2)).
TAPEFLOW_HOST_DEVICE inline void q_times(std::size_t d, double const* icf, double const* x, double* out) noexcept
{
  for (std::size_t j = 0; j < d; ++j) { out[j] = exp(icf[j]) * x[j]; }
  std::size_t idx = d;
  for (std::size_t l = 0; l < d; ++l) {
    for (std::size_t j = l + 1; j < d; ++j) { out[j] += icf[idx++] * x[l]; }
  }
}

/// main_ik from alpha_k, sum_j q_kj and |Q_k (x_i - mu_k)|^2.
TAPEFLOW_HOST_DEVICE inline double main_term(double alpha, double sum_q, double sqnorm) noexcept
{
  return alpha + sum_q - 0.5 * sqnorm;
}

/// r_ik: the softmax weight of pair (i,k) from its main term and lse_i.
TAPEFLOW_HOST_DEVICE inline double responsibility(double main, double lse) noexcept { return exp(main - lse); }

/// A running log-sum-exp: max and the sum of exp(v - max). Associative and commutative, so CUB
/// can reduce with it.
struct lse_pair {
  double max;
  double sum;
};

TAPEFLOW_HOST_DEVICE inline lse_pair lse_of(double v) noexcept { return {v, 1.0}; }

TAPEFLOW_HOST_DEVICE inline lse_pair lse_combine(lse_pair a, lse_pair b) noexcept
{
  double const m = a.max > b.max ? a.max : b.max;
  if (m == -INFINITY) { return {m, 0.0}; }
  return {m, a.sum * exp(a.max - m) + b.sum * exp(b.max - m)};
}

TAPEFLOW_HOST_DEVICE inline double lse_value(lse_pair p) noexcept { return p.max + log(p.sum); }

struct lse_op {
  TAPEFLOW_HOST_DEVICE lse_pair operator()(lse_pair a, lse_pair b) const noexcept { return lse_combine(a, b); }
};

/// prior_k's contribution of one log-diagonal entry q and of one strictly-lower entry L.
TAPEFLOW_HOST_DEVICE inline double prior_diag(double q, double gamma, double m) noexcept
{
  return 0.5 * gamma * gamma * exp(2 * q) - m * q;
}
TAPEFLOW_HOST_DEVICE inline double prior_ltri(double l, double gamma) noexcept { return 0.5 * gamma * gamma * l * l; }

// ---- the adjoint -------------------------------------------------------------------------------

/// d err / d alpha_k from R_k = sum_i r_ik.
TAPEFLOW_HOST_DEVICE inline double alpha_adjoint(double r_sum, double alpha, double lse_alpha, double n) noexcept
{
  return r_sum - n * exp(alpha - lse_alpha);
}

/// d err / d q_kj from R_k and M_k[j][j] (likelihood and prior).
TAPEFLOW_HOST_DEVICE inline double diag_adjoint(double r_sum, double q, double m_jj, double gamma, double m) noexcept
{
  double const e = exp(q);
  return r_sum - e * m_jj + gamma * gamma * e * e - m;
}

/// d err / d L_k[j][l] (j > l) from M_k[j][l] (likelihood and prior).
TAPEFLOW_HOST_DEVICE inline double ltri_adjoint(double m_jl, double l, double gamma) noexcept
{
  return -m_jl + gamma * gamma * l;
}

/// M_k[j][l] = sum_{m <= j} Q[j][m] S[m][l]: `q(j, m)` reads Q_k (lower, diagonal exp(q)),
/// `s(m, l)` reads the symmetric S_k.
template <class QAt, class SAt>
TAPEFLOW_HOST_DEVICE double qs_entry(std::size_t j, std::size_t l, QAt const& q, SAt const& s) noexcept
{
  double acc = 0;
  for (std::size_t m = 0; m <= j; ++m) { acc += q(j, m) * s(m, l); }
  return acc;
}

// ---- constants ---------------------------------------------------------------------------------

inline constexpr double pi = 3.14159265358979323846;

/// log of the multivariate gamma function Gamma_p(a).
inline double log_gamma_distrib(double a, std::size_t p)
{
  double out = 0.25 * static_cast<double>(p * (p - 1)) * std::log(pi);
  for (std::size_t j = 1; j <= p; ++j) { out += std::lgamma(a + 0.5 * (1.0 - static_cast<double>(j))); }
  return out;
}

/// The parts of err that do not depend on the parameters: C - K C_w.
inline double objective_constant(std::size_t d, std::size_t k, std::size_t n, double gamma, int m)
{
  double const c = -static_cast<double>(n) * static_cast<double>(d) * 0.5 * std::log(2 * pi);
  double const dof = static_cast<double>(d) + m + 1;
  double const cw = dof * static_cast<double>(d) * (std::log(gamma) - 0.5 * std::log(2.0)) -
                    log_gamma_distrib(0.5 * dof, d);
  return c - static_cast<double>(k) * cw;
}

}  // namespace tapeflow::workloads::gmm

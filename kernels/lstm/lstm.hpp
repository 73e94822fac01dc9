// SPDX-License-Identifier: Apache-2.0
// The LSTM workload: one layer, T steps over a batch of B sequences (of one length, or packed
// variable lengths), loss L = Σ h_T, gradient dL/d(W, U, b) through tapeflow's tape (the
// configuration of Futhark's AD evaluation: the matrix products on cuBLAS, the cells in
// tapeflow's kernels). See docs/workloads/lstm.md.
#pragma once

#include <tapeflow/workloads/common/run_options.hpp>
#include <tapeflow/workloads/common/session.hpp>

#include <tapeflow/backend.hpp>
#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/policy.hpp>
#include <tapeflow/stream.hpp>
#include <tapeflow/tiers.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

namespace tapeflow::workloads::lstm {

struct problem {
  std::size_t batch{0};   ///< B
  std::size_t steps{0};   ///< T
  std::size_t input{0};   ///< I
  std::size_t hidden{0};  ///< H
  /// Variable-length sequences, packed as PyTorch's pack_padded_sequence(enforce_sorted=True):
  /// sequence b runs lengths[b] steps, the lengths are non-increasing, the first is T, and every
  /// one is at least 1. Step t then advances only the first B_t sequences (those longer than t);
  /// the others keep their state, so the final state holds each sequence's state after its own
  /// last step. x stays T x B x I (the padding is never read). Empty: every sequence runs T steps.
  std::vector<std::size_t> lengths{};
};

/// B_t: the sequences step t advances (B when the problem has no lengths).
[[nodiscard]] std::size_t active_sequences(problem const& p, std::size_t t) noexcept;

/// The layer's parameters, row-major as in PyTorch's weight_ih_l0 / weight_hh_l0, gates i, f, g, o.
template <class T>
struct weights {
  std::vector<T> w;  ///< 4H x I
  std::vector<T> u;  ///< 4H x H
  std::vector<T> b;  ///< 4H
};

/// The inputs of one run: x_t for t = 0..T-1 (T x B x I, row-major: x[t][b][i]) and the initial
/// state (B x H each; empty means zeros).
template <class T>
struct sequence {
  std::vector<T> x;
  std::vector<T> h0;
  std::vector<T> c0;
};

/// How the chain runs (kernels/workload_common/run_options.hpp). capture_reverse is refused (logic_error):
/// the reverse runs cuBLAS, which tapeflow does not capture into a replayed program.
struct options : run_options {};

template <class T>
struct gradient_result {
  T loss{};                          ///< Σ h_T
  weights<T> gradient;               ///< dL/dW, dL/dU, dL/db, shaped like the weights
  chain_stats chain{};
  std::size_t peak_device_bytes{0};  ///< every tapeflow allocation on the backend, peak
  cpu::ring_stats staging{};         ///< CPU backend only
};

/// The final state of a run without a tape.
template <class T>
struct final_state {
  std::vector<T> h;  ///< B x H
  std::vector<T> c;  ///< B x H
};

/// The problem alone: throws logic_error unless every size is at least 1, the products fit the
/// matrix libraries' int dimensions, every buffer's bytes (in f64, the larger values) fit a
/// size_t, and the lengths (if any) are as `problem` says.
void validate(problem const& p);
/// Throws what validate(p) throws (the bytes in T), and logic_error unless the weights and the
/// sequence have the sizes the problem says.
template <class T>
void validate(problem const& p, weights<T> const& params, sequence<T> const& seq);

/// A session of this problem on `o.kind`: its inputs are W, U, b, x, h0 and c0 (h0 and c0 B x H
/// each), its gradients dL/dW, dL/dU and dL/db, its loss Σ h_T. Throws what validate() throws for
/// the problem, logic_error for capture_reverse, unavailable_error on HIP.
template <class T>
[[nodiscard]] std::unique_ptr<session<T>> open(problem const& p, options const& o);

/// L = Σ h_T (each sequence's h after its last step) and dL/d(W, U, b). The CUDA backend runs
/// the matrix products on cuBLAS in full fp32/fp64 (no TF32); there is no HIP path
/// (unavailable_error).
template <class T>
[[nodiscard]] gradient_result<T> gradient(problem const& p, weights<T> const& params, sequence<T> const& seq,
                                          options const& o);

/// What gradient() will do (policy, tape size, tiling) without running it.
template <class T>
[[nodiscard]] chain_stats plan(problem const& p, options const& o);

/// (h_T, c_T) without a tape.
template <class T>
[[nodiscard]] final_state<T> primal(problem const& p, weights<T> const& params, sequence<T> const& seq,
                                    options const& o);

/// L = Σ h, accumulated in double.
template <class T>
[[nodiscard]] T loss(std::vector<T> const& h);

/// Tape bytes of step t: B_t x H records (the first step's is the largest).
template <class T>
[[nodiscard]] std::size_t layer_bytes(problem const& p, std::size_t t = 0) noexcept;

}  // namespace tapeflow::workloads::lstm

// SPDX-License-Identifier: Apache-2.0
#include "lstm.hpp"
#include "backends.hpp"
#include "driver.hpp"
#include "math.hpp"

#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <limits>
#include <string>

namespace tapeflow::workloads::lstm {

namespace {

/// a * b, or a logic_error naming `what` when it does not fit a size_t.
std::size_t checked_product(std::size_t a, std::size_t b, char const* what)
{
  TAPEFLOW_EXPECTS(b == 0 || a <= std::numeric_limits<std::size_t>::max() / b,
                   std::string{what} + " overflows the address space");
  return a * b;
}

void expect_size(std::size_t got, std::size_t want, std::string const& what)
{
  TAPEFLOW_EXPECTS(got == want, what + " holds " + std::to_string(got) + " values; the problem needs " +
                                  std::to_string(want));
}

/// The sizes alone: every size at least 1, the cuBLAS dimensions (4H, T B, I, H) in an int, every
/// buffer's byte count in a size_t, and the lengths of packed sequences (lstm.hpp's `problem`).
void check_problem(problem const& p, std::size_t value_bytes)
{
  TAPEFLOW_EXPECTS(p.batch >= 1, "the batch size B must be at least 1");
  TAPEFLOW_EXPECTS(p.steps >= 1, "the number of steps T must be at least 1");
  TAPEFLOW_EXPECTS(p.input >= 1, "the input size I must be at least 1");
  TAPEFLOW_EXPECTS(p.hidden >= 1, "the hidden size H must be at least 1");
  std::size_t const int_max = static_cast<std::size_t>(INT_MAX);
  std::size_t const gates = checked_product(4, p.hidden, "4H");
  std::size_t const columns = checked_product(p.steps, p.batch, "T B");
  TAPEFLOW_EXPECTS(gates <= int_max && columns <= int_max && p.input <= int_max,
                   "4H, T B and I must each fit a 32-bit int (cuBLAS's dimensions)");
  std::size_t const cells = checked_product(p.batch, p.hidden, "B H");
  static_cast<void>(checked_product(checked_product(2, cells, "the state"), value_bytes, "the state's bytes"));
  static_cast<void>(checked_product(checked_product(gates, columns, "W X"), value_bytes, "W X's bytes"));
  static_cast<void>(checked_product(checked_product(columns, p.input, "x"), value_bytes, "x's bytes"));
  static_cast<void>(checked_product(checked_product(gates, p.input, "W"), value_bytes, "W's bytes"));
  static_cast<void>(checked_product(checked_product(gates, p.hidden, "U"), value_bytes, "U's bytes"));
  if (p.lengths.empty()) { return; }
  TAPEFLOW_EXPECTS(p.lengths.size() == p.batch, "lengths holds " + std::to_string(p.lengths.size()) +
                                                  " sequence lengths; the batch has B = " + std::to_string(p.batch));
  TAPEFLOW_EXPECTS(p.lengths.front() == p.steps, "the longest sequence (lengths[0] = " +
                                                   std::to_string(p.lengths.front()) + ") must run all T = " +
                                                   std::to_string(p.steps) + " steps");
  for (std::size_t b = 0; b < p.batch; ++b) {
    TAPEFLOW_EXPECTS(p.lengths[b] >= 1, "lengths[" + std::to_string(b) + "] is 0; every sequence runs at least 1 step");
    TAPEFLOW_EXPECTS(b == 0 || p.lengths[b] <= p.lengths[b - 1],
                     "lengths must be non-increasing (sorted longest first, as pack_padded_sequence's "
                     "enforce_sorted): lengths[" +
                       std::to_string(b) + "] = " + std::to_string(p.lengths[b]) + " follows " +
                       std::to_string(p.lengths[b - 1]));
  }
}

}  // namespace

std::size_t active_sequences(problem const& p, std::size_t t) noexcept
{
  if (p.lengths.empty()) { return p.batch; }
  // The lengths are non-increasing: the sequences longer than t are a prefix.
  return static_cast<std::size_t>(std::partition_point(p.lengths.begin(), p.lengths.end(),
                                                       [t](std::size_t length) { return length > t; }) -
                                  p.lengths.begin());
}

void validate(problem const& p) { check_problem(p, sizeof(double)); }

template <class T>
void validate(problem const& p, weights<T> const& params, sequence<T> const& seq)
{
  check_problem(p, sizeof(T));
  std::size_t const gates = 4 * p.hidden;
  std::size_t const cells = p.batch * p.hidden;
  expect_size(params.w.size(), gates * p.input, "W (4H x I)");
  expect_size(params.u.size(), gates * p.hidden, "U (4H x H)");
  expect_size(params.b.size(), gates, "b (4H)");
  expect_size(seq.x.size(), p.steps * p.batch * p.input, "x (T x B x I)");
  TAPEFLOW_EXPECTS(seq.h0.empty() || seq.h0.size() == cells,
                   "h0 holds " + std::to_string(seq.h0.size()) + " values; it must be empty or B x H = " +
                     std::to_string(cells));
  TAPEFLOW_EXPECTS(seq.c0.empty() || seq.c0.size() == cells,
                   "c0 holds " + std::to_string(seq.c0.size()) + " values; it must be empty or B x H = " +
                     std::to_string(cells));
}

template <class T>
std::unique_ptr<session<T>> open(problem const& p, options const& o)
{
  check_problem(p, sizeof(T));
  // The GPU path is CUDA only: its matrix products run on cuBLAS (no hipBLAS here).
  return on_backend<gpu_kernels::cuda_only>(
    o.kind, "the LSTM workload", [&] { return detail::open_cpu<T>(p, o); },
    [&](auto) { return detail::open_gpu<T>(p, o); });
}

namespace {
/// The session's six inputs; an empty h0 or c0 is zeros.
template <class T>
std::vector<std::vector<T>> zero_states(problem const& p, sequence<T> const& seq)
{
  std::size_t const cells = p.batch * p.hidden;
  return {seq.h0.empty() ? std::vector<T>(cells, T(0)) : std::vector<T>{},
          seq.c0.empty() ? std::vector<T>(cells, T(0)) : std::vector<T>{}};
}

template <class T>
std::vector<host_array<T>> inputs_of(weights<T> const& params, sequence<T> const& seq,
                                     std::vector<std::vector<T>> const& zeros)
{
  return {params.w, params.u, params.b, seq.x, seq.h0.empty() ? zeros[0] : seq.h0,
          seq.c0.empty() ? zeros[1] : seq.c0};
}
}  // namespace

template <class T>
gradient_result<T> gradient(problem const& p, weights<T> const& params, sequence<T> const& seq, options const& o)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::lstm::gradient");
  validate(p, params, seq);
  std::vector<std::vector<T>> const zeros = zero_states(p, seq);
  outcome<T> r = gradient_on_new_session<T>(p, inputs_of(params, seq, zeros), o);
  auto g = chain_result<gradient_result<T>>(r);
  g.gradient = {std::move(r.gradients[0]), std::move(r.gradients[1]), std::move(r.gradients[2])};
  return g;
}

template <class T>
chain_stats plan(problem const& p, options const& o)
{
  check_problem(p, sizeof(T));
  auto const planned = [&] {
    std::size_t const state_bytes = 2 * p.batch * p.hidden * sizeof(T);
    if (p.lengths.empty()) {
      return plan_chain(sizeof(record<T>), p.batch * p.hidden, p.steps, state_bytes, chain_options_of(o));
    }
    std::vector<std::size_t> records(p.steps);
    for (std::size_t t = 0; t < p.steps; ++t) { records[t] = active_sequences(p, t) * p.hidden; }
    return plan_chain(sizeof(record<T>), records, state_bytes, chain_options_of(o));
  };
  return on_backend<gpu_kernels::cuda_only>(o.kind, "the LSTM workload", planned, [&](auto) { return planned(); });
}

template <class T>
final_state<T> primal(problem const& p, weights<T> const& params, sequence<T> const& seq, options const& o)
{
  validate(p, params, seq);
  std::unique_ptr<session<T>> const run = open<T>(p, o);
  std::vector<std::vector<T>> const zeros = zero_states(p, seq);
  run->load(inputs_of(params, seq, zeros), o.stream);
  run->primal(o.stream);
  std::vector<std::vector<T>> hc = run->outputs(o.stream);
  return {std::move(hc[0]), std::move(hc[1])};
}

template <class T>
T loss(std::vector<T> const& h)
{
  return detail::sum_of(h.data(), h.size());
}

template <class T>
std::size_t layer_bytes(problem const& p, std::size_t t) noexcept
{
  return active_sequences(p, t) * p.hidden * sizeof(record<T>);
}

template std::unique_ptr<session<float>> open<float>(problem const&, options const&);
template std::unique_ptr<session<double>> open<double>(problem const&, options const&);
template void validate(problem const&, weights<float> const&, sequence<float> const&);
template void validate(problem const&, weights<double> const&, sequence<double> const&);
template gradient_result<float> gradient(problem const&, weights<float> const&, sequence<float> const&,
                                         options const&);
template gradient_result<double> gradient(problem const&, weights<double> const&, sequence<double> const&,
                                          options const&);
template final_state<float> primal(problem const&, weights<float> const&, sequence<float> const&, options const&);
template final_state<double> primal(problem const&, weights<double> const&, sequence<double> const&, options const&);
template chain_stats plan<float>(problem const&, options const&);
template chain_stats plan<double>(problem const&, options const&);
template float loss(std::vector<float> const&);
template double loss(std::vector<double> const&);
template std::size_t layer_bytes<float>(problem const&, std::size_t) noexcept;
template std::size_t layer_bytes<double>(problem const&, std::size_t) noexcept;

}  // namespace tapeflow::workloads::lstm

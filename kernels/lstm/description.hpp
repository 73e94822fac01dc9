// SPDX-License-Identifier: Apache-2.0
// The LSTM's description (kernels/common/describe.hpp): its CLI, benchmark suite and typed tests.
#pragma once

#include "lstm.hpp"

#include <tapeflow/workloads/common/describe.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tapeflow::workloads::lstm {

struct description {
  static constexpr workload_text text{
    "lstm", "a one-layer LSTM over a batch of sequences: dL/d(W, U, b) for L = sum(h_T)",
    "Computes L = sum(h_T) of a one-layer LSTM (gates i, f, g, o as in PyTorch) run for T steps\n"
    "over B sequences, and its gradient with respect to the weights W, U and the bias b.\n"
    "With --lengths the sequences are packed as PyTorch's pack_padded_sequence: sequence b runs\n"
    "its own L_b steps (non-increasing, L_0 = T), each step tapes only the sequences still running,\n"
    "and h_T is each sequence's h after its last step.",
    "  IN.bin   --dtype values: W (4H*I, row-major as PyTorch's weight_ih_l0), U (4H*H, as\n"
    "           weight_hh_l0), b (4H), x (T*B*I: x[t][b][i], padded to T steps), h0 (B*H), c0 (B*H)\n"
    "  G.bin    dL/dW (4H*I), dL/dU (4H*H), dL/db (4H), laid out as the weights"};
  static constexpr precision precisions = precision::f32_f64;
  static constexpr tape_kind tape = tape_kind::chain;
  static constexpr bool captures_reverse = false;  // its reverse runs cuBLAS (lstm_session)
  using problem = lstm::problem;
  using options = lstm::options;
  static constexpr std::size_t most = std::size_t{1} << 24;
  static constexpr auto fields = std::make_tuple(
    count("batch", &problem::batch, "B", "sequences in the batch", "B", flag_use::shape_required, 1, most),
    count("steps", &problem::steps, "T", "time steps", "T", flag_use::shape_required, 1, most),
    count("input-size", &problem::input, "I", "input features", "I", flag_use::shape_required, 1, most),
    count("hidden", &problem::hidden, "H", "hidden units", "H", flag_use::shape_required, 1, most),
    list("lengths", &problem::lengths, "L0,L1,...", "packed variable-length sequences: B lengths, longest (T) first"));

  static std::string sizes(problem const& p)
  {
    std::string sizes = "B = " + std::to_string(p.batch) + ", T = " + std::to_string(p.steps) +
                        ", I = " + std::to_string(p.input) + ", H = " + std::to_string(p.hidden);
    if (!p.lengths.empty()) {
      std::size_t steps = 0;
      for (std::size_t length : p.lengths) { steps += length; }
      sizes += ", packed: lengths " + std::to_string(p.lengths.front()) + " down to " + std::to_string(p.lengths.back()) +
               ", " + std::to_string(steps) + " sequence steps of " + std::to_string(p.batch * p.steps);
    }
    return sizes;
  }
  static void validate(problem const& p) { lstm::validate(p); }
  static std::string size_key(problem const& p, std::string const&)
  {
    return "B" + std::to_string(p.batch) + " T" + std::to_string(p.steps) + " I" + std::to_string(p.input) + " H" +
           std::to_string(p.hidden) + (p.lengths.empty() ? "" : " packed");
  }
  static std::vector<array_spec> inputs(problem const& p)
  {
    std::size_t const g = 4 * p.hidden;
    return {{"W", g * p.input},     {"U", g * p.hidden},          {"b", g},
            {"x", p.steps * p.batch * p.input}, {"h0", p.batch * p.hidden}, {"c0", p.batch * p.hidden}};
  }
  static std::vector<array_spec> gradients(problem const& p)
  {
    std::size_t const g = 4 * p.hidden;
    return {{"dL/dW", g * p.input}, {"dL/dU", g * p.hidden}, {"dL/db", g}};
  }
  /// Uniform in [-0.9, 0.9); the weights scaled by 0.6 to keep the gates away from saturation.
  template <class T>
  static std::vector<std::vector<T>> random_inputs(problem const& p, std::uint64_t seed)
  {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> dist(-0.9, 0.9);
    std::vector<std::vector<T>> parts;
    std::size_t index = 0;
    for (array_spec const& part : inputs(p)) {
      double const scale = index++ < 2 ? 0.6 : 1.0;
      std::vector<T> v(part.values);
      for (T& x : v) { x = static_cast<T>(scale * dist(rng)); }
      parts.push_back(std::move(v));
    }
    return parts;
  }
  template <class T>
  static auto open(problem const& p, options const& o) { return lstm::open<T>(p, o); }
  template <class T>
  static tape_report plan(problem const& p, options const& o) { return chain_report(lstm::plan<T>(p, o)); }
  /// The matrix products' throughput: the input projection (over the padded T x B inputs), then
  /// per step the recurrent GEMM, the three parameter/adjoint GEMMs and the bias GEMV over the B_t
  /// sequences it advances (the cells are not counted).
  static void bench_facts(problem const& p, tape_report const&, cli::json_object& row)
  {
    double const G = 4.0 * static_cast<double>(p.hidden);
    double const I = static_cast<double>(p.input);
    double const H = static_cast<double>(p.hidden);
    double steps = 0;  // Σ_t B_t
    for (std::size_t t = 0; t < p.steps; ++t) { steps += static_cast<double>(active_sequences(p, t)); }
    double const flops = 2 * G * static_cast<double>(p.steps * p.batch) * I +
                         steps * (2 * G * H + 2 * I * G + 2 * H * G + 2 * H * G + 2 * G);
    row.add("math", "cuBLAS CUBLAS_DEFAULT_MATH (no TF32)").add("gradient_gflop", flops / 1e9);
  }
  static std::vector<bench_suite<description>> bench_suites()
  {
    return {{"lstm", 60, "LSTM (B1024 T20 I300 H192; B1024 T300 I80 H256, also packed): cuBLAS + tapeflow tape",
             [](bench_sizes const& s, std::string const&) {
               std::vector<problem> sizes{{1024, 20, 300, 192}, {1024, 300, 80, 256}};
               if (s.overrides({"lstm.B", "lstm.T", "lstm.I", "lstm.H"})) {
                 sizes = {{s.size("lstm.B", 1024, 64), s.size("lstm.T", 20, 5), s.size("lstm.I", 300, 16),
                           s.size("lstm.H", 192, 32)}};
               } else if (s.quick()) {
                 sizes = {{64, 5, 16, 32}};
               }
               problem packed = sizes.back();
               // L_b = T - floor(b floor(3T/4) / B): from T down to about T/4 (bench/peers/lstm_sizes.py).
               for (std::size_t b = 0; b < packed.batch; ++b) {
                 packed.lengths.push_back(packed.steps - (b * (3 * packed.steps / 4)) / packed.batch);
               }
               sizes.push_back(packed);
               std::vector<bench_case<description>> cases;
               for (problem const& p : sizes) {
                 cases.push_back({"tapeflow", p});
                 cases.back().options.policy = tape_policy::store;
               }
               return cases;
             }}};
  }
  static problem test_problem() { return {5, 6, 4, 3, {6, 6, 4, 2, 1}}; }
};

}  // namespace tapeflow::workloads::lstm

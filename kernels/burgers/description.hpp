// SPDX-License-Identifier: Apache-2.0
// Burgers' description (kernels/common/describe.hpp): its CLI and typed tests (no GPU benchmark:
// the workload runs on the CPU backend).
#pragma once

#include "burgers.hpp"

#include <tapeflow/workloads/common/describe.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tapeflow::workloads::burgers {

struct description {
  static constexpr workload_text text{
    "burgers", "viscous Burgers on a periodic line, a stencil read through halos: dL/du0 (CPU backend)",
    "Computes L = 0.5 * sum(u_T^2) after T steps of\n"
    "  u'_j = u_j - a u_j (u_{j+1} - u_{j-1}) + b (u_{j+1} - 2 u_j + u_{j-1})   (periodic, n cells)\n"
    "and its gradient dL/du0. Each value is taped once; the reverse reads its neighbours' records\n"
    "through a halo of one record on each side of every tile.",
    "  IN.bin   u0: n values of --dtype\n"
    "  G.bin    dL/du0: n values"};
  static constexpr precision precisions = precision::f32_f64;
  static constexpr tape_kind tape = tape_kind::chain;
  static constexpr bool gpu = false;  // its reverse reads a halo, which the device pipelines do not stage yet
  using problem = burgers::problem;
  using options = burgers::options;
  static constexpr auto fields = std::make_tuple(
    count("n", &problem::n, "N", "cells", "n", flag_use::shape_required, 1, std::size_t{1} << 34),
    count("steps", &problem::steps, "T", "time steps", "T", flag_use::required, 1, std::size_t{1} << 32),
    real("a", &problem::a, "A", "advection number dt / (2 dx) (default 0.1)", "a"),
    real("b", &problem::b, "B", "diffusion number nu dt / dx^2, at most 0.5 (default 0.2)", "b"));

  static std::string size_key(problem const& p, std::string const& dtype) { return "n" + std::to_string(p.n) + " T" + std::to_string(p.steps) + " " + dtype; }
  static std::vector<array_spec> inputs(problem const& p) { return {{"u0", p.n}}; }
  static std::vector<array_spec> gradients(problem const& p) { return {{"dL/du0", p.n}}; }
  template <class T>
  static std::vector<std::vector<T>> random_inputs(problem const& p, std::uint64_t seed)
  {
    return {random_state<T>(p, seed)};
  }
  template <class T>
  static auto open(problem const& p, options const& o) { return burgers::open<T>(p, o); }
  template <class T>
  static tape_report plan(problem const& p, options const& o) { return chain_report(burgers::plan<T>(p, o)); }
  static problem test_problem() { return {61, 9}; }
};

}  // namespace tapeflow::workloads::burgers

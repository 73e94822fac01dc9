// SPDX-License-Identifier: Apache-2.0
// Burgers' description (kernels/common/describe.hpp): its CLI, benchmark suite and typed tests.
#pragma once

#include "burgers.hpp"
#include "stencil.hpp"

#include <tapeflow/workloads/common/describe.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tapeflow::workloads::burgers {

struct description : stencil_description {
  static constexpr workload_text text{
    "burgers", "viscous Burgers on a periodic line, a stencil read through halos: dL/du0",
    "Computes L = 0.5 * sum(u_T^2) after T steps of\n"
    "  u'_j = u_j - a u_j (u_{j+1} - u_{j-1}) + b (u_{j+1} - 2 u_j + u_{j-1})   (periodic, n cells)\n"
    "and its gradient dL/du0. Each value is taped once; the reverse reads its neighbours' values\n"
    "through a halo. --segment K keeps every K-th state and recomputes each segment on chip.",
    "  IN.bin   u0: n values of --dtype\n"
    "  G.bin    dL/du0: n values"};
  static constexpr precision precisions = precision::f32_f64;
  static constexpr tape_kind tape = tape_kind::chain;
  // Under mpirun, the line is cut into segments of cells over the ranks (docs/distributed.md).
  using problem = burgers::problem;
  using options = burgers::options;
  static void read_options(cli::parsed_args const& args, options& o) { read_segment_options(args, o, 1); }
  static constexpr auto fields = std::make_tuple(
    count("n", &problem::n, "N", "cells", "n", flag_use::shape_required, 1, std::size_t{1} << 34),
    count("steps", &problem::steps, "T", "time steps", "T", flag_use::required, 1, std::size_t{1} << 32),
    real("a", &problem::a, "A", "advection number dt / (2 dx) (default 0.1)", "a"),
    real("b", &problem::b, "B", "diffusion number nu dt / dx^2, at most 0.5 (default 0.2)", "b"));

  static void validate(problem const& p) { burgers::validate(p); }
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
  static tape_report plan(problem const& p, options const& o)
  {
    tape_report r = chain_report(burgers::plan<T>(p, o));
    if (on_stencil_library(o)) { report_segments(r, segment_plan_of<T>(p, o)); }
    return r;
  }
  /// The least traffic of its gradient (stencil_bench_bytes).
  static double bench_bytes(problem const& p, tape_report const& r, std::size_t value_bytes)
  {
    return stencil_bench_bytes(r, static_cast<double>(p.n * value_bytes), p.steps);
  }
  static std::vector<bench_suite<description>> bench_suites();
  static problem test_problem() { return {61, 9}; }
};

inline std::vector<bench_suite<description>> description::bench_suites()
{
  using case_t = bench_case<description>;
  return {
    {"burgers", 12, "Burgers 2^26 cells T100: primal vs gradient, one step per layer and in segments",
     [](bench_sizes const& s, std::string const&) {
       problem const p{s.size("burgers.n", std::size_t{1} << 26, std::size_t{1} << 20), s.size("burgers.steps", 100, 20)};
       options store;
       store.policy = tape_policy::store;
       std::vector<case_t> cases{{"tapeflow-store", p, store}};
       add_segment_cases(cases, p, store, {0, 4, 8});
       return cases;
     }},
  };
}

}  // namespace tapeflow::workloads::burgers

// SPDX-License-Identifier: Apache-2.0
// LBM's description (kernels/common/describe.hpp): its CLI, benchmark suite and typed tests.
#pragma once

#include "lbm.hpp"
#include "stencil.hpp"

#include <tapeflow/workloads/common/describe.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tapeflow::workloads::lbm {

struct description : stencil_description {
  static constexpr workload_text text{
    "lbm", "LBM D2Q9 (BGK collision and streaming) on a periodic lattice: dL/df0 for L = 0.5 * sum(f_T^2)",
    "Computes L = 0.5 * sum(f_T^2) after T steps of D2Q9 BGK collision (omega = 1/tau) and\n"
    "streaming on a periodic nx x ny lattice, and its gradient dL/df0 through the tape. One step\n"
    "per layer tapes the cells' velocities; --segment K keeps every K-th state and recomputes each\n"
    "segment on chip.",
    "  IN.bin   f0: 9 planes of nx*ny values of --dtype; plane i holds f_i, cell (x, y) at y*nx + x;\n"
    "           directions 0 (rest), 1..4 (+x, +y, -x, -y), 5..8 (+x+y, -x+y, -x-y, +x-y)\n"
    "  G.bin    dL/df0: the same layout"};
  static constexpr precision precisions = precision::f32_f64;
  static constexpr tape_kind tape = tape_kind::chain;
  // Under mpirun, the lattice is cut into slabs of rows over the ranks (docs/distributed.md).
  using problem = lbm::problem;
  using options = lbm::options;
  static constexpr auto fields = std::make_tuple(
    count("nx", &problem::nx, "NX", "lattice width", "nx", flag_use::shape_required, 1, 1U << 20),
    count("ny", &problem::ny, "NY", "lattice height", "ny", flag_use::shape_required, 1, 1U << 20),
    count("steps", &problem::steps, "T", "time steps", "T", flag_use::required, 1, std::size_t{1} << 32),
    real("tau", &problem::tau, "TAU", "BGK relaxation time, above 0.5 (default 0.8)", "tau"));

  static void validate(problem const& p) { lbm::validate(p); }
  static std::string size_key(problem const& p, std::string const& dtype)
  {
    return std::to_string(p.nx) + "x" + std::to_string(p.ny) + " T" + std::to_string(p.steps) + " " + dtype;
  }
  static std::vector<array_spec> inputs(problem const& p) { return {{"f0", p.values()}}; }
  static std::vector<array_spec> gradients(problem const& p) { return {{"dL/df0", p.values()}}; }
  template <class T>
  static std::vector<std::vector<T>> random_inputs(problem const& p, std::uint64_t seed)
  {
    return {random_state<T>(p, seed)};
  }
  template <class T>
  static auto open(problem const& p, options const& o) { return lbm::open<T>(p, o); }
  template <class T>
  static tape_report plan(problem const& p, options const& o)
  {
    tape_report r = chain_report(lbm::plan<T>(p, o));
    if (auto const segments = segments_of<T>(p, o)) { report_segments(r, *segments); }
    return r;
  }

  /// The least traffic of a taped gradient (stencil_bench_bytes). One step per layer: the forward
  /// reads f and writes f_next and the layer; the reverse reads the layer and g_next and writes
  /// g_f. The layer is the cells' velocities (8 B per cell in f32, 16 in f64), so per cell and step
  /// f32 moves 36 + 36 + 8 + 8 + 36 + 36 = 160 B against the primal's 72. In segments, what their
  /// plan counts. The seed copy is not counted.
  static double bench_bytes(problem const& p, tape_report const& r, std::size_t value_bytes)
  {
    return stencil_bench_bytes(r, static_cast<double>(p.values() * value_bytes), p.steps);
  }
  static std::vector<bench_suite<description>> bench_suites()
  {
    return {{"lbm", 40, "LBM D2Q9 1024² T100: primal vs gradient, store and recompute (25 % budget)",
             [](bench_sizes const& s, std::string const& dtype) {
               problem const p{s.size("lbm.nx", 1024, 128), s.size("lbm.ny", 1024, 128), s.size("lbm.steps", 100, 10)};
               std::vector<bench_case<description>> cases(2, {"tapeflow-store", p});
               cases[0].options.policy = tape_policy::store;
               // A quarter of the tape: Revolve keeps as many state snapshots as fit beside one layer.
               cases[1].variant = "tapeflow-recompute";
               cases[1].options.policy = tape_policy::recompute;
               cases[1].options.budget_bytes =
                 with_precision(dtype, [&](auto t) { return lbm::plan<decltype(t)>(p, cases[0].options).tape_bytes; }) /
                 4;
               cases[1].may_not_fit = true;
               // Segments (docs/stencils.md): every k-th state kept, each segment recomputed on chip.
               add_segment_cases(cases, p, cases[0].options, {0, 2, 4});
               return cases;
             }}};
  }
  static problem test_problem() { return {12, 9, 24}; }
};

}  // namespace tapeflow::workloads::lbm

// SPDX-License-Identifier: Apache-2.0
// The wave workload's description (kernels/common/describe.hpp): its CLI, benchmark suite and typed
// tests.
#pragma once

#include "segments.hpp"
#include "wave.hpp"

#include <tapeflow/workloads/common/describe.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace tapeflow::workloads::wave {

struct description : stencil_description {
  static constexpr workload_text text{
    "wave", "the acoustic wave equation in 2-D or 3-D: dL/dm of the receivers' misfit (full-waveform inversion)",
    "Computes the misfit L = 0.5 sum_t sum_r (u_t(x_r) - d_{t,r})^2 of the acoustic wave equation\n"
    "m (u_{t+1} - 2 u_t + u_{t-1}) / dt^2 = lap(u_t) + q_t (zero outside the grid, from rest, a Ricker\n"
    "source q at the centre, receivers along x on the row y = 1 of the middle z-plane) against\n"
    "observed traces d, and its gradient dL/dm with respect to the squared slowness m of every cell.",
    "  IN.bin   --dtype values: m (nx*ny*nz, x fastest), then d (T*nx: the traces, step-major)\n"
    "  G.bin    dL/dm: nx*ny*nz values, laid out as m"};
  static constexpr precision precisions = precision::f32_f64;
  static constexpr tape_kind tape = tape_kind::chain;
  using problem = wave::problem;
  using options = wave::options;
  static constexpr auto fields = std::make_tuple(
    count("nx", &problem::nx, "NX", "grid width (receivers: one per x)", "nx", flag_use::shape_required, 2, 1U << 24),
    count("ny", &problem::ny, "NY", "grid height", "ny", flag_use::shape_required, 2, 1U << 24),
    count("nz", &problem::nz, "NZ", "grid depth, 1 for 2-D (default 1)", "nz", flag_use::shape, 1, 1U << 24),
    count("steps", &problem::steps, "T", "time steps (the traces' length)", "T", flag_use::shape_required, 1,
          std::size_t{1} << 32),
    real("dt", &problem::dt, "DT", "time step (default 0.2)", "dt"),
    real("h", &problem::h, "H", "grid spacing (default 1)", "h"),
    real("peak-frequency", &problem::peak_frequency, "F", "the Ricker source's peak frequency (default 0.1)", "f"));

  static void validate(problem const& p) { wave::validate(p); }
  static std::string size_key(problem const& p, std::string const& dtype)
  {
    std::string const grid = std::to_string(p.nx) + "x" + std::to_string(p.ny) + (p.nz > 1 ? "x" + std::to_string(p.nz) : "");
    return grid + " T" + std::to_string(p.steps) + " " + dtype;
  }
  static std::vector<array_spec> inputs(problem const& p)
  {
    return {{"m", p.cells()}, {"d", p.steps * p.receivers()}};
  }
  static std::vector<array_spec> gradients(problem const& p) { return {{"dL/dm", p.cells()}}; }
  /// A smooth random model (random_model) and traces uniform in [-0.05, 0.05].
  template <class T>
  static std::vector<std::vector<T>> random_inputs(problem const& p, std::uint64_t seed)
  {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> trace(-0.05, 0.05);
    std::vector<T> d(p.steps * p.receivers());
    for (T& v : d) { v = static_cast<T>(trace(rng)); }
    return {random_model<T>(p, seed), std::move(d)};
  }
  template <class T>
  static auto open(problem const& p, options const& o) { return wave::open<T>(p, o); }
  template <class T>
  static tape_report plan(problem const& p, options const& o)
  {
    tape_report r = chain_report(wave::plan<T>(p, o));
    if (auto const segments = segments_of<T>(p, o)) { report_segments(r, *segments); }
    return r;
  }

  /// The least traffic of a gradient: the one-step chain's (one_step_states_per_step), or in
  /// segments what their plan counts (states of two values per cell, halos and m included).
  static double bench_bytes(problem const& p, tape_report const& r, std::size_t value_bytes)
  {
    double const field = static_cast<double>(p.cells() * value_bytes);
    return states_moved_per_step(r).value_or(one_step_states_per_step) * 2.0 * field * static_cast<double>(p.steps);
  }
  static std::vector<bench_suite<description>> bench_suites()
  {
    return {{"wave", 80, "acoustic wave 4096² T100 (2-D) and 256³ T100 (3-D): primal vs the FWI gradient, store",
             [](bench_sizes const& s, std::string const&) {
               problem flat;
               flat.nx = flat.ny = s.size("wave.n", 4096, 256);
               flat.steps = s.size("wave.steps", 100, 20);
               problem cube;
               cube.nx = cube.ny = cube.nz = s.size("wave.n3", 256, 32);
               cube.steps = flat.steps;
               std::vector<bench_case<description>> cases{{"tapeflow-store", flat}, {"tapeflow-store", cube}};
               for (auto& c : cases) { c.options.policy = tape_policy::store; }
               options const store = cases[0].options;
               add_segment_cases(cases, flat, store, {0, 2, 4});
               add_segment_cases(cases, cube, store, {0});
               return cases;
             }}};
  }
  static problem test_problem()
  {
    problem p;
    p.nx = 9;
    p.ny = 7;
    p.nz = 5;
    p.steps = 12;
    p.peak_frequency = 0.5;  // the wavelet peaks at t = 2, within the 12 steps
    return p;
  }
};

}  // namespace tapeflow::workloads::wave

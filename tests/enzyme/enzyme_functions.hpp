// SPDX-License-Identifier: Apache-2.0
// Functions whose derivatives real Enzyme generates (enzyme_functions.cpp is compiled through
// clang + Enzyme + tapeflow's cache pass); the tests around them are compiled as usual.
#pragma once

#include <tapeflow/workloads/enzyme_example/math.hpp>
#include <tapeflow/workloads/allen_cahn/math.hpp>
#include <tapeflow/enzyme_cache.hpp>

#include <cstddef>

namespace tapeflow::testing::enzyme_functions {

namespace ex = workloads::enzyme_example;
namespace ac = workloads::allen_cahn;

/// Bytes of Enzyme's tape for the example's `iterate` (x active, params constant): its trip count,
/// `a` and two cache pointers. Too small fails the build (enzyme_abi.hpp).
inline constexpr std::size_t example_tape_bytes = 32;

/// Enzyme's augmented forward of the example's iterate(x, p): y; its tape into `tape`, its loop
/// caches into `cache`.
double example_augmented(double x, ex::params const& p, void* tape, enzyme::cache_cursor& cache);
/// Enzyme's reverse: dL/dx from dL/dy.
double example_reverse(double x, ex::params const& p, void const* tape, double dy);

/// Bytes of Enzyme's tape for Allen–Cahn's step_cell (five values active, coefficients constant).
inline constexpr std::size_t cell_tape_bytes = 16;

/// Adjoints of step_cell's five inputs.
struct cell_adjoint {
  double c, up, down, left, right;
};
double cell_augmented(double const (&u)[5], ac::coefficients<double> const& k, void* tape,
                      enzyme::cache_cursor& cache);
cell_adjoint cell_reverse(double const (&u)[5], ac::coefficients<double> const& k, void const* tape, double dy);

}  // namespace tapeflow::testing::enzyme_functions

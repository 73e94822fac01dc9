// SPDX-License-Identifier: Apache-2.0
// Compiled through Enzyme (cmake/TapeflowEnzyme.cmake): clang -O2 to LLVM IR, opt with Enzyme's
// pass and tapeflow's cache pass, clang to an object. Everything below that says
// augmented_forward/reverse becomes Enzyme-generated code.
#include "enzyme_functions.hpp"

#include <tapeflow/enzyme_abi.hpp>

namespace tapeflow::testing::enzyme_functions {
namespace {

// The functions Enzyme differentiates take aggregates by pointer (enzyme_abi.hpp).
double iterate(double x, ex::params const* p) { return ex::iterate(x, *p); }

double cell(double c, double up, double down, double left, double right, ac::coefficients<double> const* k)
{
  return ac::step_cell(c, up, down, left, right, *k);
}

}  // namespace

double example_augmented(double x, ex::params const& p, void* tape, enzyme::cache_cursor& cache)
{
  return enzyme::augmented_forward<example_tape_bytes, double>(iterate, tape, cache, enzyme::active{x},
                                                               enzyme::constant{&p});
}

double example_reverse(double x, ex::params const& p, void const* tape, double dy)
{
  return enzyme::reverse<example_tape_bytes, double>(iterate, tape, enzyme::active{x}, enzyme::constant{&p},
                                                     enzyme::d_return{dy});
}

double cell_augmented(double const (&u)[5], ac::coefficients<double> const& k, void* tape,
                      enzyme::cache_cursor& cache)
{
  return enzyme::augmented_forward<cell_tape_bytes, double>(cell, tape, cache, enzyme::active{u[0]},
                                                            enzyme::active{u[1]}, enzyme::active{u[2]},
                                                            enzyme::active{u[3]}, enzyme::active{u[4]},
                                                            enzyme::constant{&k});
}

cell_adjoint cell_reverse(double const (&u)[5], ac::coefficients<double> const& k, void const* tape, double dy)
{
  return enzyme::reverse<cell_tape_bytes, cell_adjoint>(cell, tape, enzyme::active{u[0]}, enzyme::active{u[1]},
                                                        enzyme::active{u[2]}, enzyme::active{u[3]},
                                                        enzyme::active{u[4]}, enzyme::constant{&k},
                                                        enzyme::d_return{dy});
}

}  // namespace tapeflow::testing::enzyme_functions

// SPDX-License-Identifier: Apache-2.0
// Compiled through Enzyme (tapeflow_enzyme_object): the calls below become Enzyme's split-mode
// augmented forward and reverse of iterate.
#include "iterate.hpp"

#include <tapeflow/enzyme_abi.hpp>

#include <cmath>

namespace enzyme = tapeflow::enzyme;

namespace {
double iterate(double x, int const* n)  // aggregates and counts by pointer (docs/enzyme.md)
{
  double v = x;
  for (int i = 0; i < *n; ++i) { v = std::sin(v) + 0.5 * v; }
  return v;
}
}  // namespace

double iterate_augmented(double x, int n, void* tape, enzyme::cache_cursor& cache)
{
  return enzyme::augmented_forward<iterate_tape_bytes, double>(iterate, tape, cache, enzyme::active{x},
                                                               enzyme::constant{&n});
}

double iterate_reverse(double x, int n, void const* tape, double dy)
{
  return enzyme::reverse<iterate_tape_bytes, double>(iterate, tape, enzyme::active{x}, enzyme::constant{&n},
                                                     enzyme::d_return{dy});
}

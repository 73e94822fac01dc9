// SPDX-License-Identifier: Apache-2.0
// v <- sin(v) + v / 2, n times: a loop of run-time trip count, whose values Enzyme's augmented
// forward caches (in tapeflow's cache pool) for its reverse.
#pragma once

#include <tapeflow/enzyme_cache.hpp>

#include <cstddef>

/// Bytes of Enzyme's tape for iterate: at least what Enzyme needs (a smaller size stops the build
/// in Enzyme's pass, naming the bytes it needs).
inline constexpr std::size_t iterate_tape_bytes = 64;

/// iterate(x, n), writing Enzyme's tape into `tape` and its loop caches into `cache`'s region.
double iterate_augmented(double x, int n, void* tape, tapeflow::enzyme::cache_cursor& cache);
/// d iterate(x, n) / dx times `dy`, from the tape iterate_augmented wrote.
double iterate_reverse(double x, int n, void const* tape, double dy);

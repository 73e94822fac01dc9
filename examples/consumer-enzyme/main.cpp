// SPDX-License-Identifier: Apache-2.0
// Runs Enzyme's augmented forward and reverse of iterate (iterate.cpp) with its loop caches in a
// tapeflow cache pool on the CPU backend, and checks the derivative against the chain rule by hand.
#include "iterate.hpp"

#include <tapeflow/backend.hpp>
#include <tapeflow/enzyme.hpp>

#include <cmath>
#include <cstdio>

int main()
{
  double const x = 0.7;
  int const n = 12;
  // One layer of one slot: a region of 4 KiB for the loop's caches (check() names the bytes a
  // region needs when they do not fit).
  tapeflow::enzyme::cache_pool pool(tapeflow::backend::cpu, 1, 1, 4096);
  tapeflow::enzyme::cache_cursor cache = pool.view(0).cursor(0);
  alignas(16) unsigned char tape[iterate_tape_bytes];
  double const y = iterate_augmented(x, n, tape, cache);
  pool.check();
  double const dx = iterate_reverse(x, n, tape, 1.0);

  double v = x;
  double exact = 1.0;  // the product of each step's derivative, cos(v) + 1/2
  for (int i = 0; i < n; ++i) {
    exact *= std::cos(v) + 0.5;
    v = std::sin(v) + 0.5 * v;
  }
  double const error = std::fabs(dx - exact) / std::fabs(exact);
  std::printf("iterate(%g, %d) = %.15g; Enzyme's derivative %.15g, the chain rule's %.15g (relative difference "
              "%.1e); Enzyme cached %zu bytes in tapeflow's pool\n",
              x, n, y, dx, exact, error, cache.used());
  return std::fabs(y - v) <= 1e-15 * std::fabs(v) && error <= 1e-13 && cache.used() > 0 ? 0 : 1;
}

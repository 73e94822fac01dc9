// SPDX-License-Identifier: Apache-2.0
// The fuzz targets' invariant check: a violated one names itself and aborts, which libFuzzer
// reports as a crash with the input that caused it.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace tapeflow::fuzz {

inline void require(bool ok, char const* what)
{
  if (!ok) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

}  // namespace tapeflow::fuzz

// SPDX-License-Identifier: Apache-2.0
// The stencil segments' tests (segment_tests.hpp) on the CPU backend: the tile program run by one
// thread per tile (tapeflow/stencil/cpu.hpp).
#include <tapeflow/stencil/cpu.hpp>

namespace tapeflow::testing {
template <class S>
auto make_segments(S const& s, stencil::grid<typename S::value_type> const& g, stencil::segment_plan const& plan,
                   stencil::coefficient_view<typename S::value_type> c = {})
{
  return stencil::make_cpu_segments(s, g, plan, nullptr, c);
}
}  // namespace tapeflow::testing

#include "segment_tests.hpp"

// SPDX-License-Identifier: Apache-2.0
// The stencil segments' tests (segment_tests.hpp) on this build's GPU, or the emulated device: the
// tile program run by a block per tile in shared memory (tapeflow/stencil/device.cuh). Skipped,
// with the reason, where no device is present.
#include <tapeflow/stencil/device.cuh>

namespace tapeflow::testing {
template <class S>
auto make_segments(S const& s, stencil::grid<typename S::value_type> const& g, stencil::segment_plan const& plan,
                   stencil::coefficient_view<typename S::value_type> c = {})
{
  return stencil::make_device_segments(s, g, plan, nullptr, c);
}
}  // namespace tapeflow::testing

#include "segment_tests.hpp"

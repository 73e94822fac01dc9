// SPDX-License-Identifier: Apache-2.0
// The Step of a slab of a stencil's grid on the backend under test (target.hpp): the CPU runner in
// the host tests, the device runner in the GPU tests and their emulated twins
// (tapeflow/stencil/slab.hpp). Shared by the segment tests and the distributed tests.
#pragma once

#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/stencil.hpp>
#if defined(TAPEFLOW_TEST_ON_GPU)
#include <tapeflow/stencil/device.cuh>
#else
#include <tapeflow/stencil/cpu.hpp>
#endif

#include <memory>
#include <utility>

namespace tapeflow::testing {

/// The Step of this rank's slab of `whole`, cut over the ranks of `comm` (null: the whole grid in
/// one process), in `plan`'s segments, reading the coefficients `c` (the slab's) where S has them.
template <class S>
auto make_slab_segments(S const& s, stencil::grid<typename S::value_type> const& whole,
                        stencil::segment_plan const& plan, std::shared_ptr<distributed::communicator> comm,
                        stencil::coefficient_view<typename S::value_type> c = {})
{
#if defined(TAPEFLOW_TEST_ON_GPU)
  return stencil::make_device_segments(s, whole, plan, std::move(comm), c);
#else
  return stencil::make_cpu_segments(s, whole, plan, std::move(comm), c);
#endif
}

}  // namespace tapeflow::testing

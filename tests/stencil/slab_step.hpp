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

/// The Step of this rank's slab of `whole`, cut over the ranks of `comm`, in `plan`'s segments.
template <class S>
auto make_slab_segments(S const& s, stencil::grid<typename S::value_type> const& whole,
                        stencil::segment_plan const& plan, std::shared_ptr<distributed::communicator> comm)
{
#if defined(TAPEFLOW_TEST_ON_GPU)
  return stencil::make_device_segments(s, whole, plan, std::move(comm));
#else
  return stencil::make_cpu_segments(s, whole, plan, std::move(comm));
#endif
}

}  // namespace tapeflow::testing

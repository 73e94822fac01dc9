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
#include <string>
#include <utility>
#include <vector>

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

/// A communicator that forwards to `inner`, says whether it exchanges device memory as told, and
/// keeps the buffers of every exchange it was asked for: which route a device runner took.
class recording_ranks final : public distributed::communicator {
 public:
  recording_ranks(std::shared_ptr<distributed::communicator> inner, bool device_memory)
    : inner_(std::move(inner)), device_memory_(device_memory)
  {
  }

  std::vector<void const*> sent;  ///< the data of every send, in order
  std::vector<void*> received;    ///< the data of every receive, in order

  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  void allgather(void const* send, void* receive, std::size_t bytes) override { inner_->allgather(send, receive, bytes); }
  distributed::exchange_ticket start_exchange(std::vector<distributed::outgoing> const& sends,
                                              std::vector<distributed::incoming> const& receives) override
  {
    for (distributed::outgoing const& out : sends) { sent.push_back(out.data); }
    for (distributed::incoming const& in : receives) { received.push_back(in.data); }
    return inner_->start_exchange(sends, receives);
  }
  void finish_exchange(distributed::exchange_ticket ticket) override { inner_->finish_exchange(ticket); }
  void announce_failure(std::string const& what) noexcept override { inner_->announce_failure(what); }
  bool exchanges_device_memory() const noexcept override { return device_memory_; }

 private:
  std::shared_ptr<distributed::communicator> inner_;
  bool device_memory_;
};

}  // namespace tapeflow::testing

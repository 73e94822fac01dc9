// SPDX-License-Identifier: Apache-2.0
// tapeflow's communicator over NCCL for device memory (library tapeflow::nccl, built with
// TAPEFLOW_NCCL=ON, which needs the CUDA backend, TAPEFLOW_MPI and NCCL; docs/distributed.md).
// Exchanges go device to device through NCCL's send and receive, on a stream of the
// communicator's own, so that a device runner's interior kernel runs while they travel; what the
// ranks agree on (allgather) and failure announcements go through the MPI communicator it is
// made from. Every rank needs a GPU of its own: NCCL refuses two ranks on one device.
#pragma once

#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/distributed/mpi.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tapeflow::distributed {

class nccl_communicator final : public communicator {
 public:
  /// Collective over `ranks`: an NCCL communicator of the same ranks on the current CUDA device
  /// (rank 0 makes its id and every rank receives it through `ranks`). Throws distributed_error
  /// when NCCL fails (two ranks on one device among its reasons), platform_error when CUDA does.
  explicit nccl_communicator(std::shared_ptr<mpi_communicator> ranks);
  /// Aborts exchanges never finished, then frees the NCCL communicator and its stream.
  ~nccl_communicator() override;
  nccl_communicator(nccl_communicator const&) = delete;
  nccl_communicator& operator=(nccl_communicator const&) = delete;

  [[nodiscard]] int rank() const noexcept override { return ranks_->rank(); }
  [[nodiscard]] int size() const noexcept override { return ranks_->size(); }
  /// Through the MPI communicator, in host memory.
  void allgather(void const* send, void* receive, std::size_t bytes) override;
  /// Device memory only: enqueues NCCL's receives and sends on this communicator's stream and
  /// returns. NCCL matches the messages between two ranks by their order, not by a tag: each
  /// side's messages to a peer are issued in the order of their tags (stable for equal tags), so
  /// both sides must name the same tags, as ghost exchanges do. Throws logic_error for a peer out
  /// of range or a tag past 32766, distributed_error when NCCL fails.
  [[nodiscard]] exchange_ticket start_exchange(std::vector<outgoing> const& sends,
                                               std::vector<incoming> const& receives) override;
  /// Waits for the exchange's messages, polling: NCCL's asynchronous errors, a failure announced
  /// by any rank and the MPI communicator's timeout each end it in distributed_error (NCCL's
  /// communicator is aborted first).
  void finish_exchange(exchange_ticket ticket) override;
  void announce_failure(std::string const& what) noexcept override;
  [[nodiscard]] bool exchanges_device_memory() const noexcept override { return true; }

 private:
  struct state;  // NCCL's and CUDA's handles, kept out of this header
  /// Polls until `done()`; raises as finish_exchange on NCCL's asynchronous errors, a failure
  /// announced through MPI, or MPI's timeout.
  void wait_until(char const* what, std::function<bool()> const& done);
  /// Waits until NCCL's call that returned `result` (an ncclResult_t) has settled; raises as
  /// wait_until, and when it failed.
  void settle(int result, char const* call);
  [[noreturn]] void fail(std::string const& what, int failed_rank);

  std::shared_ptr<mpi_communicator> ranks_;
  std::unique_ptr<state> nccl_;
  std::map<exchange_ticket, void*> pending_;  // the CUDA event after each exchange's messages
  exchange_ticket next_{0};
  bool broken_{false};
};

}  // namespace tapeflow::distributed

// SPDX-License-Identifier: Apache-2.0
// tapeflow's communicator over MPI (library tapeflow::mpi, built with TAPEFLOW_MPI=ON; needs an
// MPI library: Debian's openmpi or mpich). The application initialises and finalises MPI; the
// communicator works on a duplicate of the one it is given, so tapeflow's messages never meet the
// application's, and returns MPI's errors instead of aborting on them.
//
// Every wait polls: a failure announced by any rank (announce_failure) or a peer silent for the
// timeout raises distributed_error instead of hanging. Every message is point to point, the
// allgather's too (on a duplicate of its own): a rank that stops waiting takes its receives back
// (cancels them and waits for the cancellation, which MPI completes locally), so nothing is
// written into a buffer after it unwinds; MPI allows neither for its nonblocking collectives. Buffers are host memory, or device memory
// where the library says it moves it (a CUDA- or ROCm-aware build); otherwise device data is
// staged through host memory by the caller (docs/distributed.md).
#pragma once

#include <tapeflow/distributed/communicator.hpp>

#include <mpi.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace tapeflow::distributed {

class mpi_communicator final : public communicator {
 public:
  /// How long a wait may last without progress, unless the environment's TAPEFLOW_MPI_TIMEOUT
  /// (seconds, > 0) says otherwise: 300 s.
  [[nodiscard]] static std::chrono::milliseconds default_timeout();

  /// Whether the MPI library moves device memory of this build's GPU backend, as it reports at
  /// run time (Open MPI's MPIX_Query_cuda_support / MPIX_Query_rocm_support, MPICH's
  /// MPIX_GPU_query_support; false for a library that cannot say, and in a build without a GPU
  /// backend), unless the environment's
  /// TAPEFLOW_MPI_DEVICE_MEMORY is 0.
  [[nodiscard]] static bool library_moves_device_memory();

  /// Collective over `comm`: duplicates it. Its exchanges take device memory where
  /// library_moves_device_memory() says so. Throws logic_error when MPI is not initialised or a
  /// timeout is not positive, distributed_error when MPI fails.
  explicit mpi_communicator(MPI_Comm comm = MPI_COMM_WORLD, std::chrono::milliseconds timeout = default_timeout());
  /// Gives back the requests of exchanges never finished, receives and drops messages nothing will
  /// receive, and frees the duplicates (unless MPI was finalised first, or a distributed error
  /// broke it: then MPI_Finalize frees them, since a peer's message may still be on its way).
  ~mpi_communicator() override;

  [[nodiscard]] int rank() const noexcept override { return rank_; }
  [[nodiscard]] int size() const noexcept override { return size_; }
  void allgather(void const* send, void* receive, std::size_t bytes) override;
  [[nodiscard]] exchange_ticket start_exchange(std::vector<outgoing> const& sends,
                                               std::vector<incoming> const& receives) override;
  void finish_exchange(exchange_ticket ticket) override;
  void announce_failure(std::string const& what) noexcept override;
  [[nodiscard]] bool exchanges_device_memory() const noexcept override { return device_memory_; }

  /// Throws distributed_error, naming `what` and the failed rank, when a rank has announced a
  /// failure (a waiting loop of another transport calls it between polls; nccl.hpp); returns
  /// otherwise.
  void raise_if_announced(char const* what);
  /// How long a wait may last without progress.
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }

  /// The duplicate tapeflow talks on.
  [[nodiscard]] MPI_Comm native() const noexcept { return comm_; }
  /// Whether a distributed_error left this communicator unusable.
  [[nodiscard]] bool broken() const noexcept { return broken_; }

 private:
  /// Messages posted together: their receives first, then their sends.
  struct posted {
    std::vector<MPI_Request> requests;
    std::size_t receives{0};
  };

  void check(int status, char const* call);
  void require_usable() const;
  void wait(posted& messages, char const* what);
  void raise_if_announced(char const* what, posted& waiting);
  [[noreturn]] void fail(std::string const& what, int failed_rank, posted& waiting);
  /// Takes back messages that will never complete: receives cancelled (and waited for), sends freed.
  static void give_back(posted& messages) noexcept;
  void give_back_pending() noexcept;

  MPI_Comm comm_{MPI_COMM_NULL};         // exchanges and failure announcements
  MPI_Comm gather_comm_{MPI_COMM_NULL};  // the allgather's messages, apart from every exchange's tags
  std::map<exchange_ticket, posted> pending_;  // posted, not finished
  exchange_ticket next_{0};
  int rank_{0};
  int size_{1};
  std::chrono::milliseconds timeout_;
  bool device_memory_{false};
  bool broken_{false};
  std::string broken_because_;
};

}  // namespace tapeflow::distributed

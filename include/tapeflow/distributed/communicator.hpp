// SPDX-License-Identifier: Apache-2.0
// The ranks of a distributed run, as tapeflow talks to them (docs/distributed.md). Two primitives
// carry everything: allgather (every rank's bytes, in rank order, on every rank) and exchange
// (point-to-point messages with a few peers). Everything tapeflow agrees on is built from them in
// this header: budgets reduced to their minimum, step costs to their maximum, sums taken in rank
// order (so the same run gives the same bits), and a schedule's fingerprint compared across ranks.
//
// Implementations: single_rank (here; one process, nothing to talk to) and mpi_communicator
// (tapeflow/distributed/mpi.hpp, built with TAPEFLOW_MPI=ON). Every wait of an implementation is
// bounded: a peer that fails announces it (announce_failure) and every rank raises
// distributed_error naming it; a peer that says nothing for the timeout makes the waiting rank
// raise one too. After a distributed_error a communicator is broken: its calls raise again.
#pragma once

#include <tapeflow/error.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tapeflow::distributed {

/// A message to send: `bytes` bytes at `data` to rank `peer`, tagged `tag` (0 to 32766).
struct outgoing {
  int peer{0};
  int tag{0};
  void const* data{nullptr};
  std::size_t bytes{0};
};

/// A message to receive: `bytes` bytes from rank `peer`, tagged `tag`, into `data`.
struct incoming {
  int peer{0};
  int tag{0};
  void* data{nullptr};
  std::size_t bytes{0};
};

/// An exchange posted by communicator::start_exchange, for its finish_exchange.
using exchange_ticket = std::uint64_t;

/// The ranks of a run. Calls are collective where documented: every rank makes them, in the same
/// order. Not thread-safe: one thread of each rank talks.
class communicator {
 public:
  communicator() = default;
  communicator(communicator const&) = delete;
  communicator& operator=(communicator const&) = delete;
  virtual ~communicator() = default;

  /// This process's rank, 0 to size() - 1.
  [[nodiscard]] virtual int rank() const noexcept = 0;
  /// Ranks in the run.
  [[nodiscard]] virtual int size() const noexcept = 0;

  /// Collective: `bytes` bytes from every rank's `send`, in rank order, into `receive` (size()
  /// times `bytes`). Throws distributed_error when a rank failed or the timeout passed.
  virtual void allgather(void const* send, void* receive, std::size_t bytes) = 0;

  /// Posts every receive, then every send, and returns without waiting: work that needs none of
  /// the messages can run while they travel (docs/distributed.md). The buffers must stay valid,
  /// and the sends' unchanged, until finish_exchange(ticket) returns. A rank may send to itself;
  /// messages between two ranks with one tag arrive in the order they were posted; several
  /// exchanges may be pending at once. Throws logic_error for a peer out of range or a tag past
  /// 32766, distributed_error as allgather.
  [[nodiscard]] virtual exchange_ticket start_exchange(std::vector<outgoing> const& sends,
                                                       std::vector<incoming> const& receives) = 0;

  /// Waits for every message of the pending exchange `ticket`. Throws logic_error for a ticket
  /// that is not pending, distributed_error as allgather.
  virtual void finish_exchange(exchange_ticket ticket) = 0;

  /// Whether an exchange's buffers may also lie in device memory of this build's GPU backend (an
  /// MPI library that reports CUDA or ROCm support, NCCL): device data then goes straight from and
  /// into device memory, its sender having waited for the work that wrote it. False: buffers are
  /// host memory, and device data is staged through pinned host memory by its owner.
  [[nodiscard]] virtual bool exchanges_device_memory() const noexcept { return false; }

  /// start_exchange, then finish_exchange.
  void exchange(std::vector<outgoing> const& sends, std::vector<incoming> const& receives)
  {
    finish_exchange(start_exchange(sends, receives));
  }

  /// Tells every other rank that this one failed with `what`: their current or next wait raises
  /// distributed_error naming this rank. Best effort; never throws. Marks this communicator broken.
  virtual void announce_failure(std::string const& what) noexcept = 0;
};

/// The one-process communicator: rank 0 of 1. allgather copies; an exchange matches each
/// receive with the send to itself of the same tag, in order, as it is posted.
class single_rank final : public communicator {
 public:
  [[nodiscard]] int rank() const noexcept override { return 0; }
  [[nodiscard]] int size() const noexcept override { return 1; }
  void allgather(void const* send, void* receive, std::size_t bytes) override;
  [[nodiscard]] exchange_ticket start_exchange(std::vector<outgoing> const& sends,
                                               std::vector<incoming> const& receives) override;
  void finish_exchange(exchange_ticket ticket) override;
  void announce_failure(std::string const&) noexcept override {}

 private:
  std::vector<exchange_ticket> pending_;
  exchange_ticket next_{0};
};

// ---- what the ranks agree on, built on allgather -------------------------------------------------

/// Collective: every rank's `value`, in rank order.
template <class T>
[[nodiscard]] std::vector<T> gather_all(communicator& comm, T const& value)
{
  static_assert(std::is_trivially_copyable_v<T>, "gather_all sends a value's bytes");
  std::vector<T> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(&value, all.data(), sizeof(T));
  return all;
}

/// Collective: the least of every rank's `value`.
[[nodiscard]] std::size_t min_over_ranks(communicator& comm, std::size_t value);

/// Collective: the greatest of every rank's `value`.
[[nodiscard]] double max_over_ranks(communicator& comm, double value);

/// Collective: `values` (the same length on every rank, else logic_error on every rank) replaced by
/// their element-wise maximum over the ranks.
void max_over_ranks(communicator& comm, std::vector<double>& values);

/// Collective: the sum of every rank's `value`, added in rank order from rank 0 in double, so the
/// bits do not depend on how messages arrive (MPI's reductions promise no order).
[[nodiscard]] double sum_in_rank_order(communicator& comm, double value);

/// Collective: `values` (the same length on every rank, else logic_error on every rank) replaced by
/// their element-wise sum over the ranks, each added in rank order from rank 0 in double: the
/// adjoint of parameters every rank holds, each rank's chain having added its own cells' part of
/// it. The same run gives the same bits every time.
void sum_in_rank_order(communicator& comm, std::vector<double>& values);

/// The same for float values (summed in double, then rounded once).
void sum_in_rank_order(communicator& comm, std::vector<float>& values);

/// Collective: throws distributed_error on every rank unless every rank passed the same
/// `fingerprint`; the message names `what` and the ranks that differ from rank 0.
void require_same(communicator& comm, std::uint64_t fingerprint, std::string const& what);

/// Inside a catch block: announces the exception being handled to every other rank (whose waits
/// then raise distributed_error naming this one), unless it is a distributed_error, which the
/// ranks know of already.
inline void announce_current_exception(communicator& comm) noexcept
{
  try {
    throw;
  } catch (distributed_error const&) {
  } catch (std::exception const& e) {
    comm.announce_failure(e.what());
  } catch (...) {
    comm.announce_failure("an exception that is not a std::exception");
  }
}

/// Runs `work()` as one rank of a collective piece of work: if it throws, the failure is
/// announced to every other rank and rethrown here.
template <class Work>
decltype(auto) collectively(communicator& comm, Work&& work)
{
  try {
    return std::forward<Work>(work)();
  } catch (...) {
    announce_current_exception(comm);
    throw;
  }
}

/// FNV-1a of `bytes` bytes, continuing from `hash`: fingerprints compared across ranks.
[[nodiscard]] inline std::uint64_t fingerprint(void const* bytes, std::size_t size,
                                                  std::uint64_t hash = 0xcbf29ce484222325ull) noexcept
{
  auto const* p = static_cast<unsigned char const*>(bytes);
  for (std::size_t i = 0; i < size; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace tapeflow::distributed

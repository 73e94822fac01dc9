// SPDX-License-Identifier: Apache-2.0
// nccl_communicator (tapeflow/distributed/nccl.hpp). NCCL runs in its nonblocking mode, so that
// no call of it can hang a rank: every call that reports ncclInProgress, and every wait for an
// exchange, is a polling loop that also watches for NCCL's asynchronous errors, for a failure
// announced through MPI and for MPI's timeout, and aborts NCCL's communicator before it raises.
#include <tapeflow/device/platform.hpp>
#include <tapeflow/distributed/nccl.hpp>
#include <tapeflow/error.hpp>

#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace tapeflow::distributed {

struct nccl_communicator::state {
  ncclComm_t comm{nullptr};
  cudaStream_t stream{nullptr};
};

namespace {

/// The tag exchanges may not use (the MPI communicator's failure tag), as mpi_communicator.
constexpr int last_tag = 32766;

/// Gives the core away between polls (ranks often outnumber cores in tests).
void pause(int polls)
{
  if (polls > 64) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  } else {
    std::this_thread::yield();
  }
}

}  // namespace

nccl_communicator::nccl_communicator(std::shared_ptr<mpi_communicator> ranks)
  : ranks_(std::move(ranks)), nccl_(std::make_unique<state>())
{
  TAPEFLOW_EXPECTS(ranks_ != nullptr, "an nccl_communicator is made from an mpi_communicator");
  // Rank 0 makes the id; allgather (the one collective a communicator has) hands it to every rank.
  ncclUniqueId id{};
  collectively(*ranks_, [&] {
    if (rank() == 0) {
      ncclResult_t const made = ncclGetUniqueId(&id);
      if (made != ncclSuccess) {
        throw distributed_error(detail::where(__FILE__, __LINE__) + "ncclGetUniqueId failed: " +
                                  ncclGetErrorString(made), rank());
      }
    }
  });
  std::vector<ncclUniqueId> ids(static_cast<std::size_t>(size()));
  ranks_->allgather(&id, ids.data(), sizeof id);
  collectively(*ranks_, [&] {
    TAPEFLOW_CUDA_TRY(cudaStreamCreateWithFlags(&nccl_->stream, cudaStreamNonBlocking));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    settle(ncclCommInitRankConfig(&nccl_->comm, size(), ids[0], rank(), &config), "ncclCommInitRankConfig");
  });
}

nccl_communicator::~nccl_communicator()
{
  for (auto& [ticket, event] : pending_) { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }
  if (nccl_->comm != nullptr) {
    // Messages never waited for may never arrive: abort rather than wait for them.
    if (pending_.empty()) {
      ncclCommDestroy(nccl_->comm);
    } else {
      ncclCommAbort(nccl_->comm);
    }
  }
  if (nccl_->stream != nullptr) { cudaStreamDestroy(nccl_->stream); }
}

void nccl_communicator::allgather(void const* send, void* receive, std::size_t bytes)
{
  ranks_->allgather(send, receive, bytes);
}

void nccl_communicator::wait_until(char const* what, std::function<bool()> const& done)
{
  auto const start = std::chrono::steady_clock::now();
  for (int polls = 0; !done(); ++polls) {
    ncclResult_t async = ncclSuccess;
    if (nccl_->comm != nullptr) { ncclCommGetAsyncError(nccl_->comm, &async); }
    if (async != ncclSuccess && async != ncclInProgress) {
      fail(std::string{what} + " failed: " + ncclGetErrorString(async) + " (" + ncclGetLastError(nccl_->comm) + ")",
           rank());
    }
    try {
      ranks_->raise_if_announced(what);
    } catch (distributed_error const& e) {
      fail(e.what(), e.failed_rank());
    }
    if (std::chrono::steady_clock::now() - start > ranks_->timeout()) {
      fail(std::string{what} + " made no progress for " + std::to_string(ranks_->timeout().count()) +
             " ms: a peer stopped without saying why, or the ranks called in different orders",
           -1);
    }
    pause(polls);
  }
}

void nccl_communicator::settle(int result, char const* call)
{
  auto status = static_cast<ncclResult_t>(result);
  wait_until(call, [&] {
    if (status == ncclInProgress && nccl_->comm != nullptr) { ncclCommGetAsyncError(nccl_->comm, &status); }
    return status != ncclInProgress || nccl_->comm == nullptr;
  });
  if (status != ncclSuccess) {
    fail(std::string{call} + " failed: " + ncclGetErrorString(status) +
           (nccl_->comm != nullptr ? std::string{" ("} + ncclGetLastError(nccl_->comm) + ")" : std::string{}),
         rank());
  }
}

exchange_ticket nccl_communicator::start_exchange(std::vector<outgoing> const& sends,
                                                  std::vector<incoming> const& receives)
{
  if (broken_) {
    throw distributed_error(detail::where(__FILE__, __LINE__) + "this communicator stopped at an earlier error", -1);
  }
  auto check_peer = [&](int peer, int tag) {
    TAPEFLOW_EXPECTS(peer >= 0 && peer < size(), "a message names rank " + std::to_string(peer) + " of " +
                                                   std::to_string(size()));
    TAPEFLOW_EXPECTS(tag >= 0 && tag <= last_tag, "a message's tag must lie in [0, 32766], not " + std::to_string(tag));
  };
  for (incoming const& in : receives) { check_peer(in.peer, in.tag); }
  for (outgoing const& out : sends) { check_peer(out.peer, out.tag); }
  // NCCL pairs a sender's and a receiver's messages in the order they are issued: issue each
  // peer's in the order of their tags, on both sides.
  auto by_peer_and_tag = [](auto const& a, auto const& b) { return a.peer != b.peer ? a.peer < b.peer : a.tag < b.tag; };
  std::vector<incoming> in = receives;
  std::vector<outgoing> out = sends;
  std::stable_sort(in.begin(), in.end(), by_peer_and_tag);
  std::stable_sort(out.begin(), out.end(), by_peer_and_tag);

  settle(ncclGroupStart(), "ncclGroupStart");
  for (incoming const& r : in) {
    settle(ncclRecv(r.data, r.bytes, ncclInt8, r.peer, nccl_->comm, nccl_->stream), "ncclRecv");
  }
  for (outgoing const& s : out) {
    settle(ncclSend(s.data, s.bytes, ncclInt8, s.peer, nccl_->comm, nccl_->stream), "ncclSend");
  }
  settle(ncclGroupEnd(), "ncclGroupEnd");
  cudaEvent_t done = nullptr;
  TAPEFLOW_CUDA_TRY(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  cudaError_t const recorded = cudaEventRecord(done, nccl_->stream);
  if (recorded != cudaSuccess) { cudaEventDestroy(done); }
  TAPEFLOW_CUDA_TRY(recorded);
  exchange_ticket const ticket = next_++;
  pending_.emplace(ticket, done);
  return ticket;
}

void nccl_communicator::finish_exchange(exchange_ticket ticket)
{
  auto const at = pending_.find(ticket);
  TAPEFLOW_EXPECTS(at != pending_.end(), "exchange " + std::to_string(ticket) + " is not pending");
  auto const done = static_cast<cudaEvent_t>(at->second);
  wait_until("an NCCL exchange", [&] {
    cudaError_t const arrived = cudaEventQuery(done);
    if (arrived != cudaSuccess && arrived != cudaErrorNotReady) { TAPEFLOW_CUDA_TRY(arrived); }
    return arrived == cudaSuccess;
  });
  cudaEventDestroy(done);
  pending_.erase(at);
}

void nccl_communicator::announce_failure(std::string const& what) noexcept
{
  ranks_->announce_failure(what);
  broken_ = true;
  if (nccl_->comm != nullptr) {
    ncclCommAbort(nccl_->comm);  // its pending messages will not be waited for
    nccl_->comm = nullptr;
  }
}

void nccl_communicator::fail(std::string const& what, int failed_rank)
{
  broken_ = true;
  if (nccl_->comm != nullptr) {
    ncclCommAbort(nccl_->comm);
    nccl_->comm = nullptr;
  }
  for (auto& [ticket, event] : pending_) { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }
  pending_.clear();
  throw distributed_error(detail::where(__FILE__, __LINE__) + "rank " + std::to_string(rank()) + ": " + what,
                          failed_rank);
}

}  // namespace tapeflow::distributed

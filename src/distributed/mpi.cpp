// SPDX-License-Identifier: Apache-2.0
// mpi_communicator (tapeflow/distributed/mpi.hpp): nonblocking point-to-point MPI calls, each wait
// a polling loop that also watches for failure announcements and for the timeout. Exchanges posted
// and not yet finished are kept by ticket; a failure gives all of them back (and the allgather's
// messages), so no receive writes into a buffer after the rank has unwound past it.
#include <tapeflow/distributed/mpi.hpp>

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>  // MPIX_Query_cuda_support, MPIX_Query_rocm_support (where Open MPI has them)
#endif

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace tapeflow::distributed {

namespace {

/// The tag failure announcements travel on (MPI guarantees tags up to 32767; exchange() takes
/// the ones below it).
constexpr int failure_tag = 32767;
/// Longest announcement carried, in bytes.
constexpr int failure_text = 2048;

std::string mpi_error_text(int status)
{
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(status, text, &length) != MPI_SUCCESS) { return "MPI error " + std::to_string(status); }
  return std::string(text, static_cast<std::size_t>(length));
}

/// Receives and drops every message on `comm` nothing will receive. A peer's failure this rank
/// never waited to hear of leaves its announcement (and perhaps a given-back exchange's send)
/// unmatched, and MPICH refuses to free a communicator that holds any (a fatal error). Only
/// tapeflow talks on its duplicates.
void discard_unmatched(MPI_Comm comm) noexcept
{
  std::vector<char> scratch;
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &arrived, &status) != MPI_SUCCESS || arrived == 0) { return; }
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    scratch.resize(static_cast<std::size_t>(std::max(bytes, 1)));
    if (MPI_Recv(scratch.data(), bytes, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, comm, MPI_STATUS_IGNORE) !=
        MPI_SUCCESS) {
      return;
    }
  }
}

int as_count(std::size_t bytes)
{
  TAPEFLOW_EXPECTS(bytes <= static_cast<std::size_t>(INT_MAX),
                   "one MPI message carries at most " + std::to_string(INT_MAX) + " bytes, not " + std::to_string(bytes));
  return static_cast<int>(bytes);
}

}  // namespace

std::chrono::milliseconds mpi_communicator::default_timeout()
{
  if (char const* text = std::getenv("TAPEFLOW_MPI_TIMEOUT")) {
    char* end = nullptr;
    double const seconds = std::strtod(text, &end);
    if (end != text && *end == '\0' && seconds > 0) {
      return std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0));
    }
  }
  return std::chrono::seconds(300);
}

bool mpi_communicator::library_moves_device_memory()
{
  if (char const* text = std::getenv("TAPEFLOW_MPI_DEVICE_MEMORY"); text != nullptr && std::string{text} == "0") {
    return false;
  }
#if defined(TAPEFLOW_HAS_CUDA) && defined(MPIX_CUDA_AWARE_SUPPORT)  // Open MPI
  return MPIX_Query_cuda_support() == 1;
#elif defined(TAPEFLOW_HAS_HIP) && defined(MPIX_ROCM_AWARE_SUPPORT)
  return MPIX_Query_rocm_support() == 1;
#elif (defined(TAPEFLOW_HAS_CUDA) && defined(MPIX_GPU_SUPPORT_CUDA)) || \
  (defined(TAPEFLOW_HAS_HIP) && defined(MPIX_GPU_SUPPORT_HIP))  // MPICH 4 and later
#if defined(TAPEFLOW_HAS_CUDA)
  int const kind = MPIX_GPU_SUPPORT_CUDA;
#else
  int const kind = MPIX_GPU_SUPPORT_HIP;
#endif
  int supported = 0;
  return MPIX_GPU_query_support(kind, &supported) == MPI_SUCCESS && supported != 0;
#else
  return false;  // no GPU backend, or a library that cannot say: stage through host memory
#endif
}

mpi_communicator::mpi_communicator(MPI_Comm comm, std::chrono::milliseconds timeout)
  : timeout_(timeout), device_memory_(library_moves_device_memory())
{
  int initialised = 0;
  MPI_Initialized(&initialised);
  TAPEFLOW_EXPECTS(initialised != 0, "an mpi_communicator needs MPI initialised (MPI_Init) first");
  TAPEFLOW_EXPECTS(timeout.count() > 0, "an mpi_communicator's timeout must be positive");
  check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  // The allgather's duplicate (it inherits MPI_ERRORS_RETURN); the first goes if it cannot be made.
  if (int const status = MPI_Comm_dup(comm_, &gather_comm_); status != MPI_SUCCESS) {
    MPI_Comm_free(&comm_);
    check(status, "MPI_Comm_dup");
  }
  check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

mpi_communicator::~mpi_communicator()
{
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (finalised != 0 || comm_ == MPI_COMM_NULL) { return; }
  give_back_pending();
  // After a failure a peer's message may still be on its way, and MPICH refuses to free a
  // communicator that will receive one (a fatal error): the broken duplicate is left to
  // MPI_Finalize. The run cannot go on with it anyway.
  if (broken_) { return; }
  for (MPI_Comm* c : {&gather_comm_, &comm_}) {
    if (*c == MPI_COMM_NULL) { continue; }
    discard_unmatched(*c);
    MPI_Comm_free(c);
  }
}

void mpi_communicator::give_back(posted& messages) noexcept
{
  for (std::size_t i = 0; i < messages.requests.size(); ++i) {
    MPI_Request& r = messages.requests[i];
    if (r == MPI_REQUEST_NULL) { continue; }
    if (i < messages.receives) {
      // A receive marked for cancellation completes locally (MPI's MPI_Cancel): after the wait it
      // has been cancelled or has received, and never writes again.
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else {
      MPI_Request_free(&r);  // a send: MPI completes it if it can (a small one went eagerly)
    }
  }
  messages.requests.clear();
  messages.receives = 0;
}

void mpi_communicator::give_back_pending() noexcept
{
  for (auto& [ticket, messages] : pending_) { give_back(messages); }
  pending_.clear();
}

void mpi_communicator::check(int status, char const* call)
{
  if (status == MPI_SUCCESS) { return; }
  broken_ = true;
  broken_because_ = std::string{call} + " failed: " + mpi_error_text(status);
  throw distributed_error(tapeflow::detail::where(__FILE__, __LINE__) + "rank " + std::to_string(rank_) + ": " +
                            broken_because_,
                          rank_);
}

void mpi_communicator::require_usable() const
{
  if (broken_) {
    throw distributed_error(tapeflow::detail::where(__FILE__, __LINE__) +
                              "this communicator stopped at an earlier error (" + broken_because_ +
                              "); the run cannot go on",
                            -1);
  }
}

void mpi_communicator::fail(std::string const& what, int failed_rank, posted& waiting)
{
  broken_ = true;
  broken_because_ = what;
  give_back(waiting);
  give_back_pending();  // no buffer may be written once the caller unwinds
  throw distributed_error(tapeflow::detail::where(__FILE__, __LINE__) + "rank " + std::to_string(rank_) + ": " + what,
                          failed_rank);
}

void mpi_communicator::raise_if_announced(char const* what)
{
  require_usable();
  posted none;
  raise_if_announced(what, none);
}

void mpi_communicator::raise_if_announced(char const* what, posted& waiting)
{
  int announced = 0;
  MPI_Status status;
  check(MPI_Iprobe(MPI_ANY_SOURCE, failure_tag, comm_, &announced, &status), "MPI_Iprobe");
  if (announced == 0) { return; }
  std::vector<char> text(failure_text + 1, '\0');
  MPI_Recv(text.data(), failure_text, MPI_CHAR, status.MPI_SOURCE, failure_tag, comm_, MPI_STATUS_IGNORE);
  fail(std::string{what} + " stopped: rank " + std::to_string(status.MPI_SOURCE) + " failed: " + text.data(),
       status.MPI_SOURCE, waiting);
}

void mpi_communicator::wait(posted& messages, char const* what)
{
  auto const start = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    int done = 0;
    check(MPI_Testall(static_cast<int>(messages.requests.size()), messages.requests.data(), &done,
                      MPI_STATUSES_IGNORE),
          "MPI_Testall");
    if (done != 0) { return; }

    raise_if_announced(what, messages);
    if (std::chrono::steady_clock::now() - start > timeout_) {
      fail(std::string{what} + " made no progress for " + std::to_string(timeout_.count()) +
             " ms: a peer stopped without saying why, or the ranks called in different orders",
           -1, messages);
    }
    // More ranks than cores is common in tests (oversubscribed): give the core away between polls.
    if (polls > 64) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    } else {
      std::this_thread::yield();
    }
  }
}

void mpi_communicator::allgather(void const* send, void* receive, std::size_t bytes)
{
  require_usable();
  int const count = as_count(bytes);
  // Point to point with every other rank, not MPI_Iallgather: a rank that stops waiting (a peer
  // failed) takes its receives back, which MPI forbids for a nonblocking collective. It carries a
  // few numbers, at planning and at the end of a chain's calls. Messages between two ranks on the
  // allgather's duplicate arrive in the order they were sent, so successive allgathers match.
  auto* const into = static_cast<unsigned char*>(receive);
  unsigned char* const mine = into + static_cast<std::size_t>(rank_) * bytes;
  if (bytes != 0) { std::memmove(mine, send, bytes); }
  posted messages;
  messages.requests.reserve(2 * static_cast<std::size_t>(size_ - 1));
  try {
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) { continue; }
      messages.requests.push_back(MPI_REQUEST_NULL);
      check(MPI_Irecv(into + static_cast<std::size_t>(peer) * bytes, count, MPI_BYTE, peer, 0, gather_comm_,
                      &messages.requests.back()),
            "MPI_Irecv");
      messages.receives = messages.requests.size();
    }
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) { continue; }
      messages.requests.push_back(MPI_REQUEST_NULL);
      check(MPI_Isend(mine, count, MPI_BYTE, peer, 0, gather_comm_, &messages.requests.back()), "MPI_Isend");
    }
  } catch (...) {
    give_back(messages);
    throw;
  }
  wait(messages, "an allgather");
}

exchange_ticket mpi_communicator::start_exchange(std::vector<outgoing> const& sends,
                                                 std::vector<incoming> const& receives)
{
  require_usable();
  auto check_peer = [&](int peer, int tag) {
    TAPEFLOW_EXPECTS(peer >= 0 && peer < size_, "a message names rank " + std::to_string(peer) + " of " +
                                                  std::to_string(size_));
    TAPEFLOW_EXPECTS(tag >= 0 && tag < failure_tag,
                     "a message's tag must lie in [0, 32766], not " + std::to_string(tag));
  };
  for (incoming const& in : receives) { check_peer(in.peer, in.tag); }
  for (outgoing const& out : sends) { check_peer(out.peer, out.tag); }

  posted messages;
  messages.requests.reserve(sends.size() + receives.size());
  try {
    for (incoming const& in : receives) {
      messages.requests.push_back(MPI_REQUEST_NULL);
      check(MPI_Irecv(in.data, as_count(in.bytes), MPI_BYTE, in.peer, in.tag, comm_, &messages.requests.back()),
            "MPI_Irecv");
      messages.receives = messages.requests.size();
    }
    for (outgoing const& out : sends) {
      messages.requests.push_back(MPI_REQUEST_NULL);
      // MPI-3 takes a const buffer.
      check(MPI_Isend(out.data, as_count(out.bytes), MPI_BYTE, out.peer, out.tag, comm_, &messages.requests.back()),
            "MPI_Isend");
    }
  } catch (...) {
    give_back(messages);
    throw;
  }
  exchange_ticket const ticket = next_++;
  pending_.emplace(ticket, std::move(messages));
  return ticket;
}

void mpi_communicator::finish_exchange(exchange_ticket ticket)
{
  require_usable();
  auto const at = pending_.find(ticket);
  TAPEFLOW_EXPECTS(at != pending_.end(), "exchange " + std::to_string(ticket) + " is not pending");
  wait(at->second, "a halo exchange");
  pending_.erase(at);
}

void mpi_communicator::announce_failure(std::string const& what) noexcept
{
  if (broken_) { return; }  // it failed on a distributed error, which every rank sees already
  broken_ = true;
  broken_because_ = "this rank failed: " + what;
  give_back_pending();  // the failing rank unwinds: its buffers go
  std::string const text = what.substr(0, failure_text - 1);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) { continue; }
    MPI_Request r = MPI_REQUEST_NULL;
    // Short enough to go eagerly: the send completes without its receiver.
    if (MPI_Isend(text.c_str(), static_cast<int>(text.size() + 1), MPI_CHAR, peer, failure_tag, comm_, &r) ==
        MPI_SUCCESS) {
      MPI_Request_free(&r);
    }
  }
}

}  // namespace tapeflow::distributed

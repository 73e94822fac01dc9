// SPDX-License-Identifier: Apache-2.0
#include "ranks.hpp"

#include <tapeflow/error.hpp>

#if defined(TAPEFLOW_HAS_MPI)
#include <tapeflow/distributed/mpi.hpp>

#include <mpi.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace tapeflow::cli {

namespace {
std::shared_ptr<distributed::communicator>& ranks_of_this_run() noexcept
{
  static std::shared_ptr<distributed::communicator> ranks;
  return ranks;
}

void print_error(std::string const& error) noexcept
{
  std::fflush(stdout);
  if (!error.empty()) { std::fputs(error.c_str(), stderr); }
  std::fflush(stderr);
}

#if defined(TAPEFLOW_HAS_MPI)
/// Where this rank's command is: reading alone, started with the others, finished with them and
/// writing alone, or stopped at the meeting because a rank had failed.
enum class stage { reading, started, finished, stopped };

stage& stage_of_this_run() noexcept
{
  static stage s = stage::reading;
  return s;
}

/// A fingerprint of this rank's command line (its arguments after the program's name).
std::uint64_t& arguments_of_this_run() noexcept
{
  static std::uint64_t hash = 0;
  return hash;
}

/// Whether an MPI launcher (Open MPI's, MPICH's Hydra, a PMIx one) started this process.
bool launched_by_mpi() noexcept
{
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

/// The ranks' one meeting: every rank brings its status (0: ready, or done without a failure).
struct meeting {
  int status;        ///< the highest status brought
  int first_failed;  ///< the lowest rank that brought a failure; the ranks' count when none did
};

/// Collective: every rank's status, gathered through the run's communicator. A meeting that
/// cannot be held (the communicator failed) ends the run.
meeting meet(int status) noexcept
{
  distributed::communicator& ranks = *ranks_of_this_run();
  try {
    std::vector<int> const all = distributed::gather_all(ranks, status);
    meeting m{0, ranks.size()};
    for (int r = 0; r < ranks.size(); ++r) {
      m.status = std::max(m.status, all[static_cast<std::size_t>(r)]);
      if (all[static_cast<std::size_t>(r)] != 0 && m.first_failed == ranks.size()) { m.first_failed = r; }
    }
    return m;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "tapeflow: the ranks could not meet: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, status != 0 ? status : 1);
    return {status, ranks.rank()};  // not reached: MPI_Abort ends the run
  }
}
#endif
}  // namespace

mpi_scope::mpi_scope([[maybe_unused]] int& argc, [[maybe_unused]] char**& argv)
{
#if defined(TAPEFLOW_HAS_MPI)
  if (!launched_by_mpi()) { return; }
  MPI_Init(&argc, &argv);
  std::uint64_t hash = distributed::fingerprint(nullptr, 0);
  for (int i = 1; i < argc; ++i) {
    std::size_t const length = std::strlen(argv[i]);
    hash = distributed::fingerprint(&length, sizeof length, hash);  // "a b" is not "ab"
    hash = distributed::fingerprint(argv[i], length, hash);
  }
  arguments_of_this_run() = hash;
  ranks_of_this_run() = std::make_shared<distributed::mpi_communicator>();
  if (ranks_of_this_run()->rank() != 0) { static_cast<void>(std::freopen("/dev/null", "w", stdout)); }
#endif
}

mpi_scope::~mpi_scope()
{
#if defined(TAPEFLOW_HAS_MPI)
  if (!ranks_of_this_run()) { return; }
  ranks_of_this_run().reset();
  MPI_Finalize();
#endif
}

int mpi_scope::end(int status, std::string const& error) const noexcept
{
#if defined(TAPEFLOW_HAS_MPI)
  if (ranks_of_this_run()) {
    stage const now = stage_of_this_run();
    if (now == stage::stopped) { return status; }  // met at the start: the failed rank printed
    if (now == stage::started && status != 0) {
      // Its peers may wait in a collective this rank will never enter. A launcher that forwards
      // output on its own schedule (MPICH's Hydra) may drop what is still in the pipe when the
      // abort kills the ranks: the message gets a moment to leave first.
      print_error(error);
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      MPI_Abort(MPI_COMM_WORLD, status);
      return status;  // not reached: MPI_Abort ends the run
    }
    // Reading or finished, or done without a failure (every collective of the run returned, on
    // every rank that is not itself about to abort): the ranks meet, so a failing rank's peers
    // finalise with it and its message is printed once.
    meeting const m = meet(status);
    stage_of_this_run() = stage::stopped;
    if (m.first_failed == ranks_of_this_run()->rank()) { print_error(error); }
    return m.status;
  }
#endif
  print_error(error);
  return status;
}

void start_together([[maybe_unused]] std::uint64_t inputs)
{
#if defined(TAPEFLOW_HAS_MPI)
  if (!ranks_of_this_run()) { return; }
  if (stage_of_this_run() != stage::reading) {
    TAPEFLOW_FAIL(logic_error, "the ranks start together once, while each still reads alone");
  }
  meeting const m = meet(0);
  if (m.status != 0) {
    stage_of_this_run() = stage::stopped;
    throw stopped_by_another_rank(m.status);
  }
  // Every rank is ready: the same decision on every rank, and still before any work crosses them
  // (a distributed_error here ends the command as a failure while reading does).
  std::uint64_t const given = distributed::fingerprint(&inputs, sizeof inputs, arguments_of_this_run());
  distributed::require_same(*ranks_of_this_run(), given, "the command line and the inputs");
  stage_of_this_run() = stage::started;
#endif
}

void finish_together() noexcept
{
#if defined(TAPEFLOW_HAS_MPI)
  if (ranks_of_this_run() && stage_of_this_run() == stage::started) { stage_of_this_run() = stage::finished; }
#endif
}

std::shared_ptr<distributed::communicator> const& launched_ranks() noexcept { return ranks_of_this_run(); }

bool writes_files() noexcept { return !ranks_of_this_run() || ranks_of_this_run()->rank() == 0; }

}  // namespace tapeflow::cli

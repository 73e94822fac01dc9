// SPDX-License-Identifier: Apache-2.0
// The ranks the CLI runs over when an MPI launcher started it (`mpirun -np P tapeflow run
// allen-cahn ...`; docs/distributed.md), in a build with TAPEFLOW_MPI. Otherwise, and when no
// launcher started it, the CLI is one process and none of this does anything.
//
// A command under ranks has three parts. Before `start_together()` each rank reads its arguments
// and inputs alone; nothing has crossed ranks yet, so a rank that fails there does not leave a
// peer waiting in the library: the ranks meet once, agree on the exit status, the first failed
// rank prints its error, and all finalise MPI. Between it and `finish_together()` the work crosses
// the ranks, and a failing rank cannot know where its peers wait: it ends them all (MPI_Abort).
// After it each rank writes its files alone again (rank 0 the gradient), and a failure there (a
// full disk) meets the others as one before the start does. Finalising keeps the message: MPICH's
// launcher may drop what a rank printed just before an abort.
#pragma once

#include <tapeflow/distributed/communicator.hpp>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>

namespace tapeflow::cli {

/// MPI for the life of main(): initialised when this build has it and a launcher started the
/// process, finalised at the end. Ranks past the first print nothing on standard output.
class mpi_scope {
 public:
  mpi_scope(int& argc, char**& argv);
  ~mpi_scope();
  mpi_scope(mpi_scope const&) = delete;
  mpi_scope& operator=(mpi_scope const&) = delete;

  /// Ends the command with `status`, `error` (empty on success) its message for standard error,
  /// and returns the process's exit status. As one process: prints the error, returns `status`.
  /// Under ranks, on success, or on a failure before they started together or after they
  /// finished: meets the others, the first failed rank prints, and every rank returns the highest
  /// status. A failure while they work together ends every rank with `status` (MPI_Abort) once
  /// its message is printed.
  [[nodiscard]] int end(int status, std::string const& error) const noexcept;
};

/// The ranks of this run; null when it is one process.
[[nodiscard]] std::shared_ptr<distributed::communicator> const& launched_ranks() noexcept;

/// Collective: the ranks begin the work that crosses them. Throws `stopped_by_another_rank` when
/// a rank failed before it (that rank prints why), and distributed_error on every rank when the
/// ranks were given different command lines or, `inputs` being a fingerprint of what this rank
/// read (distributed::fingerprint), different inputs: each rank runs its part of one problem, and
/// parts of different ones would make a gradient of neither (an input file that differs between
/// the nodes' disks, an argument one rank was given alone). Call it once, after the command's
/// arguments and inputs are read and before the library sees `launched_ranks()`. Does nothing as
/// one process.
void start_together(std::uint64_t inputs = 0);

/// This rank's part of the work that crosses the ranks is done: its last collective has returned,
/// and what is left (printing, writing its files) it does alone. A failure from here meets the
/// others rather than ending them (mpi_scope::end). Not collective, but every rank that started
/// together calls it before it writes. Does nothing as one process or before the start.
void finish_together() noexcept;

/// Thrown by `start_together()` on the ranks that were ready when another rank had failed; its
/// status is the exit status the ranks agreed on.
class stopped_by_another_rank : public std::exception {
 public:
  explicit stopped_by_another_rank(int status) noexcept : status_{status} {}
  [[nodiscard]] char const* what() const noexcept override { return "another rank failed before the run began"; }
  [[nodiscard]] int status() const noexcept { return status_; }

 private:
  int status_;
};

/// Whether this process writes the run's files: the only one, or rank 0.
[[nodiscard]] bool writes_files() noexcept;

}  // namespace tapeflow::cli

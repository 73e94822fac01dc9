// SPDX-License-Identifier: Apache-2.0
// The ranks the CLI runs over when an MPI launcher started it (`mpirun -np P tapeflow run
// allen-cahn ...`; docs/distributed.md), in a build with TAPEFLOW_MPI. Otherwise, and when no
// launcher started it, the CLI is one process and none of this does anything.
#pragma once

#include <tapeflow/distributed/communicator.hpp>

#include <memory>

namespace tapeflow::cli {

/// MPI for the life of main(): initialised when this build has it and a launcher started the
/// process, finalised at the end. Ranks past the first print nothing on standard output.
class mpi_scope {
 public:
  mpi_scope(int& argc, char**& argv);
  ~mpi_scope();
  mpi_scope(mpi_scope const&) = delete;
  mpi_scope& operator=(mpi_scope const&) = delete;
  /// Ends every rank with `status` after an error (MPI_Abort: a failed run cannot finalise). Does
  /// nothing without ranks.
  void abort_ranks(int status) const noexcept;
};

/// The ranks of this run; null when it is one process.
[[nodiscard]] std::shared_ptr<distributed::communicator> const& launched_ranks() noexcept;

/// Whether this process writes the run's files: the only one, or rank 0.
[[nodiscard]] bool writes_files() noexcept;

}  // namespace tapeflow::cli

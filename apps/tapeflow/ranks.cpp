// SPDX-License-Identifier: Apache-2.0
#include "ranks.hpp"

#if defined(TAPEFLOW_HAS_MPI)
#include <tapeflow/distributed/mpi.hpp>

#include <mpi.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace tapeflow::cli {

namespace {
std::shared_ptr<distributed::communicator>& ranks_of_this_run() noexcept
{
  static std::shared_ptr<distributed::communicator> ranks;
  return ranks;
}

#if defined(TAPEFLOW_HAS_MPI)
/// Whether an MPI launcher (Open MPI's, MPICH's Hydra, a PMIx one) started this process.
bool launched_by_mpi() noexcept
{
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}
#endif
}  // namespace

mpi_scope::mpi_scope([[maybe_unused]] int& argc, [[maybe_unused]] char**& argv)
{
#if defined(TAPEFLOW_HAS_MPI)
  if (!launched_by_mpi()) { return; }
  MPI_Init(&argc, &argv);
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

void mpi_scope::abort_ranks([[maybe_unused]] int status) const noexcept
{
#if defined(TAPEFLOW_HAS_MPI)
  if (ranks_of_this_run() && ranks_of_this_run()->size() > 1) {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, status);
  }
#endif
}

std::shared_ptr<distributed::communicator> const& launched_ranks() noexcept { return ranks_of_this_run(); }

bool writes_files() noexcept { return !ranks_of_this_run() || ranks_of_this_run()->rank() == 0; }

}  // namespace tapeflow::cli

// SPDX-License-Identifier: Apache-2.0
// The stencil slabs' ghost planes through NCCL (TAPEFLOW_NCCL) on this build's GPU, one rank under
// mpiexec: NCCL refuses two ranks on one GPU, and a lent machine has one. The rank sends its faces
// to itself device to device, and its gradient must have the bits of the same slab's through MPI
// (staged through pinned memory) and agree with the uncut grid's reference. Skips, saying why,
// where there is no GPU (CI compiles it; docs/distributed.md says where it ran).
#include "../stencil/reference.hpp"
#include "../stencil/slab_step.hpp"
#include "../stencil/stencils.hpp"
#include "../target.hpp"

#include <tapeflow/distributed/mpi.hpp>
#include <tapeflow/distributed/nccl.hpp>
#include <tapeflow/stencil/slab.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace tapeflow::testing {
namespace {

namespace st = tapeflow::stencil;
namespace dist = tapeflow::distributed;

TEST(Nccl, AOneRankSlabExchangesDeviceToDeviceWithTheBitsOfTheStagedRoute)
{
  TAPEFLOW_REQUIRE_DEVICE(target);
  auto const mpi = std::make_shared<dist::mpi_communicator>();
  auto const nccl = std::make_shared<dist::nccl_communicator>(mpi);
  ASSERT_TRUE(nccl->exchanges_device_memory());
  auto const staged = std::make_shared<recording_ranks>(mpi, false);
  stencils::allen_cahn_2d<double> const s{{0.1, 0.2}};
  st::grid<double> const g{40, 36, 1};
  std::vector<double> const u0 = random_state<double>(g.cells(), 17u, -1.0, 1.0);
  for (int k : {1, 3}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    run_settings const r{k, tape_policy::recompute, 0};
    std::vector<double> const through_nccl = slab_gradient(s, g, 9, r, u0, nccl).gradient;
    std::vector<double> const through_host = slab_gradient(s, g, 9, r, u0, staged).gradient;
    EXPECT_TRUE(same_bits(through_nccl, through_host));
    std::vector<double> const whole = reference_gradient(s, g, 9, u0).gradient;
    EXPECT_LT(relative_difference(through_nccl, whole), 1e-12);
  }
}

}  // namespace
}  // namespace tapeflow::testing

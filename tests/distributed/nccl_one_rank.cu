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

#include <tapeflow/chain.hpp>
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

/// dL/du_0 of L = ½ Σ u_T² through one rank's slab of `g`, its ghost planes exchanged by `comm`.
template <class S, class T = typename S::value_type>
std::vector<T> one_rank_gradient(S const& s, st::grid<T> const& g, std::size_t steps, int k,
                                 std::vector<T> const& u0, std::shared_ptr<dist::communicator> const& comm)
{
  st::segment_request request;
  request.k = k;
  request.tile = test_tile(S::dims);
  st::segment_plan const plan = st::plan_slab_segments<S>(g, steps, query_device_limits(target), request, *comm);
  auto step = make_slab_segments(s, g, plan, comm);
  chain_options o;
  o.kind = target;
  o.policy = tape_policy::recompute;
  o.poison = true;
  o.collective = comm;
  chain<decltype(step)> c(step, step.segments(), o);
  return run_half_squares(c, target, u0).gradient;
}

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
    std::vector<double> const through_nccl = one_rank_gradient(s, g, 9, k, u0, nccl);
    std::vector<double> const through_host = one_rank_gradient(s, g, 9, k, u0, staged);
    EXPECT_TRUE(same_bits(through_nccl, through_host));
    std::vector<double> const whole = reference_gradient(s, g, 9, u0).gradient;
    EXPECT_LT(relative_difference(through_nccl, whole), 1e-12);
  }
}

}  // namespace
}  // namespace tapeflow::testing

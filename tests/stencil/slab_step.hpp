// SPDX-License-Identifier: Apache-2.0
// The Step of a slab of a stencil's grid on the backend under test (target.hpp): the CPU runner in
// the host tests, the device runner in the GPU tests and their emulated twins
// (tapeflow/stencil/slab.hpp), the gradients of chains over it, and a communicator that records
// its exchanges. Shared by the segment tests and the distributed tests.
#pragma once

#include "../target.hpp"
#include "reference.hpp"

#include <tapeflow/chain.hpp>
#include <tapeflow/chain_options.hpp>
#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/slab.hpp>
#include <tapeflow/stencil/stencil.hpp>
#if defined(TAPEFLOW_TEST_ON_GPU)
#include <tapeflow/stencil/device.cuh>
#else
#include <tapeflow/stencil/cpu.hpp>
#endif

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::testing {

/// The Step of this rank's slab of `whole`, cut over the ranks of `comm` (null: the whole grid in
/// one process), in `plan`'s segments, reading the coefficients `c` (the slab's) where S has them.
template <class S>
auto make_slab_segments(S const& s, stencil::grid<typename S::value_type> const& whole,
                        stencil::segment_plan const& plan, std::shared_ptr<distributed::communicator> comm,
                        stencil::coefficient_view<typename S::value_type> c = {})
{
#if defined(TAPEFLOW_TEST_ON_GPU)
  return stencil::make_device_segments(s, whole, plan, std::move(comm), c);
#else
  return stencil::make_cpu_segments(s, whole, plan, std::move(comm), c);
#endif
}

// As reference.hpp's helpers, whose types these use: local to each test program.
namespace {

/// This rank's values of `whole` (fields x cells of the whole grid): its slab's planes of each
/// field, one field after the other, then zeros up to `padded`.
template <class T>
std::vector<T> slab_values(std::vector<T> const& whole, std::size_t cells, int fields, stencil::slab const& s,
                           std::size_t padded)
{
  std::size_t const plane = cells / s.global;
  std::vector<T> out(padded, T(0));
  for (int f = 0; f < fields; ++f) {
    auto const from = whole.begin() + std::ptrdiff_t(std::size_t(f) * cells + s.offset * plane);
    std::copy(from, from + std::ptrdiff_t(s.extent * plane), out.begin() + std::ptrdiff_t(std::size_t(f) * s.extent * plane));
  }
  return out;
}

struct run_settings {
  int k{1};
  tape_policy policy{tape_policy::store};
  std::size_t budget_bytes{0};  ///< this rank's
};

/// This rank's part of the gradient of L = 0.5 sum(u_T^2) over the whole grid, by segments of its
/// slab under a collective chain.
template <class S, class T = typename S::value_type>
gradient_of<T> slab_gradient(S const& s, stencil::grid<T> const& g, std::size_t steps, run_settings const& r,
                             std::vector<T> const& u0, std::shared_ptr<distributed::communicator> const& comm)
{
  stencil::segment_request request;
  request.k = r.k;
  request.tile = test_tile(S::dims);
  request.block_threads = 64;
  stencil::segment_plan const plan = stencil::plan_slab_segments<S>(g, steps, query_device_limits(target), request, *comm);
  auto step = make_slab_segments(s, g, plan, comm);
  chain_options o;
  o.kind = target;
  o.policy = r.policy;
  o.poison = true;
  o.host_tier_on_cpu = r.policy == tape_policy::offload;
  o.budget_bytes = r.budget_bytes;
  o.collective = comm;
  chain<decltype(step)> c(step, step.segments(), o);
  stencil::slab const mine = stencil::slab::of(g.extent(S::dims - 1), comm->size(), comm->rank());
  // Seeded with u_T on this rank's cells only: its part of the loss (the padding is zero).
  return run_half_squares(c, target, slab_values(u0, g.cells(), S::fields, mine, step.state_size()));
}

/// u_T and dL/du_0 (state), and dL/dc.
struct rates_run {
  gradient_of<double> state;
  std::vector<double> dc;
};

/// Those of a stencil with coefficients (the rates c), L = ½ Σ u_T², run in `k`-step segments:
/// over the whole grid in one process (null `comm`), or on this rank's slab.
template <class S>
rates_run run_rates(S const& s, stencil::grid<double> const& g, std::size_t steps, int k, tape_policy policy,
                       std::vector<double> const& u0, std::vector<double> const& c,
                       std::shared_ptr<distributed::communicator> const& comm)
{
  stencil::segment_request request;
  request.k = k;
  request.tile = test_tile(S::dims);
  request.block_threads = 64;
  device_limits const limits = query_device_limits(target);
  stencil::segment_plan const plan =
    comm ? stencil::plan_slab_segments<S>(g, steps, limits, request, *comm) : stencil::plan_segments<S>(g, steps, limits, request);
  std::vector<double> mine_u0 = u0;
  std::vector<double> mine_c = c;
  if (comm) {
    stencil::slab const mine = stencil::slab::of(g.extent(S::dims - 1), comm->size(), comm->rank());
    std::size_t const held = g.cells() / mine.global * mine.extent;
    mine_c = slab_values(c, g.cells(), S::coefficients, mine, held * std::size_t(S::coefficients));
    mine_u0 = slab_values(u0, g.cells(), S::fields, mine, stencil::cut_for<S>(g, plan, *comm).padded);
  }
  device_buffer rates(target, mine_c.size() * sizeof(double), {});
  rates.upload(mine_c.data(), rates.size(), {});
  auto step = make_slab_segments(s, g, plan, comm, stencil::coefficient_view<double>{rates.data_as<double>()});
  EXPECT_EQ(step.parameter_size(), mine_c.size());
  chain_options o;
  o.kind = target;
  o.policy = policy;
  o.poison = true;
  o.collective = comm;
  chain<decltype(step)> c_of(step, step.segments(), o);
  rates_run r{run_half_squares(c_of, target, mine_u0), std::vector<double>(mine_c.size())};
  c_of.parameter_adjoint().download(r.dc.data(), r.dc.size() * sizeof(double), {});
  return r;
}

}  // namespace

/// A communicator that forwards to `inner`, says whether it exchanges device memory as told, and
/// keeps the buffers of every exchange it was asked for: which route a device runner took.
class recording_ranks final : public distributed::communicator {
 public:
  recording_ranks(std::shared_ptr<distributed::communicator> inner, bool device_memory)
    : inner_(std::move(inner)), device_memory_(device_memory)
  {
  }

  std::vector<void const*> sent;  ///< the data of every send, in order
  std::vector<void*> received;    ///< the data of every receive, in order

  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  void allgather(void const* send, void* receive, std::size_t bytes) override { inner_->allgather(send, receive, bytes); }
  distributed::exchange_ticket start_exchange(std::vector<distributed::outgoing> const& sends,
                                              std::vector<distributed::incoming> const& receives) override
  {
    for (distributed::outgoing const& out : sends) { sent.push_back(out.data); }
    for (distributed::incoming const& in : receives) { received.push_back(in.data); }
    return inner_->start_exchange(sends, receives);
  }
  void finish_exchange(distributed::exchange_ticket ticket) override { inner_->finish_exchange(ticket); }
  void announce_failure(std::string const& what) noexcept override { inner_->announce_failure(what); }
  bool exchanges_device_memory() const noexcept override { return device_memory_; }

 private:
  std::shared_ptr<distributed::communicator> inner_;
  bool device_memory_;
};

}  // namespace tapeflow::testing

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
#include <list>
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

/// This rank's part of `whole` (fields x cells of the grid `g` of a `dims`-D stencil): its cells of
/// each field (a slab's planes, or a block's), one field after the other, then zeros up to
/// `padded`. Written apart from the library's cut, as the tests' own account of the layout.
template <class T>
std::vector<T> part_values(std::vector<T> const& whole, stencil::grid<T> const& g, int dims, int fields,
                           stencil::block const& b, std::size_t padded)
{
  std::size_t const inner = dims == 1 ? 1 : g.extent(dims - 2);
  std::size_t const rest = dims == 3 ? g.nx : 1;
  std::size_t const inner_first = b.cut_inner() ? b.inner.offset : 0;
  std::size_t const inner_count = b.cut_inner() ? b.inner.extent : inner;
  std::size_t const held = b.outer.extent * inner_count * rest;
  std::vector<T> out(padded, T(0));
  for (int f = 0; f < fields; ++f) {
    for (std::size_t o = 0; o < b.outer.extent; ++o) {
      for (std::size_t i = 0; i < inner_count; ++i) {
        for (std::size_t r = 0; r < rest; ++r) {
          out[std::size_t(f) * held + (o * inner_count + i) * rest + r] =
            whole[std::size_t(f) * g.cells() + ((b.outer.offset + o) * inner + inner_first + i) * rest + r];
        }
      }
    }
  }
  return out;
}

/// This rank's part of `g` over the ranks of `comm`, arranged as `grid` (0 x 0: the default).
template <class T>
stencil::block rank_block(stencil::grid<T> const& g, int dims, distributed::communicator const& comm,
                          stencil::ranks_grid grid = {})
{
  return stencil::block_of(g, dims, stencil::ranks_grid_of(comm.size(), dims, grid), comm.rank());
}

struct run_settings {
  int k{1};
  tape_policy policy{tape_policy::store};
  std::size_t budget_bytes{0};  ///< this rank's
  stencil::ranks_grid ranks{};  ///< how the ranks are arranged (0 x 0: the default)
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
  request.ranks = r.ranks;
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
  stencil::block const mine = rank_block(g, S::dims, *comm, r.ranks);
  // Seeded with u_T on this rank's cells only: its part of the loss (the padding is zero).
  return run_half_squares(c, target, part_values(u0, g, S::dims, S::fields, mine, step.state_size()));
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
    stencil::slab_cut<double> const cut = stencil::cut_for<S>(g, plan, *comm);
    mine_c = part_values(c, g, S::dims, S::coefficients, cut.where, cut.local.cells() * std::size_t(S::coefficients));
    mine_u0 = part_values(u0, g, S::dims, S::fields, cut.where, cut.padded);
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
/// keeps the buffers of every exchange it was asked for: which route a device runner took. Told it
/// exchanges device memory on a GPU, it moves the bytes as a CUDA-aware communicator would: it
/// copies the sends out of device memory, exchanges host copies through `inner` (a host
/// communicator: single_rank copies with memmove), and copies what arrived into the receives.
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
#if defined(TAPEFLOW_TEST_ON_GPU) && !defined(TAPEFLOW_EMULATED)
    if (device_memory_) {
      std::vector<distributed::outgoing> host_sends = sends;
      std::vector<distributed::incoming> host_receives = receives;
      staged_.emplace_back();
      staged_exchange& st = staged_.back();
      for (distributed::outgoing& out : host_sends) {
        st.buffers.emplace_back(out.bytes);
        TAPEFLOW_CUDA_TRY(cudaMemcpy(st.buffers.back().data(), out.data, out.bytes, cudaMemcpyDefault));
        out.data = st.buffers.back().data();
      }
      for (distributed::incoming& in : host_receives) {
        st.buffers.emplace_back(in.bytes);
        st.arrivals.push_back({in.data, st.buffers.back().data(), in.bytes});
        in.data = st.buffers.back().data();
      }
      st.ticket = inner_->start_exchange(host_sends, host_receives);
      return st.ticket;
    }
#endif
    return inner_->start_exchange(sends, receives);
  }
  void finish_exchange(distributed::exchange_ticket ticket) override
  {
    inner_->finish_exchange(ticket);
#if defined(TAPEFLOW_TEST_ON_GPU) && !defined(TAPEFLOW_EMULATED)
    auto const st = std::find_if(staged_.begin(), staged_.end(), [&](staged_exchange const& e) { return e.ticket == ticket; });
    if (st == staged_.end()) { return; }
    for (arrival const& a : st->arrivals) {
      TAPEFLOW_CUDA_TRY(cudaMemcpy(a.device, a.host, a.bytes, cudaMemcpyDefault));
    }
    staged_.erase(st);
#endif
  }
  void announce_failure(std::string const& what) noexcept override { inner_->announce_failure(what); }
  bool exchanges_device_memory() const noexcept override { return device_memory_; }

 private:
  struct arrival {
    void* device;
    void const* host;
    std::size_t bytes;
  };
  struct staged_exchange {
    distributed::exchange_ticket ticket{};
    std::list<std::vector<unsigned char>> buffers;  // a list: the host copies stay put as it grows
    std::vector<arrival> arrivals;
  };
  std::shared_ptr<distributed::communicator> inner_;
  bool device_memory_;
  std::list<staged_exchange> staged_;
};

}  // namespace tapeflow::testing

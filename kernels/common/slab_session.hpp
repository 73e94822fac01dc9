// SPDX-License-Identifier: Apache-2.0
// A state-chain workload decomposed over the ranks of a distributed run (docs/distributed.md): this
// rank's session runs its slab of the grid (a chain of stencil segments on the slab, whose state is
// padded to the widest slab's), and this wrapper makes it look like the whole problem. It takes
// the whole initial state and keeps its slab's planes. The loss is the ranks' parts summed in rank
// order. The gradients and outputs are the whole grid's, gathered on every rank. Every call is
// collective; a rank that throws tells the others (distributed::collectively).
#pragma once

#include "session.hpp"

#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/stencil/slab.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::workloads {

template <class T>
class slab_session final : public session<T> {
 public:
  /// `inner`: this rank's session over `cut`'s padded slab state (`fields` fields) of a whole grid
  /// whose planes hold `plane` values each.
  slab_session(std::unique_ptr<session<T>> inner, std::shared_ptr<distributed::communicator> ranks,
               stencil::slab_cut<T> const& cut, std::size_t plane, int fields)
    : session<T>(inner->kind()), inner_(std::move(inner)), ranks_(std::move(ranks)), slab_(cut.where), plane_(plane),
      fields_(static_cast<std::size_t>(fields)), padded_(cut.padded)
  {
  }

  void load(std::vector<host_array<T>> const& inputs, stream_view s) override
  {
    together([&] {
      std::size_t const whole = slab_.global * plane_ * fields_;
      TAPEFLOW_EXPECTS(inputs.size() == 1, "the workload takes one input, its initial state");
      TAPEFLOW_EXPECTS(inputs[0].size == whole, "the initial state holds " + std::to_string(inputs[0].size) +
                                                  " values; the problem's state has " + std::to_string(whole));
      std::vector<T> mine(padded_, T(0));
      for (std::size_t f = 0; f < fields_; ++f) {
        T const* const from = inputs[0].data + f * slab_.global * plane_ + slab_.offset * plane_;
        std::copy(from, from + slab_.extent * plane_, mine.begin() + static_cast<std::ptrdiff_t>(f * slab_.extent * plane_));
      }
      inner_->load({host_array<T>(mine)}, s);
    });
  }

  void primal(stream_view s) override
  {
    together([&] { inner_->primal(s); });
  }
  void forward(stream_view s) override
  {
    together([&] { inner_->forward(s); });
  }
  void reverse(stream_view s) override
  {
    together([&] { inner_->reverse(s); });
  }

  /// Σ over ranks of each rank's ½ Σ u² over its own cells, in rank order.
  T loss(stream_view s) override
  {
    T const mine = together([&] { return inner_->loss(s); });
    return static_cast<T>(distributed::sum_in_rank_order(*ranks_, static_cast<double>(mine)));
  }

  std::vector<std::vector<T>> gradients(stream_view s) override
  {
    return whole(together([&] { return inner_->gradients(s); }));
  }
  std::vector<std::vector<T>> outputs(stream_view s) override
  {
    return whole(together([&] { return inner_->outputs(s); }));
  }

  tape_report report() const override
  {
    tape_report r = inner_->report();
    r.notes.push_back("ranks: " + std::to_string(slab_.ranks) + ", this one (" + std::to_string(slab_.rank) +
                      ") owns planes " + std::to_string(slab_.offset) + " to " +
                      std::to_string(slab_.offset + slab_.extent - 1) + " of " + std::to_string(slab_.global));
    r.facts.emplace_back("ranks", static_cast<double>(slab_.ranks));
    return r;
  }

 private:
  template <class Work>
  decltype(auto) together(Work&& work)
  {
    return distributed::collectively(*ranks_, std::forward<Work>(work));
  }

  /// The whole grid's vectors from every rank's padded slab vectors (the same size on every rank).
  std::vector<std::vector<T>> whole(std::vector<std::vector<T>> const& mine) const
  {
    std::vector<std::vector<T>> out;
    for (std::vector<T> const& part : mine) {
      TAPEFLOW_EXPECTS(part.size() == padded_, "a slab's vector holds " + std::to_string(part.size()) +
                                                 " values; the padded slab has " + std::to_string(padded_));
      std::vector<T> all(padded_ * static_cast<std::size_t>(slab_.ranks));
      ranks_->allgather(part.data(), all.data(), padded_ * sizeof(T));
      std::vector<T> grid(slab_.global * plane_ * fields_);
      for (int r = 0; r < slab_.ranks; ++r) {
        stencil::slab const theirs = stencil::slab::of(slab_.global, slab_.ranks, r);
        for (std::size_t f = 0; f < fields_; ++f) {
          T const* const from = all.data() + static_cast<std::size_t>(r) * padded_ + f * theirs.extent * plane_;
          std::copy(from, from + theirs.extent * plane_,
                    grid.begin() + static_cast<std::ptrdiff_t>(f * slab_.global * plane_ + theirs.offset * plane_));
        }
      }
      out.push_back(std::move(grid));
    }
    return out;
  }

  std::unique_ptr<session<T>> inner_;
  std::shared_ptr<distributed::communicator> ranks_;
  stencil::slab slab_;
  std::size_t plane_;
  std::size_t fields_;
  std::size_t padded_;
};

}  // namespace tapeflow::workloads

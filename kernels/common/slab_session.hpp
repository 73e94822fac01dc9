// SPDX-License-Identifier: Apache-2.0
// A state-chain workload decomposed over the ranks of a distributed run (docs/distributed.md): this
// rank's session runs its slab of the grid (a chain of stencil segments on the slab, whose state is
// padded to the widest slab's), and this wrapper makes it look like the whole problem. It takes
// the whole inputs and hands each rank its slab's planes of those the layout cuts (the initial
// state of Allen–Cahn; the wave's session cuts its model itself). The loss is the ranks' parts
// summed in rank order. The gradients and outputs are the whole grid's, gathered on every rank.
// Every call is collective; a rank that throws tells the others (distributed::collectively).
#pragma once

#include "session.hpp"

#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/stencil/slab.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::workloads {

/// How a session's arrays lie over the ranks: per input, gradient and output, the values per cell
/// of an array cut into slabs (each rank's session holds its slab's planes of every field, field
/// after field, its padding after them), or 0 for an input every rank's session takes whole.
struct slab_layout {
  std::vector<int> inputs;
  std::vector<int> gradients;
  std::vector<int> outputs;

  /// A state chain's: the initial state in, its gradient and the final state out, `fields` values
  /// per cell each.
  [[nodiscard]] static slab_layout of_state(int fields) { return {{fields}, {fields}, {fields}}; }
};

template <class T>
class slab_session final : public session<T> {
 public:
  /// `inner`: this rank's session over slab `where` of a whole grid whose planes hold `plane`
  /// values each, its arrays laid out as `layout` says.
  slab_session(std::unique_ptr<session<T>> inner, std::shared_ptr<distributed::communicator> ranks,
               stencil::slab const& where, std::size_t plane, slab_layout layout)
    : session<T>(inner->kind()), inner_(std::move(inner)), ranks_(std::move(ranks)), slab_(where), plane_(plane),
      layout_(std::move(layout))
  {
  }

  void load(std::vector<host_array<T>> const& inputs, stream_view s) override
  {
    together([&] {
      TAPEFLOW_EXPECTS(inputs.size() == layout_.inputs.size(),
                       "the workload takes " + std::to_string(layout_.inputs.size()) + " inputs, not " +
                         std::to_string(inputs.size()));
      std::vector<std::vector<T>> cut(inputs.size());
      std::vector<host_array<T>> mine;
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        auto const fields = static_cast<std::size_t>(layout_.inputs[i]);
        if (fields == 0) {
          mine.push_back(inputs[i]);
          continue;
        }
        std::size_t const whole = slab_.global * plane_ * fields;
        TAPEFLOW_EXPECTS(inputs[i].size == whole, "input " + std::to_string(i) + " holds " +
                                                    std::to_string(inputs[i].size) + " values; the problem's has " +
                                                    std::to_string(whole));
        cut[i].assign(fields * slab_.widest() * plane_, T(0));
        for (std::size_t f = 0; f < fields; ++f) {
          T const* const from = inputs[i].data + f * slab_.global * plane_ + slab_.offset * plane_;
          std::copy(from, from + slab_.extent * plane_,
                    cut[i].begin() + static_cast<std::ptrdiff_t>(f * slab_.extent * plane_));
        }
        mine.push_back(host_array<T>(cut[i]));
      }
      inner_->load(mine, s);
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
    return whole(together([&] { return inner_->gradients(s); }), layout_.gradients);
  }
  std::vector<std::vector<T>> outputs(stream_view s) override
  {
    return whole(together([&] { return inner_->outputs(s); }), layout_.outputs);
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

  /// The whole grid's vectors from every rank's slab vectors (`fields` values per cell each).
  std::vector<std::vector<T>> whole(std::vector<std::vector<T>> const& mine, std::vector<int> const& fields) const
  {
    TAPEFLOW_EXPECTS(mine.size() == fields.size(), "the session gave " + std::to_string(mine.size()) +
                                                     " vectors; its layout names " + std::to_string(fields.size()));
    std::vector<std::vector<T>> out;
    for (std::size_t i = 0; i < mine.size(); ++i) {
      auto const per_cell = static_cast<std::size_t>(fields[i]);
      std::size_t const held = per_cell * slab_.extent * plane_;
      std::size_t const widest = per_cell * slab_.widest() * plane_;  // what every rank sends
      TAPEFLOW_EXPECTS(mine[i].size() >= held, "a slab's vector holds " + std::to_string(mine[i].size()) +
                                                 " values; the slab has " + std::to_string(held));
      std::vector<T> part(widest, T(0));
      std::copy(mine[i].begin(), mine[i].begin() + static_cast<std::ptrdiff_t>(held), part.begin());
      std::vector<T> all(widest * static_cast<std::size_t>(slab_.ranks));
      ranks_->allgather(part.data(), all.data(), widest * sizeof(T));
      std::vector<T> grid(slab_.global * plane_ * per_cell);
      for (int r = 0; r < slab_.ranks; ++r) {
        stencil::slab const theirs = stencil::slab::of(slab_.global, slab_.ranks, r);
        for (std::size_t f = 0; f < per_cell; ++f) {
          T const* const from = all.data() + static_cast<std::size_t>(r) * widest + f * theirs.extent * plane_;
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
  slab_layout layout_;
};

}  // namespace tapeflow::workloads

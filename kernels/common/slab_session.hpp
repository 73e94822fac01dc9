// SPDX-License-Identifier: Apache-2.0
// A state-chain workload decomposed over the ranks of a distributed run (docs/distributed.md): this
// rank's session runs its part of the grid, a slab or a block (a chain of stencil segments on the
// part, whose state is padded to the widest part's), and this wrapper makes it look like the whole
// problem. It takes the whole inputs and hands each rank its part's cells of those the layout cuts
// (the initial state of Allen–Cahn; the wave's session cuts its model itself). The loss is the
// ranks' parts summed in rank order. The gradients and outputs are the whole grid's, gathered on
// every rank.
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

/// Where one rank's part of a grid lies in the whole grid's arrays of one value per cell: its
/// block, and the whole grid's cells along the inner axis and along the faster uncut one. A part's
/// cells are stored as the whole grid's are (stencil/ghosts.hpp), so each of its planes along the
/// outer cut axis is one run of the whole array.
struct part_place {
  stencil::block where;
  std::size_t inner{1};  ///< the whole grid's cells along the inner axis (1 in 1-D)
  std::size_t rest{1};   ///< along the faster uncut axis (x in 3-D; 1 otherwise)

  /// The whole of a grid of `cells` cells, as one process holds it.
  [[nodiscard]] static part_place whole(std::size_t cells) { return {{stencil::slab::of(1, 1, 0)}, cells, 1}; }
  /// Part `where` of the grid `g` of a `dims`-D stencil.
  template <class T>
  [[nodiscard]] static part_place of(stencil::grid<T> const& g, int dims, stencil::block const& where)
  {
    return {where, dims == 1 ? 1 : g.extent(dims - 2), dims == 3 ? g.nx : 1};
  }
  /// The same place of another rank of the run.
  [[nodiscard]] part_place of_rank(int rank) const
  {
    return {stencil::block::of(where.outer.global, inner, {where.outer.ranks, where.inner.ranks}, rank), inner, rest};
  }

  /// Cells of the part along the inner axis, and its first there.
  [[nodiscard]] std::size_t inner_extent() const noexcept { return where.cut_inner() ? where.inner.extent : inner; }
  [[nodiscard]] std::size_t inner_offset() const noexcept { return where.cut_inner() ? where.inner.offset : 0; }
  /// Cells of the whole grid, of the part, and of the widest part of the run.
  [[nodiscard]] std::size_t cells() const noexcept { return where.outer.global * inner * rest; }
  [[nodiscard]] std::size_t held() const noexcept { return where.outer.extent * inner_extent() * rest; }
  [[nodiscard]] std::size_t widest() const noexcept
  {
    return where.outer.widest() * (where.cut_inner() ? where.inner.widest() : inner) * rest;
  }

  /// part = the part's cells of `whole` (one field of each).
  template <class T>
  void take(T const* whole, T* part) const
  {
    each_plane([&](std::size_t w, std::size_t p, std::size_t n) { std::copy(whole + w, whole + w + n, part + p); });
  }
  /// The part's cells of `whole` = part.
  template <class T>
  void put(T const* part, T* whole) const
  {
    each_plane([&](std::size_t w, std::size_t p, std::size_t n) { std::copy(part + p, part + p + n, whole + w); });
  }

 private:
  /// run(whole_index, part_index, values) for each of the part's planes along the outer cut.
  template <class Run>
  void each_plane(Run&& run) const
  {
    std::size_t const n = inner_extent() * rest;
    for (std::size_t o = 0; o < where.outer.extent; ++o) {
      run(((where.outer.offset + o) * inner + inner_offset()) * rest, o * n, n);
    }
  }
};

/// How a session's arrays lie over the ranks: per input, gradient and output, the values per cell
/// of an array cut into parts (each rank's session holds its part's cells of every field, field
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
  /// `inner`: this rank's session over the part `where` of a whole grid, its arrays laid out as
  /// `layout` says.
  slab_session(std::unique_ptr<session<T>> inner, std::shared_ptr<distributed::communicator> ranks,
               part_place const& where, slab_layout layout)
    : session<T>(inner->kind()), inner_(std::move(inner)), ranks_(std::move(ranks)), place_(where),
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
        std::size_t const whole = place_.cells() * fields;
        TAPEFLOW_EXPECTS(inputs[i].size == whole, "input " + std::to_string(i) + " holds " +
                                                    std::to_string(inputs[i].size) + " values; the problem's has " +
                                                    std::to_string(whole));
        cut[i].assign(fields * place_.widest(), T(0));
        for (std::size_t f = 0; f < fields; ++f) {
          place_.take(inputs[i].data + f * place_.cells(), cut[i].data() + f * place_.held());
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
    stencil::block const& b = place_.where;
    std::string note = "ranks: " + std::to_string(b.ranks()) + " (" + std::to_string(b.outer.ranks) + " x " +
                       std::to_string(b.inner.ranks) + "), this one (" + std::to_string(b.rank()) + ") owns planes " +
                       std::to_string(b.outer.offset) + " to " + std::to_string(b.outer.offset + b.outer.extent - 1) +
                       " of " + std::to_string(b.outer.global);
    if (b.cut_inner()) {
      note += ", cells " + std::to_string(b.inner.offset) + " to " + std::to_string(b.inner.offset + b.inner.extent - 1) +
              " of " + std::to_string(b.inner.global) + " across them";
    }
    r.notes.push_back(note);
    r.facts.emplace_back("ranks", static_cast<double>(b.ranks()));
    r.facts.emplace_back("ranks_rows", static_cast<double>(b.outer.ranks));  // the process grid
    r.facts.emplace_back("ranks_columns", static_cast<double>(b.inner.ranks));
    return r;
  }

 private:
  template <class Work>
  decltype(auto) together(Work&& work)
  {
    return distributed::collectively(*ranks_, std::forward<Work>(work));
  }

  /// The whole grid's vectors from every rank's part's vectors (`fields` values per cell each).
  std::vector<std::vector<T>> whole(std::vector<std::vector<T>> const& mine, std::vector<int> const& fields) const
  {
    TAPEFLOW_EXPECTS(mine.size() == fields.size(), "the session gave " + std::to_string(mine.size()) +
                                                     " vectors; its layout names " + std::to_string(fields.size()));
    int const ranks = place_.where.ranks();
    std::vector<std::vector<T>> out;
    for (std::size_t i = 0; i < mine.size(); ++i) {
      auto const per_cell = static_cast<std::size_t>(fields[i]);
      std::size_t const held = per_cell * place_.held();
      std::size_t const widest = per_cell * place_.widest();  // what every rank sends
      TAPEFLOW_EXPECTS(mine[i].size() >= held, "a part's vector holds " + std::to_string(mine[i].size()) +
                                                 " values; the part has " + std::to_string(held));
      std::vector<T> part(widest, T(0));
      std::copy(mine[i].begin(), mine[i].begin() + static_cast<std::ptrdiff_t>(held), part.begin());
      std::vector<T> all(widest * static_cast<std::size_t>(ranks));
      ranks_->allgather(part.data(), all.data(), widest * sizeof(T));
      std::vector<T> grid(place_.cells() * per_cell);
      for (int r = 0; r < ranks; ++r) {
        part_place const theirs = place_.of_rank(r);
        for (std::size_t f = 0; f < per_cell; ++f) {
          theirs.put(all.data() + static_cast<std::size_t>(r) * widest + f * theirs.held(),
                     grid.data() + f * place_.cells());
        }
      }
      out.push_back(std::move(grid));
    }
    return out;
  }

  std::unique_ptr<session<T>> inner_;
  std::shared_ptr<distributed::communicator> ranks_;
  part_place place_;
  slab_layout layout_;
};

}  // namespace tapeflow::workloads

// SPDX-License-Identifier: Apache-2.0
// The backend-independent host side of the wave gradient, its session: m and the observed data on
// the backend, the chain's state (u_{t-1}, u_t, L_t) from rest, the seed dL/dL_T = 1, the chain's
// reverse with dL/dm accumulated by every step into the chain's parameter adjoint. Each backend
// supplies its Step (cpu.cpp, cuda.cu), made from the geometry and the two input buffers.
#pragma once

#include "wave.hpp"

#include <tapeflow/workloads/common/slab_session.hpp>

#include <tapeflow/chain.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/nvtx.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::workloads::wave::detail {

/// Values of the chain's state: u_{t-1} and u_t of every cell, then L_t.
[[nodiscard]] inline std::size_t state_values(problem const& p) noexcept { return 2 * p.cells() + 1; }

/// Throws logic_error unless every m is finite, positive and stable for the time step.
template <class T>
void check_model(problem const& p, host_array<T> m)
{
  T least = m.size > 0 ? m.data[0] : T(0);
  for (std::size_t i = 0; i < m.size; ++i) {
    TAPEFLOW_EXPECTS(std::isfinite(static_cast<double>(m.data[i])) && m.data[i] > T(0),
                     "m (the squared slowness) of cell " + std::to_string(i) + " is not a finite positive value");
    least = std::min(least, m.data[i]);
  }
  double const dims = p.nz > 1 ? 3.0 : 2.0;
  double const limit = p.h * std::sqrt(static_cast<double>(least) / dims);
  TAPEFLOW_EXPECTS(p.dt <= limit, "the time step dt = " + ::tapeflow::detail::shown(p.dt) +
                                    " is unstable for this model: its fastest cell (m = " +
                                    ::tapeflow::detail::shown(static_cast<double>(least)) + ") needs dt <= " +
                                    ::tapeflow::detail::shown(limit));
}

/// Throws logic_error unless `inputs` are m (one value per cell, check_model) and the observed
/// data d (T x receivers).
template <class T>
void check_inputs(problem const& p, std::vector<host_array<T>> const& inputs)
{
  TAPEFLOW_EXPECTS(inputs.size() == 2, "the wave workload takes 2 inputs (m and the observed data d), not " +
                                         std::to_string(inputs.size()));
  TAPEFLOW_EXPECTS(inputs[0].size == p.cells(), "m holds " + std::to_string(inputs[0].size) + " values; the grid has " +
                                                  std::to_string(p.cells()) + " cells");
  std::size_t const traces = p.steps * p.receivers();
  TAPEFLOW_EXPECTS(inputs[1].size == traces, "d holds " + std::to_string(inputs[1].size) + " values; " +
                                               std::to_string(p.steps) + " steps of " + std::to_string(p.receivers()) +
                                               " receivers need " + std::to_string(traces));
  check_model(p, inputs[0]);
}

/// The cells of the grid a session holds (its m, dL/dm and u_T): all of them, or over ranks its
/// part's (a slab or a block: part_place).
using held_cells = part_place;

/// What the wave's sessions share, whatever one step of their chain is (a time step here, a
/// segment of them in segments.hpp): m and the observed data on the backend, the state and its
/// adjoint, the chain over `Step`, and the calls that do not depend on the step. The derived
/// session makes its Step (after the buffers, whose addresses it may take) and seeds the adjoint.
template <class T, class Step>
class chain_session : public session<T> {
 public:
  /// Checks the whole model and data, and keeps the model's held cells.
  void load(std::vector<host_array<T>> const& inputs, stream_view s) override
  {
    check_inputs(p_, inputs);
    if (held_.held() == held_.cells()) {
      m_.upload(inputs[0].data, m_.size(), s);
    } else {
      std::vector<T> mine(held_.held());
      held_.take(inputs[0].data, mine.data());
      m_.upload(mine.data(), m_.size(), s);
      synchronize(this->kind(), s);  // `mine` is pageable host memory, and goes when this returns
    }
    d_.upload(inputs[1].data, d_.size(), s);
  }

  void reverse(stream_view s) override
  {
    TAPEFLOW_EXPECTS(chain_, "reverse() needs a completed forward() whose tape was not reversed yet");
    chain_->reverse(adjoint_, s);  // zeroes the parameter adjoint, then every step adds its dL/dm
  }

  /// dL/dm of the held cells.
  std::vector<std::vector<T>> gradients(stream_view s) override
  {
    std::vector<T> dm(held_.held());
    chain_->parameter_adjoint().download(dm.data(), dm.size() * sizeof(T), s);
    return {std::move(dm)};
  }

  /// u_T of the held cells (the state's second field).
  std::vector<std::vector<T>> outputs(stream_view s) override
  {
    std::vector<T> u(held_.held());
    state_.download(u.data(), u.size() * sizeof(T), s, u.size() * sizeof(T));
    return {std::move(u)};
  }

 protected:
  /// The buffers of a state of `state_values` values over the `held` cells.
  chain_session(problem const& p, options const& o, held_cells held, std::size_t state_values)
    : session<T>(o.kind), p_(p), o_(o), held_(held), m_(o.kind, held.held() * sizeof(T), o.stream),
      d_(o.kind, p.steps * p.receivers() * sizeof(T), o.stream), state_(o.kind, state_values * sizeof(T), o.stream),
      spare_(o.kind, state_values * sizeof(T), o.stream), adjoint_(o.kind, state_values * sizeof(T), o.stream)
  {
  }

  /// The untaped forward of the chain's `layers` steps of `step`, from rest.
  void run_primal(Step const& step, std::size_t layers, stream_view s)
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::wave::primal");
    state_.fill(0, s);
    for (std::size_t j = 0; j < layers; ++j) {
      step.forward(j, state_.template data_as<T>(), spare_.template data_as<T>(), s);
      std::swap(state_, spare_);
    }
  }
  /// The chain's forward of `layers` steps of `step` from rest (the chain made at the first call).
  void run_forward(Step const& step, std::size_t layers, stream_view s)
  {
    TAPEFLOW_NVTX_RANGE("tapeflow::wave::forward");
    if (!chain_) { chain_.emplace(step, layers, chain_options_of(o_)); }
    state_.fill(0, s);
    chain_->forward(state_, s);
  }
  [[nodiscard]] tape_report report_of_chain() const { return chain_session_report(chain_, this->kind()); }

  problem p_;
  options o_;
  held_cells held_;
  device_buffer m_, d_;
  device_buffer state_, spare_, adjoint_;
  std::optional<chain<Step>> chain_;
};

/// The one-step chain's session: the chain's state is (u_{t-1}, u_t, L_t). The backend's Step has
/// the members `geometry<T> g`, `T const* m` and `T const* d`, which the session points at its grid
/// and its buffers.
template <class T, class Step>
class wave_session final : public chain_session<T, Step> {
 public:
  /// `step`: the backend's Step but for g, m and d; `staging`: the ring counters a CPU step adds its
  /// tiles to (null on a GPU).
  wave_session(problem const& p, options const& o, Step step, std::shared_ptr<cpu::ring_stats const> staging)
    : chain_session<T, Step>(p, o, held_cells::whole(p.cells()), state_values(p)), staging_(std::move(staging)), step_(std::move(step)),
      seed_(o.kind, state_values(p) * sizeof(T), o.stream)
  {
    step_.g = geometry_of<T>(p);
    step_.m = this->m_.template data_as<T>();
    step_.d = this->d_.template data_as<T>();
    std::vector<T> seed(state_values(p), T(0));
    seed.back() = T(1);  // dL/dL_T = 1; the fields' adjoints start at zero
    seed_.upload(seed.data(), seed_.size(), o.stream);
    synchronize(o.kind, o.stream);  // `seed` is pageable host memory, and goes when this returns
  }

  void primal(stream_view s) override { this->run_primal(step_, this->p_.steps, s); }

  void forward(stream_view s) override
  {
    this->run_forward(step_, this->p_.steps, s);
    this->adjoint_.copy_from(seed_, s);
  }

  /// L_T, the state's last value.
  T loss(stream_view s) override
  {
    T l{};
    this->state_.download(&l, sizeof(T), s, this->state_.size() - sizeof(T));
    return l;
  }

  tape_report report() const override
  {
    tape_report r = this->report_of_chain();
    if (staging_) { r.staging = *staging_; }
    return r;
  }

 private:
  std::shared_ptr<cpu::ring_stats const> staging_;
  Step step_;
  device_buffer seed_;
};

template <class T, class Step>
[[nodiscard]] std::unique_ptr<session<T>> open_wave(problem const& p, options const& o, Step step,
                                                    std::shared_ptr<cpu::ring_stats const> staging = nullptr)
{
  return std::make_unique<wave_session<T, Step>>(p, o, std::move(step), std::move(staging));
}

}  // namespace tapeflow::workloads::wave::detail

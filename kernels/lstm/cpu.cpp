// SPDX-License-Identifier: Apache-2.0
// The LSTM on the CPU reference backend: the matrix products as plain loops over the sequences a
// step advances, the cells through the shared math (ended sequences carry their state and
// adjoint), every loop spread over the CPU backend's threads by what it writes (a row of a
// product, a cell, a row of a parameter gradient), so the sums run in one order whatever the
// thread count; the reverse's records come through cpu::reverse_tiles.
#include "backends.hpp"
#include "driver.hpp"
#include "math.hpp"

#include <tapeflow/cpu/reverse.hpp>
#include <tapeflow/cpu/thread_pool.hpp>

#include <memory>

namespace tapeflow::workloads::lstm::detail {
namespace {


template <class T>
struct cpu_step {
  using value_type = T;
  using record_type = record<T>;

  problem p;
  step_buffers<T> buf;
  std::shared_ptr<cpu::ring_stats> staging;

  [[nodiscard]] std::size_t gates() const noexcept { return 4 * p.hidden; }
  [[nodiscard]] std::size_t state_size() const noexcept { return 2 * p.batch * p.hidden; }
  [[nodiscard]] std::size_t cells() const noexcept { return p.batch * p.hidden; }
  /// B_t H: the cells of the sequences step t advances (all B H unless the sequences are packed).
  [[nodiscard]] std::size_t records_per_step(std::size_t t) const noexcept { return active_sequences(p, t) * p.hidden; }
  [[nodiscard]] std::size_t parameter_size() const noexcept { return parameter_count(p); }

  /// wx[:, t B + b] = W x_t[b] for every step at once.
  void project_inputs(stream_view) const
  {
    std::size_t const G = gates();
    std::size_t const columns = p.steps * p.batch;
    cpu::parallel_for(columns, cpu::grain_for(columns), [&](std::size_t begin, std::size_t end) {
      for (std::size_t tb = begin; tb < end; ++tb) {
        T const* x = buf.x + tb * p.input;
        for (std::size_t r = 0; r < G; ++r) {
          T const* w = buf.w + r * p.input;
          T acc = 0;
          for (std::size_t i = 0; i < p.input; ++i) { acc += w[i] * x[i]; }
          buf.wx[tb * G + r] = acc;
        }
      }
    });
  }

  /// z[:, b] = U h[b] for the first `active` sequences.
  void recurrent(T const* h, std::size_t active) const
  {
    std::size_t const G = gates();
    cpu::parallel_for(active, cpu::grain_for(active), [&](std::size_t begin, std::size_t end) {
      for (std::size_t b = begin; b < end; ++b) {
        for (std::size_t r = 0; r < G; ++r) {
          T const* u = buf.u + r * p.hidden;
          T acc = 0;
          for (std::size_t j = 0; j < p.hidden; ++j) { acc += u[j] * h[b * p.hidden + j]; }
          buf.z[b * G + r] = acc;
        }
      }
    });
  }

  /// The cells of a step that advances `active` sequences: cell_of(r) for their cells; the others
  /// carry their state.
  template <class Cell>
  void cells_of(std::size_t active, T const* in, T* out, Cell&& cell_of) const
  {
    std::size_t const advanced = active * p.hidden;
    cpu::parallel_for(cells(), cpu::grain_for(cells(), 256), [&](std::size_t begin, std::size_t end) {
      for (std::size_t r = begin; r < end; ++r) {
        if (r < advanced) {
          cell_of(r);
        } else {
          carry_cell(in, out, p.hidden, p.batch, r);
        }
      }
    });
  }

  void forward(std::size_t t, T const* in, T* out, stream_view) const
  {
    std::size_t const active = active_sequences(p, t);
    recurrent(in, active);
    T const* wx = buf.wx + t * p.batch * gates();
    cells_of(active, in, out, [&](std::size_t r) {
      static_cast<void>(forward_cell(buf.z, wx, buf.b, in, out, p.hidden, p.batch, r));
    });
  }

  void augmented_forward(std::size_t t, T const* in, T* out, tape_writer<record_type> tape, stream_view) const
  {
    std::size_t const active = active_sequences(p, t);
    recurrent(in, active);
    T const* wx = buf.wx + t * p.batch * gates();
    cells_of(active, in, out, [&](std::size_t r) {
      tape.write(r, forward_cell(buf.z, wx, buf.b, in, out, p.hidden, p.batch, r));
    });
  }

  void reverse(std::size_t t, tape_reader<record_type> tape, pipeline_plan const& plan, T const* g_out, T* g_in,
               T* g_theta, stream_view) const
  {
    parameter_gradients<T> const g(p, g_theta);
    cpu::reverse_tiles(
      tape, plan,
      [&](std::size_t, record_type const* staged, std::size_t first, std::size_t count) {
        for (std::size_t k = 0; k < count; ++k) {
          reverse_cell(staged[k], g_out, g_in, buf.dz, buf.h_prev, p.hidden, p.batch, first + k);
        }
      },
      staging.get());
    // The sequences that have ended pass their adjoint back unchanged.
    std::size_t const active = active_sequences(p, t);
    std::size_t const taped = active * p.hidden;
    std::size_t const ended = cells() - taped;
    cpu::parallel_for(ended, cpu::grain_for(ended, 256), [&](std::size_t begin, std::size_t end) {
      for (std::size_t k = begin; k < end; ++k) { carry_cell(g_out, g_in, p.hidden, p.batch, taped + k); }
    });
    std::size_t const G = gates();
    T const* x = buf.x + t * p.batch * p.input;
    // dW += δz X_tᵀ, dU += δz H_prevᵀ, db += Σ_b δz over the B_t active sequences: a thread per
    // row r, sums over b in order.
    cpu::parallel_for(G, cpu::grain_for(G), [&](std::size_t r_begin, std::size_t r_end) {
      for (std::size_t r = r_begin; r < r_end; ++r) {
        for (std::size_t i = 0; i < p.input; ++i) {
          T acc = 0;
          for (std::size_t b = 0; b < active; ++b) { acc += buf.dz[b * G + r] * x[b * p.input + i]; }
          g.dw[r * p.input + i] += acc;
        }
        for (std::size_t j = 0; j < p.hidden; ++j) {
          T acc = 0;
          for (std::size_t b = 0; b < active; ++b) { acc += buf.dz[b * G + r] * buf.h_prev[b * p.hidden + j]; }
          g.du[r * p.hidden + j] += acc;
        }
        T acc = 0;
        for (std::size_t b = 0; b < active; ++b) { acc += buf.dz[b * G + r]; }
        g.db[r] += acc;
      }
    });
    // dL/dh_prev = Uᵀ δz for the active sequences.
    cpu::parallel_for(active, cpu::grain_for(active), [&](std::size_t b_begin, std::size_t b_end) {
      for (std::size_t b = b_begin; b < b_end; ++b) {
        for (std::size_t j = 0; j < p.hidden; ++j) {
          T acc = 0;
          for (std::size_t r = 0; r < G; ++r) { acc += buf.u[r * p.hidden + j] * buf.dz[b * G + r]; }
          g_in[b * p.hidden + j] = acc;
        }
      }
    });
  }
};

/// What the CPU steps share: the staging ring's counters.
template <class T>
struct cpu_kit {
  using step_type = cpu_step<T>;
  std::shared_ptr<cpu::ring_stats> counters = std::make_shared<cpu::ring_stats>();

  [[nodiscard]] step_type step(problem const& p, step_buffers<T> buf) const { return {p, buf, counters}; }
  [[nodiscard]] cpu::ring_stats staging() const { return *counters; }
};

}  // namespace

template <class T>
std::unique_ptr<session<T>> open_cpu(problem const& p, options const& o)
{
  return std::make_unique<lstm_session<T, cpu_kit<T>>>(p, o, cpu_kit<T>{});
}

template std::unique_ptr<session<float>> open_cpu(problem const&, options const&);
template std::unique_ptr<session<double>> open_cpu(problem const&, options const&);

}  // namespace tapeflow::workloads::lstm::detail

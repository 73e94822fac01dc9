// SPDX-License-Identifier: Apache-2.0
// LBM on the CPU reference backend: the same plan, layers and tiles as the GPU, the reverse fed by
// the worker-thread staging ring.
#include "backends.hpp"
#include "driver.hpp"
#include "math.hpp"

#include <tapeflow/cpu/tile_ring.hpp>

#include <memory>

namespace tapeflow::workloads::lbm::detail {
namespace {


template <class T>
struct cpu_step {
  using value_type = T;
  using record_type = record<T>;

  std::size_t nx;
  std::size_t ny;
  T omega;
  std::shared_ptr<cpu::lazy_tile_ring<record_type>> stage;

  [[nodiscard]] std::size_t state_size() const noexcept { return 9 * nx * ny; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return records_per_layer<T>(nx * ny); }

  void forward(std::size_t, T const* in, T* out, stream_view) const
  {
    for (std::size_t cell = 0; cell < nx * ny; ++cell) { step_cell(in, out, nx, ny, cell, omega); }
  }

  void augmented_forward(std::size_t, T const* in, T* out, tape_writer<record_type> tape, stream_view) const
  {
    for (std::size_t r = 0; r < tape.size(); ++r) { tape.write(r, forward_region(in, out, nx, ny, r, omega)); }
  }

  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const& plan, T const* g_next, T* g_f,
               stream_view) const
  {
    stage->for_plan(plan).reverse(
      tape, [&](std::size_t, record_type const* staged, std::size_t first, std::size_t count) {
        for (std::size_t i = 0; i < count; ++i) { reverse_region(staged[i], g_next, g_f, nx, ny, first + i, omega); }
      });
  }
};

}  // namespace

template <class T>
gradient_result<T> gradient_cpu(problem const& p, std::vector<T> const& f0, options const& o)
{
  auto stage = std::make_shared<cpu::lazy_tile_ring<record<T>>>();
  cpu_step<T> step{p.nx, p.ny, omega_of<T>(p), stage};
  gradient_result<T> result = run_gradient<T>(
    std::move(step),
    [](device_buffer const& state, stream_view) {
      return half_sum_of_squares(state.data_as<T>(), state.size() / sizeof(T));
    },
    p, f0, o);
  result.staging = stage->stats();
  return result;
}

template <class T>
std::vector<T> primal_cpu(problem const& p, std::vector<T> const& f0, options const& o)
{
  cpu_step<T> const step{p.nx, p.ny, omega_of<T>(p), nullptr};
  return run_primal<T>([&step](T const* in, T* out, stream_view s) { step.forward(0, in, out, s); }, p, f0, o);
}

template gradient_result<float> gradient_cpu(problem const&, std::vector<float> const&, options const&);
template gradient_result<double> gradient_cpu(problem const&, std::vector<double> const&, options const&);
template std::vector<float> primal_cpu(problem const&, std::vector<float> const&, options const&);
template std::vector<double> primal_cpu(problem const&, std::vector<double> const&, options const&);

}  // namespace tapeflow::workloads::lbm::detail

// SPDX-License-Identifier: Apache-2.0
// Allen–Cahn on the CPU reference backend: the same plan, layers and tiles as the GPU, the reverse
// fed by the worker-thread staging ring.
#include "backends.hpp"
#include "driver.hpp"
#include "math.hpp"

#include <tapeflow/cpu/tile_ring.hpp>

#include <memory>

namespace tapeflow::workloads::allen_cahn::detail {
namespace {


template <class T>
struct cpu_step {
  using value_type = T;
  using record_type = record<T>;

  std::size_t n;
  coefficients<T> k;
  std::shared_ptr<cpu::lazy_tile_ring<record_type>> stage;
  tape_content content{tape_content::values};

  [[nodiscard]] std::size_t state_size() const noexcept { return n * n; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return records_for<T>(n * n); }

  void forward(std::size_t, T const* in, T* out, stream_view) const
  {
    for (std::size_t cell = 0; cell < n * n; ++cell) { out[cell] = step_at(in, n, cell, k); }
  }

  void augmented_forward(std::size_t, T const* in, T* out, tape_writer<record_type> tape, stream_view) const
  {
    for (std::size_t r = 0; r < tape.size(); ++r) { tape.write(r, forward_region(in, out, n, r, k, content)); }
  }

  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const& plan, T const* g_out, T* g_in,
               stream_view) const
  {
    stage->for_plan(plan).reverse(
      tape, [&](std::size_t, record_type const* staged, std::size_t first, std::size_t count) {
        for (std::size_t i = 0; i < count; ++i) { reverse_region(staged[i], g_out, g_in, n, first + i, k, content); }
      });
  }
};

}  // namespace

template <class T>
gradient_result<T> gradient_cpu(problem const& p, std::vector<T> const& u0, options const& o)
{
  auto stage = std::make_shared<cpu::lazy_tile_ring<record<T>>>();
  cpu_step<T> step{p.n, coefficients_of<T>(p), stage, o.content};
  gradient_result<T> result = run_gradient<T>(
    std::move(step), [](device_buffer const& state, stream_view) { return half_sum_of_squares(state.data_as<T>(), state.size() / sizeof(T)); }, p, u0, o);
  result.staging = stage->stats();
  return result;
}

template <class T>
std::vector<T> primal_cpu(problem const& p, std::vector<T> const& u0, options const& o)
{
  cpu_step<T> const step{p.n, coefficients_of<T>(p), nullptr};
  return run_primal<T>([&step](T const* in, T* out, stream_view s) { step.forward(0, in, out, s); }, p, u0, o);
}

template <class T>
bench_result benchmark_cpu(problem const& p, std::vector<T> const& u0, options const& o, int warmup, int repeats)
{
  cpu_step<T> const step{p.n, coefficients_of<T>(p), std::make_shared<cpu::lazy_tile_ring<record<T>>>(), o.content};
  return run_benchmark<T>(step, p, u0, o, warmup, repeats);
}

template bench_result benchmark_cpu(problem const&, std::vector<float> const&, options const&, int, int);
template bench_result benchmark_cpu(problem const&, std::vector<double> const&, options const&, int, int);
template gradient_result<float> gradient_cpu(problem const&, std::vector<float> const&, options const&);
template gradient_result<double> gradient_cpu(problem const&, std::vector<double> const&, options const&);
template std::vector<float> primal_cpu(problem const&, std::vector<float> const&, options const&);
template std::vector<double> primal_cpu(problem const&, std::vector<double> const&, options const&);

}  // namespace tapeflow::workloads::allen_cahn::detail

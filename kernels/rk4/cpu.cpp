// SPDX-License-Identifier: Apache-2.0
// RK4 particles on the CPU reference backend: the same arena layout, chunks and tiers as the GPU;
// each "launch" is a loop over the particles calling the regions of math.hpp, spread over the CPU
// backend's threads (a particle writes only its own state, steps and tape slots).
#include "backends.hpp"
#include "driver.hpp"
#include "math.hpp"

#include <tapeflow/cpu/thread_pool.hpp>

namespace tapeflow::workloads::rk4::detail {
namespace {

template <class T>
struct cpu_kernels {
  std::size_t n;

  /// f(t) for every particle t, on the CPU backend's threads (trip counts differ: small chunks).
  template <class F>
  void each(F&& f) const
  {
    cpu::parallel_for(n, cpu::grain_for(n, 16, 32), [&](std::size_t begin, std::size_t end) {
      for (std::size_t t = begin; t < end; ++t) { f(t); }
    });
  }

  void segment(thread_tape_writer<step_record<T>> w, state<T>* y, T* arc, T const* budget, params<T> const& k,
               stream_view) const
  {
    each([&](std::size_t t) { segment_region(w, t, y, arc, budget, k); });
  }
  void chunk_reverse(thread_tape_reader<step_record<T>> r, state<T>* g, params<T> const& k, stream_view) const
  {
    each([&](std::size_t t) { chunk_reverse_region(r, t, g, k); });
  }
  void stack_forward(step_record<T>* tape, state<T>* y, T const* budget, std::uint32_t* steps, params<T> const& k,
                     stream_view) const
  {
    each([&](std::size_t t) { stack_forward_region(t, tape, y, budget, steps, k); });
  }
  void stack_reverse(step_record<T> const* tape, std::uint32_t const* steps, state<T>* g, params<T> const& k,
                     stream_view) const
  {
    each([&](std::size_t t) { stack_reverse_region(t, tape, steps, g, k); });
  }
  void primal(state<T>* y, T const* budget, std::uint32_t* steps, params<T> const& k, stream_view) const
  {
    each([&](std::size_t t) { steps[t] = primal_region(t, y, budget, k); });
  }
  void budgets(state<T> const* y0, std::uint32_t const* targets, T* out, params<T> const& k, stream_view) const
  {
    each([&](std::size_t t) { out[t] = budget_region(t, y0, targets, k); });
  }
};

}  // namespace

template <class T>
std::unique_ptr<session<T>> open_cpu(problem const& p, options const& o)
{
  return std::make_unique<rk4_session<T, cpu_kernels<T>>>(cpu_kernels<T>{p.particles}, p, o);
}

template <class T>
primal_result<T> primal_cpu(problem const& p, std::vector<T> const& state0, std::vector<T> const& budgets,
                            options const& o)
{
  return run_primal<T>(cpu_kernels<T>{p.particles}, p, state0, budgets, o);
}

template <class T>
std::vector<T> budgets_cpu(problem const& p, std::vector<T> const& state0, std::vector<std::uint32_t> const& targets,
                           options const& o)
{
  return run_budgets<T>(cpu_kernels<T>{p.particles}, p, state0, targets, o);
}

template std::unique_ptr<session<float>> open_cpu(problem const&, options const&);
template std::unique_ptr<session<double>> open_cpu(problem const&, options const&);
template primal_result<float> primal_cpu(problem const&, std::vector<float> const&, std::vector<float> const&,
                                         options const&);
template primal_result<double> primal_cpu(problem const&, std::vector<double> const&, std::vector<double> const&,
                                          options const&);
template std::vector<float> budgets_cpu(problem const&, std::vector<float> const&, std::vector<std::uint32_t> const&,
                                        options const&);
template std::vector<double> budgets_cpu(problem const&, std::vector<double> const&,
                                         std::vector<std::uint32_t> const&, options const&);

}  // namespace tapeflow::workloads::rk4::detail

// SPDX-License-Identifier: Apache-2.0
#include "allen_cahn.hpp"
#include "backends.hpp"
#include "driver.hpp"
#include "math.hpp"

#include <tapeflow/error.hpp>

#include <string>

namespace tapeflow::workloads::allen_cahn {

void validate(problem const& p, std::size_t values)
{
  TAPEFLOW_EXPECTS(p.n >= 1, "the grid side n must be at least 1");
  TAPEFLOW_EXPECTS(p.steps >= 1, "the number of steps must be at least 1");
  TAPEFLOW_EXPECTS(p.n <= (std::size_t{1} << 31), "grid side " + std::to_string(p.n) + " is too large");
  TAPEFLOW_EXPECTS(values == p.n * p.n, "the initial state holds " + std::to_string(values) +
                                          " values; an n = " + std::to_string(p.n) + " grid needs " +
                                          std::to_string(p.n * p.n));
}

namespace {
[[noreturn]] void no_backend(backend kind)
{
  TAPEFLOW_FAIL(unavailable_error, "the Allen–Cahn workload has no " + std::string{to_string(kind)} +
                                     " kernels in this build");
}
}  // namespace

template <class T>
gradient_result<T> gradient(problem const& p, std::vector<T> const& u0, options const& o)
{
  switch (o.kind) {
    case backend::cpu: return detail::gradient_cpu(p, u0, o);
#if defined(TAPEFLOW_HAS_CUDA)
    case backend::cuda: return detail::gradient_gpu(p, u0, o);
#elif defined(TAPEFLOW_HAS_HIP)
    case backend::hip: return detail::gradient_gpu(p, u0, o);
#endif
    default: no_backend(o.kind);
  }
}

template <class T>
chain_stats plan(problem const& p, options const& o)
{
  validate(p, p.n * p.n);
  return plan_chain(sizeof(record<T>), records_for<T>(p.n * p.n), p.steps, p.n * p.n * sizeof(T),
                    chain_options_of(o));
}

template <class T>
std::vector<T> primal(problem const& p, std::vector<T> const& u0, options const& o)
{
  switch (o.kind) {
    case backend::cpu: return detail::primal_cpu(p, u0, o);
#if defined(TAPEFLOW_HAS_CUDA)
    case backend::cuda: return detail::primal_gpu(p, u0, o);
#elif defined(TAPEFLOW_HAS_HIP)
    case backend::hip: return detail::primal_gpu(p, u0, o);
#endif
    default: no_backend(o.kind);
  }
}

template <class T>
bench_result benchmark(problem const& p, std::vector<T> const& u0, options const& o, int warmup, int repeats)
{
  switch (o.kind) {
    case backend::cpu: return detail::benchmark_cpu(p, u0, o, warmup, repeats);
#if defined(TAPEFLOW_HAS_CUDA)
    case backend::cuda: return detail::benchmark_gpu(p, u0, o, warmup, repeats);
#elif defined(TAPEFLOW_HAS_HIP)
    case backend::hip: return detail::benchmark_gpu(p, u0, o, warmup, repeats);
#endif
    default: no_backend(o.kind);
  }
}

template <class T>
T loss(std::vector<T> const& u)
{
  return half_sum_of_squares(u.data(), u.size());
}

template gradient_result<float> gradient(problem const&, std::vector<float> const&, options const&);
template gradient_result<double> gradient(problem const&, std::vector<double> const&, options const&);
template std::vector<float> primal(problem const&, std::vector<float> const&, options const&);
template std::vector<double> primal(problem const&, std::vector<double> const&, options const&);
template chain_stats plan<float>(problem const&, options const&);
template chain_stats plan<double>(problem const&, options const&);
template bench_result benchmark(problem const&, std::vector<float> const&, options const&, int, int);
template bench_result benchmark(problem const&, std::vector<double> const&, options const&, int, int);
template float loss(std::vector<float> const&);
template double loss(std::vector<double> const&);

}  // namespace tapeflow::workloads::allen_cahn

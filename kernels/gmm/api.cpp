// SPDX-License-Identifier: Apache-2.0
#include "gmm.hpp"
#include "backends.hpp"
#include "driver.hpp"
#include "math.hpp"

#include <tapeflow/error.hpp>

#include <random>
#include <string>

namespace tapeflow::workloads::gmm {

namespace {

void expect_length(std::vector<double> const& v, std::size_t want, char const* name)
{
  TAPEFLOW_EXPECTS(v.size() == want, std::string{name} + " holds " + std::to_string(v.size()) +
                                       " values; the problem needs " + std::to_string(want));
}

[[noreturn]] void no_backend(backend kind)
{
  TAPEFLOW_FAIL(unavailable_error, "the GMM workload has no " + std::string{to_string(kind)} +
                                     " kernels in this build (its GPU path is CUDA only: CUB reductions)");
}

}  // namespace

void validate(problem const& p, inputs const& in)
{
  TAPEFLOW_EXPECTS(p.d >= 1, "the dimension d must be at least 1");
  TAPEFLOW_EXPECTS(p.k >= 1, "the number of components K must be at least 1");
  TAPEFLOW_EXPECTS(p.n >= 1, "the number of points N must be at least 1");
  TAPEFLOW_EXPECTS(p.gamma > 0, "the Wishart gamma must be positive");
  TAPEFLOW_EXPECTS(p.m >= 0, "the Wishart m must not be negative");
  TAPEFLOW_EXPECTS(p.d <= 4096 && p.k <= (std::size_t{1} << 24) && p.n <= (std::size_t{1} << 34) &&
                     p.n * p.k <= (std::size_t{1} << 40),
                   "the GMM problem d = " + std::to_string(p.d) + ", K = " + std::to_string(p.k) +
                     ", N = " + std::to_string(p.n) + " is too large");
  expect_length(in.alphas, p.k, "alphas");
  expect_length(in.means, p.k * p.d, "means");
  expect_length(in.icf, p.k * icf_size(p.d), "icf");
  expect_length(in.x, p.n * p.d, "x");
}

inputs random_inputs(problem const& p, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  inputs in;
  in.alphas.resize(p.k);
  in.means.resize(p.k * p.d);
  in.icf.resize(p.k * icf_size(p.d));
  in.x.resize(p.n * p.d);
  for (double& v : in.alphas) { v = normal(rng); }
  for (double& v : in.means) { v = unit(rng); }
  for (double& v : in.icf) { v = 0.1 * normal(rng); }
  for (double& v : in.x) { v = unit(rng); }
  return in;
}

double objective(problem const& p, inputs const& in, options const& o)
{
  switch (o.kind) {
    case backend::cpu: return detail::objective_cpu(p, in, o);
#if defined(TAPEFLOW_HAS_CUDA)
    case backend::cuda: return detail::objective_gpu(p, in, o);
#endif
    default: no_backend(o.kind);
  }
}

gradient_result gradient(problem const& p, inputs const& in, options const& o)
{
  switch (o.kind) {
    case backend::cpu: return detail::gradient_cpu(p, in, o);
#if defined(TAPEFLOW_HAS_CUDA)
    case backend::cuda: return detail::gradient_gpu(p, in, o);
#endif
    default: no_backend(o.kind);
  }
}

pipeline_plan plan(problem const& p, options const& o)
{
  TAPEFLOW_EXPECTS(p.d >= 1 && p.k >= 1 && p.n >= 1, "d, K and N must be at least 1");
  if (o.kind != backend::cpu && !backend_compiled(o.kind)) { no_backend(o.kind); }
#if !defined(TAPEFLOW_HAS_CUDA)
  if (o.kind != backend::cpu) { no_backend(o.kind); }
#endif
  return detail::make_layout(p, o).plan;
}

bench_result benchmark(problem const& p, inputs const& in, options const& o, int warmup, int repeats)
{
  switch (o.kind) {
    case backend::cpu: return detail::benchmark_cpu(p, in, o, warmup, repeats);
#if defined(TAPEFLOW_HAS_CUDA)
    case backend::cuda: return detail::benchmark_gpu(p, in, o, warmup, repeats);
#endif
    default: no_backend(o.kind);
  }
}

}  // namespace tapeflow::workloads::gmm

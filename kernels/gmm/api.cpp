// SPDX-License-Identifier: Apache-2.0
#include "gmm.hpp"
#include "backends.hpp"
#include "driver.hpp"
#include "math.hpp"

#include <tapeflow/memory.hpp>

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

}  // namespace

void validate(problem const& p)
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
}

void validate(problem const& p, inputs const& in)
{
  validate(p);
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

std::unique_ptr<session<double>> open(problem const& p, options const& o)
{
  validate(p);
  // The GPU path is CUDA only: its reductions run on CUB (no rocPRIM twin yet).
  return on_backend<gpu_kernels::cuda_only>(
    o.kind, "the GMM workload", [&] { return detail::open_cpu(p, o); }, [&](auto) { return detail::open_gpu(p, o); });
}

double objective(problem const& p, inputs const& in, options const& o)
{
  validate(p, in);
  std::unique_ptr<session<double>> const run = open(p, o);
  run->load({in.alphas, in.means, in.icf, in.x}, o.stream);
  run->primal(o.stream);
  return run->loss(o.stream);
}

gradient_result gradient(problem const& p, inputs const& in, options const& o)
{
  validate(p, in);
  reset_device_memory_peak(o.kind);
  std::unique_ptr<session<double>> const run = open(p, o);
  outcome<double> r = gradient_of(*run, {in.alphas, in.means, in.icf, in.x}, o.stream);
  gradient_result g;
  g.objective = r.loss;
  g.d_alphas = std::move(r.gradients[0]);
  g.d_means = std::move(r.gradients[1]);
  g.d_icf = std::move(r.gradients[2]);
  g.plan = *r.report.layer;
  g.tape_bytes = r.report.tape_bytes;
  g.peak_device_bytes = r.report.peak_device_bytes;
  g.staging = r.report.staging;
  return g;
}

pipeline_plan plan(problem const& p, options const& o)
{
  validate(p);
  return on_backend<gpu_kernels::cuda_only>(
    o.kind, "the GMM workload", [&] { return detail::make_layout(p, o).plan; },
    [&](auto) { return detail::make_layout(p, o).plan; });
}

}  // namespace tapeflow::workloads::gmm

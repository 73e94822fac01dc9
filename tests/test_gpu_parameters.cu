// SPDX-License-Identifier: Apache-2.0
// Chains on the GPU backend (and its emulated twin): a second gradient allocates nothing under
// every policy, the stream-ordered allocator's pool keeps freed memory (release threshold), and a
// step's parameter adjoint matches long-double central differences with the same bits under
// every policy. Skipped (with the reason) when no GPU is present.
#include "gpu_backend.hpp"

#include <tapeflow/backend.hpp>
#include <tapeflow/chain.hpp>
#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/tile_pipeline.cuh>
#include <tapeflow/memory.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace tapeflow {
namespace {

using rec = value_record<double, 2>;

// x' = x + a (x - x³) + b x²/2 elementwise, θ = (a, b); two values a record.
TAPEFLOW_HOST_DEVICE inline double next_value(double x, double a, double b) noexcept
{
  return x + a * (x - x * x * x) + b * 0.5 * x * x;
}

__global__ void forward_kernel(double const* in, double* out, std::size_t n, double a, double b)
{
  for (std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[k] = next_value(in[k], a, b);
  }
}

__global__ void augmented_kernel(double const* in, double* out, tape_writer<rec> tape, std::size_t n, double a,
                                 double b)
{
  for (std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; r < tape.size();
       r += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    rec v{};
    for (std::size_t c = 0; c < 2 && 2 * r + c < n; ++c) {
      v.values[c] = in[2 * r + c];
      out[2 * r + c] = next_value(in[2 * r + c], a, b);
    }
    tape.write(r, v);
  }
}

// The state adjoint and each element's share of dL/dθ (a per-element partial: no atomics).
template <int Stages>
__global__ void reverse_kernel(tape_reader<rec> tape, double const* g_out, double* g_in, double* partial,
                               std::size_t n, double a, double b)
{
  device::tile_pipeline<rec, Stages>::reverse(
    tape, [&](std::size_t, rec const* staged, std::size_t first, std::size_t count) {
      for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) {
        for (std::size_t c = 0; c < 2 && 2 * (first + i) + c < n; ++c) {
          std::size_t const k = 2 * (first + i) + c;
          double const x = staged[i].values[c];
          g_in[k] = g_out[k] * (1.0 + a * (1.0 - 3.0 * x * x) + b * x);
          partial[2 * k] = g_out[k] * (x - x * x * x);
          partial[2 * k + 1] = g_out[k] * 0.5 * x * x;
        }
      }
    });
}

// θ's adjoint += the partials summed in index order by one thread: the same bits every time.
__global__ void accumulate_kernel(double const* partial, std::size_t n, double* g_theta)
{
  if (blockIdx.x != 0 || threadIdx.x != 0) { return; }
  double da = 0;
  double db = 0;
  for (std::size_t k = 0; k < n; ++k) {
    da += partial[2 * k];
    db += partial[2 * k + 1];
  }
  g_theta[0] += da;
  g_theta[1] += db;
}

struct gpu_theta_step {
  using value_type = double;
  using record_type = rec;

  std::size_t size;
  double a;
  double b;
  double* partial;  ///< 2 x size values of the test's device memory
  int multiprocessors;

  [[nodiscard]] std::size_t state_size() const noexcept { return size; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return (size + 1) / 2; }
  [[nodiscard]] std::size_t parameter_size() const noexcept { return 2; }

  void forward(std::size_t, double const* in, double* out, stream_view s) const
  {
    device::launch(forward_kernel, device::grid_for(size, 128, multiprocessors), 128, 0, s, in, out, size, a, b);
  }

  void augmented_forward(std::size_t, double const* in, double* out, tape_writer<rec> tape, stream_view s) const
  {
    device::launch(augmented_kernel, device::grid_for(tape.size(), 128, multiprocessors), 128, 0, s, in, out, tape,
                   size, a, b);
  }

  void reverse(std::size_t, tape_reader<rec> tape, pipeline_plan const& plan, double const* g_out, double* g_in,
               double* g_theta, stream_view s) const
  {
    device::with_tile_pipeline<rec>(plan, [&](auto stages) {
      constexpr int S = decltype(stages)::value;
      device::launch(reverse_kernel<S>, plan.grid_blocks, plan.block_threads, plan.smem_bytes, s, tape, g_out, g_in,
                     partial, size, a, b);
    });
    device::launch(accumulate_kernel, 1, 1, 0, s, partial, size, g_theta);
  }
};

std::vector<tape_policy> const every_policy{tape_policy::store, tape_policy::offload, tape_policy::recompute,
                                            tape_policy::automatic};

chain_options options_for(tape_policy p, std::size_t layer, std::size_t state, std::size_t steps)
{
  chain_options o;
  o.kind = gpu_backend;
  o.policy = p;
  o.poison = true;
  o.bw = {5.0, 5.0, 20.0};
  o.pipeline.tile_records = 8;
  if (p == tape_policy::offload) { o.budget_bytes = 2 * layer; }
  if (p == tape_policy::recompute) { o.budget_bytes = layer + 3 * state; }
  if (p == tape_policy::automatic) {
    o.budget_bytes = steps * layer / 2;
    o.bw = {50.0, 50.0, 20.0};  // copies hide behind compute: half on the device, half in the host tier
  }
  return o;
}

long double loss_of(std::vector<double> const& x0, long double a, long double b, std::size_t steps)
{
  long double sum = 0;
  for (double v : x0) {
    long double x = v;
    for (std::size_t t = 0; t < steps; ++t) { x = x + a * (x - x * x * x) + b * 0.5L * x * x; }
    sum += 0.5L * x * x;
  }
  return sum;
}

class GpuChains : public ::testing::Test {
 protected:
  void SetUp() override
  {
    TAPEFLOW_REQUIRE_DEVICE(gpu_backend);
  }
};

struct run_result {
  std::vector<double> theta;
  std::vector<double> state;
};

run_result run(chain<gpu_theta_step>& c, device_buffer& state, device_buffer& adjoint, std::vector<double> const& x0,
               stream_view s)
{
  state.upload(x0.data(), state.size(), s);
  c.forward(state, s);
  adjoint.copy_from(state, s);  // dL/dx_T = x_T
  c.reverse(adjoint, s);
  run_result r{std::vector<double>(2), std::vector<double>(x0.size())};
  c.parameter_adjoint().download(r.theta.data(), 2 * sizeof(double), s);
  adjoint.download(r.state.data(), adjoint.size(), s);
  return r;
}

/// What the memory and stream tests share: 64 values of x0 (a smooth function of the index),
/// `steps` steps of gpu_theta_step with a = 0.03, b = 0.05, and the sizes the policies' budgets
/// are made from.
struct small_chain {
  std::vector<double> x0;
  std::size_t steps;
  std::size_t bytes;
  std::size_t layer;
  device_limits limits;
  device_buffer partial;

  template <class Init>
  small_chain(std::size_t step_count, Init&& value_at)
    : x0(64), steps(step_count), bytes(64 * sizeof(double)), layer(32 * sizeof(rec)),
      limits(query_device_limits(gpu_backend)), partial(gpu_backend, 2 * bytes, {})
  {
    for (std::size_t k = 0; k < x0.size(); ++k) { x0[k] = value_at(static_cast<double>(k)); }
  }
  [[nodiscard]] gpu_theta_step step() { return gpu_theta_step{x0.size(), 0.03, 0.05, partial.data_as<double>(), limits.multiprocessors}; }
  [[nodiscard]] chain_options options(tape_policy p) const { return options_for(p, layer, bytes, steps); }
};

TEST_F(GpuChains, ParameterAdjointsMatchFiniteDifferencesWithTheSameBitsUnderEveryPolicy)
{
  std::vector<double> x0(45);
  for (std::size_t k = 0; k < x0.size(); ++k) { x0[k] = 0.5 * std::sin(1.3 * static_cast<double>(k) + 0.2); }
  double const a = 0.04;
  double const b = -0.06;
  constexpr std::size_t steps = 12;
  std::size_t const bytes = x0.size() * sizeof(double);
  std::size_t const layer = ((x0.size() + 1) / 2) * sizeof(rec);
  long double const h = 1e-6L;
  long double const fd_a = (loss_of(x0, a + h, b, steps) - loss_of(x0, a - h, b, steps)) / (2 * h);
  long double const fd_b = (loss_of(x0, a, b + h, steps) - loss_of(x0, a, b - h, steps)) / (2 * h);
  device_limits const limits = query_device_limits(gpu_backend);
  device_buffer partial(gpu_backend, 2 * bytes, {});
  std::vector<run_result> results;
  for (tape_policy p : every_policy) {
    SCOPED_TRACE(to_string(p));
    chain<gpu_theta_step> c(gpu_theta_step{x0.size(), a, b, partial.data_as<double>(), limits.multiprocessors}, steps,
                            options_for(p, layer, bytes, steps));
    if (p == tape_policy::automatic) {
      EXPECT_GT(c.stats().tiers.count(tier::host), 0u);
      EXPECT_GT(c.stats().tiers.count(tier::device), 0u);
    } else {
      EXPECT_EQ(c.stats().policy, p);
    }
    device_buffer state(gpu_backend, bytes, {});
    device_buffer adjoint(gpu_backend, bytes, {});
    run_result const r = run(c, state, adjoint, x0, {});
    EXPECT_NEAR(r.theta[0], static_cast<double>(fd_a), 1e-9 * std::fabs(static_cast<double>(fd_a)));
    EXPECT_NEAR(r.theta[1], static_cast<double>(fd_b), 1e-9 * std::fabs(static_cast<double>(fd_b)));
    run_result const again = run(c, state, adjoint, x0, {});  // zeroed at each reverse
    EXPECT_EQ(std::memcmp(again.theta.data(), r.theta.data(), 2 * sizeof(double)), 0);
    results.push_back(r);
  }
  for (std::size_t k = 1; k < results.size(); ++k) {
    EXPECT_EQ(std::memcmp(results[k].theta.data(), results[0].theta.data(), 2 * sizeof(double)), 0) << k;
    EXPECT_EQ(std::memcmp(results[k].state.data(), results[0].state.data(), bytes), 0) << k;
  }
}

TEST_F(GpuChains, ASecondGradientAllocatesNothingUnderEveryPolicyOnAnyStream)
{
  small_chain sc(10, [](double k) { return 0.3 * std::cos(0.7 * k); });
  std::vector<double> const& x0 = sc.x0;
  std::size_t const bytes = sc.bytes;
  stream other(gpu_backend);
  for (tape_policy p : every_policy) {
    SCOPED_TRACE(to_string(p));
    chain<gpu_theta_step> c(sc.step(), sc.steps, sc.options(p));
    device_buffer state(gpu_backend, bytes, {});
    device_buffer adjoint(gpu_backend, bytes, {});
    run_result const first = run(c, state, adjoint, x0, {});
    memory_usage const device_before = device_memory_usage(gpu_backend);
    memory_usage const host_before = host_memory_usage(gpu_backend);
    // Again on the default stream, then on another one (its memory reuse follows the last call).
    for (stream_view s : {stream_view{}, other.view()}) {
      run_result const r = run(c, state, adjoint, x0, s);
      EXPECT_EQ(std::memcmp(r.theta.data(), first.theta.data(), 2 * sizeof(double)), 0);
      EXPECT_EQ(std::memcmp(r.state.data(), first.state.data(), bytes), 0);
    }
    memory_usage const device_after = device_memory_usage(gpu_backend);
    memory_usage const host_after = host_memory_usage(gpu_backend);
    EXPECT_EQ(device_after.allocations, device_before.allocations);
    EXPECT_EQ(device_after.allocated_bytes, device_before.allocated_bytes);
    EXPECT_EQ(host_after.allocations, host_before.allocations);
    EXPECT_EQ(host_after.allocated_bytes, host_before.allocated_bytes);
  }
}

TEST_F(GpuChains, AForwardOnAnotherStreamWaitsForTheReverseWhoseMemoryItReuses)
{
  // The reverse runs on s2; the next forward, on s1, is queued at once and reuses the layers the
  // reverse has yet to read. (Lazy emulated streams run s1's queue first when the host waits for
  // s1: without the chain's event between the calls the forward overwrites the reverse's tape.)
  small_chain sc(8, [](double k) { return 0.4 * std::sin(0.9 * k); });
  std::vector<double> const& x0 = sc.x0;
  std::size_t const bytes = sc.bytes;
  for (tape_policy p : every_policy) {
    SCOPED_TRACE(to_string(p));
    chain<gpu_theta_step> c(sc.step(), sc.steps, sc.options(p));
    device_buffer state(gpu_backend, bytes, {});
    device_buffer adjoint(gpu_backend, bytes, {});
    run_result const expect = run(c, state, adjoint, x0, {});
    stream s1(gpu_backend);
    stream s2(gpu_backend);
    event handoff(gpu_backend);
    state.upload(x0.data(), bytes, s1.view());
    c.forward(state, s1.view());
    adjoint.copy_from(state, s1.view());
    handoff.record(s1.view());
    handoff.wait(s2.view());
    c.reverse(adjoint, s2.view());
    std::vector<double> x1(x0.size());
    for (std::size_t k = 0; k < x1.size(); ++k) { x1[k] = -0.5 * x0[k] + 0.1; }  // another tape altogether
    // Allocated on the stream that uses them: memory from the stream-ordered pool is ordered on
    // the stream it was allocated on (compute-sanitizer's initcheck flagged `next` allocated on the
    // default stream and written on s1 before that allocation was reached).
    device_buffer next(gpu_backend, bytes, s1.view());
    next.upload(x1.data(), bytes, s1.view());
    c.forward(next, s1.view());
    s1.synchronize();
    std::vector<double> got(x0.size());
    adjoint.download(got.data(), bytes, s2.view());
    EXPECT_EQ(std::memcmp(got.data(), expect.state.data(), bytes), 0);
    device_buffer next_adjoint(gpu_backend, bytes, s1.view());
    next_adjoint.copy_from(next, s1.view());
    c.reverse(next_adjoint, s1.view());
    s1.synchronize();
  }
}

TEST_F(GpuChains, AChainThatGoesAfterACallOnAnotherStreamFreesItsMemoryAfterThatCall)
{
  // The chain's memory is allocated on the default stream (its first gradient); its last gradient
  // runs on another stream, and the chain goes while that gradient is still queued. Its buffers
  // are freed on the stream they were allocated on, which must first wait for that gradient.
  // (Lazy emulated streams: synchronising the default stream first runs the frees before the
  // other stream's queue, whose kernels would then read and write freed memory.)
  small_chain sc(8, [](double k) { return 0.35 * std::cos(1.1 * k + 0.4); });
  std::vector<double> const& x0 = sc.x0;
  std::size_t const bytes = sc.bytes;
  for (tape_policy p : every_policy) {
    SCOPED_TRACE(to_string(p));
    device_buffer state(gpu_backend, bytes, {});
    device_buffer adjoint(gpu_backend, bytes, {});
    stream other(gpu_backend);
    run_result expect;
    {
      chain<gpu_theta_step> c(sc.step(), sc.steps, sc.options(p));
      expect = run(c, state, adjoint, x0, {});
      state.upload(x0.data(), bytes, other.view());
      c.forward(state, other.view());
      adjoint.copy_from(state, other.view());
      c.reverse(adjoint, other.view());
    }
    synchronize(gpu_backend, {});  // the chain's frees
    std::vector<double> got(x0.size());
    adjoint.download(got.data(), bytes, other.view());
    EXPECT_EQ(std::memcmp(got.data(), expect.state.data(), bytes), 0);
  }
}

TEST_F(GpuChains, TheStreamOrderedPoolKeepsFreedMemory)
{
  { device_buffer const any(gpu_backend, 1024, {}); }  // the backend's first allocation configures the pool
  int ordinal = 0;
  TAPEFLOW_CUDA_TRY(cudaGetDevice(&ordinal));
  cudaMemPool_t pool = nullptr;
  TAPEFLOW_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, ordinal));
  unsigned long long threshold = 0;
  TAPEFLOW_CUDA_TRY(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  EXPECT_EQ(threshold, ~0ULL) << "the default pool would hand freed memory back at every synchronisation";
}

}  // namespace
}  // namespace tapeflow

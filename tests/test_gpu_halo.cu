// SPDX-License-Identifier: Apache-2.0
// A stencil's halo on the device (tapeflow/halo.hpp): every tile pipeline variant stages each
// tile with `halo` records on each side (wrapping past the layer's end, or the whole layer where
// the window covers it), and a chain of Burgers' one-step reverse on the GPU, which reads its
// neighbours through those windows, gives the host's gradient, the same bits under every policy
// and pipeline. Skipped (with the reason) when no GPU is present.
#include "gpu_backend.hpp"
#include "random_layer.cuh"

#include <tapeflow/backend.hpp>
#include <tapeflow/chain.hpp>
#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/tile_pipeline.cuh>
#include <tapeflow/halo.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/tape.hpp>
#include <tapeflow/workloads/burgers/math.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tapeflow {
namespace {

using rec = testing::digest_record;
using testing::digest;

/// What record r of a layer of `records` sees through its window: the records r - halo ... r + halo
/// (wrapped), folded in order.
template <class Records>
TAPEFLOW_HOST_DEVICE unsigned neighbourhood(Records const& layer, std::size_t r, std::size_t halo, std::size_t records)
{
  unsigned s = 0;
  for (std::size_t d = 0; d <= 2 * halo; ++d) { s = s * 31u + digest(layer[(r + records - halo + d) % records]); }
  return s;
}

// Each thread takes the tile's records from its far end, so it reads what other threads staged: a
// window published before all of it landed, cut one record short, or refilled while read fails.
template <int Stages>
__global__ void window_kernel(tape_reader<rec> tape, std::size_t halo, unsigned* sums, unsigned* visits)
{
  device::tile_pipeline<rec, Stages>::reverse_windows(
    tape, halo, [&](std::size_t, tile_window<rec> const& window, std::size_t first, std::size_t count) {
      for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) {
        std::size_t const r = first + (count - 1 - i);
        sums[r] = neighbourhood(window, r, halo, tape.layout().records);
        atomicAdd(visits + r, 1u);
      }
    });
}

struct window_case {
  std::size_t records;
  std::size_t tile_records;
  int stages;
  int block_threads;
  std::size_t halo;
  bool plain{false};
  bool bulk{false};  ///< the sm_90 bulk-copy pipeline, where the device has it (else cp.async)
};

void PrintTo(window_case const& c, std::ostream* os)
{
  *os << c.records << " records, tiles of " << c.tile_records << ", halo " << c.halo << ", " << c.stages
      << " stages, " << c.block_threads << " threads" << (c.plain ? ", plain" : "") << (c.bulk ? ", bulk" : "");
}

using SM80_HaloWindows = ::testing::TestWithParam<window_case>;

TEST_P(SM80_HaloWindows, EveryTileSeesItsNeighboursRecordsWrappedAround)
{
  TAPEFLOW_REQUIRE_DEVICE(gpu_backend);
  window_case const c = GetParam();
  device_limits const limits = query_device_limits(gpu_backend);
  pipeline_request request{sizeof(rec), c.records, c.tile_records, c.stages, c.block_threads, c.plain};
  request.bulk_copy = c.bulk;
  request.halo_records = c.halo;
  pipeline_plan const plan = plan_pipeline(limits, request);
  ASSERT_EQ(plan.halo_records, c.halo);
  ASSERT_EQ(plan.smem_bytes, (plan.async_copy ? plan.stages : 1) * plan.window_records() * sizeof(rec));

  tape t(gpu_backend);
  testing::random_layer const data(t, c.records, plan.tile_records);
  layer& l = data.on_device;
  device_buffer sums(gpu_backend, c.records * sizeof(unsigned), {});
  device_buffer visits(gpu_backend, c.records * sizeof(unsigned), {});
  sums.fill(0xFF, {});
  visits.fill(0, {});
  device::with_tile_pipeline<rec>(plan, [&](auto stages) {
    constexpr int S = decltype(stages)::value;
    device::launch(window_kernel<S>, plan.grid_blocks, plan.block_threads, plan.smem_bytes, {}, l.reader<rec>(),
                   plan.halo_records, sums.data_as<unsigned>(), visits.data_as<unsigned>());
  });
  std::vector<unsigned> got_sums(c.records);
  std::vector<unsigned> got_visits(c.records);
  sums.download(got_sums.data(), sums.size(), {});
  visits.download(got_visits.data(), visits.size(), {});
  for (std::size_t r = 0; r < c.records; ++r) {
    ASSERT_EQ(got_visits[r], 1u) << "record " << r;
    ASSERT_EQ(got_sums[r], neighbourhood(data.host.data(), r, c.halo, c.records)) << "record " << r;
  }
}

// Records enough that each block walks many more tiles than it has stages (slots refilled many
// times over): 2^20 on a GPU, 2^15 on the emulated device's 4 multiprocessors.
#if defined(TAPEFLOW_EMULATED)
constexpr std::size_t many_tiles = std::size_t{1} << 15;
#else
constexpr std::size_t many_tiles = std::size_t{1} << 20;
#endif

window_case const windows[] = {
#if defined(TAPEFLOW_HAS_ASYNC_PIPELINE)
  {12345, 37, 2, 64, 1},        {100003, 512, 4, 128, 3},     {5000, 37, 3, 64, 40},  // a halo wider than a tile
  {100, 32, 2, 64, 40},         {1, 0, 0, 0, 1},              // windows that are the whole layer
  {many_tiles, 32, 2, 64, 1},
  {12345, 37, 2, 64, 1, false, true},  {5000, 37, 3, 64, 40, false, true}, {100, 32, 2, 64, 40, false, true},
  {many_tiles, 32, 3, 64, 2, false, true},
#endif
  {12345, 37, 2, 64, 2, true},  {100, 32, 2, 64, 40, true},   {many_tiles, 32, 2, 64, 1, true},
};

INSTANTIATE_TEST_SUITE_P(Shapes, SM80_HaloWindows, ::testing::ValuesIn(windows), [](auto const& param_info) {
  window_case const& c = param_info.param;
  return std::string{c.plain ? "plain" : c.bulk ? "bulk" : "async"} + "_r" + std::to_string(c.records) + "_t" +
         std::to_string(c.tile_records) + "_h" + std::to_string(c.halo) + "_s" + std::to_string(c.stages);
});

// ---- Burgers' one-step reverse on the GPU through the windows --------------------------------------

namespace burgers = workloads::burgers;
using burgers_record = burgers::record<double>;

__global__ void burgers_forward(double const* in, double* out, std::size_t n, burgers::coefficients<double> k)
{
  for (std::size_t j = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[j] = burgers::step_cell(in[burgers::wrap_prev(j, n)], in[j], in[burgers::wrap_next(j, n)], k);
  }
}

__global__ void burgers_augmented(double const* in, double* out, tape_writer<burgers_record> tape, std::size_t n,
                                  burgers::coefficients<double> k)
{
  for (std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; r < tape.size();
       r += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    tape.write(r, burgers::forward_region(in, out, n, r, k));
  }
}

template <int Stages>
__global__ void burgers_reverse(tape_reader<burgers_record> tape, std::size_t halo, double const* g_out, double* g_in,
                                std::size_t n, burgers::coefficients<double> k)
{
  device::tile_pipeline<burgers_record, Stages>::reverse_windows(
    tape, halo, [&](std::size_t, tile_window<burgers_record> const& window, std::size_t first, std::size_t count) {
      for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) {
        burgers::reverse_region(window, g_out, g_in, n, first + i, k);
      }
    });
}

/// Burgers' one-step chain on the GPU: the tape holds each u_j once, and the reverse reads a
/// record's neighbours from the records beside its tile (a halo of one record).
struct gpu_burgers_step {
  using value_type = double;
  using record_type = burgers_record;

  std::size_t n;
  burgers::coefficients<double> k;
  int multiprocessors;

  [[nodiscard]] std::size_t state_size() const noexcept { return n; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return burgers::records_for<double>(n); }
  [[nodiscard]] std::size_t halo_records() const noexcept { return burgers::halo_records; }

  void forward(std::size_t, double const* in, double* out, stream_view s) const
  {
    device::launch(burgers_forward, device::grid_for(n, 128, multiprocessors), 128, 0, s, in, out, n, k);
  }
  void augmented_forward(std::size_t, double const* in, double* out, tape_writer<record_type> tape, stream_view s) const
  {
    device::launch(burgers_augmented, device::grid_for(tape.size(), 128, multiprocessors), 128, 0, s, in, out, tape,
                   n, k);
  }
  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const& plan, double const* g_out,
               double* g_in, stream_view s) const
  {
    device::with_tile_pipeline<record_type>(plan, [&](auto stages) {
      constexpr int S = decltype(stages)::value;
      device::launch(burgers_reverse<S>, plan.grid_blocks, plan.block_threads, plan.smem_bytes, s, tape,
                     plan.halo_records, g_out, g_in, n, k);
    });
  }
};

/// dL/du_0 of L = 0.5 sum u_T^2 on the host: the forward's states kept, then the gather-form
/// adjoint step by step (the same per-cell functions; no tape, tile or window).
std::vector<double> host_gradient(std::vector<double> u, std::size_t steps, burgers::coefficients<double> k)
{
  std::size_t const n = u.size();
  std::vector<std::vector<double>> states;
  for (std::size_t t = 0; t < steps; ++t) {
    std::vector<double> next(n);
    for (std::size_t j = 0; j < n; ++j) {
      next[j] = burgers::step_cell(u[burgers::wrap_prev(j, n)], u[j], u[burgers::wrap_next(j, n)], k);
    }
    states.push_back(std::move(u));
    u = std::move(next);
  }
  std::vector<double> g = u;
  for (std::size_t t = steps; t-- > 0;) {
    std::vector<double> const& s = states[t];
    std::vector<double> before(n);
    for (std::size_t j = 0; j < n; ++j) {
      std::size_t const l = burgers::wrap_prev(j, n);
      std::size_t const r = burgers::wrap_next(j, n);
      before[j] = burgers::adjoint_cell(s[l], s[r], g[l], g[j], g[r], k);
    }
    g = std::move(before);
  }
  return g;
}

TEST(SM80_HaloChain, BurgersOneStepReverseOnTheGpuMatchesTheHostUnderEveryPolicyAndPipeline)
{
  TAPEFLOW_REQUIRE_DEVICE(gpu_backend);
  constexpr std::size_t n = 1001;  // 501 records of 2 cells, the last one half full
  constexpr std::size_t steps = 9;
  burgers::coefficients<double> const k{0.1, 0.2};
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> phase(0.0, 6.283185307179586);
  double const p1 = phase(rng);
  double const p2 = phase(rng);
  std::vector<double> u0(n);
  for (std::size_t j = 0; j < n; ++j) {
    double const x = 6.283185307179586 * static_cast<double>(j) / static_cast<double>(n);
    u0[j] = 0.4 * std::sin(x + p1) + 0.2 * std::sin(3.0 * x + p2);
  }
  std::vector<double> const want = host_gradient(u0, steps, k);
  double scale = 0;
  for (double v : want) { scale = std::max(scale, std::fabs(v)); }

  device_limits const limits = query_device_limits(gpu_backend);
  std::size_t const bytes = n * sizeof(double);
  std::size_t const layer = burgers::records_for<double>(n) * sizeof(burgers_record);
  struct pipeline_case {
    char const* name;
    bool plain;
    bool bulk;
  };
  std::vector<pipeline_case> pipelines{{"plain", true, false}};
  if (limits.async_copy) {
    pipelines.push_back({"cp.async", false, false});
    pipelines.push_back({"bulk", false, true});
  }
  std::vector<double> first;
  for (pipeline_case const& pc : pipelines) {
    for (tape_policy p : {tape_policy::store, tape_policy::offload, tape_policy::recompute, tape_policy::automatic}) {
      SCOPED_TRACE(std::string{pc.name} + ", " + std::string{to_string(p)});
      chain_options o;
      o.kind = gpu_backend;
      o.policy = p;
      o.poison = true;
      o.pipeline.tile_records = 16;  // 32 tiles: most windows reach into the next tiles' records
      o.pipeline.force_plain = pc.plain;
      o.pipeline.bulk_copy = pc.bulk;
      if (p == tape_policy::offload) { o.budget_bytes = 2 * layer; }
      if (p == tape_policy::recompute) { o.budget_bytes = layer + 3 * bytes; }
      if (p == tape_policy::automatic) {
        o.budget_bytes = steps * layer / 2;
        o.bw = {50.0, 50.0, 20.0};
      }
      chain<gpu_burgers_step> c(gpu_burgers_step{n, k, limits.multiprocessors}, steps, o);
      ASSERT_EQ(c.stats().plan.halo_records, 1u);
      ASSERT_EQ(c.stats().plan.async_copy, !pc.plain);
      device_buffer state(gpu_backend, bytes, {});
      device_buffer adjoint(gpu_backend, bytes, {});
      state.upload(u0.data(), bytes, {});
      c.forward(state, {});
      adjoint.copy_from(state, {});  // dL/du_T = u_T
      c.reverse(adjoint, {});
      std::vector<double> got(n);
      adjoint.download(got.data(), bytes, {});
      for (std::size_t j = 0; j < n; ++j) { ASSERT_NEAR(got[j], want[j], 1e-12 * scale) << "cell " << j; }
      if (first.empty()) {
        first = got;
      } else {
        EXPECT_EQ(std::memcmp(got.data(), first.data(), bytes), 0) << "not the first run's bits";
      }
    }
  }
}

TEST(HaloPlans, AGpuPlanStagesEachTileWithItsHalosAndFitsThemIntoItsMemory)
{
  TAPEFLOW_REQUIRE_DEVICE(gpu_backend);
  device_limits const limits = query_device_limits(gpu_backend);
  pipeline_request r{sizeof(rec), 100000};
  r.halo_records = 100;
  r.force_plain = true;
  pipeline_plan const plain = plan_pipeline(limits, r);
  EXPECT_EQ(plain.window_records(), plain.tile_records + 200);
  // Register double-buffering holds the whole window in registers.
  EXPECT_LE(plain.window_records() * sizeof(rec),
            static_cast<std::size_t>(plain.block_threads) * max_register_chunks * 16);
  r.halo_records = 100000;  // a window no register file holds
  EXPECT_THROW(static_cast<void>(plan_pipeline(limits, r)), logic_error);
}

}  // namespace
}  // namespace tapeflow

// SPDX-License-Identifier: Apache-2.0
// What the workloads' tests share. Each tests/workloads/<workload>.cpp is written once against the
// backend under test (tests/target.hpp) and compiled into each test executable: the fixture that
// skips where that backend has no device, a workload's options on a backend, comparisons of
// results, the tilings a staged reverse is tried with, and a stencil workload's segments.
#pragma once

#include "../reference.hpp"
#include "../target.hpp"

#include <tapeflow/backend.hpp>
#include <tapeflow/cpu/thread_pool.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/policy.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace tapeflow::testing {

/// Which GPUs a workload has kernels for (workloads::gpu_kernels).
enum class gpu_path { cuda_and_hip, cuda_only };

/// A fixture on the backend under test: skipped where it has nothing to run on, failed where a
/// device is there but unusable (TAPEFLOW_REQUIRE_DEVICE), and skipped on a HIP GPU for a workload
/// whose GPU path is CUDA only. `Base`: ::testing::Test, or ::testing::TestWithParam<P> for a
/// parameterised suite.
template <class Base = ::testing::Test, gpu_path path = gpu_path::cuda_and_hip>
class on_target : public Base {
 protected:
  void SetUp() override
  {
    if (path == gpu_path::cuda_only && target == backend::hip) {
      GTEST_SKIP() << "GPU test skipped: the workload's GPU path is CUDA only";
    }
    TAPEFLOW_REQUIRE_DEVICE(target);
  }
};

/// A workload's options on `kind`; with `poison`, every buffer its kernels write starts as NaN,
/// so an element that is never written shows in the result.
template <class Options>
[[nodiscard]] Options options_on(backend kind, bool poison = true)
{
  Options o;
  o.kind = kind;
  o.poison = poison;
  return o;
}

/// Every value finite.
template <class T>
[[nodiscard]] bool all_finite(std::vector<T> const& values)
{
  for (T v : values) {
    if (!std::isfinite(v)) { return false; }
  }
  return true;
}

/// Every value of every array finite.
template <class T>
[[nodiscard]] bool all_finite(std::vector<std::vector<T>> const& arrays)
{
  for (auto const& a : arrays) {
    if (!all_finite(a)) { return false; }
  }
  return true;
}

/// The same values, bit for bit.
template <class T>
[[nodiscard]] bool same_bits(std::vector<T> const& a, std::vector<T> const& b)
{
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class T>
[[nodiscard]] bool same_bits(std::vector<std::vector<T>> const& a, std::vector<std::vector<T>> const& b)
{
  if (a.size() != b.size()) { return false; }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!same_bits(a[i], b[i])) { return false; }
  }
  return true;
}

/// A tiling a test asks a staged reverse for: records per tile and stages (0: the planner's); on
/// a GPU the block's threads (0: the planner's) and register double-buffering instead of async
/// copies; on the CPU the staging ring and the pool's threads while it runs (0: as they are).
struct pipeline_variant {
  std::size_t tile{0};
  int stages{0};
  int threads{0};
  bool plain{false};
  cpu_staging staging{cpu_staging::in_place};
  std::size_t cpu_threads{0};

  /// Whether the device under test runs it: a GPU without async copies runs only the plain
  /// variants, and blocks are whole warps.
  [[nodiscard]] bool runs_on_target() const
  {
    if constexpr (on_gpu) {
      device_limits const limits = query_device_limits(target);
      return (limits.async_copy || plain) && threads % limits.warp_size == 0;
    } else {
      return true;
    }
  }

  /// `request` asking for this tiling.
  void apply(pipeline_request& request) const
  {
    request.tile_records = tile;
    request.stages = stages;
    request.block_threads = threads;
    request.force_plain = plain;
    request.staging = staging;
  }
};

/// The CPU backend's pool at `count` threads while in scope (0: leaves it as it is).
class scoped_cpu_threads {
 public:
  explicit scoped_cpu_threads(std::size_t count) : count_(count)
  {
    if (count_ != 0) { cpu::set_threads(count_); }
  }
  ~scoped_cpu_threads()
  {
    if (count_ != 0) { cpu::set_threads(0); }
  }
  scoped_cpu_threads(scoped_cpu_threads const&) = delete;
  scoped_cpu_threads& operator=(scoped_cpu_threads const&) = delete;

 private:
  std::size_t count_;
};

/// A stencil workload's segments (docs/stencils.md) against its one-step layers: for each k of `ks`
/// (0: the planner's), under store and under auto with a budget of two layers, `gradient(o)` gives
/// `one`'s gradient bits and loss (on a real GPU the gradient within 1e-6: kernels compiled apart
/// may contract apart), with a tape of one `layer`-byte state per segment of `plan(o)`.
template <class Options, class Gradient, class Plan>
void expect_segments_give_the_one_step_bits(Options const& one, std::vector<int> const& ks, std::size_t layer,
                                            Gradient&& gradient, Plan&& plan)
{
  auto const expect = gradient(one);
  for (int k : ks) {
    for (bool tight : {false, true}) {
      SCOPED_TRACE("segment " + std::to_string(k) + (tight ? ", auto under a budget of 2 layers" : ", store"));
      Options o = one;
      o.segment = k;
      if (tight) {
        o.policy = tape_policy::automatic;
        o.budget_bytes = 2 * layer;
      }
      auto const segments = plan(o).segments;
      auto const r = gradient(o);
      if (on_gpu && !emulated) {
        EXPECT_LT(relative_error(r.gradient, expect.gradient), 1e-6) << "kernels compiled apart may contract apart";
      } else {
        EXPECT_EQ(r.gradient, expect.gradient);
      }
      EXPECT_EQ(r.loss, expect.loss);
      EXPECT_EQ(r.chain.steps, segments);
      EXPECT_EQ(r.chain.tape_bytes, segments * layer) << "one state per segment";
      if (!tight) { EXPECT_LE(r.chain.peak_tape_bytes, segments * layer); }
    }
  }
}

}  // namespace tapeflow::testing

// SPDX-License-Identifier: Apache-2.0
// Host-side helpers for launching staged reverse kernels from a pipeline_plan.
#pragma once

#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/tile_pipeline.cuh>
#include <tapeflow/error.hpp>
#include <tapeflow/plan.hpp>

#include <climits>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tapeflow::device {

namespace detail {
inline dim3 launch_extent(dim3 shape) noexcept { return shape; }
template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
dim3 launch_extent(I count)
{
  TAPEFLOW_EXPECTS(count > 0 && static_cast<unsigned long long>(count) <= UINT_MAX,
                   "a launch extent must be positive and fit 32 bits, got " + std::to_string(count));
  return dim3(static_cast<unsigned>(count));
}
}  // namespace detail

/// tapeflow's one kernel launch path: `kernel<<<grid, block, smem_bytes, stream>>>(args...)` on CUDA
/// and HIP, a launch of fibers on the emulated device; the launch is checked (a bad shape or a
/// launch failure throws platform_error). `grid` and `block` are dim3 or positive integers; the
/// arguments convert to the kernel's parameter types as a CUDA launch converts them.
template <class... Params, class Grid, class Block, class... Args>
void launch(void (*kernel)(Params...), Grid grid, Block block, std::size_t smem_bytes, stream_view stream,
            Args&&... args)
{
  static_assert(sizeof...(Params) == sizeof...(Args), "launch: the kernel takes a different number of arguments");
  dim3 const g = detail::launch_extent(grid);
  dim3 const b = detail::launch_extent(block);
#if defined(TAPEFLOW_PLATFORM_EMULATED)
  emu::launch_kernel(g, b, smem_bytes, to_native(stream),
                     [kernel, params = std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)] {
                       std::apply(kernel, params);
                     });
#else
  kernel<<<g, b, smem_bytes, to_native(stream)>>>(std::forward<Args>(args)...);
#endif
  TAPEFLOW_CHECK_LAUNCH();
}

/// Calls `f(std::integral_constant<int, S>{})` with the pipeline variant the plan asks for:
/// S = plan.stages for the cp.async pipeline, S = -plan.stages for the bulk-copy pipeline
/// (plan.bulk_copy), S = 0 for register double-buffering; kernels use tile_pipeline<R, S>. Checks
/// that the plan fits the variant before any launch.
template <class R, class F>
void with_tile_pipeline(pipeline_plan const& plan, F&& f)
{
  TAPEFLOW_EXPECTS(plan.record_bytes == sizeof(R), "the plan was made for records of " +
                                                     std::to_string(plan.record_bytes) + " bytes, not " +
                                                     std::to_string(sizeof(R)));
  TAPEFLOW_EXPECTS(plan.grid_blocks > 0 && plan.block_threads > 0, "the plan has an empty launch shape");
  if (!plan.async_copy) {
    TAPEFLOW_EXPECTS(plan.tile_bytes() <= static_cast<std::size_t>(plan.block_threads) * max_register_chunks * 16,
                     "a tile of " + std::to_string(plan.tile_bytes()) +
                       " bytes does not fit register double-buffering at " + std::to_string(plan.block_threads) +
                       " threads");
    f(std::integral_constant<int, 0>{});
    return;
  }
#if !defined(TAPEFLOW_HAS_ASYNC_PIPELINE)
  TAPEFLOW_FAIL(logic_error, "this platform has no asynchronous copy pipeline; plan with force_plain");
#else
  auto const dispatch = [&](auto sign) {
    constexpr int k = decltype(sign)::value;  // +1: cp.async, -1: bulk copies
    switch (plan.stages) {
      case 2: f(std::integral_constant<int, 2 * k>{}); return;
      case 3: f(std::integral_constant<int, 3 * k>{}); return;
      case 4: f(std::integral_constant<int, 4 * k>{}); return;
      case 5: f(std::integral_constant<int, 5 * k>{}); return;
      case 6: f(std::integral_constant<int, 6 * k>{}); return;
      case 7: f(std::integral_constant<int, 7 * k>{}); return;
      case 8: f(std::integral_constant<int, 8 * k>{}); return;
      default:
        TAPEFLOW_FAIL(logic_error, "pipeline stages must be between 2 and 8, got " + std::to_string(plan.stages));
    }
  };
  if (plan.bulk_copy) {
    dispatch(std::integral_constant<int, -1>{});
  } else {
    dispatch(std::integral_constant<int, 1>{});
  }
#endif
}

/// Blocks of `threads` covering `items` work items in a grid-stride loop on `limits`' device.
inline int grid_for(std::size_t items, int threads, int multiprocessors) noexcept
{
  std::size_t const blocks = (items + threads - 1) / threads;
  std::size_t const cap = static_cast<std::size_t>(multiprocessors) * 32;
  return static_cast<int>(blocks < cap ? (blocks == 0 ? 1 : blocks) : cap);
}

}  // namespace tapeflow::device

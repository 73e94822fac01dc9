// SPDX-License-Identifier: Apache-2.0
// Host-side helpers for launching staged reverse kernels from a pipeline_plan.
#pragma once

#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/tile_pipeline.cuh>
#include <tapeflow/error.hpp>
#include <tapeflow/plan.hpp>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#if defined(__GNUG__)
#include <cxxabi.h>
#endif

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

/// What the code loaded for one kernel on the current device allows (cudaFuncGetAttributes): its
/// own thread limit, lower than the device's where the kernel needs many registers, and the
/// virtual architecture its code was compiled for, which decides the code paths it holds. A binary
/// built for sm_80 only runs on an H100 as compute_80 PTX the driver compiles for sm_90: its real
/// architecture (binaryVersion) is 90, its virtual architecture (ptxVersion, the __CUDA_ARCH__ it
/// was compiled with) 80, and sm_90-only paths in it are whatever `#if __CUDA_ARCH__` left there.
struct kernel_facts {
  std::string name;             ///< demangled where the platform names kernels, else the address
  int max_threads_per_block{0};
  int virtual_arch{0};          ///< major*10+minor of the code's virtual architecture (ptxVersion; 90: compute_90)
  int real_arch{0};             ///< major*10+minor of the machine code the driver loaded (binaryVersion)
  std::size_t static_shared_bytes{0};  ///< its __shared__ variables (sharedSizeBytes), beside the dynamic bytes
};

namespace detail {

inline std::string kernel_name(void const* kernel)
{
  char const* raw = nullptr;
#if defined(TAPEFLOW_PLATFORM_HIP)
#if defined(__HIP_PLATFORM_AMD__)
  raw = hipKernelNameRefByPtr(kernel, nullptr);  // AMD's runtime only; HIP on NVIDIA gives the address
#endif
#elif defined(CUDART_VERSION) && CUDART_VERSION >= 12030
  if (cudaFuncGetName(&raw, kernel) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    raw = nullptr;
  }
#endif
  if (raw == nullptr || *raw == '\0') {
    char address[2 + 2 * sizeof(void*) + 1];
    std::snprintf(address, sizeof address, "%p", kernel);
    return std::string{"the kernel at "} + address;
  }
#if defined(__GNUG__)
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(raw, nullptr, nullptr, &status), std::free);
  if (status == 0 && demangled) { return demangled.get(); }
#endif
  return raw;
}

/// The least virtual architecture (kernel_facts::virtual_arch) a launch on this thread needs:
/// with_tile_pipeline raises it to 90 around the launch of a bulk-copy kernel, so that one compiled
/// as older code is a typed error at launch rather than a trap inside it.
inline int& required_virtual_arch() noexcept
{
  thread_local int version = 0;
  return version;
}

struct require_virtual_arch {
  explicit require_virtual_arch(int arch) noexcept : previous_(required_virtual_arch())
  {
    required_virtual_arch() = arch;
  }
  ~require_virtual_arch() { required_virtual_arch() = previous_; }
  require_virtual_arch(require_virtual_arch const&) = delete;
  require_virtual_arch& operator=(require_virtual_arch const&) = delete;

 private:
  int previous_;
};

}  // namespace detail

/// The facts of the code loaded for `kernel` on the current device, queried once per kernel and
/// device and cached (a launch reads them, so they must cost a map lookup, not a driver call).
inline kernel_facts const& facts_of(void const* kernel)
{
  static std::mutex mutex;
  static std::map<std::pair<void const*, std::uint64_t>, std::unique_ptr<kernel_facts const>> cache;
  std::uint64_t const ordinal = detail::current_device();
  std::lock_guard<std::mutex> lock(mutex);
  auto& entry = cache[{kernel, ordinal}];
  if (!entry) {
    cudaFuncAttributes attributes{};
    TAPEFLOW_CUDA_TRY(cudaFuncGetAttributes(&attributes, kernel));
    entry = std::make_unique<kernel_facts const>(
      kernel_facts{detail::kernel_name(kernel), attributes.maxThreadsPerBlock, attributes.ptxVersion,
                   attributes.binaryVersion, attributes.sharedSizeBytes});
  }
  return *entry;
}

template <class... Params>
kernel_facts const& facts_of(void (*kernel)(Params...))
{
  return facts_of(reinterpret_cast<void const*>(kernel));
}

/// Shared memory, static and dynamic together, any kernel may launch with before it opts in to
/// more (CUDA's 48 KiB).
inline constexpr std::size_t shared_without_opt_in = 48 * 1024;

/// Lets `kernel` launch with `bytes` of dynamic shared memory: where they and the kernel's static
/// shared memory pass shared_without_opt_in, its dynamic limit is raised
/// (cudaFuncAttributeMaxDynamicSharedMemorySize, whose default is 48 KiB less the static bytes),
/// once per kernel, device and size reached. Throws platform_error past the device's opt-in limit
/// (device_limits::shared_mem_per_block_optin, which holds both). `facts` are facts_of(kernel).
inline void opt_in_shared(void const* kernel, kernel_facts const& facts, std::size_t bytes)
{
  if (bytes + facts.static_shared_bytes <= shared_without_opt_in) { return; }
  static std::mutex mutex;
  static std::map<std::pair<void const*, std::uint64_t>, std::size_t> raised;
  std::lock_guard<std::mutex> lock(mutex);
  std::size_t& to = raised[{kernel, detail::current_device()}];
  if (bytes <= to) { return; }
  TAPEFLOW_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  to = bytes;
}

/// Blocks of `kernel` one multiprocessor runs at once when launched with `threads` threads and
/// `smem_bytes` of dynamic shared memory — what its registers, its shared memory and its threads
/// allow together (cudaOccupancyMaxActiveBlocksPerMultiprocessor) — times the device's
/// multiprocessors: the most blocks of it resident at once. Opts the kernel in to `smem_bytes`
/// first (opt_in_shared). Queried once per kernel, device and shape. Throws logic_error where the
/// kernel cannot run one such block (the launch would fail), platform_error where the query does.
inline int resident_grid(void const* kernel, int threads, std::size_t smem_bytes)
{
  opt_in_shared(kernel, facts_of(kernel), smem_bytes);
  static std::mutex mutex;
  static std::map<std::tuple<void const*, std::uint64_t, int, std::size_t>, int> known;
  std::lock_guard<std::mutex> lock(mutex);
  int& blocks = known[{kernel, detail::current_device(), threads, smem_bytes}];
  if (blocks == 0) {
    int per_multiprocessor = 0;
    TAPEFLOW_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel, threads, smem_bytes));
    int device = 0;
    int multiprocessors = 0;
    TAPEFLOW_CUDA_TRY(cudaGetDevice(&device));
    TAPEFLOW_CUDA_TRY(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
    TAPEFLOW_EXPECTS(per_multiprocessor > 0, detail::kernel_name(kernel) + " cannot run a block of " +
                                               std::to_string(threads) + " threads with " + std::to_string(smem_bytes) +
                                               " bytes of shared memory on this device");
    blocks = per_multiprocessor * multiprocessors;
  }
  return blocks;
}

/// The grid of a persistent kernel — one whose blocks walk its work by gridDim, so that any grid
/// computes the same — for `wanted` blocks: no more than resident_grid(). Blocks past what the
/// device holds at once would wait for the first wave to finish its whole walk, then run a second,
/// part-empty one: where a plan counted the threads and the shared memory but not the registers
/// (Allen–Cahn's segment reverse: 5 blocks an SM planned, 3 fit), the walk takes a fifth longer.
template <class... Params>
[[nodiscard]] int persistent_grid(void (*kernel)(Params...), int wanted, int threads, std::size_t smem_bytes)
{
  int const resident = resident_grid(reinterpret_cast<void const*>(kernel), threads, smem_bytes);
  return wanted < resident ? wanted : resident;
}

/// tapeflow's one kernel launch path: `kernel<<<grid, block, smem_bytes, stream>>>(args...)` on CUDA
/// and HIP, a launch of fibers on the emulated device; the launch is checked (a bad shape or a
/// launch failure throws platform_error). A launch past 48 KiB of shared memory opts its kernel in
/// first (opt_in_shared). `grid` and `block` are dim3 or positive integers; the
/// arguments convert to the kernel's parameter types as a CUDA launch converts them.
template <class... Params, class Grid, class Block, class... Args>
void launch(void (*kernel)(Params...), Grid grid, Block block, std::size_t smem_bytes, stream_view stream,
            Args&&... args)
{
  static_assert(sizeof...(Params) == sizeof...(Args), "launch: the kernel takes a different number of arguments");
  dim3 const g = detail::launch_extent(grid);
  dim3 const b = detail::launch_extent(block);
  // The kernel's own limits, not only the device's: a kernel that needs many registers launches
  // fewer threads than maxThreadsPerBlock, and a bulk-copy kernel must be sm_90 code. Either is
  // a plan this kernel cannot run, refused before the launch with the kernel's name.
  kernel_facts const& facts = facts_of(kernel);
  unsigned long long const threads = static_cast<unsigned long long>(b.x) * b.y * b.z;
  TAPEFLOW_EXPECTS(threads <= static_cast<unsigned long long>(facts.max_threads_per_block),
                   facts.name + " runs at most " + std::to_string(facts.max_threads_per_block) +
                     " threads per block on this device (its registers); the launch asked for " +
                     std::to_string(threads) + ": plan fewer block threads");
  TAPEFLOW_EXPECTS(facts.virtual_arch >= detail::required_virtual_arch(),
                   facts.name + " was compiled as compute_" + std::to_string(facts.virtual_arch) +
                     " code, and the bulk-copy pipeline needs compute_" +
                     std::to_string(detail::required_virtual_arch()) +
                     " code: build for that architecture, or plan without bulk_copy");
  opt_in_shared(reinterpret_cast<void const*>(kernel), facts, smem_bytes);
  detail::launch_kernel(kernel, g, b, smem_bytes, to_native(stream), std::forward<Args>(args)...);
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
    std::size_t const window_bytes = plan.window_records() * plan.record_bytes;  // the tile and its halos
    TAPEFLOW_EXPECTS(window_bytes <= static_cast<std::size_t>(plan.block_threads) * max_register_chunks * 16,
                     "a tile of " + std::to_string(window_bytes) +
                       " bytes (with its halos) does not fit register double-buffering at " +
                       std::to_string(plan.block_threads) + " threads");
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
    detail::require_virtual_arch const sm90(90);
    dispatch(std::integral_constant<int, -1>{});
  } else {
    dispatch(std::integral_constant<int, 1>{});
  }
#endif
}

/// Whether the bulk-copy pipeline can run a reverse kernel here: the code the driver loaded for
/// it was compiled for compute_90 or newer (so it holds the bulk pipeline, and the device, which
/// runs it, has the bulk-copy engine). A binary built for sm_80 only runs on an H100 as compute_80
/// code, whose bulk pipeline is a trap. `kernel_for(integral_constant<
/// int, S>)` returns the reverse kernel for stage count S (tile_pipeline<R, S>); it is asked for a
/// bulk instantiation only where the bulk pipeline is compiled. A Step's bulk_copy_runs()
/// (tapeflow/step.hpp) returns this, and the chain then grants bulk_copy only where it holds.
template <class KernelFor>
[[nodiscard]] bool bulk_copy_runs(KernelFor&& kernel_for)
{
#if defined(TAPEFLOW_HAS_BULK_PIPELINE)
  return facts_of(kernel_for(std::integral_constant<int, -2>{})).virtual_arch >= 90;
#else
  static_cast<void>(kernel_for);
  return false;
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

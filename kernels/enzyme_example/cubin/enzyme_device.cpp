// SPDX-License-Identifier: Apache-2.0
// The Enzyme example's Enzyme-generated kernels, loaded from their cubin and run as chain steps
// (enzyme_device.hpp). Built only where the Enzyme route and the CUDA backend both are, so it
// lives outside the folder whose *.cpp every build compiles into tapeflow::workloads.
#include "../enzyme_device.hpp"
#include "../steps.hpp"

#include <tapeflow/enzyme_cache.hpp>
#include <tapeflow/error.hpp>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>

namespace tapeflow::workloads::enzyme_example {
namespace {

/// The driver API calls this needs, found through the CUDA runtime (linked statically, it opens
/// the driver itself): a hard link to libcuda.so would stop the binary from even starting, and its
/// tests from being listed, on a machine without a driver.
struct driver_api {
  PFN_cuGetErrorName_v6000 get_error_name{nullptr};
  PFN_cuGetErrorString_v6000 get_error_string{nullptr};
  PFN_cuModuleLoad_v2000 module_load{nullptr};
  PFN_cuModuleUnload_v2000 module_unload{nullptr};
  PFN_cuModuleGetFunction_v2000 module_get_function{nullptr};
  PFN_cuLaunchKernel_v4000 launch_kernel{nullptr};
};

template <class F>
void entry_point(char const* symbol, int version, F& fn)
{
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
  cudaError_t const code = cudaGetDriverEntryPointByVersion(symbol, &address, static_cast<unsigned>(version),
                                                            cudaEnableDefault, &found);
#else
  static_cast<void>(version);
  cudaError_t const code = cudaGetDriverEntryPoint(symbol, &address, cudaEnableDefault, &found);
#endif
  if (code != cudaSuccess || found != cudaDriverEntryPointSuccess || address == nullptr) {
    TAPEFLOW_FAIL(unavailable_error, std::string("the CUDA driver has no ") + symbol + " (version " +
                                       std::to_string(version) + "): " + cudaGetErrorString(code));
  }
  fn = reinterpret_cast<F>(address);
}

driver_api const& driver()
{
  static driver_api const api = [] {
    driver_api d;
    entry_point("cuGetErrorName", 6000, d.get_error_name);
    entry_point("cuGetErrorString", 6000, d.get_error_string);
    entry_point("cuModuleLoad", 2000, d.module_load);
    entry_point("cuModuleUnload", 2000, d.module_unload);
    entry_point("cuModuleGetFunction", 2000, d.module_get_function);
    entry_point("cuLaunchKernel", 4000, d.launch_kernel);
    return d;
  }();
  return api;
}

void check(CUresult code, char const* call, std::string const& what)
{
  if (code == CUDA_SUCCESS) { return; }
  char const* name = nullptr;
  char const* text = nullptr;
  driver().get_error_name(code, &name);
  driver().get_error_string(code, &text);
  std::string const message = std::string(call) + " failed for " + what + ": " + (name ? name : "?") + " (" +
                              (text ? text : "no description") + ")";
  throw platform_error(tapeflow::detail::where(__FILE__, __LINE__) + message, name ? name : "CUresult", static_cast<int>(code));
}

constexpr int threads = 256;

/// The cubin for `device`'s architecture (sm_80 code runs on 8.x, sm_90 code on 9.0).
std::string cubin_path(std::string const& dir, enzyme_caches caches, int major)
{
  char const* const arch = major == 9 ? "sm_90" : major == 8 ? "sm_80" : nullptr;
  if (arch == nullptr) {
    TAPEFLOW_FAIL(unavailable_error, "the Enzyme example's cubins are for sm_80 and sm_90; this device is sm_" +
                                       std::to_string(major) + "x");
  }
  std::string const name =
    std::string("enzyme_example_kernels") + (caches == enzyme_caches::heap ? "_heap" : "") + "." + arch + ".cubin";
  return (std::filesystem::path(dir) / name).string();
}

}  // namespace

std::string enzyme_cubin_dir()
{
  char const* const dir = std::getenv("TAPEFLOW_ENZYME_CUBIN_DIR");
  return dir != nullptr && *dir != '\0' ? dir : TAPEFLOW_ENZYME_CUBIN_DIR;
}

std::size_t enzyme_region_bytes(std::size_t inner) noexcept
{
  return 2 * enzyme::cache_block_bytes(inner * sizeof(double));
}

struct enzyme_module::kernels {
  CUmodule module{nullptr};
  CUfunction primal{nullptr};
  CUfunction augmented{nullptr};
  CUfunction reverse{nullptr};
  int grid_cap{1};
};

enzyme_module::enzyme_module(std::string const& dir, enzyme_caches caches)
  : caches_(caches), k_(std::make_unique<kernels>())
{
  if (query_backend_status(backend::cuda) != backend_status::available) {
    TAPEFLOW_FAIL(unavailable_error, "Enzyme's kernels need a CUDA device: " + backend_unavailable_reason(backend::cuda));
  }
  device_limits const& limits = query_device_limits(backend::cuda);
  // The runtime's primary context becomes current on this thread: the module lives beside
  // tapeflow's buffers and streams.
  if (cudaFree(nullptr) != cudaSuccess) {
    TAPEFLOW_FAIL(unavailable_error, "the CUDA runtime did not start: " + backend_unavailable_reason(backend::cuda));
  }
  path_ = cubin_path(dir, caches, limits.compute_capability / 10);
  check(driver().module_load(&k_->module, path_.c_str()), "cuModuleLoad", path_);
  try {
    check(driver().module_get_function(&k_->primal, k_->module, "tapeflow_enzyme_example_primal_kernel"), "cuModuleGetFunction",
          "the primal kernel in " + path_);
    check(driver().module_get_function(&k_->augmented, k_->module, "tapeflow_enzyme_example_augmented_kernel"),
          "cuModuleGetFunction", "the augmented kernel in " + path_);
    check(driver().module_get_function(&k_->reverse, k_->module, "tapeflow_enzyme_example_reverse_kernel"),
          "cuModuleGetFunction", "the reverse kernel in " + path_);
  } catch (...) {
    driver().module_unload(k_->module);
    throw;
  }
  k_->grid_cap = limits.multiprocessors * 32;
}

enzyme_module::~enzyme_module()
{
  if (k_ && k_->module != nullptr) { driver().module_unload(k_->module); }
}

namespace {

/// Launches `f` over n items (a grid-stride loop) with `args`, each a pointer to an argument.
void launch(CUfunction f, int grid_cap, std::size_t n, stream_view s, void** args, char const* what)
{
  std::size_t const blocks = std::max<std::size_t>(1, std::min<std::size_t>((n + threads - 1) / threads, grid_cap));
  check(driver().launch_kernel(f, static_cast<unsigned>(blocks), 1, 1, threads, 1, 1, 0,
                       static_cast<CUstream>(s.native()), args, nullptr),
        "cuLaunchKernel", what);
}

}  // namespace

void enzyme_module::primal(double const* in, double* out, std::size_t n, params p, stream_view s) const
{
  void* args[] = {&in, &out, &n, &p};
  launch(k_->primal, k_->grid_cap, n, s, args, "Enzyme's primal kernel");
}

void enzyme_module::augmented(double const* in, double* out, tape_writer<enzyme::chunk> tape, std::size_t n, params p,
                              enzyme::cache_view caches, stream_view s) const
{
  void* args[] = {&in, &out, &tape, &n, &p, &caches};
  launch(k_->augmented, k_->grid_cap, n, s, args, "Enzyme's augmented forward");
}

void enzyme_module::reverse(enzyme::chunk const* tape, double const* g_out, double* g_in, std::size_t n, params p,
                            stream_view s) const
{
  void* args[] = {&tape, &g_out, &g_in, &n, &p};
  launch(k_->reverse, k_->grid_cap, n, s, args, "Enzyme's reverse");
}

namespace {

/// A chain step made of Enzyme's kernels: one slot of enzyme_slot_bytes per element.
struct enzyme_step : detail::step_shape {
  enzyme_module const* m;
  enzyme::cache_pool* pool;  // null: the device heap

  [[nodiscard]] std::size_t records_per_step() const noexcept
  {
    return n * enzyme::slot_chunks(enzyme_slot_bytes);
  }

  void forward(std::size_t, double const* in, double* out, stream_view s) const { m->primal(in, out, n, p, s); }

  void augmented_forward(std::size_t step, double const* in, double* out, tape_writer<record_type> tape,
                         stream_view s) const
  {
    m->augmented(in, out, tape, n, p, pool != nullptr ? pool->view(step) : enzyme::cache_view{}, s);
  }

  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const&, double const* g_out, double* g_in,
               stream_view s) const
  {
    m->reverse(tape.data(), g_out, g_in, n, p, s);
  }
};

/// The sweeps of the chain, and the pool's check when they are collected (the recompute tier runs
/// augmented forwards inside the reverse too).
class enzyme_sweeps final : public sweeps {
 public:
  enzyme_sweeps(enzyme_step step, std::shared_ptr<enzyme::cache_pool> pool, problem const& p,
                std::vector<double> const& x0, options const& o)
    : pool_(std::move(pool)), chain_(step, p, x0, o, enzyme_slot_bytes)
  {
  }
  void forward() override { chain_.forward(); }
  void reverse() override { chain_.reverse(); }
  result collect() override
  {
    if (pool_) { pool_->check(); }
    return chain_.collect();
  }

 private:
  std::shared_ptr<enzyme::cache_pool> pool_;
  detail::chain_sweeps<enzyme_step> chain_;
};

}  // namespace

std::unique_ptr<sweeps> open_enzyme(enzyme_module const& m, std::shared_ptr<enzyme::cache_pool> pool,
                                    problem const& p, std::vector<double> const& x0, options const& o)
{
  TAPEFLOW_EXPECTS(o.kind == backend::cuda, "Enzyme's kernels run on the CUDA backend, not " +
                                              std::string{to_string(o.kind)});
  if (m.caches() == enzyme_caches::pool) {
    TAPEFLOW_EXPECTS(pool != nullptr && pool->layers() >= p.steps && pool->slots() >= p.n,
                     "Enzyme's pool-routed kernels need a cache pool of at least " + std::to_string(p.steps) +
                       " layers of " + std::to_string(p.n) + " slots");
  } else {
    TAPEFLOW_EXPECTS(pool == nullptr, "Enzyme's heap kernels take no cache pool");
  }
  enzyme_step const step{{p.n, {p.inner, p.a}}, &m, pool.get()};
  return std::make_unique<enzyme_sweeps>(step, std::move(pool), p, x0, o);
}

}  // namespace tapeflow::workloads::enzyme_example

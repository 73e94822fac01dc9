// SPDX-License-Identifier: Apache-2.0
// The Enzyme example's Enzyme-generated kernels on a CUDA GPU. The Enzyme route (TAPEFLOW_ENZYME,
// docs/enzyme.md) compiles enzyme_kernels.cu through clang-15, Enzyme's plugin and tapeflow's
// passes to PTX and cubins for sm_80 and sm_90; this loads the cubin for the current device
// through the driver API, into the CUDA runtime's primary context (the one tapeflow's buffers and
// streams live in), and runs its kernels as the steps of a tapeflow chain.
//
// Two cubins come out of the route: `pool`, where tapeflow's pass routed Enzyme's loop caches
// into an enzyme::cache_pool (no device heap), and `heap`, Enzyme's own code, whose augmented
// forward mallocs its caches on the device heap and whose reverse frees them (the control, and the
// baseline the benchmarks time it against).
#pragma once

#include "enzyme_example.hpp"
#include "math.hpp"

#include <tapeflow/backend.hpp>
#include <tapeflow/device/views.hpp>
#include <tapeflow/enzyme.hpp>
#include <tapeflow/enzyme_cache.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace tapeflow::workloads::enzyme_example {

/// Where Enzyme's loop caches go.
enum class enzyme_caches { pool, heap };

/// A slot of the Enzyme kernels: x (padded to a chunk), then Enzyme's 32-byte tape (trip count,
/// a, two cache pointers).
inline constexpr std::size_t enzyme_slot_bytes = 48;

/// Bytes of a cache region that holds Enzyme's caches of one call with `inner` iterations, at most:
/// two arrays of `inner` doubles, each a 16-byte header plus its data rounded up to 16 bytes.
[[nodiscard]] std::size_t enzyme_region_bytes(std::size_t inner) noexcept;

/// Where the build put the example's cubins, unless $TAPEFLOW_ENZYME_CUBIN_DIR names another folder
/// (a build carried to another machine).
[[nodiscard]] std::string enzyme_cubin_dir();

/// The cubin of the Enzyme example's kernels for the current CUDA device, loaded. Not copyable.
class enzyme_module {
 public:
  /// Loads `<dir>/enzyme_example_kernels[_heap].sm_XX.cubin` (sm_90 on compute capability 9.x,
  /// sm_80 on 8.x). Throws unavailable_error when no CUDA device is usable or none of the cubins is
  /// for its architecture, platform_error when the driver cannot load the file or a kernel.
  enzyme_module(std::string const& dir, enzyme_caches caches);
  ~enzyme_module();
  enzyme_module(enzyme_module const&) = delete;
  enzyme_module& operator=(enzyme_module const&) = delete;

  [[nodiscard]] enzyme_caches caches() const noexcept { return caches_; }
  [[nodiscard]] std::string const& path() const noexcept { return path_; }

  /// out[i] = iterate(in[i], p), i < n, on `s`.
  void primal(double const* in, double* out, std::size_t n, params p, stream_view s) const;
  /// Enzyme's augmented forward: out[i] and slot i of `tape` ({x, Enzyme's tape}), its loop caches
  /// in `caches`' region i (pool) or on the device heap (heap; `caches` unused).
  void augmented(double const* in, double* out, tape_writer<enzyme::chunk> tape, std::size_t n, params p,
                 enzyme::cache_view caches, stream_view s) const;
  /// Enzyme's reverse: g_in[i] from slot i and g_out[i].
  void reverse(enzyme::chunk const* tape, double const* g_out, double* g_in, std::size_t n, params p,
               stream_view s) const;

 private:
  struct kernels;
  enzyme_caches caches_;
  std::string path_;
  std::unique_ptr<kernels> k_;
};

/// The example's chain with Enzyme's kernels as its steps, on the CUDA backend (o.kind must be
/// backend::cuda). With a `pool` module, the caches of every layer's slots live in `pool` (layers
/// at least p.steps, slots at least p.n), which the sweeps check after each forward and reverse
/// (budget_error when a region was too small); with a `heap` module `pool` must be null, and the
/// device heap must hold every layer's caches at once (cudaLimitMallocHeapSize).
[[nodiscard]] std::unique_ptr<sweeps> open_enzyme(enzyme_module const& m, std::shared_ptr<enzyme::cache_pool> pool,
                                                  problem const& p, std::vector<double> const& x0,
                                                  options const& o);

}  // namespace tapeflow::workloads::enzyme_example

// SPDX-License-Identifier: Apache-2.0
// The Enzyme example's kernels with Enzyme-generated device code: compiled only through the Enzyme
// route (cmake/TapeflowEnzyme.cmake: clang-15 -x cuda -nocudainc, Enzyme's plugin, tapeflow's
// cache pass, libdevice, NVPTX) to PTX for sm_80 and sm_90 and a cubin by ptxas. The CUDA build
// (nvcc) uses cuda.cu's hand-written pair instead.
//
// A slot is {x, Enzyme's tape}: Enzyme's split-mode reverse takes the primal arguments again as
// well as its tape. Enzyme's loop caches (the inner loop's trip count is a run-time value) go to
// the cache pool's region of the slot, not to the device heap: the PTX calls neither malloc nor
// free (checked by tests/enzyme/check_ptx.cmake).
//
// The reverse reads each thread's slot into registers rather than through tile_pipeline: clang-15,
// the newest clang an Enzyme plugin for Debian's LLVM is published for, cannot include CUDA 12/13's
// headers (cuda::pipeline); docs/enzyme.md says what that leaves open.
//
// The kernels are extern "C": the host loads the cubin through the driver API and finds them by
// these names (enzyme_device.hpp, which also holds the argument lists each launch passes).
#include <tapeflow/workloads/enzyme_example/math.hpp>
#include <tapeflow/device/views.hpp>
#include <tapeflow/enzyme_abi.hpp>
#include <tapeflow/enzyme_cache.hpp>
#include <tapeflow/record.hpp>

#include <cstddef>
#include <cstdint>

namespace tapeflow::workloads::enzyme_example::device {

using chunk = value_record<std::uint32_t, 4>;

/// Enzyme's tape for iterate (x active, params constant): trip count, a, two cache pointers.
inline constexpr std::size_t tape_bytes = 32;
inline constexpr std::size_t input_bytes = 16;  // x, padded to a chunk
inline constexpr std::size_t slot_chunks = (input_bytes + tape_bytes) / sizeof(chunk);

__device__ double iterate_ptr(double x, params* p) { return iterate(x, *p); }

extern "C" {

/// The untaped primal, for the chain's forward sweeps past a checkpoint.
__global__ void tapeflow_enzyme_example_primal_kernel(double const* __restrict__ in, double* __restrict__ out,
                                                      std::size_t n, params p)
{
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = iterate(in[i], p);
  }
}

__global__ void tapeflow_enzyme_example_augmented_kernel(double const* __restrict__ in, double* __restrict__ out,
                                                         tape_writer<chunk> tape, std::size_t n, params p,
                                                         enzyme::cache_view caches)
{
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned char* const slot = reinterpret_cast<unsigned char*>(tape.data() + i * slot_chunks);
    double const x = in[i];
    *reinterpret_cast<double*>(slot) = x;
    *reinterpret_cast<double*>(slot + sizeof(double)) = 0;  // the chunk's padding: every byte copied is written
    enzyme::cache_cursor cache = caches.cursor(i);
    // Explicit activity types: clang-15 treats deduction guides as host functions in device code.
    out[i] = enzyme::augmented_forward<tape_bytes, double>(iterate_ptr, slot + input_bytes, cache,
                                                            enzyme::active<double>{x}, enzyme::constant<params*>{&p});
  }
}

__global__ void tapeflow_enzyme_example_reverse_kernel(chunk const* __restrict__ tape,
                                                       double const* __restrict__ g_out, double* __restrict__ g_in,
                                                       std::size_t n, params p)
{
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    chunk staged[slot_chunks];  // the thread's slot, in registers
    for (std::size_t c = 0; c < slot_chunks; ++c) { staged[c] = tape[i * slot_chunks + c]; }
    auto const* const slot = reinterpret_cast<unsigned char const*>(staged);
    double const x = *reinterpret_cast<double const*>(slot);
    g_in[i] = enzyme::reverse<tape_bytes, double>(iterate_ptr, slot + input_bytes, enzyme::active<double>{x},
                                                   enzyme::constant<params*>{&p}, enzyme::d_return<double>{g_out[i]});
  }
}

}  // extern "C"

}  // namespace tapeflow::workloads::enzyme_example::device

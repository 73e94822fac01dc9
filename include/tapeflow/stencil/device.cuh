// SPDX-License-Identifier: Apache-2.0
// Stencil segments on a GPU (CUDA, HIP, or the emulated device, from this one source): the tile
// program (tile_program.hpp) run by a block per tile, its levels in the block's shared memory, a
// barrier between levels. A persistent grid walks the tiles. Include it from the .cu file that
// names the stencil: the kernels are instantiated for it there. Over the ranks of a distributed
// run, each rank runs its slab or block, its faces packed on the device and its ghost cells
// exchanged once per segment (tapeflow/stencil/slab.hpp; staged through pinned host memory unless
// the communicator moves device memory), the interior tiles' kernel running while they travel.
#pragma once

#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/tile_pipeline.cuh>  // TAPEFLOW_HAS_ASYNC_PIPELINE, <cuda/pipeline>
#include <tapeflow/distributed/communicator.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/stencil/segment.hpp>
#include <tapeflow/stencil/runner_program.hpp>
#include <tapeflow/stencil/slab.hpp>
#include <tapeflow/stencil/tile_program.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

namespace tapeflow::stencil {

#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(TAPEFLOW_EMULATED)
#define TAPEFLOW_STENCIL_DEVICE_PASS 1
#endif

/// A GPU block working a tile: its threads stride over the cells, and wait for each other at
/// sync(). (Host+device only so that the tile program, written once for both, compiles on either
/// side; it runs in kernels.)
struct block_team {
  /// f(x, y, z) for each cell of `b`, cell i = x + ex (y + ey z) by thread i mod blockDim; `b`
  /// extends along its first Dims axes only.
  template <int Dims, class F>
  TAPEFLOW_HOST_DEVICE void for_each(box const& b, F&& f) const
  {
#if defined(TAPEFLOW_STENCIL_DEVICE_PASS)
    for (cursor<Dims> c(b); c.i < c.cells; c.next()) { f(c.x, c.y, c.z); }
#else
    static_cast<void>(b);
    static_cast<void>(f);
#endif
  }

  /// solo_team::copy_periodic_box, cell by cell (each thread wraps its own cells' coordinates).
  template <int Dims, int Fields, class T>
  TAPEFLOW_HOST_DEVICE void copy_periodic_box(box const& b, T const* src, std::size_t nx, std::size_t ny,
                                              std::size_t nz, T* dst) const
  {
    std::size_t const cells = nx * ny * nz;
    std::size_t const plane = b.cells();
    for_each<Dims>(b, [&](int x, int y, int z) {
      auto const gx = static_cast<std::size_t>(wrapped(b.x0 + x, nx));
      auto const gy = static_cast<std::size_t>(wrapped(b.y0 + y, ny));
      auto const gz = static_cast<std::size_t>(wrapped(b.z0 + z, nz));
      std::size_t const at = (gz * ny + gy) * nx + gx;
      std::size_t const c = b.at(x, y, z);
      for (int f = 0; f < Fields; ++f) { dst[static_cast<std::size_t>(f) * plane + c] = src[static_cast<std::size_t>(f) * cells + at]; }
    });
  }

  /// Each thread takes its own cells: a cell a test rejects masks a thread (masking_team).
  static constexpr bool masks_cells = true;

  /// Levels of inner tiles run as column sweeps (sweep.hpp, for_each_run).
  static constexpr bool sweeps = true;

  /// f(x, y, z, n) for runs of the cells of `b` along its last axis (y in 2-D, z in 3-D): cells
  /// (x, y, z) .. n - 1 cells on, each cell in one run. A thread takes one run at a time: the runs
  /// of a column are as many as the block's threads allow across the box's columns (at least one),
  /// so that a warp's threads sweep neighbouring columns side by side (no bank conflicts).
  template <int Dims, class F>
  TAPEFLOW_HOST_DEVICE void for_each_run(box const& b, F&& f) const
  {
    static_assert(Dims == 2 || Dims == 3, "tapeflow::stencil: runs lie along the last of 2 or 3 axes");
#if defined(TAPEFLOW_STENCIL_DEVICE_PASS)
    // (narrow_divide: a box in shared memory has fewer than 2^20 cells. A thread's column and run
    // take an integer division: through narrow_divide, nvcc 13.0 gave Allen–Cahn's inner advance
    // kernel 48 registers instead of 32, 5 blocks of 256 an SM instead of 8.)
    int const along = Dims == 2 ? b.ey : b.ez;
    int const columns = Dims == 2 ? b.ex : b.ex * b.ey;
    auto const threads = static_cast<int>(blockDim.x);
    int const per_column = threads > columns ? narrow_divide(threads, columns).q : 1;
    int const length = narrow_divide(along + per_column - 1, per_column).q;
    int const runs = columns * per_column;
    for (int i = static_cast<int>(threadIdx.x); i < runs; i += threads) {
      quotient const c{i / columns, i % columns};  // the run along its column, and the column
      int const first = c.q * length;
      if (first >= along) { continue; }
      int const n = along - first < length ? along - first : length;
      if constexpr (Dims == 2) {
        f(c.r, first, 0, n);
      } else {
        quotient const xy = narrow_divide(c.r, b.ex);
        f(xy.r, xy.q, first, n);
      }
    }
#else
    static_cast<void>(b);
    static_cast<void>(f);
#endif
  }

  /// dst[f * b.cells() + i] = src[f * field_stride + z * plane + y * row + x] for each cell
  /// i = (x, y, z) of `b` and field f < Fields: a box lying inside the source array, `dst` in
  /// shared memory. The copies land before it returns, each thread's own; the caller's sync() then
  /// shows them to the block. Every load of a thread is in flight at once where the platform copies
  /// asynchronously (CUDA sm_80+ and the emulated device: cp.async through a per-thread pipeline,
  /// as the tile pipelines stage tapes); elsewhere (HIP) cell by cell.
  template <int Fields, class T>
  TAPEFLOW_HOST_DEVICE void copy_box(box const& b, T const* src, std::size_t field_stride, std::size_t row,
                                     std::size_t plane, T* dst) const
  {
    // (The walk steps all three axes: specialised to the box's axes, as for_each is, nvcc gave
    // Allen–Cahn's advance kernel 53 registers instead of 48, one block an SM fewer.)
#if defined(TAPEFLOW_STENCIL_DEVICE_PASS) && defined(TAPEFLOW_HAS_ASYNC_PIPELINE)
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
    pipe.producer_acquire();
    // 16 bytes a copy where both arrays, the box's rows and every stride allow it (Allen–Cahn's
    // forward boxes at k = 4: 40 floats wide, from a multiple of 4), else one value a copy.
    constexpr std::size_t wide = 16 / sizeof(T);
    auto const at_16 = [](void const* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    if (wide > 1 && at_16(src) && at_16(dst) && static_cast<std::size_t>(b.ex) % wide == 0 && row % wide == 0 &&
        plane % wide == 0 && field_stride % wide == 0) {  // (whole rows: the box's fields are whole copies too)
      copy_async<Fields, wide>(b, src, field_stride, row, plane, dst, pipe);
    } else {
      copy_async<Fields, 1>(b, src, field_stride, row, plane, dst, pipe);
    }
    pipe.producer_commit();
    cuda::pipeline_consumer_wait_prior<0>(pipe);
    pipe.consumer_release();
#elif defined(TAPEFLOW_STENCIL_DEVICE_PASS)
    auto const dst_field = static_cast<std::size_t>(b.cells());
    for (cursor<3> c(b, row, plane); c.i < c.cells; c.next()) {
      TAPEFLOW_UNROLL
      for (int f = 0; f < Fields; ++f) {
        dst[static_cast<std::size_t>(f) * dst_field + static_cast<std::size_t>(c.i)] =
          src[static_cast<std::size_t>(f) * field_stride + c.offset];
      }
    }
#else
    static_cast<void>(b);
    static_cast<void>(src);
    static_cast<void>(field_stride);
    static_cast<void>(row);
    static_cast<void>(plane);
    static_cast<void>(dst);
#endif
  }

  TAPEFLOW_HOST_DEVICE void sync() const noexcept
  {
#if defined(TAPEFLOW_STENCIL_DEVICE_PASS)
    __syncthreads();
#endif
  }

 private:
#if defined(TAPEFLOW_STENCIL_DEVICE_PASS) && defined(TAPEFLOW_HAS_ASYNC_PIPELINE)
  /// copy_box's copies into `pipe`, `Width` values each: the box's rows, its first cell, both
  /// arrays and every stride hold whole copies.
  template <int Fields, std::size_t Width, class T>
  TAPEFLOW_HOST_DEVICE static void copy_async(box b, T const* src, std::size_t field_stride, std::size_t row,
                                              std::size_t plane, T* dst,
                                              cuda::pipeline<cuda::thread_scope_thread>& pipe)
  {
    auto const dst_field = static_cast<std::size_t>(b.cells());
    b.ex /= static_cast<int>(Width);  // the box in copies
    for (cursor<3> c(b, row / Width, plane / Width); c.i < c.cells; c.next()) {
      TAPEFLOW_UNROLL
      for (int f = 0; f < Fields; ++f) {
        cuda::memcpy_async(dst + static_cast<std::size_t>(f) * dst_field + Width * static_cast<std::size_t>(c.i),
                           src + static_cast<std::size_t>(f) * field_stride + Width * c.offset,
                           cuda::aligned_size_t<sizeof(T) * Width>(sizeof(T) * Width), pipe);
      }
    }
  }
#endif

  /// A thread's walk over the cells of a box: cell i = x + ex (y + ey z), from threadIdx.x by
  /// blockDim.x, and the cell's offset in an array of pitches `row` and `plane` holding the box. It
  /// divides once, for its first cell and for the stride (narrow_divide: a box in shared memory has
  /// fewer than 2^20 cells); from there it steps its coordinates with at most one carry an axis (the
  /// stride's part along an axis is less than that axis), not two divisions a cell; along the axes
  /// past Dims the box has one cell, so it never carries there. (for_each reads no offset: the
  /// compiler drops it.)
  template <int Dims>
  struct cursor {
    int cells, ex, ey;
    int i{0}, x{0}, y{0}, z{0};
    int sx{0}, sy{0}, sz{0}, stride{1};
    std::size_t offset{0}, step{0}, row_carry{0}, plane_carry{0};

    TAPEFLOW_HOST_DEVICE explicit cursor(box const& b, std::size_t row = 0, std::size_t plane = 0)
      : cells(static_cast<int>(b.cells())), ex(b.ex), ey(b.ey)
    {
#if defined(TAPEFLOW_STENCIL_DEVICE_PASS)
      i = static_cast<int>(threadIdx.x);
      stride = static_cast<int>(blockDim.x);
      quotient const ix = narrow_divide(i, ex);
      quotient const iy = narrow_divide(ix.q, ey);
      quotient const sx_ = narrow_divide(stride, ex);
      quotient const sy_ = narrow_divide(sx_.q, ey);
      x = ix.r;
      y = iy.r;
      z = iy.q;
      sx = sx_.r;
      sy = sy_.r;
      sz = sy_.q;
      auto const at = [&](int cx, int cy, int cz) {
        return static_cast<std::size_t>(cz) * plane + static_cast<std::size_t>(cy) * row + static_cast<std::size_t>(cx);
      };
      offset = at(x, y, z);
      step = at(sx, sy, sz);
      row_carry = row - static_cast<std::size_t>(ex);              // x past ex: one row on
      plane_carry = plane - static_cast<std::size_t>(ey) * row;    // y past ey: one plane on
#else
      static_cast<void>(row);
      static_cast<void>(plane);
#endif
    }
    TAPEFLOW_HOST_DEVICE void next() noexcept
    {
      i += stride;
      x += sx;
      y += sy;
      z += sz;
      offset += step;
      if (Dims >= 2 && x >= ex) {
        x -= ex;
        ++y;
        offset += row_carry;
      }
      if (Dims >= 3 && y >= ey) {
        y -= ey;
        ++z;
        offset += plane_carry;
      }
    }
  };
};

#undef TAPEFLOW_STENCIL_DEVICE_PASS

namespace detail {

// The segment kernels come in two: Inner = true for the tiles of the walk that its `inner` holds
// (whose every read lies inside the grid, compiled without the code that wraps, reads ghost cells
// or decides fixed edges, and without the registers it holds), Inner = false for the others. Each
// walks all of the walk's tiles and skips the other kind's.

template <class S, bool Inner>
__global__ void advance_kernel(tile_program<S> program, tile_walk walk, std::size_t first, int k,
                               typename S::value_type const* __restrict__ in, typename S::value_type* __restrict__ out)
{
  using T = typename S::value_type;
  T* const scratch = device::dynamic_shared<T>();
  for (std::size_t i = blockIdx.x; i < walk.size(); i += gridDim.x) {
    tile_place const p = walk[i];
    if (walk.inner.holds(p) != Inner) { continue; }
    program.template advance<Inner>(block_team{}, program.tile_box(p), first, k, in, out, scratch);
    __syncthreads();  // the next tile reuses the scratch
  }
}

template <class S, bool Inner>
__global__ void reverse_kernel(tile_program<S> program, tile_walk walk, std::size_t first, int k,
                               typename S::value_type const* __restrict__ checkpoint,
                               typename S::value_type const* __restrict__ lambda_out,
                               typename S::value_type* __restrict__ lambda_in, typename S::value_type* __restrict__ dc)
{
  using T = typename S::value_type;
  T* const scratch = device::dynamic_shared<T>();
  for (std::size_t i = blockIdx.x; i < walk.size(); i += gridDim.x) {
    tile_place const p = walk[i];
    if (walk.inner.holds(p) != Inner) { continue; }
    program.template reverse<Inner>(block_team{}, program.tile_box(p), first, k, checkpoint, lambda_out, lambda_in,
                                    dc, scratch);
    __syncthreads();
  }
}

/// taped[0, values) = in, taped[values, padded) = 0.
template <class T>
__global__ void record_kernel(T const* __restrict__ in, T* __restrict__ taped, std::size_t values, std::size_t padded)
{
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < padded;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    taped[i] = i < values ? in[i] : T(0);
  }
}

/// faces[i] = face_value(layout, state, field_cells, i) for i in [0, values).
template <class T>
__global__ void pack_faces_kernel(ghost_layout layout, T const* __restrict__ state, std::size_t field_cells,
                                  T* __restrict__ faces, std::size_t values)
{
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < values;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    faces[i] = face_value(layout, state, field_cells, i);
  }
}

}  // namespace detail

/// Ghost cells of a device state over ranks, ordered on the call's stream. The state's faces are
/// packed on the device (one kernel: a block's inner faces and corners are strided). Where the
/// communicator exchanges device memory (a CUDA- or ROCm-aware MPI, NCCL), they go straight from
/// there and the neighbours' cells straight into device memory. Otherwise the faces are copied to
/// pinned host memory, exchanged there (Debian's MPI is not CUDA-aware), and the neighbours' cells
/// copied to device memory. start() returns once the faces' messages are posted, so kernels
/// launched next overlap the exchange.
template <class T>
class device_ghosts {
 public:
  device_ghosts(std::shared_ptr<distributed::communicator> comm, block b, grid<T> const& whole, int dims, int fields,
                int depth)
    : direct_(comm != nullptr && comm->exchanges_device_memory()),
      exchange_(std::move(comm), b, whole, dims, fields, depth), capacity_(exchange_.values(depth))
  {
    if (!direct_) { staged_.emplace(gpu_backend, capacity_ * sizeof(T)); }
  }

  [[nodiscard]] slab_view<T> view() const noexcept { return exchange_.view(); }
  /// Whether the cells go straight between device memories (the communicator's choice).
  [[nodiscard]] bool direct() const noexcept { return direct_; }

  /// Collective: starts exchanging the faces (`depth` cells deep) of the device state `state` once
  /// the work before on `s` has written them.
  void start(T const* state, int depth, stream_view s)
  {
    exchange_.check_start(depth);  // before the faces are packed into buffers sized for its depth
    if (!planes_) {
      planes_.emplace(gpu_backend, capacity_ * sizeof(T), s);
      faces_.emplace(gpu_backend, capacity_ * sizeof(T), s);
    }
    std::size_t const values = exchange_.values(depth);
    T* const faces = faces_->template data_as<T>();
    if (values > 0) {
      int const blocks = static_cast<int>(std::min<std::size_t>((values + pack_threads - 1) / pack_threads, 1024));
      device::launch(detail::pack_faces_kernel<T>, blocks, pack_threads, 0, s,
                     exchange_.layout(depth), state, exchange_.field_values(), faces, values);
    }
    if (direct_) {
      TAPEFLOW_CUDA_TRY(cudaStreamSynchronize(to_native(s)));  // the faces are packed, the cells allocated
      exchange_.start_from_faces(faces, depth, planes_->template data_as<T>());
      return;
    }
    auto* const staged = static_cast<T*>(staged_->data());
    if (values > 0) {
      TAPEFLOW_CUDA_TRY(
        cudaMemcpyAsync(staged, faces, values * sizeof(T), cudaMemcpyDeviceToHost, to_native(s)));
      TAPEFLOW_CUDA_TRY(cudaStreamSynchronize(to_native(s)));  // the faces are on the host
    }
    exchange_.start_from_faces(staged, depth);
  }

  /// Collective: waits for the exchange; its ghost cells in device memory, ready on `s` (after the
  /// work launched on `s` since start()).
  [[nodiscard]] ghost_planes<T> finish(stream_view s)
  {
    ghost_planes<T> const got = exchange_.finish();
    if (got.depth == 0) { return {0, nullptr}; }
    if (!direct_) {
      // From pageable memory the copy returns once its source is read: the exchange may reuse it.
      TAPEFLOW_CUDA_TRY(cudaMemcpyAsync(planes_->data(), got.values, exchange_.values(got.depth) * sizeof(T),
                                        cudaMemcpyHostToDevice, to_native(s)));
    }
    return {got.depth, planes_->template data_as<T>()};
  }

  /// start(), then finish().
  [[nodiscard]] ghost_planes<T> fill(T const* state, int depth, stream_view s)
  {
    start(state, depth, s);
    return finish(s);
  }

 private:
  static constexpr int pack_threads = 256;

  bool direct_;
  ghost_exchange<T> exchange_;
  std::size_t capacity_;
  std::optional<pinned_buffer> staged_;  // staged: the packed faces on the host
  std::optional<device_buffer> faces_;   // the packed faces, allocated on the first call's stream
  std::optional<device_buffer> planes_;  // the ghost cells the kernels read, likewise
};

/// Runs the tile program of stencil S on the GPU of this build (segment_step's Runner).
template <class S>
class device_runner {
 public:
  using T = typename S::value_type;

  /// The runner over `g`; with `comm`, over this rank's part of `g` (the whole grid) cut over the
  /// ranks of `comm` (the plan is the part's: plan_slab_segments); `c`: S's coefficients in device
  /// memory, where it has them. Throws logic_error for a plan made for the CPU, and what
  /// runner_program throws.
  device_runner(S stencil, grid<T> const& g, segment_plan const& plan,
                std::shared_ptr<distributed::communicator> comm = nullptr, coefficient_view<T> c = {})
    : program_(stencil, g, plan, std::move(comm), c), block_threads_(plan.block_threads), grid_blocks_(plan.grid_blocks),
      forward_grid_blocks_(plan.forward_grid_blocks)
  {
    TAPEFLOW_EXPECTS(plan.kind != backend::cpu, "a device_runner needs a segment plan made for a GPU backend");
  }

  [[nodiscard]] std::size_t state_size() const noexcept { return program_.state_size(); }
  [[nodiscard]] std::size_t parameter_size() const noexcept { return program_.parameter_size(); }

  /// The interior tiles' kernels run while the ghost planes travel, the boundary tiles' once they
  /// are on the device; the inner tiles (tile_program::inner_tiles) through the kernel compiled for
  /// them, the others through the general one.
  void advance(std::size_t first, int k, T const* in, T* out, stream_view s) const
  {
    program_.advancing(k, in, s).run([&](tile_program<S> const& program, tile_range tiles) {
      tile_rect const inner = program.inner_tiles(program.advance_reach(k));
      std::size_t const smem = program.advance_scratch(k) * sizeof(T);
      tile_walk const walk(tiles, inner);
      each_kind(tiles, inner, [&](auto kind, std::size_t count) {
        auto const kernel = detail::advance_kernel<S, decltype(kind)::value>;
        device::launch(kernel, blocks_for(kernel, count, smem, forward_grid_blocks_), block_threads_, smem, s, program,
                       walk, first, k, in, out);
      });
    }, s);
    zero_tail(out, s);
  }

  void reverse(std::size_t first, int k, T const* checkpoint, T const* lambda_out, T* lambda_in, T* dc,
               stream_view s) const
  {
    program_.reversing(k, checkpoint, lambda_out, s).run([&](tile_program<S> const& program, tile_range tiles) {
      tile_rect const inner = program.inner_tiles(program.reverse_reach(k));
      std::size_t const smem = program.reverse_scratch(k) * sizeof(T);
      tile_walk const walk(tiles, inner);
      each_kind(tiles, inner, [&](auto kind, std::size_t count) {
        auto const kernel = detail::reverse_kernel<S, decltype(kind)::value>;
        device::launch(kernel, blocks_for(kernel, count, smem, grid_blocks_), block_threads_, smem, s, program, walk, first, k,
                       checkpoint, lambda_out, lambda_in, dc);
      });
    }, s);
    zero_tail(lambda_in, s);
  }

  void record(T const* in, T* taped, std::size_t padded_values, stream_view s) const
  {
    device::launch(detail::record_kernel<T>, grid_blocks_, block_threads_, 0, s, in, taped, state_size(), padded_values);
  }

 private:
  /// Calls launch(std::bool_constant<Inner>{}, count) for the `count` tiles of `tiles` that `inner`
  /// holds (Inner = true) and for the others, each kind where it has tiles.
  template <class Launch>
  static void each_kind(tile_range tiles, tile_rect const& inner, Launch&& launch)
  {
    std::size_t const held = tiles.count_in(inner);
    if (held > 0) { launch(std::true_type{}, held); }
    if (held < tiles.size()) { launch(std::false_type{}, tiles.size() - held); }
  }

  /// Blocks of `kernel`'s launch over `tiles` tiles with `smem` bytes of scratch: the plan's
  /// persistent grid `planned` (the forward's or the reverse's), fewer for fewer tiles, and no more
  /// than the device holds at once (the plan counts the threads and the shared memory; the kernel's
  /// registers may let fewer blocks in).
  template <class Kernel>
  [[nodiscard]] int blocks_for(Kernel kernel, std::size_t tiles, std::size_t smem, int planned) const
  {
    int const wanted = tiles < static_cast<std::size_t>(planned) ? static_cast<int>(tiles) : planned;
    return device::persistent_grid(kernel, wanted, block_threads_, smem);
  }

  void zero_tail(T* state, stream_view s) const
  {
    std::size_t const used = program_.used_values();
    if (state_size() > used) {
      TAPEFLOW_CUDA_TRY(cudaMemsetAsync(state + used, 0, (state_size() - used) * sizeof(T), to_native(s)));
    }
  }

  runner_program<S, device_ghosts<T>> program_;
  int block_threads_;
  int grid_blocks_;
  int forward_grid_blocks_;
};

/// The chain Step of stencil S's segments on a GPU backend.
template <class S>
using device_segments = segment_step<S, device_runner<S>>;

/// The GPU Step of `plan`'s segments of `stencil` over `g`; with `comm`, of this rank's part of `g`
/// (the whole grid) cut over the ranks of `comm`, in the segments plan_slab_segments planned (its
/// state is the part's: cut_for says which cells). A null `comm` is one process. A stencil with
/// coefficients reads them from `c` (device memory; over ranks, the part's cells of them) and is a
/// Step with parameters (dL/dc of the cells it holds).
template <class S>
[[nodiscard]] device_segments<S> make_device_segments(S stencil, grid<typename S::value_type> const& g,
                                                      segment_plan const& plan,
                                                      std::shared_ptr<distributed::communicator> comm = nullptr,
                                                      coefficient_view<typename S::value_type> c = {})
{
  return device_segments<S>(device_runner<S>(std::move(stencil), g, plan, std::move(comm), c), plan);
}

/// make_device_segments as an object, for code written once over the backends (cpu.hpp's twin).
struct device_segments_maker {
  template <class S, class... Rest>
  auto operator()(S stencil, Rest&&... rest) const
  {
    return make_device_segments(std::move(stencil), std::forward<Rest>(rest)...);
  }
};

}  // namespace tapeflow::stencil

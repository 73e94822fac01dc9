// SPDX-License-Identifier: Apache-2.0
// Device memory owned by tapeflow, with byte accounting per backend.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <vector>

namespace tapeflow {

/// An uninitialised, stream-ordered allocation in a backend's device memory (host memory on the
/// CPU backend). Move-only; freed on the stream it was allocated on. The memory is the buffer's
/// from that point of its stream on: allocate it on the stream that uses it first, or order that
/// stream after the allocation (an event recorded after it), as with cudaMallocAsync. The stream
/// has no default: `{}` is the legacy default stream, which tapeflow's streams (non-blocking) do
/// not wait for ("What the GPU found" in docs/gpu-validation.md).
class device_buffer {
 public:
  device_buffer() noexcept = default;
  device_buffer(backend kind, std::size_t bytes, stream_view stream);
  ~device_buffer();
  device_buffer(device_buffer&& other) noexcept;
  device_buffer& operator=(device_buffer&& other) noexcept;
  device_buffer(device_buffer const&) = delete;
  device_buffer& operator=(device_buffer const&) = delete;

  [[nodiscard]] void* data() noexcept { return data_; }
  [[nodiscard]] void const* data() const noexcept { return data_; }
  template <class T>
  [[nodiscard]] T* data_as() noexcept { return static_cast<T*>(data_); }
  template <class T>
  [[nodiscard]] T const* data_as() const noexcept { return static_cast<T const*>(data_); }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  [[nodiscard]] backend kind() const noexcept { return kind_; }
  [[nodiscard]] stream_view stream() const noexcept { return stream_; }

  /// Copies `bytes` from host memory into the buffer at `offset` (ordered on `stream`). The host
  /// memory must stay as it is until the stream has reached the copy (synchronize it, or an event
  /// recorded after): on a CPU backend's stream other than the default the copy runs on the
  /// stream's worker, later, as a copy from pinned memory does on a GPU.
  void upload(void const* host, std::size_t bytes, stream_view stream, std::size_t offset = 0);
  /// Copies `bytes` from the buffer at `offset` to host memory and waits for it.
  void download(void* host, std::size_t bytes, stream_view stream, std::size_t offset = 0) const;
  /// Copies the whole of `source` (same backend, same size) into this buffer.
  void copy_from(device_buffer const& source, stream_view stream);
  /// Copies the first `bytes` of `source` (same backend) into this buffer's first `bytes`. Throws
  /// logic_error when either holds fewer.
  void copy_from(device_buffer const& source, std::size_t bytes, stream_view stream);
  /// Sets every byte to `value` (e.g. 0xFF poisons floating-point data with NaN).
  void fill(unsigned char value, stream_view stream);
  /// Sets the bytes [offset, offset + bytes) to `value`. Throws logic_error past the buffer's end.
  void fill(unsigned char value, std::size_t offset, std::size_t bytes, stream_view stream);

 private:
  void release() noexcept;
  backend kind_{backend::cpu};
  void* data_{nullptr};
  std::size_t bytes_{0};
  stream_view stream_{};
};

/// Page-locked host memory for a backend's host tier (cudaMallocHost on CUDA), with byte
/// accounting. Move-only.
class pinned_buffer {
 public:
  pinned_buffer() noexcept = default;
  pinned_buffer(backend kind, std::size_t bytes);
  ~pinned_buffer();
  pinned_buffer(pinned_buffer&& other) noexcept;
  pinned_buffer& operator=(pinned_buffer&& other) noexcept;
  pinned_buffer(pinned_buffer const&) = delete;
  pinned_buffer& operator=(pinned_buffer const&) = delete;

  [[nodiscard]] void* data() noexcept { return data_; }
  [[nodiscard]] void const* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  [[nodiscard]] backend kind() const noexcept { return kind_; }

 private:
  void release() noexcept;
  backend kind_{backend::cpu};
  void* data_{nullptr};
  std::size_t bytes_{0};
};

/// Copies `bytes` between a device buffer and pinned host memory on `stream`, asynchronously.
void copy_to_host_async(pinned_buffer& dst, device_buffer const& src, std::size_t bytes, stream_view stream);
void copy_to_device_async(device_buffer& dst, pinned_buffer const& src, std::size_t bytes, stream_view stream);

/// Bytes tapeflow holds in a backend's device memory, now and at the high-water mark, and what
/// it has allocated since the process started: `allocations` counts every device_buffer (or
/// pinned_buffer) made, `allocated_bytes` their sizes. Take the difference of two readings to
/// see what a piece of code allocated (a chain's second forward and reverse: nothing).
struct memory_usage {
  std::size_t current_bytes{0};
  std::size_t peak_bytes{0};
  std::size_t allocations{0};
  std::size_t allocated_bytes{0};
};

[[nodiscard]] memory_usage device_memory_usage(backend kind) noexcept;
/// Starts a new high-water mark at the current usage.
void reset_device_memory_peak(backend kind) noexcept;

/// Bytes tapeflow holds in a backend's pinned host memory (the host tier).
[[nodiscard]] memory_usage host_memory_usage(backend kind) noexcept;
void reset_host_memory_peak(backend kind) noexcept;

/// Device buffers kept for reuse for as long as the pool lives: where a chain's tape memory
/// (layers, host-tier ring slots, Revolve snapshots, scratch and adjoint buffers) comes from, so
/// that its second forward and reverse allocate nothing and touch no fresh pages. `take` hands
/// out a kept buffer of exactly the size asked for, else allocates one; `give` keeps a buffer
/// instead of freeing it. Kept bytes stay counted by device_memory_usage (tapeflow still holds
/// them) until the pool is cleared or destroyed, which frees them.
///
/// A kept buffer is handed out again without any synchronisation: give and take on one stream
/// (tapeflow::chain orders its calls on different streams itself), or order them yourself.
class buffer_pool {
 public:
  explicit buffer_pool(backend kind) noexcept : kind_(kind) {}
  buffer_pool(buffer_pool const&) = delete;
  buffer_pool& operator=(buffer_pool const&) = delete;
  ~buffer_pool() = default;

  /// A buffer of `bytes` bytes: a kept one (the most recently given) or a new one on `stream`.
  [[nodiscard]] device_buffer take(std::size_t bytes, stream_view stream);
  /// Keeps `buffer` (of this pool's backend) for a later take; an empty buffer is ignored.
  void give(device_buffer&& buffer) noexcept;
  /// Frees every kept buffer.
  void clear() noexcept;

  [[nodiscard]] backend kind() const noexcept { return kind_; }
  /// Bytes kept now (not handed out).
  [[nodiscard]] std::size_t kept_bytes() const noexcept { return kept_bytes_; }
  /// Buffers the pool had to allocate over its lifetime.
  [[nodiscard]] std::size_t allocations() const noexcept { return allocations_; }

 private:
  backend kind_;
  std::vector<device_buffer> kept_;
  std::size_t kept_bytes_{0};
  std::size_t allocations_{0};
};

namespace cpu {
/// Bytes the CPU backend keeps from freed buffers of 64 KiB or more, for reuse by later ones of
/// the same size: its counterpart of CUDA's stream-ordered pool, so that a gradient's layers are
/// not fresh pages every time. Not counted by device_memory_usage (tapeflow holds no buffer in
/// them). At most TAPEFLOW_CPU_POOL_BYTES (environment; default an eighth of physical memory);
/// nothing is kept under AddressSanitizer.
[[nodiscard]] std::size_t cached_memory() noexcept;
/// Gives the cached bytes back to the system; returns how many.
std::size_t release_cached_memory() noexcept;
}  // namespace cpu

}  // namespace tapeflow

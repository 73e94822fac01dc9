// SPDX-License-Identifier: Apache-2.0
// Enzyme split-mode interop, host side. Enzyme's augmented forward writes an opaque per-thread tape
// whose size is a compile-time constant (`enzyme_allocated, N`, checked against
// `__enzyme_augmentsize`: include/tapeflow/enzyme_abi.hpp); its reverse reads it back. tapeflow
// gives each thread a *slot* of that size in a tiled layer (one record per thread, in 16-byte
// chunks) and stages whole slots back into shared memory for the reverse. What Enzyme allocates
// beside its tape (loop caches) goes into a cache_pool. See docs/enzyme.md.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/config.hpp>
#include <tapeflow/enzyme_cache.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <cstdint>

namespace tapeflow::enzyme {

/// The unit a slot is made of: 16 bytes, the unit of async copies and coalesced writes.
using chunk = value_record<std::uint32_t, 4>;

/// Bytes of one thread's slot for an Enzyme tape of `tape_bytes`: rounded up to whole chunks.
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t slot_bytes(std::size_t tape_bytes) noexcept
{
  return (tape_bytes + sizeof(chunk) - 1) / sizeof(chunk) * sizeof(chunk);
}

/// Chunks in one slot.
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t slot_chunks(std::size_t tape_bytes) noexcept
{
  return slot_bytes(tape_bytes) / sizeof(chunk);
}

/// Thread `i`'s slot (slot_bytes(tape_bytes) bytes) in a writing layer, for Enzyme to write its
/// `tape_bytes` into. The slot's padding past them is zeroed here: slots are staged and copied in
/// whole chunks, and bytes nothing wrote would go through every copy ("What the GPU found" in
/// docs/gpu-validation.md).
[[nodiscard]] TAPEFLOW_HOST_DEVICE inline void* slot(tape_writer<chunk> layer, std::size_t tape_bytes,
                                                     std::size_t i) noexcept
{
  chunk* const first = layer.data() + i * slot_chunks(tape_bytes);
  auto* const bytes = reinterpret_cast<unsigned char*>(first);
  for (std::size_t k = tape_bytes; k < slot_bytes(tape_bytes); ++k) { bytes[k] = 0; }
  return first;
}

/// A pipeline request for layers of `slots` slots of an Enzyme tape of `tape_bytes`: the records
/// are chunks, and every tile holds whole slots (the planner picks how many). Pass it as a chain's
/// `pipeline` option. Throws logic_error for a zero size or a slot the device cannot stage.
[[nodiscard]] pipeline_request slot_pipeline(device_limits const& limits, std::size_t tape_bytes, std::size_t slots,
                                             pipeline_request overrides = {});

/// Chunks of a slot for a tape of TapeBytes, at compile time.
template <std::size_t TapeBytes>
inline constexpr std::size_t slot_chunks_v = slot_chunks(TapeBytes);

/// Where Enzyme's loop caches go: `layers` layers of `slots` regions of `region_bytes` each, in
/// device (or CPU-backend) memory that stays put for the pool's life, so the pointers Enzyme keeps
/// in its tapes stay valid whichever tier the tapes themselves move to. Bounded: a slot whose
/// caches do not fit its region raises the status that check() turns into a budget_error.
class cache_pool {
 public:
  /// Throws logic_error for zero sizes or a region that is not a multiple of 16 bytes.
  cache_pool(backend kind, std::size_t layers, std::size_t slots, std::size_t region_bytes, stream_view s = {});

  /// Layer `layer`'s regions, for a kernel (or the CPU backend's loop).
  [[nodiscard]] cache_view view(std::size_t layer) noexcept;
  /// Waits for `s`, reads the status and throws budget_error when any slot's caches overflowed its
  /// region (naming the bytes a region needs at least); then zeroes the status. A single request
  /// larger than a whole layer's pool never gets here: it cannot be served, and the kernel traps
  /// (on a GPU the context is lost, and this call throws platform_error) or, on the CPU backend,
  /// the process aborts with a message (Enzyme's code calls the allocator; nothing can unwind it).
  void check(stream_view s = {});
  /// Zeroes the status (on `s`).
  void reset(stream_view s = {});

  [[nodiscard]] std::size_t layers() const noexcept { return layers_; }
  [[nodiscard]] std::size_t slots() const noexcept { return slots_; }
  [[nodiscard]] std::size_t region_bytes() const noexcept { return region_bytes_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return regions_.size(); }

 private:
  std::size_t layers_;
  std::size_t slots_;
  std::size_t region_bytes_;
  device_buffer regions_;
  device_buffer status_;
};

}  // namespace tapeflow::enzyme

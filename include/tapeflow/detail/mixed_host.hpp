// SPDX-License-Identifier: Apache-2.0
// The host side of a mixed schedule (tapeflow/schedule.hpp): layers kept in pinned host memory
// and checkpoints of the state on the host.
//
// Layers. A layer kept on the host is written into one of two device slots; once the compute
// stream has written it, a D2H copy stream copies it into pinned memory and frees the slot. Layers
// come back last-first (the schedule is a stack): an H2D copy stream copies one into a free slot,
// and the chain asks for the next host layer's prefetch as soon as its pinned copy exists and no
// host layer is written before its reverse, so it lands while the compute stream runs the steps
// in between. Events order every slot's users; the host never waits except on the CPU backend,
// whose default stream runs inline.
//
// Checkpoints are copied to and from pinned memory on the compute stream.
//
// Pinned buffers are pooled by size and kept for the owner's lifetime, so a chain run again and
// again allocates nothing after its first run.
#pragma once

#include <tapeflow/memory.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <vector>

namespace tapeflow::detail {

class mixed_host {
 public:
  /// Layers of up to `slot_bytes`; `steps` steps in the chain.
  mixed_host(backend kind, std::size_t slot_bytes, std::size_t steps);
  mixed_host(mixed_host const&) = delete;
  mixed_host& operator=(mixed_host const&) = delete;
  mixed_host(mixed_host&&) = delete;
  mixed_host& operator=(mixed_host&&) = delete;
  /// Waits for the copy streams before anything they use goes.
  ~mixed_host();

  /// The device slot the layer of `step` (`bytes` long) is written into; the compute stream
  /// first waits until the slot is free. Allocates its pinned copy (out_of_memory when it cannot).
  [[nodiscard]] void* begin_write(std::size_t step, std::size_t bytes, stream_view compute);
  void fill_slot(std::size_t step, unsigned char value, stream_view compute);
  /// Queues the D2H copy of the slot behind the compute stream's writes.
  void end_write(std::size_t step, stream_view compute);
  /// Queues the H2D copy of `step`'s layer into a free slot (no-op when already queued).
  void prefetch(std::size_t step);
  /// The slot holding `step`'s layer (prefetched now if it was not); the compute stream first
  /// waits for it to land.
  [[nodiscard]] void const* begin_read(std::size_t step, stream_view compute);
  /// The compute stream is done with the slot; its pinned copy goes back to the pool.
  void end_read(std::size_t step, stream_view compute);

  /// Checkpoints of the state, copied on the compute stream.
  void store(std::size_t step, device_buffer const& state, stream_view compute);
  void restore(std::size_t step, device_buffer& state, stream_view compute);
  void release(std::size_t step);

  /// After the reverse: orders the compute stream after both copy streams; the slots are kept for
  /// the next gradient (freed by abandon() and the destructor).
  void end(stream_view compute);
  /// After a failure: waits for the copy streams and drops what is held. Never throws.
  void abandon() noexcept;

  [[nodiscard]] std::size_t ring_bytes() const noexcept { return slots_.size() * slot_bytes_; }
  /// Pinned bytes held by layers and checkpoints now, and the most held so far.
  [[nodiscard]] std::size_t host_bytes() const noexcept { return held_bytes_; }
  [[nodiscard]] std::size_t peak_host_bytes() const noexcept { return peak_bytes_; }
  [[nodiscard]] std::size_t prefetches() const noexcept { return prefetches_; }
  /// Whether pinned memory could not be had (the chain then plans without host memory).
  [[nodiscard]] bool allocation_failed() const noexcept { return allocation_failed_; }

 private:
  struct kept {
    pinned_buffer host;
    std::size_t bytes{0};
    int slot{-1};        ///< the slot it was prefetched into, -1 if none
    std::unique_ptr<event> landed;  ///< its D2H copy is done
  };
  pinned_buffer take(std::size_t bytes);
  void give_back(pinned_buffer buffer);
  void ensure_slots(stream_view compute);
  int free_slot() const;

  backend kind_;
  std::size_t slot_bytes_;
  std::vector<device_buffer> slots_;
  std::vector<event> slot_free_;   // the slot's last user is done with it
  std::vector<event> slot_ready_;  // the slot holds the prefetched layer
  int busy_[2]{-1, -1};            // the step whose layer a slot holds (written or prefetched), -1 none
  event written_;
  std::vector<kept> layers_;       // per step
  std::vector<pinned_buffer> checkpoints_;  // per step
  std::multimap<std::size_t, pinned_buffer> pool_;
  std::size_t held_bytes_{0};
  std::size_t peak_bytes_{0};
  std::size_t prefetches_{0};
  int next_slot_{0};
  bool allocation_failed_{false};
  // Declared last, destroyed first: work queued on them uses the buffers and events above.
  stream d2h_;
  stream h2d_;
};

}  // namespace tapeflow::detail

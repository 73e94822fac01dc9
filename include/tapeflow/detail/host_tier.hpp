// SPDX-License-Identifier: Apache-2.0
// The host tier of one chain: layers kept in pinned host memory, checkpoints of the state on the
// host, a ring of device slots the layers pass through, a D2H and an H2D copy stream, and the
// events that order every slot's users without device-wide synchronisation. Every schedule the
// chain runs uses it (a tier split's offloaded layers, the mixed schedule's host layers and host
// checkpoints).
//
// Layers. A layer kept on the host is written into a free slot (round robin, so K slots form a
// ring: the compute stream waits only for the D2H copy of the layer written K layers earlier);
// once the compute stream has written it, the D2H stream copies it into pinned memory and frees
// the slot. Layers come back in the order the schedule reverses them: the chain's executor asks
// for each prefetch ahead of its read (up to `distance` layers ahead, chain_executor.hpp), and the
// H2D stream copies it into a free slot once its pinned copy has landed and the slot's last user
// is done, so it lands while the compute stream runs the steps in between. The host never waits except on the
// CPU backend, whose default stream runs inline.
//
// Checkpoints are copied to and from pinned memory on the compute stream.
//
// Pinned buffers are pooled by size and the slots are kept for the owner's lifetime, so a chain
// run again and again allocates nothing after its first gradient.
#pragma once

#include <tapeflow/memory.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <vector>

namespace tapeflow::detail {

class host_tier {
 public:
  /// Layers of up to `slot_bytes` of a chain of `steps` steps, passing through `slots` (>= 1)
  /// device slots. `measure_stalls`: time the compute stream's waits (stall_ms()).
  host_tier(backend kind, std::size_t slot_bytes, std::size_t steps, std::size_t slots, bool measure_stalls);
  host_tier(host_tier const&) = delete;
  host_tier& operator=(host_tier const&) = delete;
  host_tier(host_tier&&) = delete;
  host_tier& operator=(host_tier&&) = delete;
  /// Waits for the copy streams before anything they use goes.
  ~host_tier();

  /// The device slot the layer of `step` (`bytes` long) is written into; the compute stream
  /// first waits until the slot is free. Allocates its pinned copy (out_of_memory when it cannot).
  [[nodiscard]] void* begin_write(std::size_t step, std::size_t bytes, stream_view compute);
  void fill_slot(std::size_t step, unsigned char value, stream_view compute);
  /// Queues the D2H copy of the slot behind the compute stream's writes; frees the slot.
  void end_write(std::size_t step, stream_view compute);
  /// Queues the H2D copy of `step`'s layer into a free slot. True when it is queued (now or
  /// before); false when every slot is in use (the caller prefetches it later).
  bool prefetch(std::size_t step);
  /// The slot holding `step`'s layer (prefetched now if it was not); the compute stream first
  /// waits for it to land.
  [[nodiscard]] void const* begin_read(std::size_t step, stream_view compute);
  /// The compute stream is done with the slot; its pinned copy goes back to the pool.
  void end_read(std::size_t step, stream_view compute);
  /// Prefetched layers not read yet.
  [[nodiscard]] std::size_t queued() const noexcept { return queued_; }

  /// Checkpoints of the state, copied on the compute stream.
  void store(std::size_t step, device_buffer const& state, stream_view compute);
  void restore(std::size_t step, device_buffer& state, stream_view compute);
  void release(std::size_t step);

  /// Starts a gradient's counts (prefetches, stalls).
  void begin(stream_view compute);
  /// After the reverse: orders the compute stream after both copy streams (the slots are kept
  /// for the next gradient, freed by abandon() and the destructor) and, when stalls are measured,
  /// waits for the compute stream and sums them.
  void end(stream_view compute);
  /// After a failure: waits for the copy streams and drops what is held. Never throws.
  void abandon() noexcept;

  [[nodiscard]] std::size_t slots() const noexcept { return slot_count_; }
  /// Device bytes of the slots allocated so far.
  [[nodiscard]] std::size_t ring_bytes() const noexcept { return slots_.size() * slot_bytes_; }
  /// Pinned bytes held by layers and checkpoints now, and the most held so far.
  [[nodiscard]] std::size_t host_bytes() const noexcept { return held_bytes_; }
  [[nodiscard]] std::size_t peak_host_bytes() const noexcept { return peak_bytes_; }
  /// Layers copied back in the last gradient.
  [[nodiscard]] std::size_t prefetches() const noexcept { return prefetches_; }
  /// Milliseconds the compute stream waited for a free slot (forward) or a prefetch (reverse)
  /// in the last gradient; needs measure_stalls and end().
  [[nodiscard]] double stall_ms() const noexcept { return stall_ms_; }
  /// Whether pinned memory could not be had (the chain then plans without host memory).
  [[nodiscard]] bool allocation_failed() const noexcept { return allocation_failed_; }

 private:
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  struct kept {
    pinned_buffer host;
    std::size_t bytes{0};
    std::size_t slot{none};         ///< the slot it is written into or prefetched into
    bool prefetched{false};         ///< its H2D copy is queued (it is in `slot` for a read)
    std::unique_ptr<event> landed;  ///< its D2H copy is done
  };
  pinned_buffer take(std::size_t bytes);
  void give_back(pinned_buffer buffer);
  void ensure_slots(stream_view compute);
  [[nodiscard]] std::size_t free_slot() const noexcept;  ///< none when all are in use
  std::size_t occupy(std::size_t step);
  void wait_timed(event const& e, stream_view compute);

  backend kind_;
  std::size_t slot_bytes_;
  std::size_t slot_count_;
  bool measure_;
  std::vector<device_buffer> slots_;
  std::vector<event> slot_free_;   // the slot's last user is done with it
  std::vector<event> slot_ready_;  // the slot holds the prefetched layer
  std::vector<std::size_t> busy_;  // the step whose layer a slot holds (written or prefetched), none
  event written_;
  event d2h_done_;                 // end(): the copy streams' last work, which the compute stream follows
  event h2d_done_;
  std::vector<kept> layers_;       // per step
  std::vector<pinned_buffer> checkpoints_;  // per step
  std::multimap<std::size_t, pinned_buffer> pool_;
  std::vector<event> marks_;       // pairs around the compute stream's waits (measure only)
  std::size_t used_marks_{0};
  std::size_t held_bytes_{0};
  std::size_t peak_bytes_{0};
  std::size_t prefetches_{0};
  std::size_t queued_{0};
  std::size_t next_slot_{0};
  double stall_ms_{0};
  bool allocation_failed_{false};
  // Declared last, destroyed first: work queued on them uses the buffers and events above.
  stream d2h_;
  stream h2d_;
};

}  // namespace tapeflow::detail

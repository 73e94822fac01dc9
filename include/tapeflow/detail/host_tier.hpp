// SPDX-License-Identifier: Apache-2.0
// The host tier's machinery for one chain: pinned host copies of the offloaded layers, a bounded
// ring of device slots, a D2H and an H2D copy stream, and the events that order copies with
// compute without device-wide synchronisation. Everything is allocated once and kept for the
// chain's lifetime (the ring from the first forward on).
//
// Forward: layer i is written into slot i % K once that slot's previous D2H copy is done; when
// the compute stream has written it, the D2H stream copies it out. Reverse: layers come back in
// the opposite order (j = 0 is the last layer written); prefetch j goes into slot j % K once
// the reverse of j - K released it and every D2H copy of the forward has landed, `distance`
// layers ahead of the one being reversed.
#pragma once

#include <tapeflow/memory.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <vector>

namespace tapeflow::detail {

class host_tier {
 public:
  /// `layers` offloaded layers of `layer_bytes`, cycling through `slots` device buffers with
  /// `distance` (< slots) prefetches in flight. Host memory is allocated once and kept.
  host_tier(backend kind, std::size_t layer_bytes, std::size_t layers, std::size_t slots, std::size_t distance,
            bool measure_stalls);
  host_tier(host_tier const&) = delete;
  host_tier& operator=(host_tier const&) = delete;
  host_tier(host_tier&&) = delete;
  host_tier& operator=(host_tier&&) = delete;
  /// Waits for the copy streams before anything they use goes.
  ~host_tier();

  /// Allocates the ring (the first time; later forwards reuse it); the forward writes layers
  /// 0, 1, ... in order.
  void begin_forward(stream_view compute);
  /// The slot layer `i` is written into (the compute stream first waits until it is free).
  [[nodiscard]] void* begin_write(std::size_t i, stream_view compute);
  /// Sets every byte of layer `i`'s slot (tests poison it before the forward writes it).
  void fill_slot(std::size_t i, unsigned char value, stream_view compute);
  /// Queues the copy of layer `i` to the host behind the compute stream's writes.
  void end_write(std::size_t i, stream_view compute);

  /// Queues the first prefetches; the reverse then reads layers n-1, n-2, ... in order.
  void begin_reverse(stream_view compute);
  /// The slot holding layer `i` (the compute stream first waits for its prefetch).
  [[nodiscard]] void const* begin_read(std::size_t i, stream_view compute);
  /// Releases layer `i`'s slot to the next prefetch.
  void end_read(std::size_t i, stream_view compute);
  /// Ends the reverse; the ring is kept for the next forward, which is ordered after the last
  /// read and both copy streams (no host wait).
  void end_reverse(stream_view compute);

  /// After a failure: waits for the copy streams and frees the ring. Never throws.
  void abandon() noexcept;

  [[nodiscard]] std::size_t ring_bytes() const noexcept { return ring_.size() * layer_bytes_; }
  [[nodiscard]] std::size_t host_bytes() const noexcept { return host_.size() * layer_bytes_; }
  [[nodiscard]] std::size_t slots() const noexcept { return slots_; }
  [[nodiscard]] std::size_t distance() const noexcept { return distance_; }
  /// Milliseconds the compute stream waited on the ring (forward) and on prefetches (reverse),
  /// summed over the last forward/reverse; needs measure_stalls and a completed reverse.
  [[nodiscard]] double forward_stall_ms() const noexcept { return forward_stall_ms_; }
  [[nodiscard]] double reverse_stall_ms() const noexcept { return reverse_stall_ms_; }
  /// Layers copied back in the last reverse.
  [[nodiscard]] std::size_t prefetches() const noexcept { return prefetches_; }

 private:
  [[nodiscard]] std::size_t read_order(std::size_t i) const noexcept { return layers_ - 1 - i; }
  void issue_prefetches(std::size_t up_to);
  double collect(std::vector<event>& marks) const;

  backend kind_;
  std::size_t layer_bytes_;
  std::size_t layers_;
  std::size_t slots_;
  std::size_t distance_;
  bool measure_;
  std::vector<pinned_buffer> host_;
  std::vector<device_buffer> ring_;
  event offloaded_;                // every D2H copy of the forward has landed
  event reads_done_;               // the reverse read its last layer
  event copies_done_;              // the last prefetch has landed
  std::vector<event> slot_free_;   // the slot's previous content is no longer needed
  std::vector<event> slot_ready_;  // the slot holds the layer the compute stream wants
  std::vector<event> written_;     // the compute stream finished writing the slot
  std::vector<event> forward_marks_;  // pairs around each forward wait (measure only)
  std::vector<event> reverse_marks_;  // pairs around each reverse wait (measure only)
  bool active_{false};             // between begin_forward and end_reverse
  std::size_t issued_{0};          // prefetches queued in this reverse
  std::size_t prefetches_{0};
  double forward_stall_ms_{0};
  double reverse_stall_ms_{0};
  // Declared last, destroyed first: work queued on them uses the buffers and events above.
  stream d2h_;
  stream h2d_;
};

}  // namespace tapeflow::detail

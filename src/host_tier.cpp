// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/detail/host_tier.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>

namespace tapeflow::detail {

host_tier::host_tier(backend kind, std::size_t layer_bytes, std::size_t layers, std::size_t slots,
                     std::size_t distance, bool measure_stalls)
  : kind_(kind), layer_bytes_(layer_bytes), layers_(layers), slots_(slots), distance_(distance),
    measure_(measure_stalls), offloaded_(kind), reads_done_(kind), copies_done_(kind), d2h_(kind), h2d_(kind)
{
  TAPEFLOW_EXPECTS(layer_bytes > 0 && layers > 0, "the host tier needs at least one layer");
  TAPEFLOW_EXPECTS(slots >= 1 && distance < slots, "the host tier's prefetch distance must be below its ring size");
  host_.reserve(layers);
  for (std::size_t i = 0; i < layers; ++i) { host_.emplace_back(kind, layer_bytes); }
  for (std::size_t k = 0; k < slots; ++k) {
    slot_free_.emplace_back(kind);
    slot_ready_.emplace_back(kind);
    written_.emplace_back(kind);
  }
  if (measure_) {
    for (std::size_t i = 0; i < 2 * layers; ++i) {
      forward_marks_.emplace_back(kind);
      reverse_marks_.emplace_back(kind);
    }
  }
}

host_tier::~host_tier() { abandon(); }

void host_tier::begin_forward(stream_view compute)
{
  TAPEFLOW_EXPECTS(!active_, "the host tier's ring is already in use");
  if (ring_.empty()) {
    ring_.reserve(slots_);
    for (std::size_t k = 0; k < slots_; ++k) { ring_.emplace_back(kind_, layer_bytes_, compute); }
  } else {
    // The ring stays from the last gradient: this forward writes it after that reverse's reads
    // and both copy streams are done with it (recorded by end_reverse; free on the same stream).
    reads_done_.wait(compute);
    copies_done_.wait(compute);
    offloaded_.wait(compute);
  }
  for (std::size_t k = 0; k < slots_; ++k) { slot_free_[k].record(compute); }
  active_ = true;
  forward_stall_ms_ = 0;
}

void* host_tier::begin_write(std::size_t i, stream_view compute)
{
  std::size_t const k = i % slots_;
  if (measure_) { forward_marks_[2 * i].record(compute); }
  slot_free_[k].wait(compute);  // the D2H copy of layer i - K is done with the slot
  if (measure_) { forward_marks_[2 * i + 1].record(compute); }
  return ring_[k].data();
}

void host_tier::fill_slot(std::size_t i, unsigned char value, stream_view compute)
{
  ring_[i % slots_].fill(value, compute);
}

void host_tier::end_write(std::size_t i, stream_view compute)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::host_tier::offload");
  std::size_t const k = i % slots_;
  written_[k].record(compute);
  written_[k].wait(d2h_.view());
  copy_to_host_async(host_[i], ring_[k], layer_bytes_, d2h_.view());
  slot_free_[k].record(d2h_.view());
}

void host_tier::issue_prefetches(std::size_t up_to)
{
  for (; issued_ < layers_ && issued_ <= up_to; ++issued_) {
    TAPEFLOW_NVTX_RANGE("tapeflow::host_tier::prefetch");
    std::size_t const j = issued_;
    std::size_t const k = j % slots_;
    slot_free_[k].wait(h2d_.view());  // the reverse of j - K (or the forward's copy) released it
    copy_to_device_async(ring_[k], host_[read_order(j)], layer_bytes_, h2d_.view());
    slot_ready_[k].record(h2d_.view());
    ++prefetches_;
  }
}

void host_tier::begin_reverse(stream_view)
{
  TAPEFLOW_EXPECTS(active_ && ring_.size() == slots_, "the host tier's reverse needs its forward first");
  // A prefetch reads a layer's pinned copy: every D2H copy of the forward must have landed.
  // (Waiting on each ring slot's last user is not enough: the last layers written are still
  // being copied out of slots that no prefetch reuses first.)
  offloaded_.record(d2h_.view());
  offloaded_.wait(h2d_.view());
  issued_ = 0;
  prefetches_ = 0;
  reverse_stall_ms_ = 0;
  if (distance_ > 0) { issue_prefetches(distance_ - 1); }
}

void const* host_tier::begin_read(std::size_t i, stream_view compute)
{
  std::size_t const j = read_order(i);
  issue_prefetches(j + distance_);
  std::size_t const k = j % slots_;
  if (measure_) { reverse_marks_[2 * j].record(compute); }
  slot_ready_[k].wait(compute);
  if (measure_) { reverse_marks_[2 * j + 1].record(compute); }
  return ring_[k].data();
}

void host_tier::end_read(std::size_t i, stream_view compute)
{
  slot_free_[read_order(i) % slots_].record(compute);
}

double host_tier::collect(std::vector<event>& marks) const
{
  double total = 0;
  for (std::size_t p = 0; p + 1 < marks.size(); p += 2) {
    total += static_cast<double>(elapsed_ms(marks[p], marks[p + 1]));
  }
  return total;
}

void host_tier::end_reverse(stream_view compute)
{
  // Every prefetch was waited for by a read, and every D2H copy by the prefetches (offloaded_).
  // The ring stays for the next forward (begin_forward waits for these events); the stream it
  // was allocated on, which frees it when the chain goes, is ordered after the last read and
  // both copy streams by the same events: the host does not wait (unless stalls are measured).
  stream_view const owner = ring_.front().stream();
  reads_done_.record(compute);
  reads_done_.wait(owner);
  copies_done_.record(h2d_.view());
  copies_done_.wait(owner);
  offloaded_.record(d2h_.view());
  offloaded_.wait(owner);
  if (measure_) {
    tapeflow::synchronize(kind_, compute);
    forward_stall_ms_ = collect(forward_marks_);
    reverse_stall_ms_ = collect(reverse_marks_);
  }
  active_ = false;
}

void host_tier::abandon() noexcept
{
  try {
    d2h_.synchronize();
    h2d_.synchronize();
  } catch (...) {  // the original failure is what the caller sees
  }
  ring_.clear();
  active_ = false;
  issued_ = 0;
}

}  // namespace tapeflow::detail

// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/detail/host_tier.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>

#include <algorithm>
#include <utility>

namespace tapeflow::detail {

host_tier::host_tier(backend kind, std::size_t slot_bytes, std::size_t steps, std::size_t slots, bool measure_stalls)
  : kind_(kind), slot_bytes_(slot_bytes), slot_count_(slots), measure_(measure_stalls), busy_(slots, none),
    written_(kind), d2h_done_(kind), h2d_done_(kind), layers_(steps), checkpoints_(steps), d2h_(kind), h2d_(kind)
{
  TAPEFLOW_EXPECTS(slot_bytes > 0 && steps > 0 && slots > 0,
                   "the host tier needs a layer size, steps and at least one device slot");
  for (std::size_t k = 0; k < slots; ++k) {
    slot_free_.emplace_back(kind);
    slot_ready_.emplace_back(kind);
  }
}

host_tier::~host_tier() { abandon(); }

pinned_buffer host_tier::take(std::size_t bytes)
{
  auto it = pool_.find(bytes);
  pinned_buffer buffer;
  if (it != pool_.end()) {
    buffer = std::move(it->second);
    pool_.erase(it);
  } else {
    try {
      buffer = pinned_buffer(kind_, bytes);
    } catch (out_of_memory const&) {
      allocation_failed_ = true;
      throw;
    }
  }
  held_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, held_bytes_);
  return buffer;
}

void host_tier::give_back(pinned_buffer buffer)
{
  std::size_t const bytes = buffer.size();
  held_bytes_ -= bytes;
  pool_.emplace(bytes, std::move(buffer));
}

void host_tier::ensure_slots(stream_view compute)
{
  if (!slots_.empty()) { return; }
  slots_.reserve(slot_count_);
  for (std::size_t k = 0; k < slot_count_; ++k) {
    slots_.emplace_back(kind_, slot_bytes_, compute);
    slot_free_[k].record(compute);
    busy_[k] = none;
  }
}

std::size_t host_tier::free_slot() const noexcept
{
  for (std::size_t i = 0; i < slot_count_; ++i) {
    std::size_t const k = (next_slot_ + i) % slot_count_;
    if (busy_[k] == none) { return k; }
  }
  return none;
}

std::size_t host_tier::occupy(std::size_t step)
{
  std::size_t const k = free_slot();
  if (k == none) { return none; }
  next_slot_ = (k + 1) % slot_count_;
  busy_[k] = step;
  layers_[step].slot = k;
  return k;
}

void host_tier::wait_timed(event const& e, stream_view compute)
{
  if (!measure_) {
    e.wait(compute);
    return;
  }
  while (marks_.size() < used_marks_ + 2) { marks_.emplace_back(kind_); }  // the first gradient's
  marks_[used_marks_].record(compute);
  e.wait(compute);
  marks_[used_marks_ + 1].record(compute);
  used_marks_ += 2;
}

void host_tier::begin(stream_view)
{
  prefetches_ = 0;
  used_marks_ = 0;
  stall_ms_ = 0;
}

void* host_tier::begin_write(std::size_t step, std::size_t bytes, stream_view compute)
{
  TAPEFLOW_EXPECTS(step < layers_.size() && bytes <= slot_bytes_ && layers_[step].bytes == 0,
                   "a host layer is written once, and fits a slot");
  ensure_slots(compute);
  kept& l = layers_[step];
  std::size_t const k = occupy(step);
  TAPEFLOW_EXPECTS(k != none, "every host-tier slot is in use: a layer is written while prefetches are queued");
  try {
    l.host = take(bytes);
  } catch (...) {
    busy_[k] = none;
    l.slot = none;
    throw;
  }
  l.bytes = bytes;
  if (!l.landed) { l.landed = std::make_unique<event>(kind_); }
  wait_timed(slot_free_[k], compute);  // the slot's previous user (a D2H copy K layers back) is done
  return slots_[k].data();
}

void host_tier::fill_slot(std::size_t step, unsigned char value, stream_view compute)
{
  slots_[layers_[step].slot].fill(value, compute);
}

void host_tier::end_write(std::size_t step, stream_view compute)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::host_tier::offload");
  TAPEFLOW_EXPECTS(step < layers_.size() && layers_[step].slot != none && layers_[step].bytes != 0 &&
                     !layers_[step].prefetched,
                   "end_write of a host layer that is not being written");
  kept& l = layers_[step];
  std::size_t const k = l.slot;
  written_.record(compute);
  written_.wait(d2h_.view());
  copy_to_host_async(l.host, slots_[k], l.bytes, d2h_.view());
  slot_free_[k].record(d2h_.view());
  l.landed->record(d2h_.view());
  busy_[k] = none;
  l.slot = none;
}

bool host_tier::prefetch(std::size_t step)
{
  TAPEFLOW_EXPECTS(step < layers_.size(), "a host layer of a step the host tier does not have");
  kept& l = layers_[step];
  TAPEFLOW_EXPECTS(l.bytes != 0 && (l.slot == none || l.prefetched), "a host layer is prefetched after it was written");
  if (l.prefetched) { return true; }
  std::size_t const k = occupy(step);
  if (k == none) { return false; }
  l.prefetched = true;
  TAPEFLOW_NVTX_RANGE("tapeflow::host_tier::prefetch");
  slot_free_[k].wait(h2d_.view());  // the slot's previous user is done
  l.landed->wait(h2d_.view());      // the pinned copy is complete
  copy_to_device_async(slots_[k], l.host, l.bytes, h2d_.view());
  slot_ready_[k].record(h2d_.view());
  ++prefetches_;
  ++queued_;
  return true;
}

void const* host_tier::begin_read(std::size_t step, stream_view compute)
{
  TAPEFLOW_EXPECTS(step < layers_.size() && (layers_[step].slot == none || layers_[step].prefetched),
                   "begin_read of a host layer that is being written or read");
  bool const in_a_slot = prefetch(step);
  TAPEFLOW_EXPECTS(in_a_slot, "every host-tier slot is in use: a layer is read beyond the prefetch distance");
  --queued_;
  layers_[step].prefetched = false;  // now being read
  std::size_t const k = layers_[step].slot;
  wait_timed(slot_ready_[k], compute);
  return slots_[k].data();
}

void host_tier::end_read(std::size_t step, stream_view compute)
{
  TAPEFLOW_EXPECTS(step < layers_.size() && layers_[step].slot != none && !layers_[step].prefetched,
                   "end_read of a host layer that is not being read");
  kept& l = layers_[step];
  std::size_t const k = l.slot;
  slot_free_[k].record(compute);
  busy_[k] = none;
  l.slot = none;
  l.bytes = 0;
  // The compute stream waited for the H2D copy: the pinned copy's next user (ordered after the
  // compute stream's later work) cannot overtake it.
  give_back(std::move(l.host));
}

void host_tier::store(std::size_t step, device_buffer const& state, stream_view compute)
{
  TAPEFLOW_EXPECTS(step < checkpoints_.size() && checkpoints_[step].size() == 0,
                   "a host checkpoint of this step is already held");
  checkpoints_[step] = take(state.size());
  copy_to_host_async(checkpoints_[step], state, state.size(), compute);
}

void host_tier::restore(std::size_t step, device_buffer& state, stream_view compute)
{
  TAPEFLOW_EXPECTS(step < checkpoints_.size() && checkpoints_[step].size() == state.size(),
                   "no host checkpoint of this step");
  copy_to_device_async(state, checkpoints_[step], state.size(), compute);
}

void host_tier::release(std::size_t step)
{
  TAPEFLOW_EXPECTS(step < checkpoints_.size() && checkpoints_[step].size() != 0, "no host checkpoint of this step");
  give_back(std::move(checkpoints_[step]));
  checkpoints_[step] = pinned_buffer{};
}

void host_tier::end(stream_view compute)
{
  if (!slots_.empty()) {
    // The slots are kept for the next gradient (which then allocates nothing): the compute
    // stream's later work (the next forward's writes into them, or their free with the chain)
    // is ordered after both copy streams.
    d2h_done_.record(d2h_.view());
    d2h_done_.wait(compute);
    h2d_done_.record(h2d_.view());
    h2d_done_.wait(compute);
  }
  if (measure_ && used_marks_ > 0) {
    tapeflow::synchronize(kind_, compute);
    for (std::size_t p = 0; p + 1 < used_marks_; p += 2) {
      stall_ms_ += static_cast<double>(elapsed_ms(marks_[p], marks_[p + 1]));
    }
  }
}

void host_tier::abandon() noexcept
{
  try {
    d2h_.synchronize();
    h2d_.synchronize();
  } catch (...) {  // the original failure is what the caller sees
  }
  slots_.clear();
  std::fill(busy_.begin(), busy_.end(), none);
  for (kept& l : layers_) {
    if (l.bytes != 0) { give_back(std::move(l.host)); }
    l.bytes = 0;
    l.slot = none;
    l.prefetched = false;
  }
  for (pinned_buffer& c : checkpoints_) {
    if (c.size() != 0) { give_back(std::move(c)); }
    c = pinned_buffer{};
  }
  queued_ = 0;
  used_marks_ = 0;
}

}  // namespace tapeflow::detail

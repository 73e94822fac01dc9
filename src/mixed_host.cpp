// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/detail/mixed_host.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>

#include <algorithm>
#include <utility>

namespace tapeflow::detail {

mixed_host::mixed_host(backend kind, std::size_t slot_bytes, std::size_t steps)
  : kind_(kind), slot_bytes_(slot_bytes), written_(kind), layers_(steps), checkpoints_(steps), d2h_(kind), h2d_(kind)
{
  TAPEFLOW_EXPECTS(slot_bytes > 0 && steps > 0, "the host side of a schedule needs a layer size and steps");
  for (int k = 0; k < 2; ++k) {
    slot_free_.emplace_back(kind);
    slot_ready_.emplace_back(kind);
  }
}

mixed_host::~mixed_host() { abandon(); }

pinned_buffer mixed_host::take(std::size_t bytes)
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

void mixed_host::give_back(pinned_buffer buffer)
{
  held_bytes_ -= buffer.size();
  std::size_t const bytes = buffer.size();
  pool_.emplace(bytes, std::move(buffer));
}

void mixed_host::ensure_slots(stream_view compute)
{
  if (!slots_.empty()) { return; }
  for (int k = 0; k < 2; ++k) {
    slots_.emplace_back(kind_, slot_bytes_, compute);
    slot_free_[static_cast<std::size_t>(k)].record(compute);
    busy_[k] = -1;
  }
}

int mixed_host::free_slot() const
{
  for (int i = 0; i < 2; ++i) {
    int const k = (next_slot_ + i) % 2;
    if (busy_[k] == -1) { return k; }
  }
  TAPEFLOW_FAIL(logic_error, "the mixed schedule's host slots are both in use");
}

void* mixed_host::begin_write(std::size_t step, std::size_t bytes, stream_view compute)
{
  TAPEFLOW_EXPECTS(step < layers_.size() && bytes <= slot_bytes_ && layers_[step].bytes == 0,
                   "a host layer is written once, and fits a slot");
  ensure_slots(compute);
  kept& l = layers_[step];
  l.host = take(bytes);
  l.bytes = bytes;
  if (!l.landed) { l.landed = std::make_unique<event>(kind_); }
  int const k = free_slot();
  next_slot_ = (k + 1) % 2;
  busy_[k] = static_cast<int>(step);
  l.slot = k;
  slot_free_[static_cast<std::size_t>(k)].wait(compute);  // the slot's previous user is done
  return slots_[static_cast<std::size_t>(k)].data();
}

void mixed_host::fill_slot(std::size_t step, unsigned char value, stream_view compute)
{
  slots_[static_cast<std::size_t>(layers_[step].slot)].fill(value, compute);
}

void mixed_host::end_write(std::size_t step, stream_view compute)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::mixed::offload");
  kept& l = layers_[step];
  std::size_t const k = static_cast<std::size_t>(l.slot);
  written_.record(compute);
  written_.wait(d2h_.view());
  copy_to_host_async(l.host, slots_[k], l.bytes, d2h_.view());
  slot_free_[k].record(d2h_.view());
  l.landed->record(d2h_.view());
  busy_[k] = -1;
  l.slot = -1;
}

void mixed_host::prefetch(std::size_t step)
{
  kept& l = layers_[step];
  TAPEFLOW_EXPECTS(l.bytes != 0, "a host layer is prefetched after it was written");
  if (l.slot != -1) { return; }
  TAPEFLOW_NVTX_RANGE("tapeflow::mixed::prefetch");
  int const k = free_slot();
  next_slot_ = (k + 1) % 2;
  busy_[k] = static_cast<int>(step);
  l.slot = k;
  std::size_t const s = static_cast<std::size_t>(k);
  slot_free_[s].wait(h2d_.view());  // the slot's previous user is done
  l.landed->wait(h2d_.view());      // the pinned copy is complete
  copy_to_device_async(slots_[s], l.host, l.bytes, h2d_.view());
  slot_ready_[s].record(h2d_.view());
  ++prefetches_;
}

void const* mixed_host::begin_read(std::size_t step, stream_view compute)
{
  prefetch(step);
  std::size_t const k = static_cast<std::size_t>(layers_[step].slot);
  slot_ready_[k].wait(compute);
  return slots_[k].data();
}

void mixed_host::end_read(std::size_t step, stream_view compute)
{
  kept& l = layers_[step];
  std::size_t const k = static_cast<std::size_t>(l.slot);
  slot_free_[k].record(compute);
  busy_[k] = -1;
  l.slot = -1;
  l.bytes = 0;
  // The compute stream waited for the H2D copy: the pinned copy's next user (ordered after the
  // compute stream's later work) cannot overtake it.
  give_back(std::move(l.host));
}

void mixed_host::store(std::size_t step, device_buffer const& state, stream_view compute)
{
  TAPEFLOW_EXPECTS(checkpoints_[step].size() == 0, "a host checkpoint of this step is already held");
  checkpoints_[step] = take(state.size());
  copy_to_host_async(checkpoints_[step], state, state.size(), compute);
}

void mixed_host::restore(std::size_t step, device_buffer& state, stream_view compute)
{
  TAPEFLOW_EXPECTS(checkpoints_[step].size() == state.size(), "no host checkpoint of this step");
  copy_to_device_async(state, checkpoints_[step], state.size(), compute);
}

void mixed_host::release(std::size_t step)
{
  TAPEFLOW_EXPECTS(checkpoints_[step].size() != 0, "no host checkpoint of this step");
  give_back(std::move(checkpoints_[step]));
  checkpoints_[step] = pinned_buffer{};
}

void mixed_host::end(stream_view compute)
{
  if (slots_.empty()) { return; }
  // The slots are kept for the next gradient (which then allocates nothing): the compute stream's
  // later work — the next forward's writes into them, or their free with the chain — is ordered
  // after both copy streams.
  event done(kind_);
  done.record(d2h_.view());
  done.wait(compute);
  done.record(h2d_.view());
  done.wait(compute);
}

void mixed_host::abandon() noexcept
{
  try {
    d2h_.synchronize();
    h2d_.synchronize();
  } catch (...) {  // the original failure is what the caller sees
  }
  slots_.clear();
  busy_[0] = busy_[1] = -1;
  for (kept& l : layers_) {
    if (l.bytes != 0) { give_back(std::move(l.host)); }
    l.bytes = 0;
    l.slot = -1;
  }
  for (pinned_buffer& c : checkpoints_) {
    if (c.size() != 0) { give_back(std::move(c)); }
    c = pinned_buffer{};
  }
}

}  // namespace tapeflow::detail

// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/thread_tape.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>

namespace tapeflow {

namespace {

constexpr std::size_t u32_max = std::numeric_limits<std::uint32_t>::max();


}  // namespace

std::string thread_tape_stats::describe() const
{
  std::ostringstream out;
  out << "thread tape: " << threads << " threads, at most " << max_steps << " steps each, " << chunks
      << " chunks of " << chunk_steps << " steps (" << detail::shown_bytes(chunk_bytes) << " each, " << record_bytes
      << "-byte records), tape " << detail::shown_bytes(tape_bytes) << "; ";
  if (slot_limit == 0) {
    out << "every chunk on the device";
  } else {
    out << "ring of " << slot_limit << " device slots, " << chunks_to_host << " chunks pushed to the host, "
        << prefetches << " prefetched (distance " << prefetch_distance << ")";
  }
  return out.str();
}

std::size_t thread_arena::planned_chunk_bytes(std::size_t record_bytes, std::size_t threads,
                                              thread_tape_options const& options)
{
  TAPEFLOW_EXPECTS(record_bytes > 0 && record_bytes % record_alignment == 0,
                   "a thread tape record must be a positive multiple of 16 bytes, not " + std::to_string(record_bytes));
  TAPEFLOW_EXPECTS(threads >= 1 && threads <= u32_max, "a thread tape needs 1 to 2^32 - 1 threads, not " +
                                                          std::to_string(threads));
  TAPEFLOW_EXPECTS(options.chunk_steps >= 1 && options.chunk_steps <= (std::size_t{1} << 20),
                   "chunk_steps must be between 1 and 2^20, not " + std::to_string(options.chunk_steps));
  TAPEFLOW_EXPECTS(options.max_steps < u32_max, "max_steps must be below 2^32 - 1, not " +
                                                  std::to_string(options.max_steps));
  std::size_t const records = thread_tape_layout{threads, options.chunk_steps}.chunk_records();
  TAPEFLOW_EXPECTS(records <= std::numeric_limits<std::size_t>::max() / record_bytes,
                   "a thread tape chunk of " + std::to_string(records) + " records overflows");
  std::size_t const chunk = records * record_bytes;
  if (options.device_budget_bytes != 0 && options.device_budget_bytes < chunk) {
    TAPEFLOW_FAIL_BYTES(budget_error,
                        "a device budget of " + std::to_string(options.device_budget_bytes) +
                          " bytes holds no thread-tape chunk of " + std::to_string(chunk) + " bytes (" +
                          std::to_string(threads) + " threads x " + std::to_string(options.chunk_steps) +
                          " steps x " + std::to_string(record_bytes) + "-byte records)",
                        chunk);
  }
  return chunk;
}

thread_arena::thread_arena(std::size_t record_bytes, std::size_t threads, thread_tape_options const& options)
  : options_(options), layout_{threads, options.chunk_steps}, record_bytes_(record_bytes), chunk_bytes_(0),
    cap_(static_cast<std::uint32_t>(options.max_steps == 0 ? u32_max : std::min(options.max_steps, u32_max))),
    status_ready_(options.kind), offloaded_(options.kind), prefetched_(options.kind), d2h_(options.kind),
    h2d_(options.kind)
{
  chunk_bytes_ = planned_chunk_bytes(record_bytes, threads, options);
  std::size_t const max_chunks = (std::size_t{cap_} + options.chunk_steps - 1) / options.chunk_steps;
  if (options.device_budget_bytes != 0) {
    std::size_t const slots = options.device_budget_bytes / chunk_bytes_;
    slot_limit_ = slots >= max_chunks ? 0 : slots;  // 0: every chunk the cap allows fits
  }
  if (ring()) {
    lag_ = slot_limit_ >= 2 ? slot_limit_ - 2 : 0;
    distance_ = std::min(options.prefetch_distance, slot_limit_ - 1);
    // A slot's events come with its buffer (begin_segment): a budget of millions of small slots
    // created three events each up front, used or not.
  }
  steps_ = device_buffer(options.kind, threads * sizeof(std::uint32_t), {});
  status_ = device_buffer(options.kind, thread_tape_status_words * sizeof(std::uint32_t), {});
  status_host_ = pinned_buffer(options.kind, thread_tape_status_words * sizeof(std::uint32_t));
  // The buffers above are allocated in order on the default stream; the tape's work runs on
  // whatever stream its caller passes (tapeflow's streams do not wait for the default one), so
  // the allocations complete before any of it can be queued.
  synchronize(options.kind, {});
}

thread_arena::~thread_arena() { abandon(); }

void thread_arena::begin_forward(stream_view s)
{
  TAPEFLOW_EXPECTS(phase_ == phase::idle || phase_ == phase::forwarded,
                   "a thread tape's forward cannot start during its reverse");
  // A forward on another stream than the last reverse must not clear steps_ under that
  // reverse's kernels: wait for them.
  if (s.native() != compute_.native()) { synchronize(options_.kind, compute_); }
  compute_ = s;
  chunks_ = 0;
  pushed_ = 0;
  phase_ = phase::forward;
  steps_.fill(0, s);
}

void* thread_arena::begin_segment(std::size_t k, stream_view s)
{
  TAPEFLOW_EXPECTS(phase_ == phase::forward && k == chunks_, "thread tape segments run in order within a forward");
  TAPEFLOW_EXPECTS((k + 1) * options_.chunk_steps <= u32_max, "a thread tape's step count overflows 32 bits");
  std::size_t const slot = slot_of(k);
  if (slot == slots_.size()) {
    // The buffer and (in a ring) its events, each list growing by one only when all are made.
    device_buffer buffer(options_.kind, chunk_bytes_, s);
    if (ring()) {
      event freed(options_.kind);
      event ready(options_.kind);
      event written(options_.kind);
      slot_free_.reserve(slot + 1);
      slot_ready_.reserve(slot + 1);
      written_.reserve(slot + 1);
      slots_.reserve(slot + 1);
      slot_free_.push_back(std::move(freed));
      slot_ready_.push_back(std::move(ready));
      written_.push_back(std::move(written));
    }
    slots_.push_back(std::move(buffer));
  } else if (ring()) {
    // The D2H copy of chunk k - K (or a copy left by an earlier tape) is done with the slot.
    slot_free_[slot].wait(s);
  }
  if (options_.poison) { slots_[slot].fill(0xFF, s); }
  status_.fill(0, s);
  chunks_ = k + 1;
  return slots_[slot].data();
}

void thread_arena::push_out(std::size_t k)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::thread_tape::push_out");
  if (host_.size() == k) {
    std::size_t const need = (k + 1) * chunk_bytes_;
    if (options_.host_budget_bytes != 0 && need > options_.host_budget_bytes) {
      TAPEFLOW_FAIL_BYTES(budget_error,
                          "the thread tape pushes chunk " + std::to_string(k + 1) + " of " +
                            std::to_string(chunk_bytes_) + " bytes to the host: " + std::to_string(need) +
                            " bytes exceed the host budget of " + std::to_string(options_.host_budget_bytes) +
                            " bytes (device ring of " + std::to_string(slot_limit_) + " slots)",
                          need);
    }
    host_.emplace_back(options_.kind, chunk_bytes_);
  }
  std::size_t const slot = slot_of(k);
  written_[slot].wait(d2h_.view());
  copy_to_host_async(host_[k], slots_[slot], chunk_bytes_, d2h_.view());
  slot_free_[slot].record(d2h_.view());
  ++pushed_;
}

bool thread_arena::end_segment(std::size_t k, stream_view s)
{
  TAPEFLOW_EXPECTS(phase_ == phase::forward && k + 1 == chunks_, "end_segment without its begin_segment");
  if (ring()) {
    written_[slot_of(k)].record(s);
    // Chunk j leaves for the host after segment j + lag: one segment before its slot is needed,
    // and the last chunks written stay on the device only.
    while (pushed_ + lag_ <= k) { push_out(pushed_); }
  }
  auto* const words = static_cast<std::uint32_t*>(status_host_.data());
  copy_to_host_async(status_host_, status_, thread_tape_status_words * sizeof(std::uint32_t), s);
  status_ready_.record(s);
  status_ready_.synchronize();
  if (words[thread_tape_overflow] != 0) {
    TAPEFLOW_FAIL(logic_error, "a thread of the thread tape wants more than max_steps = " + std::to_string(cap_) +
                                 " steps (in chunk " + std::to_string(k) + ", " +
                                 std::to_string(options_.chunk_steps) + " steps per chunk, " +
                                 std::to_string(layout_.threads) + " threads)");
  }
  if (words[thread_tape_active] != 0) { return true; }
  phase_ = phase::forwarded;
  return false;
}

void thread_arena::issue_prefetches(std::size_t reading)
{
  // Chunk j's slot was last used by chunk j + K, already reversed when j >= reading - (K - 1).
  while (next_prefetch_ > 0 && next_prefetch_ - 1 + distance_ >= reading) {
    TAPEFLOW_NVTX_RANGE("tapeflow::thread_tape::prefetch");
    std::size_t const j = --next_prefetch_;
    std::size_t const slot = slot_of(j);
    slot_free_[slot].wait(h2d_.view());
    copy_to_device_async(slots_[slot], host_[j], chunk_bytes_, h2d_.view());
    slot_ready_[slot].record(h2d_.view());
    ++prefetches_;
  }
}

void thread_arena::begin_reverse(stream_view s)
{
  TAPEFLOW_EXPECTS(phase_ == phase::forwarded, "a thread tape's reverse needs a completed forward");
  compute_ = s;
  prefetches_ = 0;
  next_prefetch_ = 0;
  if (ring()) {
    // A prefetch reads a pushed-out copy: every D2H copy of the forward must have landed.
    offloaded_.record(d2h_.view());
    offloaded_.wait(h2d_.view());
    next_prefetch_ = chunks_ > slot_limit_ ? chunks_ - slot_limit_ : 0;
  }
  phase_ = phase::reverse;
}

void const* thread_arena::begin_read(std::size_t k, stream_view s)
{
  TAPEFLOW_EXPECTS(phase_ == phase::reverse && k < chunks_, "begin_read outside a thread tape's reverse");
  std::size_t const slot = slot_of(k);
  if (!resident(k)) {
    issue_prefetches(k);
    slot_ready_[slot].wait(s);
  } else if (ring()) {
    issue_prefetches(k);
  }
  return slots_[slot].data();
}

void thread_arena::end_read(std::size_t k, stream_view s)
{
  if (ring()) { slot_free_[slot_of(k)].record(s); }
}

void thread_arena::end_reverse(stream_view s)
{
  TAPEFLOW_EXPECTS(phase_ == phase::reverse, "end_reverse outside a thread tape's reverse");
  if (ring()) {
    // The next forward overwrites slots and pinned copies: order it after every copy of this tape.
    prefetched_.record(h2d_.view());
    prefetched_.wait(s);
    offloaded_.record(d2h_.view());
    offloaded_.wait(s);
  }
  phase_ = phase::idle;
}

void thread_arena::abandon() noexcept
{
  try {
    // Kernels still queued on the compute stream read steps_ and the slots, which are freed on
    // other streams: let them finish first.
    synchronize(options_.kind, compute_);
    d2h_.synchronize();
    h2d_.synchronize();
  } catch (...) {  // the original failure is what the caller sees
  }
  phase_ = phase::idle;
  chunks_ = 0;
  pushed_ = 0;
  next_prefetch_ = 0;
}

std::vector<std::uint32_t> thread_arena::steps(stream_view s) const
{
  std::vector<std::uint32_t> out(layout_.threads);
  steps_.download(out.data(), out.size() * sizeof(std::uint32_t), s);
  return out;
}

std::size_t thread_arena::max_steps(stream_view s) const
{
  std::vector<std::uint32_t> const all = steps(s);
  return all.empty() ? 0 : *std::max_element(all.begin(), all.end());
}

thread_tape_stats thread_arena::stats() const
{
  thread_tape_stats r;
  r.threads = layout_.threads;
  r.chunk_steps = layout_.chunk_steps;
  r.record_bytes = record_bytes_;
  r.chunk_bytes = chunk_bytes_;
  r.chunks = chunks_;
  r.slot_limit = slot_limit_;
  r.device_slots = slots_.size();
  r.chunks_to_host = pushed_;
  r.prefetches = prefetches_;
  r.d2h_bytes = pushed_ * chunk_bytes_;
  r.h2d_bytes = prefetches_ * chunk_bytes_;
  r.tape_bytes = chunks_ * chunk_bytes_;
  r.device_bytes = slots_.size() * chunk_bytes_ + steps_.size() + status_.size();
  r.host_bytes = host_.size() * chunk_bytes_ + status_host_.size();
  r.prefetch_distance = distance_;
  r.max_steps = chunks_ == 0 ? 0 : max_steps(compute_);
  return r;
}

}  // namespace tapeflow

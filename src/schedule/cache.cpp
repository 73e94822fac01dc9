// SPDX-License-Identifier: Apache-2.0
// The outcomes of the last models optimal_schedule planned (docs/tiers.md, "Plans are kept").
#include "schedule/internal.hpp"

#include <algorithm>
#include <list>
#include <mutex>
#include <utility>

namespace tapeflow {
namespace detail::scheduling {
namespace {

// A field added to step_cost or schedule_model must join same_step or same_model (the cache's
// key): these sizes are the fields the two compare (on the LP64 targets tapeflow builds for).
static_assert(sizeof(void*) != 8 || sizeof(step_cost) == 32, "a new field of step_cost must join same_step");
static_assert(sizeof(void*) != 8 || sizeof(schedule_model) == 120, "a new field of schedule_model must join same_model");

bool same_step(step_cost const& a, step_cost const& b) noexcept
{
  return a.forward_ms == b.forward_ms && a.aug_forward_ms == b.aug_forward_ms && a.reverse_ms == b.reverse_ms &&
         a.layer_bytes == b.layer_bytes;
}

/// Every field the optimiser reads, equal.
bool same_model(schedule_model const& a, schedule_model const& b) noexcept
{
  return a.state_bytes == b.state_bytes && a.device_bytes == b.device_bytes && a.host_bytes == b.host_bytes &&
         a.write_ms[0] == b.write_ms[0] && a.write_ms[1] == b.write_ms[1] && a.read_ms[0] == b.read_ms[0] &&
         a.read_ms[1] == b.read_ms[1] && a.host_layer_ms == b.host_layer_ms && a.device_layers == b.device_layers &&
         a.host_layers == b.host_layers && a.checkpoints[0] == b.checkpoints[0] &&
         a.checkpoints[1] == b.checkpoints[1] && a.unit_bytes == b.unit_bytes &&
         std::equal(a.steps.begin(), a.steps.end(), b.steps.begin(), b.steps.end(), same_step);
}

/// The last few models planned in this process and their schedules (empty: none fits). The
/// optimiser is a pure function of the model, so a chain built again for the same problem — a
/// workload's one-shot gradient() in a training loop — gets its schedule without solving again.
/// Its bytes are bounded too: a million-step chain's model and schedule hold about 150 MB.
class schedule_cache {
 public:
  static schedule_cache& instance()
  {
    static schedule_cache cache;
    return cache;
  }

  /// The cached outcome for `model`, if any (moved to the front).
  std::optional<std::optional<schedule>> find(schedule_model const& model)
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (same_model(it->model, model)) {
        entries_.splice(entries_.begin(), entries_, it);
        ++stats_.hits;
        return entries_.front().outcome;
      }
    }
    ++stats_.misses;
    return std::nullopt;
  }

  /// Keeps `outcome` unless it alone is more than the limit, then forgets the least recently used
  /// beyond the last eight or the limit.
  void put(schedule_model const& model, std::optional<schedule> const& outcome)
  {
    std::size_t const size = bytes_of(model, outcome);
    std::lock_guard<std::mutex> lock(mutex_);
    if (size > limit_) { return; }
    entries_.push_front({model, outcome, size});
    bytes_ += size;
    shrink();
  }

  std::size_t limit(std::size_t bytes)
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t const was = limit_;
    limit_ = bytes;
    shrink();
    return was;
  }

  schedule_cache_stats stats()
  {
    std::lock_guard<std::mutex> lock(mutex_);
    schedule_cache_stats s = stats_;
    s.entries = entries_.size();
    s.bytes = bytes_;
    return s;
  }

 private:
  struct entry {
    schedule_model model;
    std::optional<schedule> outcome;
    std::size_t bytes;
  };

  /// The memory an entry holds: the model's and the schedule's arrays, and the entry itself.
  static std::size_t bytes_of(schedule_model const& m, std::optional<schedule> const& s) noexcept
  {
    std::size_t bytes = sizeof(entry) + m.steps.capacity() * sizeof(step_cost) + m.host_layer_ms.capacity() * sizeof(double);
    if (s) {
      bytes += s->actions.capacity() * sizeof(schedule_action) + s->fate.capacity() * sizeof(layer_fate) +
               s->recomputed.capacity() * sizeof(std::size_t);
    }
    return bytes;
  }

  void shrink()
  {
    while (!entries_.empty() && (entries_.size() > capacity || bytes_ > limit_)) {
      bytes_ -= entries_.back().bytes;
      entries_.pop_back();
    }
  }

  static constexpr std::size_t capacity = 8;
  std::mutex mutex_;
  std::list<entry> entries_;  // most recent first
  std::size_t bytes_{0};
  std::size_t limit_{default_schedule_cache_bytes};
  schedule_cache_stats stats_{};
};

}  // namespace

std::optional<std::optional<schedule>> cached_outcome(schedule_model const& model)
{
  return schedule_cache::instance().find(model);
}

void keep_outcome(schedule_model const& model, std::optional<schedule> const& outcome)
{
  schedule_cache::instance().put(model, outcome);
}

}  // namespace detail::scheduling

schedule_cache_stats schedule_cache_counts() { return detail::scheduling::schedule_cache::instance().stats(); }

std::size_t set_schedule_cache_limit(std::size_t bytes) { return detail::scheduling::schedule_cache::instance().limit(bytes); }

}  // namespace tapeflow

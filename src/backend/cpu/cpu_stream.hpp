// SPDX-License-Identifier: Apache-2.0
// The CPU backend's streams and events. A non-default stream is a worker thread running its
// queue in order, so copies on copy streams really run behind the calling thread; the default
// stream runs work inline. Events mark positions in a stream's queue.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace tapeflow::detail::cpu {

class stream {
 public:
  stream();
  ~stream();
  stream(stream const&) = delete;
  stream& operator=(stream const&) = delete;

  /// Runs `task` on the worker after everything enqueued before it.
  void enqueue(std::function<void()> task);
  /// Waits until every task enqueued so far has run.
  void drain();

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> tasks_;
  std::uint64_t enqueued_{0};
  std::uint64_t finished_{0};
  bool stop_{false};
  std::thread worker_;
};

class event {
 public:
  /// Marks the event as recorded again; returns the ticket that completes it.
  std::uint64_t arm();
  void complete(std::uint64_t ticket);
  /// The ticket of the most recent record.
  [[nodiscard]] std::uint64_t ticket();
  /// Blocks until the record with `ticket` has completed.
  void wait_for(std::uint64_t ticket);
  /// Blocks until the most recent record (as of this call) has completed.
  void wait() { wait_for(ticket()); }
  [[nodiscard]] std::chrono::steady_clock::time_point completed_at();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t recorded_{0};
  std::uint64_t completed_{0};
  std::chrono::steady_clock::time_point when_{};
};

/// Delay added to every copy that runs on a non-default CPU stream (tests: a slow copy engine).
void set_copy_delay(std::chrono::microseconds delay) noexcept;
std::chrono::microseconds copy_delay() noexcept;

}  // namespace tapeflow::detail::cpu

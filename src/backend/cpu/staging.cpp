// SPDX-License-Identifier: Apache-2.0
// The CPU backend's staging threads (tapeflow/cpu/tile_ring.hpp): started on first use and kept
// for the life of the process, the CPU's analogue of a GPU's copy engine. A staging ring hands
// its producer loop to one of them instead of starting a thread per layer. There is one thread
// per ring streaming at once — normally one in all; a ring opened inside another ring's consumer
// gets a thread of its own, so rings never wait on each other.
#include <tapeflow/cpu/tile_ring.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

namespace tapeflow::cpu::detail {

struct staging_task::state {
  std::function<void()> body;
  bool done{false};
};

namespace {

class staging_threads {
 public:
  staging_threads() = default;
  staging_threads(staging_threads const&) = delete;
  staging_threads& operator=(staging_threads const&) = delete;
  ~staging_threads()
  {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    for (std::thread& t : threads_) { t.join(); }
  }

  void run(std::shared_ptr<staging_task::state> task)
  {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
      submitted_.fetch_add(1, std::memory_order_release);
      // Every idle thread takes one task: start another when the tasks outnumber them.
      if (tasks_.size() > idle_) {
        try {
          threads_.emplace_back([this] { main(); });
        } catch (...) {
          tasks_.pop_back();
          throw;
        }
      }
    }
    changed_.notify_all();
  }

  void wait(staging_task::state const& task)
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return task.done; });
  }

  [[nodiscard]] std::size_t started() const
  {
    std::lock_guard<std::mutex> lock(mutex_);
    return threads_.size();
  }

 private:
  void main()
  {
    std::unique_lock<std::mutex> lock(mutex_);
    ++idle_;
    for (;;) {
      if (tasks_.empty() && !stop_) {
        // Idle: the next layer's ring usually follows within microseconds. Spin on the task count
        // for a moment before sleeping, so that it does not pay a futex wake-up.
        std::size_t const seen = submitted_.load(std::memory_order_acquire);
        lock.unlock();
        auto const until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
        for (unsigned i = 1; submitted_.load(std::memory_order_acquire) == seen; ++i) {
          if (i % 64 == 0 && std::chrono::steady_clock::now() > until) { break; }
          cpu_relax();
        }
        lock.lock();
      }
      changed_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) { return; }  // stopping
      std::shared_ptr<staging_task::state> task = std::move(tasks_.front());
      tasks_.pop_front();
      --idle_;
      lock.unlock();
      task->body();
      lock.lock();
      // Idle again before the task counts as done: whoever waited for it and starts the next
      // ring finds this thread free, and no thread is started per ring.
      ++idle_;
      task->done = true;
      done_.notify_all();
    }
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::condition_variable done_;
  std::deque<std::shared_ptr<staging_task::state>> tasks_;
  std::vector<std::thread> threads_;
  std::size_t idle_{0};
  bool stop_{false};
  std::atomic<std::size_t> submitted_{0};
};

staging_threads& the_threads()
{
  static staging_threads threads;
  return threads;
}

}  // namespace

staging_task::staging_task(std::function<void()> body) : state_(std::make_shared<state>())
{
  state_->body = std::move(body);
  the_threads().run(state_);
}

staging_task::~staging_task() { wait(); }

void staging_task::wait() noexcept
{
  if (state_) { the_threads().wait(*state_); }
}

std::size_t staging_threads_started() { return the_threads().started(); }

}  // namespace tapeflow::cpu::detail

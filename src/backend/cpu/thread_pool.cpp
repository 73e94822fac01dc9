// SPDX-License-Identifier: Apache-2.0
// The CPU backend's worker pool (tapeflow/cpu/thread_pool.hpp).
//
// One loop at a time holds the pool. The caller publishes the loop (a new generation) and takes
// chunks itself at once; workers join when they wake, take chunks from the same counter and
// leave when none is left. Closing the loop stops late workers from joining, then waits for the
// ones inside to leave, so nothing touches the loop's state after run_chunks returns.
#include <tapeflow/cpu/thread_pool.hpp>
#include <tapeflow/error.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <thread>
#include <vector>

namespace tapeflow::cpu {
namespace {

thread_local bool inside_loop = false;

inline void relax() noexcept
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

std::size_t default_threads() noexcept
{
  unsigned const hw = std::thread::hardware_concurrency();
  std::size_t const hardware = hw == 0 ? 1 : hw;
  if (char const* env = std::getenv("TAPEFLOW_CPU_THREADS")) {
    char* end = nullptr;
    unsigned long const n = std::strtoul(env, &end, 10);
    if (end != env && *end == '\0' && env[0] != '-' && n >= 1 && n <= 1024) { return n; }
    // Not an error (no call of the library's asked for it), but never ignored in silence.
    std::fprintf(stderr, "tapeflow: TAPEFLOW_CPU_THREADS='%s' is not a count from 1 to 1024; using %zu threads\n", env,
                 hardware);
  }
  return hardware;
}

class pool {
 public:
  pool() : threads_(default_threads()) {}
  ~pool() { stop_workers(); }
  pool(pool const&) = delete;
  pool& operator=(pool const&) = delete;

  std::size_t threads() const noexcept { return threads_.load(std::memory_order_relaxed); }

  void set_threads(std::size_t count)
  {
    TAPEFLOW_EXPECTS(!inside_loop, "cpu::set_threads() called from inside a parallel loop");
    std::lock_guard<std::mutex> hold(loop_mutex_);
    stop_workers();
    threads_.store(count == 0 ? default_threads() : count, std::memory_order_relaxed);
  }

  void run(std::size_t chunks, detail::chunk_function fn, void* context)
  {
    if (inside_loop || threads() < 2) {
      serial(chunks, fn, context);
      return;
    }
    std::unique_lock<std::mutex> hold(loop_mutex_, std::try_to_lock);
    if (!hold.owns_lock()) {  // another thread's loop holds the pool
      serial(chunks, fn, context);
      return;
    }
    start_workers();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fn_ = fn;
      context_ = context;
      chunks_ = chunks;
      next_.store(0, std::memory_order_relaxed);
      error_ = nullptr;
      open_ = true;
      ++generation_;
      published_.store(generation_, std::memory_order_release);
    }
    wake_.notify_all();
    inside_loop = true;
    work();
    inside_loop = false;
    std::unique_lock<std::mutex> lock(mutex_);
    open_ = false;
    left_.wait(lock, [&] { return inside_ == 0; });
    if (error_) { std::rethrow_exception(std::exchange(error_, nullptr)); }
  }

 private:
  static void serial(std::size_t chunks, detail::chunk_function fn, void* context)
  {
    bool const outer = !inside_loop;
    inside_loop = true;
    try {
      for (std::size_t c = 0; c < chunks; ++c) { fn(context, c); }
    } catch (...) {
      if (outer) { inside_loop = false; }
      throw;
    }
    if (outer) { inside_loop = false; }
  }

  /// Takes chunks until none is left; records the first exception and stops handing out more.
  void work() noexcept
  {
    for (;;) {
      std::size_t const c = next_.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks_) { return; }
      try {
        fn_(context_, c);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) { error_ = std::current_exception(); }
        next_.store(chunks_, std::memory_order_relaxed);
      }
    }
  }

  void worker_main()
  {
    inside_loop = true;  // a loop started by a body on a worker runs inline
    std::uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (!stop_ && generation_ == seen) {
        // Idle: a step's next loop usually follows within microseconds. Spin on the generation
        // for a moment before sleeping, so that joining it costs no futex wake-up.
        lock.unlock();
        auto const until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
        for (unsigned i = 1; published_.load(std::memory_order_acquire) == seen; ++i) {
          if (i % 64 == 0 && std::chrono::steady_clock::now() > until) { break; }
          relax();
        }
        lock.lock();
      }
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) { return; }
      seen = generation_;
      if (!open_) { continue; }  // woke after that loop closed
      ++inside_;
      lock.unlock();
      work();
      lock.lock();
      if (--inside_ == 0) { left_.notify_all(); }
    }
  }

  /// Called with loop_mutex_ held.
  void start_workers()
  {
    std::size_t const wanted = threads() - 1;
    if (workers_.size() == wanted) { return; }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = false;
    }
    try {
      while (workers_.size() < wanted) { workers_.emplace_back([this] { worker_main(); }); }
    } catch (std::system_error const&) {
      // Fewer workers than asked for: the loops still run, on the threads there are.
    }
  }

  /// Called with loop_mutex_ held, or from the destructor.
  void stop_workers() noexcept
  {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& w : workers_) { w.join(); }
    workers_.clear();
  }

  std::atomic<std::size_t> threads_;
  std::mutex loop_mutex_;  // held by the loop in progress
  std::mutex mutex_;       // guards what follows, except the counter
  std::condition_variable wake_;
  std::condition_variable left_;
  std::vector<std::thread> workers_;
  std::uint64_t generation_{0};
  std::atomic<std::uint64_t> published_{0};  // generation_, for idle workers to spin on
  bool stop_{false};
  bool open_{false};
  std::size_t inside_{0};
  detail::chunk_function fn_{nullptr};
  void* context_{nullptr};
  std::size_t chunks_{0};
  std::atomic<std::size_t> next_{0};
  std::exception_ptr error_;
};

pool& the_pool()
{
  static pool p;
  return p;
}

}  // namespace

std::size_t threads() noexcept { return the_pool().threads(); }

void set_threads(std::size_t count) { the_pool().set_threads(count); }

namespace detail {
void run_chunks(std::size_t chunks, chunk_function fn, void* context) { the_pool().run(chunks, fn, context); }
}  // namespace detail

}  // namespace tapeflow::cpu

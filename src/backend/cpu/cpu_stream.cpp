// SPDX-License-Identifier: Apache-2.0
#include "backend/cpu/cpu_stream.hpp"

#include <tapeflow/fault.hpp>

#include <atomic>

namespace tapeflow::detail::cpu {

stream::stream() : worker_([this] { run(); }) {}

stream::~stream()
{
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void stream::enqueue(std::function<void()> task)
{
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
    ++enqueued_;
  }
  changed_.notify_all();
}

void stream::drain()
{
  std::unique_lock<std::mutex> lock(mutex_);
  std::uint64_t const target = enqueued_;
  changed_.wait(lock, [&] { return finished_ >= target; });
}

void stream::run()
{
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) { return; }  // stopping, and everything enqueued has run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
    ++finished_;
    changed_.notify_all();
  }
}

std::uint64_t event::arm()
{
  std::lock_guard<std::mutex> lock(mutex_);
  return ++recorded_;
}

void event::complete(std::uint64_t ticket)
{
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ticket > completed_) {
      completed_ = ticket;
      when_ = std::chrono::steady_clock::now();
    }
  }
  changed_.notify_all();
}

std::uint64_t event::ticket()
{
  std::lock_guard<std::mutex> lock(mutex_);
  return recorded_;
}

void event::wait_for(std::uint64_t ticket)
{
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return completed_ >= ticket; });
}

std::chrono::steady_clock::time_point event::completed_at()
{
  wait();
  std::lock_guard<std::mutex> lock(mutex_);
  return when_;
}

namespace {
std::atomic<std::int64_t> copy_delay_us{0};
}

void set_copy_delay(std::chrono::microseconds delay) noexcept { copy_delay_us.store(delay.count()); }
std::chrono::microseconds copy_delay() noexcept { return std::chrono::microseconds{copy_delay_us.load()}; }

}  // namespace tapeflow::detail::cpu

namespace tapeflow::fault {
void set_cpu_copy_delay(std::chrono::microseconds delay) noexcept { tapeflow::detail::cpu::set_copy_delay(delay); }
}  // namespace tapeflow::fault

// SPDX-License-Identifier: Apache-2.0
// The emulator's own settings (TAPEFLOW_EMULATOR, tapeflow::emu::configure) and counters.
#include "state.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace tapeflow::emu {
namespace detail {
namespace {

std::size_t default_stack_bytes() noexcept
{
#if defined(__SANITIZE_ADDRESS__)
  return std::size_t{512} << 10;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return std::size_t{512} << 10;
#else
  return std::size_t{64} << 10;
#endif
#else
  return std::size_t{64} << 10;
#endif
}

std::atomic<std::uint64_t> epoch{0};

}  // namespace

settings parse_environment()
{
  settings s;
  char const* text = std::getenv("TAPEFLOW_EMULATOR");
  if (text == nullptr) { return s; }
  std::string const all = text;
  std::size_t start = 0;
  while (start <= all.size()) {
    std::size_t const end = std::min(all.find(',', start), all.size());
    std::string const item = all.substr(start, end - start);
    start = end + 1;
    if (item.empty()) { continue; }
    std::size_t const eq = item.find('=');
    std::string const key = item.substr(0, eq);
    std::string const value = eq == std::string::npos ? "" : item.substr(eq + 1);
    auto number = [&] {
      char* rest = nullptr;
      unsigned long long const v = std::strtoull(value.c_str(), &rest, 10);
      if (value.empty() || rest == nullptr || *rest != '\0') {
        std::fprintf(stderr, "tapeflow emulator: TAPEFLOW_EMULATOR: '%s' needs a number\n", item.c_str());
        std::exit(2);
      }
      return v;
    };
    if (key == "schedule" && (value == "random" || value == "sequential")) {
      s.random_schedule = value == "random";
    } else if (key == "seed") {
      s.seed = number();
    } else if (key == "threads") {
      s.threads = static_cast<unsigned>(number());
    } else if (key == "streams" && (value == "lazy" || value == "eager")) {
      s.lazy_streams = value == "lazy";
    } else if (key == "memory") {
      s.memory_bytes = number();
    } else if (key == "stack") {
      s.stack_bytes = number();
    } else if (key == "virtual_arch") {
      s.kernel_virtual_arch = static_cast<int>(number());
    } else if (key == "kernel_threads") {
      s.kernel_max_threads = static_cast<int>(number());
    } else if (key == "kernel_registers") {
      s.kernel_registers = static_cast<int>(number());
    } else {
      std::fprintf(stderr,
                   "tapeflow emulator: TAPEFLOW_EMULATOR: unknown setting '%s' (schedule=sequential|random, seed=N, "
                   "threads=N, streams=lazy|eager, memory=BYTES, stack=BYTES, virtual_arch=SM, kernel_threads=N, kernel_registers=N)\n",
                   item.c_str());
      std::exit(2);
    }
  }
  return s;
}

settings resolved(settings s)
{
  if (s.stack_bytes == 0) { s.stack_bytes = default_stack_bytes(); }
  if (s.threads == 0) { s.threads = std::clamp(std::thread::hardware_concurrency(), 1U, 4U); }
  return s;
}

settings active_settings()
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  return dev().config;
}

}  // namespace detail

settings current_settings() { return detail::active_settings(); }

settings configure(settings const& next)
{
  std::lock_guard<std::recursive_mutex> lock(detail::dev().mutex);
  detail::run_everything();
  settings const previous = detail::dev().config;
  detail::dev().config = detail::resolved(next);
  detail::dev().launches = 0;  // launches are counted afresh: a seed gives the same schedules from here on
  detail::dev().opted_in.clear();  // a device afresh: its kernels opt in again
  detail::epoch.fetch_add(1, std::memory_order_relaxed);
  return previous;
}

std::uint64_t configuration_epoch() noexcept { return detail::epoch.load(std::memory_order_relaxed); }

counters current_counters() noexcept
{
  return {detail::launches.load(), detail::blocks_run.load(), detail::fiber_switches.load()};
}

}  // namespace tapeflow::emu

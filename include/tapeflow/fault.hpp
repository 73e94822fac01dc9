// SPDX-License-Identifier: Apache-2.0
// Fault injection for tests: hooks in the memory and copy layers that make failures and slow
// paths reproducible on any backend, without special hardware.
#pragma once

#include <chrono>
#include <cstddef>

namespace tapeflow::fault {

/// Where a fault can be injected.
enum class site {
  device_allocation,  ///< device_buffer: fails with out_of_memory
  host_allocation,    ///< pinned_buffer (the host tier): fails with out_of_memory
  copy,               ///< uploads, downloads and tier copies: fail with platform_error
};

/// Makes the `n`-th next operation at `s` fail (n = 1: the very next one). n = 0 disarms it.
void fail_nth(site s, std::size_t n) noexcept;
/// Disarms every site.
void clear() noexcept;
/// Faults injected at `s` since the process started.
[[nodiscard]] std::size_t injected(site s) noexcept;

/// Arms a site for a scope.
class scoped_failure {
 public:
  scoped_failure(site s, std::size_t n) noexcept : site_(s) { fail_nth(s, n); }
  ~scoped_failure() { fail_nth(site_, 0); }
  scoped_failure(scoped_failure const&) = delete;
  scoped_failure& operator=(scoped_failure const&) = delete;

 private:
  site site_;
};

/// Delays every copy that runs on a non-default CPU-backend stream (the host tier's D2H and H2D
/// copy streams) by `delay`: a slow copy engine. Zero turns it off.
void set_cpu_copy_delay(std::chrono::microseconds delay) noexcept;

/// Turns the delay on for a scope.
class scoped_cpu_copy_delay {
 public:
  explicit scoped_cpu_copy_delay(std::chrono::microseconds delay) noexcept { set_cpu_copy_delay(delay); }
  ~scoped_cpu_copy_delay() { set_cpu_copy_delay(std::chrono::microseconds{0}); }
  scoped_cpu_copy_delay(scoped_cpu_copy_delay const&) = delete;
  scoped_cpu_copy_delay& operator=(scoped_cpu_copy_delay const&) = delete;
};

namespace detail {
/// True when the armed fault at `s` fires now (counts down otherwise). Used by the memory layer.
[[nodiscard]] bool fires(site s) noexcept;
}  // namespace detail

}  // namespace tapeflow::fault

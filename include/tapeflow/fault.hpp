// SPDX-License-Identifier: Apache-2.0
// Fault injection for tests: hooks in the copy layer that make failures and slow paths
// reproducible without special hardware.
#pragma once

#include <chrono>

namespace tapeflow::fault {

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

}  // namespace tapeflow::fault

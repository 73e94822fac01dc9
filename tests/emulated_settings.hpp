// SPDX-License-Identifier: Apache-2.0
// The emulated device's settings changed for a scope of a test: a test plays binaries and kernels a
// GPU would refuse or hold fewer of (docs/emulation.md, "Settings").
#pragma once

#if defined(TAPEFLOW_EMULATED)
#include <tapeflow/emulated/runtime.hpp>

#include <utility>

namespace tapeflow::testing {

/// The emulated device's settings as `change(settings&)` leaves them while in scope; the previous
/// ones after.
class emulated_settings {
 public:
  template <class Change>
  explicit emulated_settings(Change&& change) : previous_(emu::current_settings())
  {
    emu::settings next = previous_;
    std::forward<Change>(change)(next);
    emu::configure(next);
  }
  ~emulated_settings() { emu::configure(previous_); }
  emulated_settings(emulated_settings const&) = delete;
  emulated_settings& operator=(emulated_settings const&) = delete;

 private:
  emu::settings previous_;
};

}  // namespace tapeflow::testing
#endif

// SPDX-License-Identifier: Apache-2.0
// A captured program: stream work recorded once and replayed, so a schedule of many small
// launches does not pay launch overhead each time. On CUDA the first launch captures the body
// into a CUDA Graph on a private stream; later launches replay the graph. Backends without graphs
// (the CPU) run the body again on each launch.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <functional>

namespace tapeflow {

class captured_program {
 public:
  /// `body(s)` queues the program's work on `s`. Everything it touches must stay at the same
  /// addresses for the program's life: a replay uses the recorded pointers.
  captured_program(backend kind, std::function<void(stream_view)> body);
  ~captured_program();
  captured_program(captured_program const&) = delete;
  captured_program& operator=(captured_program const&) = delete;

  /// Runs the program after the work queued on `stream`; later work on `stream` waits for it.
  void launch(stream_view stream);

  /// True once a device graph has been captured (CUDA).
  [[nodiscard]] bool captured() const noexcept { return graph_ != nullptr; }
  [[nodiscard]] std::size_t launches() const noexcept { return launches_; }

 private:
  backend kind_;
  std::function<void(stream_view)> body_;
  stream private_;   // capture needs a stream of its own (never the legacy default stream)
  event ready_;      // the caller's earlier work is done
  event done_;       // the program is done
  void* graph_{nullptr};
  std::size_t launches_{0};
};

}  // namespace tapeflow

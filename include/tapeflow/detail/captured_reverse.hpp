// SPDX-License-Identifier: Apache-2.0
// A chain's capture_reverse: every layer kept resident in a buffer of its own, and the reverse
// replayed as one captured program (a CUDA Graph on CUDA), so that a chain of many small layers
// costs one launch. The program refers to the buffers by address: they are allocated by the first
// forward, and every iteration writes the same ones.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/program.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <memory>
#include <vector>

namespace tapeflow::detail {

class captured_reverse {
 public:
  explicit captured_reverse(backend kind) noexcept : kind_(kind) {}

  /// Allocates, on the first call, `steps` resident layers of `layer_bytes` and the program's two
  /// adjoints of `state_bytes`, on `s`; later calls keep them.
  void reserve(std::size_t steps, std::size_t layer_bytes, std::size_t state_bytes, stream_view s)
  {
    if (!layers_.empty()) { return; }
    layers_.reserve(steps);
    for (std::size_t t = 0; t < steps; ++t) { layers_.emplace_back(kind_, layer_bytes, s); }
    for (device_buffer& a : adjoints_) { a = device_buffer(kind_, state_bytes, s); }
  }

  /// Step `t`'s resident layer, which its augmented forward writes.
  [[nodiscard]] device_buffer& resident(std::size_t t) noexcept { return layers_[t]; }

  /// Turns dL/d(final state) in `adjoint` into dL/d(initial state) with one launch of the program,
  /// captured on the first call: `reverse_layer(t, resident, adjoint_out, adjoint_in, stream)` for
  /// every step, last first, the adjoints ping-ponging between the program's two (each filled
  /// with NaN bytes first under `poison`).
  template <class ReverseLayer>
  void run(device_buffer& adjoint, stream_view s, bool poison, ReverseLayer reverse_layer)
  {
    if (!program_) {
      program_ = std::make_unique<captured_program>(kind_, [this, poison, reverse_layer](stream_view ps) {
        std::size_t const steps = layers_.size();
        for (std::size_t t = steps; t-- > 0;) {
          std::size_t const in = (steps - 1 - t) % 2;
          device_buffer& out = adjoints_[1 - in];
          if (poison) { out.fill(0xFF, ps); }
          reverse_layer(t, layers_[t], adjoints_[in], out, ps);
        }
      });
    }
    adjoints_[0].copy_from(adjoint, s);
    program_->launch(s);
    adjoint.copy_from(adjoints_[layers_.size() % 2], s);
  }

  /// Reverses run as one program so far.
  [[nodiscard]] std::size_t launches() const noexcept { return program_ ? program_->launches() : 0; }
  /// Whether a device graph was captured.
  [[nodiscard]] bool captured() const noexcept { return program_ && program_->captured(); }

 private:
  backend kind_;
  std::vector<device_buffer> layers_;
  device_buffer adjoints_[2];
  std::unique_ptr<captured_program> program_;  // declared last, destroyed first: it uses the buffers
};

}  // namespace tapeflow::detail

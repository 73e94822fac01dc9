// SPDX-License-Identifier: Apache-2.0
// Streams: a non-owning view (what every host call that does device work takes) and an owner.
#pragma once

#include <tapeflow/backend.hpp>

namespace tapeflow {

/// A non-owning handle to a backend stream (cudaStream_t / hipStream_t), passed by value.
/// The default-constructed view is the backend's default stream. The CPU backend executes
/// synchronously on the calling thread and ignores the handle.
class stream_view {
 public:
  constexpr stream_view() noexcept = default;
  constexpr explicit stream_view(void* native) noexcept : native_(native) {}
  [[nodiscard]] constexpr void* native() const noexcept { return native_; }
  [[nodiscard]] constexpr bool is_default() const noexcept { return native_ == nullptr; }

 private:
  void* native_{nullptr};
};

/// Blocks the calling thread until all work queued on `stream` has finished.
void synchronize(backend kind, stream_view stream);

/// An owning, non-blocking stream of one backend.
class stream {
 public:
  explicit stream(backend kind);
  ~stream();
  stream(stream&& other) noexcept;
  stream& operator=(stream&& other) noexcept;
  stream(stream const&) = delete;
  stream& operator=(stream const&) = delete;

  [[nodiscard]] stream_view view() const noexcept { return stream_view{native_}; }
  [[nodiscard]] backend kind() const noexcept { return kind_; }
  void synchronize() const { tapeflow::synchronize(kind_, view()); }

 private:
  void reset() noexcept;
  backend kind_;
  void* native_{nullptr};
};

}  // namespace tapeflow

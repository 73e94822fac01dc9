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

/// An owning event of one backend: marks a point in a stream that other streams (or the host)
/// can wait for, and times the work between two points.
class event {
 public:
  explicit event(backend kind);
  ~event();
  event(event&& other) noexcept;
  event& operator=(event&& other) noexcept;
  event(event const&) = delete;
  event& operator=(event const&) = delete;

  /// Marks the point after everything queued on `stream` so far.
  void record(stream_view stream);
  /// Makes `stream` wait for the most recent record before running what is queued after this
  /// call. (The CPU backend's default stream runs inline: the calling thread waits.)
  void wait(stream_view stream) const;
  /// Blocks the calling thread until the most recent record has completed.
  void synchronize() const;
  [[nodiscard]] backend kind() const noexcept { return kind_; }

 private:
  friend float elapsed_ms(event const& start, event const& stop);
  void reset() noexcept;
  backend kind_;
  void* native_{nullptr};
};

/// Milliseconds between two recorded events of one backend (waits for both to complete).
[[nodiscard]] float elapsed_ms(event const& start, event const& stop);

}  // namespace tapeflow

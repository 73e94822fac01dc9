// SPDX-License-Identifier: Apache-2.0
// The one table through which the host library reaches a platform. Each backend directory
// (src/backend/<name>/) fills one in; nothing else in src/ knows which platform it runs on.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <string>

namespace tapeflow::detail {

enum class copy_kind { host_to_device, device_to_host, device_to_device };

struct backend_ops {
  backend kind;
  /// Devices present (0 when the driver or device is missing; never throws).
  int (*device_count)() noexcept;
  /// Why no device is present, in words ("" when one is).
  std::string (*unavailable_reason)();
  /// True when a driver or device is there but cannot be used (a driver older than the runtime,
  /// a failed initialisation): not the same as no device at all.
  bool (*device_unusable)() noexcept;
  device_limits (*limits)(int ordinal);
  void* (*allocate)(std::size_t bytes, stream_view stream);
  void (*deallocate)(void* ptr, std::size_t bytes, stream_view stream) noexcept;
  void (*copy)(void* dst, void const* src, std::size_t bytes, copy_kind kind, stream_view stream);
  void (*fill)(void* dst, unsigned char value, std::size_t bytes, stream_view stream);
  void (*synchronize)(stream_view stream);
  void* (*create_stream)();
  void (*destroy_stream)(void* native) noexcept;

  /// Page-locked host memory (the host tier): cudaMallocHost on CUDA, aligned memory on the CPU.
  void* (*allocate_host)(std::size_t bytes);
  void (*deallocate_host)(void* ptr, std::size_t bytes) noexcept;

  /// Events order work across streams. `wait_event` makes `stream` wait for the event's most
  /// recent record (on the CPU backend's default stream: the calling thread waits).
  void* (*create_event)();
  void (*destroy_event)(void* event) noexcept;
  void (*record_event)(void* event, stream_view stream);
  void (*wait_event)(stream_view stream, void* event);
  void (*synchronize_event)(void* event);
  /// Milliseconds between two completed events.
  float (*elapsed_ms)(void* start, void* stop);

  /// Stream capture into a replayable graph; null where the backend has none (the CPU backend
  /// replays by running the recorded work again).
  void (*capture_begin)(stream_view stream);
  void* (*capture_end)(stream_view stream);  ///< returns an instantiated graph
  void (*graph_launch)(void* graph, stream_view stream);
  void (*graph_destroy)(void* graph) noexcept;
};

/// The table of a compiled backend, or nullptr when this build lacks it.
backend_ops const* find_ops(backend kind) noexcept;
/// The table of an available backend; throws unavailable_error otherwise.
backend_ops const& ops(backend kind);

backend_ops const& cpu_backend_ops() noexcept;
#if defined(TAPEFLOW_HAS_CUDA)
backend_ops const& cuda_backend_ops() noexcept;
#endif
#if defined(TAPEFLOW_HAS_HIP)
backend_ops const& hip_backend_ops() noexcept;
#endif

}  // namespace tapeflow::detail

// SPDX-License-Identifier: Apache-2.0
// The emulated device's state, shared by the runtime's sections (device.cpp, error.cpp, stream.cpp,
// event.cpp, memory.cpp, memory_pool.cpp, execution.cpp, graph.cpp, settings.cpp): its settings,
// memory, streams and sticky error, and how queued work runs (state.cpp).
//
// Streams are queues of work run in order. Under the default lazy setting, work runs only when
// something waits for it — a synchronize, an event wait, a synchronous copy — which is a legal
// CUDA schedule and the one that turns a missing wait into a wrong result: a host that reads a
// pinned buffer before waiting for the copy into it reads stale bytes. Every API call takes one
// process-wide (recursive) lock; kernels run their blocks outside any lock.
#pragma once

#include "emulator.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace tapeflow::emu::detail {

using work = std::function<void()>;
using clock = std::chrono::steady_clock;

/// The work a stream capture recorded.
struct graph_ops {
  std::vector<work> ops;
};

struct stream_state {
  std::deque<work> queue;
  std::uint64_t enqueued{0};
  std::uint64_t executed{0};
  std::shared_ptr<graph_ops> capture;  // non-null while the stream is being captured
};

struct event_state {
  std::shared_ptr<stream_state> stream;
  std::uint64_t seq{0};
  bool recorded{false};
  bool done{false};
  clock::time_point when{};
};

struct allocation {
  std::size_t bytes;
};

/// The settings TAPEFLOW_EMULATOR asks for (settings.cpp).
settings parse_environment();
/// `s` with its defaults filled in: the stack size and the host threads.
settings resolved(settings s);

/// The device: its settings, memory, the legacy default stream and the sticky error.
struct device {
  std::recursive_mutex mutex;
  settings config{resolved(parse_environment())};
  std::map<std::uintptr_t, allocation> device_memory;  // by start address
  std::map<std::uintptr_t, allocation> pinned_memory;
  std::size_t used{0};
  std::shared_ptr<stream_state> legacy{std::make_shared<stream_state>()};
  std::set<std::shared_ptr<stream_state>> streams;  // every live stream, for device-wide waits
  cudaError_t sticky{cudaSuccess};
  std::string sticky_message;
  std::uint64_t launches{0};
  /// The dynamic shared memory each kernel opted in to (cudaFuncSetAttribute), by kernel.
  std::map<void const*, std::size_t> opted_in;

  device() { streams.insert(legacy); }
};

/// The one device, created on first use and never destroyed (streams may be used during exit).
device& dev();

/// This host thread's last launch error (cudaGetLastError).
inline thread_local cudaError_t last_error = cudaSuccess;

/// Runs `s`'s queued work in order up to (and including) its `upto`-th operation.
void run_until(stream_state& s, std::uint64_t upto);
void run_all(stream_state& s);
/// Runs every stream's queued work.
void run_everything();

/// The stream behind a handle (nullptr: the legacy default stream).
stream_state& resolve(cudaStream_t stream);
std::shared_ptr<stream_state> resolve_shared(cudaStream_t stream);

/// Queues `w` on `stream` (or records it, while the stream is captured); an eager stream runs it.
void enqueue(cudaStream_t stream, work w);

bool capturing_anywhere();

/// Leaves the sticky error of a failed kernel (the first one's message is kept).
void fail_device(std::string message);

/// Device memory, filled with 0xFF bytes, within the device's size (memory.cpp).
cudaError_t allocate_device(void** ptr, std::size_t bytes);
void release_device(void* p);

}  // namespace tapeflow::emu::detail

struct CUstream_st {
  std::shared_ptr<tapeflow::emu::detail::stream_state> state;
};
struct CUevent_st {
  std::shared_ptr<tapeflow::emu::detail::event_state> state;
};
struct CUgraph_st {
  std::shared_ptr<tapeflow::emu::detail::graph_ops> graph;
};
struct CUgraphExec_st {
  std::vector<tapeflow::emu::detail::work> ops;
};

/// The start of every runtime call that may touch the device: takes the device's lock and returns
/// its sticky error, if any.
#define TAPEFLOW_EMU_GUARD()                                                                  \
  std::lock_guard<std::recursive_mutex> emu_lock(::tapeflow::emu::detail::dev().mutex);       \
  if (::tapeflow::emu::detail::dev().sticky != cudaSuccess) { return ::tapeflow::emu::detail::dev().sticky; }

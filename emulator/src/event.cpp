// SPDX-License-Identifier: Apache-2.0
// Event management: an event is a marker queued on a stream; it records (and takes the host's
// time) when the stream runs it.
#include "state.hpp"

#include <new>

using namespace tapeflow::emu::detail;

cudaError_t cudaEventCreate(cudaEvent_t* event) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (event == nullptr) { return cudaErrorInvalidValue; }
  auto* e = new (std::nothrow) CUevent_st{std::make_shared<event_state>()};
  if (e == nullptr) { return cudaErrorMemoryAllocation; }
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) noexcept
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  if (event == nullptr) { return cudaErrorInvalidResourceHandle; }
  delete event;  // queued work that marks it keeps its state alive
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (event == nullptr) { return cudaErrorInvalidResourceHandle; }
  std::shared_ptr<event_state> const e = event->state;
  std::shared_ptr<stream_state> const s = resolve_shared(stream);
  if (s->capture) {
    // Inside a graph, a record marks the event each time the graph runs.
    s->capture->ops.push_back([e] {
      e->done = true;
      e->when = clock::now();
    });
    return cudaSuccess;
  }
  e->stream = s;
  e->recorded = true;
  e->done = false;
  enqueue(stream, [e] {
    e->done = true;
    e->when = clock::now();
  });
  e->seq = s->enqueued;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (event == nullptr) { return cudaErrorInvalidResourceHandle; }
  event_state& e = *event->state;
  if (e.recorded && e.stream) { run_until(*e.stream, e.seq); }
  return dev().sticky;
}

cudaError_t cudaEventQuery(cudaEvent_t event) noexcept
{
  // A query is a wait that must make progress: it runs the work up to the event.
  return cudaEventSynchronize(event);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (ms == nullptr || start == nullptr || stop == nullptr) { return cudaErrorInvalidValue; }
  event_state const& a = *start->state;
  event_state const& b = *stop->state;
  if (!a.recorded || !b.recorded) { return cudaErrorInvalidResourceHandle; }
  if (!a.done || !b.done) { return cudaErrorNotReady; }
  *ms = std::chrono::duration<float, std::milli>(b.when - a.when).count();
  return cudaSuccess;
}

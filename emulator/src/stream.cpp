// SPDX-License-Identifier: Apache-2.0
// Stream management: streams as queues (state.hpp), waits on events, and capture into graphs.
#include "state.hpp"

#include <new>

using namespace tapeflow::emu::detail;

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (stream == nullptr || flags > cudaStreamNonBlocking) { return cudaErrorInvalidValue; }
  auto* s = new (std::nothrow) CUstream_st{std::make_shared<stream_state>()};
  if (s == nullptr) { return cudaErrorMemoryAllocation; }
  dev().streams.insert(s->state);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) noexcept
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  if (stream == nullptr) { return cudaErrorInvalidResourceHandle; }
  // Work already queued still runs (CUDA lets it complete after the call returns).
  run_all(*stream->state);
  dev().streams.erase(stream->state);
  delete stream;
  return dev().sticky;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) noexcept
{
  TAPEFLOW_EMU_GUARD();
  stream_state& s = resolve(stream);
  if (s.capture) { return cudaErrorStreamCaptureUnsupported; }
  run_all(s);
  return dev().sticky;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (event == nullptr) { return cudaErrorInvalidResourceHandle; }
  event_state const& e = *event->state;
  if (!e.recorded) { return cudaSuccess; }  // waiting for an event never recorded is a no-op
  std::shared_ptr<stream_state> const other = e.stream;
  std::uint64_t const seq = e.seq;
  if (other == resolve_shared(stream)) { return cudaSuccess; }
  enqueue(stream, [other, seq] { run_until(*other, seq); });
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) noexcept
{
  TAPEFLOW_EMU_GUARD();
  stream_state& s = resolve(stream);
  if (stream == nullptr || s.capture) { return cudaErrorStreamCaptureUnsupported; }  // not the legacy stream, not twice
  s.capture = std::make_shared<graph_ops>();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (graph == nullptr) { return cudaErrorInvalidValue; }
  stream_state& s = resolve(stream);
  if (!s.capture) { return cudaErrorInvalidValue; }
  auto* g = new (std::nothrow) CUgraph_st{std::move(s.capture)};
  s.capture = nullptr;
  if (g == nullptr) { return cudaErrorMemoryAllocation; }
  *graph = g;
  return cudaSuccess;
}

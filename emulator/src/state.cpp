// SPDX-License-Identifier: Apache-2.0
// The emulated device's state (state.hpp): the device, its streams' queues and how they run.
#include "state.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace tapeflow::emu::detail {

device& dev()
{
  static device* const d = new device();  // never destroyed: streams may be used during exit
  return *d;
}

void run_until(stream_state& s, std::uint64_t upto)
{
  while (s.executed < upto && !s.queue.empty()) {
    work w = std::move(s.queue.front());
    s.queue.pop_front();
    ++s.executed;
    if (dev().sticky == cudaSuccess) { w(); }
  }
}

void run_all(stream_state& s) { run_until(s, s.enqueued); }

void run_everything()
{
  // Work on one stream may wait for another's; running each to its end in turn is enough, since
  // a cross-stream wait runs the other stream's work itself.
  std::vector<std::shared_ptr<stream_state>> const all(dev().streams.begin(), dev().streams.end());
  for (auto const& s : all) { run_all(*s); }
}

stream_state& resolve(cudaStream_t stream)
{
  return stream == nullptr ? *dev().legacy : *stream->state;
}
std::shared_ptr<stream_state> resolve_shared(cudaStream_t stream)
{
  return stream == nullptr ? dev().legacy : stream->state;
}

void enqueue(cudaStream_t stream, work w)
{
  stream_state& s = resolve(stream);
  if (s.capture) {
    s.capture->ops.push_back(std::move(w));
    return;
  }
  s.queue.push_back(std::move(w));
  ++s.enqueued;
  if (!dev().config.lazy_streams) { run_all(s); }
}

bool capturing_anywhere()
{
  return std::any_of(dev().streams.begin(), dev().streams.end(), [](auto const& s) { return s->capture != nullptr; });
}

void fail_device(std::string message)
{
  device& d = dev();
  if (d.sticky == cudaSuccess) {
    d.sticky = cudaErrorLaunchFailure;
    d.sticky_message = "unspecified launch failure (emulated device: " + message + ")";
    std::fprintf(stderr, "tapeflow emulator: %s\n", message.c_str());
  }
}

}  // namespace tapeflow::emu::detail

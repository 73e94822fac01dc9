// SPDX-License-Identifier: Apache-2.0
// The order of a chain's calls across streams. A forward() or reverse() reuses memory the previous
// call used last (its pool, its tape, its scratch); when that call ran on another stream, this one
// waits for it on the device (stream-ordered: the host does not wait). Every buffer of the chain is
// freed on the stream it was allocated on, an earlier call's: when the calls changed streams, the
// last one may still be running on another, so the host waits for it before the buffers go.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/stream.hpp>

#include <optional>

namespace tapeflow::detail {

class call_order {
 public:
  explicit call_order(backend kind) noexcept : kind_(kind) {}
  call_order(call_order const&) = delete;
  call_order& operator=(call_order const&) = delete;
  call_order(call_order&&) = delete;
  call_order& operator=(call_order&&) = delete;

  /// Waits for the last call when the calls changed streams (a chain used on one stream frees in
  /// that stream's order, without waiting). Its owner declares it after the memory it guards.
  ~call_order()
  {
    if (!switched_streams_) { return; }
    try {
      last_call_->synchronize();
    } catch (...) {  // a device that failed has nothing left to wait for
    }
  }

  /// The stream a call runs on: `requested`, or the default stream on the CPU backend, whose steps
  /// run inline on the calling thread.
  [[nodiscard]] stream_view stream(stream_view requested) const noexcept
  {
    return kind_ == backend::cpu ? stream_view{} : requested;
  }

  /// Orders a call on `s` after the previous call, when that ran on another stream.
  void follow(stream_view s)
  {
    if (kind_ == backend::cpu) { return; }  // one stream: inline, in order
    if (!last_call_) { last_call_.emplace(kind_); }
    if (called_ && s.native() != last_stream_.native()) {
      last_call_->wait(s);
      switched_streams_ = true;
    }
  }

  /// Marks the end of a call on `s`, which the next call follows.
  void end(stream_view s)
  {
    if (kind_ == backend::cpu) { return; }
    last_call_->record(s);
    last_stream_ = s;
    called_ = true;
  }

 private:
  backend kind_;
  std::optional<event> last_call_;
  stream_view last_stream_{};
  bool called_{false};
  bool switched_streams_{false};  // a call ran on another stream than the one before it
};

}  // namespace tapeflow::detail

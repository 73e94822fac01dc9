// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/error.hpp>
#include <tapeflow/stream.hpp>

#include "backend/backend_ops.hpp"

#include <utility>

namespace tapeflow {

void synchronize(backend kind, stream_view stream) { detail::ops(kind).synchronize(stream); }

event::event(backend kind) : kind_(kind), native_(detail::ops(kind).create_event()) {}

event::~event() { reset(); }

event::event(event&& other) noexcept : kind_(other.kind_), native_(std::exchange(other.native_, nullptr)) {}

event& event::operator=(event&& other) noexcept
{
  if (this != &other) {
    reset();
    kind_ = other.kind_;
    native_ = std::exchange(other.native_, nullptr);
  }
  return *this;
}

void event::reset() noexcept
{
  if (native_ != nullptr) { detail::find_ops(kind_)->destroy_event(native_); }
  native_ = nullptr;
}

void event::record(stream_view stream) { detail::ops(kind_).record_event(native_, stream); }
void event::wait(stream_view stream) const { detail::ops(kind_).wait_event(stream, native_); }
void event::synchronize() const { detail::ops(kind_).synchronize_event(native_); }

float elapsed_ms(event const& start, event const& stop)
{
  TAPEFLOW_EXPECTS(start.kind_ == stop.kind_, "elapsed_ms between events of different backends");
  return detail::ops(start.kind_).elapsed_ms(start.native_, stop.native_);
}

stream::stream(backend kind) : kind_(kind), native_(detail::ops(kind).create_stream()) {}

stream::~stream() { reset(); }

stream::stream(stream&& other) noexcept : kind_(other.kind_), native_(std::exchange(other.native_, nullptr)) {}

stream& stream::operator=(stream&& other) noexcept
{
  if (this != &other) {
    reset();
    kind_ = other.kind_;
    native_ = std::exchange(other.native_, nullptr);
  }
  return *this;
}

void stream::reset() noexcept
{
  if (native_ != nullptr) { detail::find_ops(kind_)->destroy_stream(native_); }
  native_ = nullptr;
}

}  // namespace tapeflow

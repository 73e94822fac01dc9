// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/error.hpp>
#include <tapeflow/fault.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/stream.hpp>

#include "backend/backend_ops.hpp"

#include <array>
#include <algorithm>
#include <atomic>
#include <utility>

namespace tapeflow {
namespace {

struct usage_counters {
  std::atomic<std::size_t> current{0};
  std::atomic<std::size_t> peak{0};
  std::atomic<std::size_t> allocations{0};
  std::atomic<std::size_t> allocated_bytes{0};
};

usage_counters& counters(backend kind) noexcept
{
  static std::array<usage_counters, 3> all;
  return all[static_cast<std::size_t>(kind)];
}

usage_counters& host_counters(backend kind) noexcept
{
  static std::array<usage_counters, 3> all;
  return all[static_cast<std::size_t>(kind)];
}

void inject_allocation_fault(fault::site s, backend kind, std::size_t bytes)
{
  if (fault::detail::fires(s)) {
    TAPEFLOW_FAIL_BYTES(out_of_memory,
                        std::string{"injected fault: "} + (s == fault::site::device_allocation ? "device" : "pinned host") +
                          " allocation of " + std::to_string(bytes) + " bytes on backend " +
                          std::string{to_string(kind)} + " failed",
                        bytes);
  }
}

void inject_copy_fault(std::size_t bytes)
{
  if (fault::detail::fires(fault::site::copy)) {
    throw platform_error(detail::where(__FILE__, __LINE__) + "injected fault: a copy of " + std::to_string(bytes) +
                           " bytes failed",
                         "tapeflow_injected_copy_fault", -1);
  }
}

void account(usage_counters& c, std::size_t bytes) noexcept
{
  c.allocations.fetch_add(1);
  c.allocated_bytes.fetch_add(bytes);
  std::size_t const now = c.current.fetch_add(bytes) + bytes;
  std::size_t peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {}
}

}  // namespace

device_buffer::device_buffer(backend kind, std::size_t bytes, stream_view stream)
  : kind_(kind), bytes_(bytes), stream_(stream)
{
  TAPEFLOW_EXPECTS(bytes > 0, "a device_buffer needs a positive size");
  detail::backend_ops const& table = detail::ops(kind);
  inject_allocation_fault(fault::site::device_allocation, kind, bytes);
  data_ = table.allocate(bytes, stream);
  account(counters(kind), bytes);
}

device_buffer::~device_buffer() { release(); }

device_buffer::device_buffer(device_buffer&& other) noexcept
  : kind_(other.kind_), data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)),
    stream_(other.stream_)
{
}

device_buffer& device_buffer::operator=(device_buffer&& other) noexcept
{
  if (this != &other) {
    release();
    kind_ = other.kind_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    stream_ = other.stream_;
  }
  return *this;
}

void device_buffer::release() noexcept
{
  if (data_ == nullptr) { return; }
  // The table exists: this buffer was allocated through it.
  detail::find_ops(kind_)->deallocate(data_, bytes_, stream_);
  counters(kind_).current.fetch_sub(bytes_);
  data_ = nullptr;
  bytes_ = 0;
}

namespace {
void check_range(std::size_t offset, std::size_t bytes, std::size_t size, char const* what)
{
  TAPEFLOW_EXPECTS(offset <= size && bytes <= size - offset,
                   std::string{what} + " of " + std::to_string(bytes) + " bytes at offset " +
                     std::to_string(offset) + " overruns a buffer of " + std::to_string(size) + " bytes");
}
}  // namespace

void device_buffer::upload(void const* host, std::size_t bytes, stream_view stream, std::size_t offset)
{
  check_range(offset, bytes, bytes_, "upload");
  inject_copy_fault(bytes);
  detail::ops(kind_).copy(static_cast<unsigned char*>(data_) + offset, host, bytes,
                          detail::copy_kind::host_to_device, stream);
}

void device_buffer::download(void* host, std::size_t bytes, stream_view stream, std::size_t offset) const
{
  check_range(offset, bytes, bytes_, "download");
  inject_copy_fault(bytes);
  detail::backend_ops const& table = detail::ops(kind_);
  table.copy(host, static_cast<unsigned char const*>(data_) + offset, bytes, detail::copy_kind::device_to_host,
             stream);
  table.synchronize(stream);
}

void device_buffer::copy_from(device_buffer const& source, stream_view stream)
{
  TAPEFLOW_EXPECTS(source.kind_ == kind_ && source.bytes_ == bytes_,
                   "copy_from needs a source of the same backend and size");
  inject_copy_fault(bytes_);
  detail::ops(kind_).copy(data_, source.data_, bytes_, detail::copy_kind::device_to_device, stream);
}

void device_buffer::fill(unsigned char value, stream_view stream)
{
  detail::ops(kind_).fill(data_, value, bytes_, stream);
}

memory_usage device_memory_usage(backend kind) noexcept
{
  usage_counters const& c = counters(kind);
  return {c.current.load(), c.peak.load(), c.allocations.load(), c.allocated_bytes.load()};
}

void reset_device_memory_peak(backend kind) noexcept
{
  usage_counters& c = counters(kind);
  c.peak.store(c.current.load());
}

memory_usage host_memory_usage(backend kind) noexcept
{
  usage_counters const& c = host_counters(kind);
  return {c.current.load(), c.peak.load(), c.allocations.load(), c.allocated_bytes.load()};
}

void reset_host_memory_peak(backend kind) noexcept
{
  usage_counters& c = host_counters(kind);
  c.peak.store(c.current.load());
}

device_buffer buffer_pool::take(std::size_t bytes, stream_view stream)
{
  // Last given, first taken: a reverse gives its layers back last-first, the next forward takes
  // them first-first, so each layer gets the memory it had (and the cache lines it left).
  for (std::size_t k = kept_.size(); k-- > 0;) {
    if (kept_[k].size() != bytes) { continue; }
    device_buffer found = std::move(kept_[k]);
    kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(k));
    kept_bytes_ -= bytes;
    return found;
  }
  if (kept_.capacity() < allocations_ + 1) {
    // give() must not allocate: room for every buffer this pool has handed out.
    kept_.reserve(std::max(2 * kept_.capacity(), allocations_ + 1));
  }
  device_buffer fresh(kind_, bytes, stream);
  ++allocations_;
  return fresh;
}

void buffer_pool::give(device_buffer&& buffer) noexcept
{
  if (buffer.size() == 0) { return; }
  if (buffer.kind() != kind_ || kept_.size() == kept_.capacity()) {
    device_buffer const dropped = std::move(buffer);  // not ours, or no room: freed here
    return;
  }
  kept_bytes_ += buffer.size();
  kept_.push_back(std::move(buffer));
}

void buffer_pool::clear() noexcept
{
  kept_.clear();
  kept_bytes_ = 0;
}

pinned_buffer::pinned_buffer(backend kind, std::size_t bytes) : kind_(kind), bytes_(bytes)
{
  TAPEFLOW_EXPECTS(bytes > 0, "a pinned_buffer needs a positive size");
  detail::backend_ops const& table = detail::ops(kind);
  inject_allocation_fault(fault::site::host_allocation, kind, bytes);
  data_ = table.allocate_host(bytes);
  account(host_counters(kind), bytes);
}

pinned_buffer::~pinned_buffer() { release(); }

pinned_buffer::pinned_buffer(pinned_buffer&& other) noexcept
  : kind_(other.kind_), data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0))
{
}

pinned_buffer& pinned_buffer::operator=(pinned_buffer&& other) noexcept
{
  if (this != &other) {
    release();
    kind_ = other.kind_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void pinned_buffer::release() noexcept
{
  if (data_ == nullptr) { return; }
  detail::find_ops(kind_)->deallocate_host(data_, bytes_);
  host_counters(kind_).current.fetch_sub(bytes_);
  data_ = nullptr;
  bytes_ = 0;
}

void copy_to_host_async(pinned_buffer& dst, device_buffer const& src, std::size_t bytes, stream_view stream)
{
  TAPEFLOW_EXPECTS(dst.kind() == src.kind(), "host and device buffers of different backends");
  check_range(0, bytes, std::min(dst.size(), src.size()), "copy to host");
  inject_copy_fault(bytes);
  detail::ops(src.kind()).copy(dst.data(), src.data(), bytes, detail::copy_kind::device_to_host, stream);
}

void copy_to_device_async(device_buffer& dst, pinned_buffer const& src, std::size_t bytes, stream_view stream)
{
  TAPEFLOW_EXPECTS(dst.kind() == src.kind(), "host and device buffers of different backends");
  check_range(0, bytes, std::min(dst.size(), src.size()), "copy to device");
  inject_copy_fault(bytes);
  detail::ops(dst.kind()).copy(dst.data(), src.data(), bytes, detail::copy_kind::host_to_device, stream);
}

}  // namespace tapeflow

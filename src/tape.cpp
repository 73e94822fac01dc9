// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/nvtx.hpp>
#include <tapeflow/tape.hpp>

#include <utility>

namespace tapeflow {

namespace {
std::string_view to_string(layer_state state) noexcept
{
  return state == layer_state::writing ? "writing" : "committed";
}
}  // namespace

layer::layer(backend kind, std::size_t index, std::size_t record_bytes, tile_layout layout, stream_view stream)
  : index_(index), record_bytes_(record_bytes), layout_(layout),
    storage_(kind, record_bytes * layout.records, stream)
{
}

layer::layer(std::size_t index, std::size_t record_bytes, tile_layout layout, device_buffer storage)
  : index_(index), record_bytes_(record_bytes), layout_(layout), storage_(std::move(storage))
{
  TAPEFLOW_EXPECTS(storage_.size() >= record_bytes * layout.records,
                   "layer " + std::to_string(index) + " needs " + std::to_string(record_bytes * layout.records) +
                     " bytes; its storage holds " + std::to_string(storage_.size()));
}

void layer::commit()
{
  TAPEFLOW_EXPECTS(state_ == layer_state::writing, "layer " + std::to_string(index_) + " is already committed");
  state_ = layer_state::committed;
}

void layer::fill(unsigned char value, stream_view stream)
{
  TAPEFLOW_EXPECTS(state_ == layer_state::writing, "fill() of committed layer " + std::to_string(index_));
  storage_.fill(value, stream);
}

void layer::check_access(std::size_t record_bytes, layer_state wanted, char const* what) const
{
  TAPEFLOW_EXPECTS(record_bytes == record_bytes_,
                   std::string{what} + " of layer " + std::to_string(index_) + " asked for records of " +
                     std::to_string(record_bytes) + " bytes; the layer holds records of " +
                     std::to_string(record_bytes_) + " bytes");
  TAPEFLOW_EXPECTS(state_ == wanted, std::string{what} + " of layer " + std::to_string(index_) +
                                       " needs a " + std::string{to_string(wanted)} + " layer; it is " +
                                       std::string{to_string(state_)});
}

tape::tape(backend kind, tape_options options) : kind_(kind), options_(options)
{
  TAPEFLOW_EXPECTS(options_.pool == nullptr || options_.pool->kind() == kind,
                   "a tape on backend " + std::string{to_string(kind)} + " cannot take layers from a pool on " +
                     std::string{to_string(options_.pool->kind())});
}

std::size_t tape::check_push(std::size_t record_bytes, std::size_t records, std::size_t tile_records) const
{
  TAPEFLOW_EXPECTS(record_bytes > 0 && record_bytes % record_alignment == 0,
                   "record size " + std::to_string(record_bytes) + " is not a positive multiple of 16 bytes");
  TAPEFLOW_EXPECTS(records > 0, "a layer needs at least one record");
  TAPEFLOW_EXPECTS(tile_records > 0, "a tile needs at least one record");
  TAPEFLOW_EXPECTS(records <= static_cast<std::size_t>(-1) / record_bytes,
                   "a layer of " + std::to_string(records) + " records of " + std::to_string(record_bytes) +
                     " bytes overflows the address space");
  std::size_t const bytes = record_bytes * records;
  if (options_.budget_bytes != 0 && bytes > options_.budget_bytes - std::min(bytes_, options_.budget_bytes)) {
    TAPEFLOW_FAIL_BYTES(budget_error,
                  "layer " + std::to_string(layers_.size()) + " needs " + std::to_string(bytes) +
                    " bytes; the tape holds " + std::to_string(bytes_) + " of a " +
                    std::to_string(options_.budget_bytes) + "-byte device budget",
                  bytes);
  }
  return bytes;
}

void tape::count_pushed(std::size_t bytes) noexcept
{
  bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, bytes_);
  ++pushed_;
}

layer& tape::adopt(std::size_t record_bytes, std::size_t records, std::size_t tile_records, device_buffer&& storage)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::tape::adopt");
  std::size_t const bytes = check_push(record_bytes, records, tile_records);
  TAPEFLOW_EXPECTS(storage.kind() == kind_, "an adopted layer's storage must be of the tape's backend");
  TAPEFLOW_EXPECTS(storage.size() >= bytes, "an adopted layer's storage holds " + std::to_string(storage.size()) +
                                              " bytes, fewer than its " + std::to_string(bytes) + "-byte records");
  layers_.emplace_back(layers_.size(), record_bytes, tile_layout{records, tile_records}, std::move(storage));
  layers_.back().state_ = layer_state::committed;
  count_pushed(bytes);
  return layers_.back();
}

layer& tape::push(std::size_t record_bytes, std::size_t records, std::size_t tile_records, stream_view stream)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::tape::push");
  std::size_t const bytes = check_push(record_bytes, records, tile_records);
  if (options_.pool != nullptr) {
    device_buffer storage = options_.pool->take(bytes, stream);
    layers_.emplace_back(layers_.size(), record_bytes, tile_layout{records, tile_records}, std::move(storage));
  } else {
    layers_.emplace_back(kind_, layers_.size(), record_bytes, tile_layout{records, tile_records}, stream);
  }
  count_pushed(bytes);
  return layers_.back();
}

layer& tape::top()
{
  TAPEFLOW_EXPECTS(!layers_.empty(), "top() of an empty tape");
  return layers_.back();
}

layer const& tape::top() const
{
  TAPEFLOW_EXPECTS(!layers_.empty(), "top() of an empty tape");
  return layers_.back();
}

void tape::pop()
{
  TAPEFLOW_NVTX_RANGE("tapeflow::tape::pop");
  TAPEFLOW_EXPECTS(!layers_.empty(), "pop() of an empty tape");
  bytes_ -= layers_.back().bytes();
  if (options_.pool != nullptr) { options_.pool->give(std::move(layers_.back().storage_)); }
  layers_.pop_back();
}

}  // namespace tapeflow

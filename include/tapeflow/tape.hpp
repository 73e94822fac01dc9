// SPDX-License-Identifier: Apache-2.0
// The tape: a LIFO of layers (one per forward launch), each a tiled run of records.
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/device/views.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace tapeflow {

/// A layer is written by one augmented forward launch, then committed, then read once by the
/// reverse and popped.
enum class layer_state { writing, committed };

class layer {
 public:
  layer(backend kind, std::size_t index, std::size_t record_bytes, tile_layout layout, stream_view stream);
  /// A layer over `storage` (at least record_bytes x layout.records bytes), e.g. from a buffer_pool.
  layer(std::size_t index, std::size_t record_bytes, tile_layout layout, device_buffer storage);

  [[nodiscard]] std::size_t index() const noexcept { return index_; }
  [[nodiscard]] std::size_t record_bytes() const noexcept { return record_bytes_; }
  [[nodiscard]] std::size_t records() const noexcept { return layout_.records; }
  [[nodiscard]] tile_layout layout() const noexcept { return layout_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return storage_.size(); }
  [[nodiscard]] layer_state state() const noexcept { return state_; }

  /// The view an augmented forward kernel writes through. The layer must still be writing.
  template <class R>
  [[nodiscard]] tape_writer<R> writer()
  {
    require_record<R>();
    check_access(sizeof(R), layer_state::writing, "writer()");
    return tape_writer<R>{storage_.data_as<R>(), layout_};
  }

  /// The view a reverse kernel stages tiles from. The layer must be committed.
  template <class R>
  [[nodiscard]] tape_reader<R> reader() const
  {
    require_record<R>();
    check_access(sizeof(R), layer_state::committed, "reader()");
    return tape_reader<R>{storage_.data_as<R>(), layout_};
  }

  /// Marks the forward's writes as complete (stream-ordered): the layer becomes readable.
  void commit();

  /// Sets every byte of a writing layer (0xFF poisons records with NaN for tests).
  void fill(unsigned char value, stream_view stream);

  /// The raw storage (for the host tier's copies and for tests).
  [[nodiscard]] device_buffer const& storage() const noexcept { return storage_; }

 private:
  friend class tape;  // hands a popped layer's storage back to its pool, commits an adopted one
  void check_access(std::size_t record_bytes, layer_state wanted, char const* what) const;

  std::size_t index_;
  std::size_t record_bytes_;
  tile_layout layout_;
  layer_state state_{layer_state::writing};
  device_buffer storage_;
};

/// Options of a tape.
struct tape_options {
  /// Most bytes of layer storage the tape may hold on the device at once; 0 means no limit
  /// beyond the device's memory. Exceeding it throws budget_error and changes nothing.
  std::size_t budget_bytes{0};
  /// Where layers' storage comes from and goes back to (it must outlive the tape); null: each
  /// layer is allocated when pushed and freed when popped.
  buffer_pool* pool{nullptr};
};

/// A LIFO of layers on one backend.
class tape {
 public:
  explicit tape(backend kind, tape_options options = {});

  /// Opens a new layer of `records` records of `record_bytes` bytes, cut into tiles of
  /// `tile_records`, on top of the stack.
  layer& push(std::size_t record_bytes, std::size_t records, std::size_t tile_records,
              stream_view stream = {});

  template <class R>
  layer& push(std::size_t records, std::size_t tile_records, stream_view stream = {})
  {
    require_record<R>();
    return push(sizeof(R), records, tile_records, stream);
  }

  /// Pushes `storage` itself (at least record_bytes x records bytes, of the tape's backend), already
  /// written, as a committed layer: a step whose record is its input state gives its state buffer.
  /// Throws budget_error when the layer does not fit the budget (`storage` is then left as it was)
  /// and logic_error for bad sizes.
  layer& adopt(std::size_t record_bytes, std::size_t records, std::size_t tile_records, device_buffer&& storage);

  template <class R>
  layer& adopt(std::size_t records, std::size_t tile_records, device_buffer&& storage)
  {
    require_record<R>();
    return adopt(sizeof(R), records, tile_records, std::move(storage));
  }

  /// The most recently pushed layer. Throws logic_error when the tape is empty.
  [[nodiscard]] layer& top();
  [[nodiscard]] layer const& top() const;

  /// Releases the top layer (stream-ordered on the stream it was allocated on), or gives its
  /// storage back to the tape's pool.
  void pop();

  [[nodiscard]] backend kind() const noexcept { return kind_; }
  [[nodiscard]] bool empty() const noexcept { return layers_.empty(); }
  [[nodiscard]] std::size_t depth() const noexcept { return layers_.size(); }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] std::size_t peak_bytes() const noexcept { return peak_bytes_; }
  [[nodiscard]] std::size_t budget_bytes() const noexcept { return options_.budget_bytes; }
  /// Layers pushed over the tape's lifetime.
  [[nodiscard]] std::size_t layers_pushed() const noexcept { return pushed_; }

 private:
  /// The bytes of a layer of that shape; throws what push() throws before it changes anything.
  [[nodiscard]] std::size_t check_push(std::size_t record_bytes, std::size_t records, std::size_t tile_records) const;
  void count_pushed(std::size_t bytes) noexcept;

  backend kind_;
  tape_options options_;
  std::vector<layer> layers_;
  std::size_t bytes_{0};
  std::size_t peak_bytes_{0};
  std::size_t pushed_{0};
};

}  // namespace tapeflow

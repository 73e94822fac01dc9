// SPDX-License-Identifier: Apache-2.0
// The small, trivially copyable views host owners hand to kernels: the tile layout of a layer,
// a writer for augmented-forward kernels and a reader for reverse kernels. Host and device.
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/record.hpp>

#include <cstddef>

namespace tapeflow {

/// A layer of `records` records cut into tiles of `tile_records` (the last one may be partial).
struct tile_layout {
  std::size_t records{0};
  std::size_t tile_records{1};

  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t tiles() const noexcept
  {
    return (records + tile_records - 1) / tile_records;
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t first(std::size_t tile) const noexcept
  {
    return tile * tile_records;
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t count(std::size_t tile) const noexcept
  {
    std::size_t const begin = first(tile);
    std::size_t const left = records > begin ? records - begin : 0;
    return left < tile_records ? left : tile_records;
  }
};

/// Write access to one layer for an augmented forward kernel. Region `i` writes record `i`;
/// consecutive threads writing consecutive records write one coalesced run of 16-byte chunks.
template <class R>
class tape_writer {
 public:
  using record_type = R;
  tape_writer() = default;
  TAPEFLOW_HOST_DEVICE tape_writer(R* records, tile_layout layout) noexcept
    : records_(records), layout_(layout)
  {
    require_record<R>();
  }
  TAPEFLOW_HOST_DEVICE void write(std::size_t i, R const& value) const noexcept { records_[i] = value; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t size() const noexcept { return layout_.records; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE tile_layout layout() const noexcept { return layout_; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE R* data() const noexcept { return records_; }

 private:
  R* records_{nullptr};
  tile_layout layout_{};
};

/// Read access to one committed layer, tile by tile, for the staged reverse pipelines. Reverse
/// kernels do not index it record by record: they stage whole tiles (tile_pipeline.cuh).
template <class R>
class tape_reader {
 public:
  using record_type = R;
  tape_reader() = default;
  TAPEFLOW_HOST_DEVICE tape_reader(R const* records, tile_layout layout) noexcept
    : records_(records), layout_(layout)
  {
    require_record<R>();
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE tile_layout layout() const noexcept { return layout_; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t tiles() const noexcept { return layout_.tiles(); }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE R const* tile(std::size_t t) const noexcept
  {
    return records_ + layout_.first(t);
  }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t tile_size(std::size_t t) const noexcept
  {
    return layout_.count(t);
  }
  /// The whole layer, for a reverse that reads it as one array rather than tile by tile (a
  /// stencil segment's checkpoint, whose halos reach into every neighbouring tile).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE R const* data() const noexcept { return records_; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE std::size_t size() const noexcept { return layout_.records; }

 private:
  R const* records_{nullptr};
  tile_layout layout_{};
};

}  // namespace tapeflow

// SPDX-License-Identifier: Apache-2.0
// Halos: how a stencil's reverse reads its neighbours' records. A tile is handed to the reverse
// with `halo` records on each side (periodic: past either end of the layer it wraps around), so
// a record taped once serves its own region and its neighbours' — a stencil does not copy its
// neighbours' values into every record. Host and device (the view is what a kernel would get).
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/device/views.hpp>

#include <cassert>
#include <cstddef>

namespace tapeflow {

/// Which records of a layer a tile's window holds: `extent` records starting at record `origin`,
/// wrapping past the end of the layer's `records` records to record 0.
struct window_span {
  std::size_t origin{0};
  std::size_t extent{0};
  std::size_t records{0};
};

/// The window of a tile of `count` records from record `first`, with `halo` records on each side.
/// When the tile and its halos cover the whole layer, the window is the layer itself (origin 0),
/// so no record appears in it twice.
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr window_span window_of(std::size_t first, std::size_t count,
                                                                   std::size_t halo, std::size_t records) noexcept
{
  if (count + 2 * halo >= records) { return {0, records, records}; }
  std::size_t const origin = first >= halo ? first - halo : first + records - halo;
  return {origin, count + 2 * halo, records};
}

/// Read access to one tile's window: record `j` of the layer (an index in [0, records); the
/// caller wraps it as its stencil does) for any j within `halo` records of the tile. Trivially
/// copyable. Staged, `base` points at the window's first record in the staging buffer; in place,
/// at the layer itself (then every record is addressable, but only the window's may be read, as
/// where the window is staged: `contains(j)` says which, and debug builds assert it).
template <class R>
class tile_window {
 public:
  using record_type = R;
  tile_window() = default;
  /// A staged window: base[k] holds record (span.origin + k) mod span.records.
  TAPEFLOW_HOST_DEVICE tile_window(R const* base, window_span span) noexcept
    : base_(base), map_(span), bounds_(span)
  {
  }
  /// A window of a layer read in place: `layer` is record 0; `bounds` says what may be read.
  TAPEFLOW_HOST_DEVICE static tile_window in_place(R const* layer, window_span bounds) noexcept
  {
    tile_window w;
    w.base_ = layer;
    w.map_ = window_span{0, bounds.records, bounds.records};
    w.bounds_ = bounds;
    return w;
  }

  /// Record `j` of the layer; j must lie in the window (the tile, or within its halo).
  [[nodiscard]] TAPEFLOW_HOST_DEVICE R const& operator[](std::size_t j) const noexcept
  {
#if !defined(NDEBUG) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
    assert(contains(j) && "tapeflow: a reverse read a record outside its tile's halo");
#endif
    return base_[j >= map_.origin ? j - map_.origin : j + map_.records - map_.origin];
  }
  /// Whether record `j` lies in the window.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE bool contains(std::size_t j) const noexcept
  {
    std::size_t const k = j >= bounds_.origin ? j - bounds_.origin : j + bounds_.records - bounds_.origin;
    return j < bounds_.records && k < bounds_.extent;
  }
  /// The records the window holds.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE window_span span() const noexcept { return bounds_; }

 private:
  R const* base_{nullptr};
  window_span map_{};
  window_span bounds_{};
};

}  // namespace tapeflow

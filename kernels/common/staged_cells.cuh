// SPDX-License-Identifier: Apache-2.0
// The reverse of a workload whose tape holds values per cell, in a GPU kernel: a record holds the
// values of `CellsPerRecord` consecutive cells (`ValuesPerCell` each, cell by cell), staged into
// shared memory tile by tile through the tile pipeline (staged_cells.hpp: the CPU's).
#pragma once

#include <tapeflow/device/platform.hpp>
#include <tapeflow/device/tile_pipeline.cuh>
#include <tapeflow/device/views.hpp>

#include <cstddef>

namespace tapeflow::workloads {

/// Inside a reverse kernel, over such a tape of `cells` cells staged by tile_pipeline<R, Stages>:
/// f(cell, values) for each staged cell, `values` its ValuesPerCell taped values in shared memory,
/// the block's threads striding over a tile's cells.
template <class T, std::size_t CellsPerRecord, std::size_t ValuesPerCell, int Stages, class R, class F>
__device__ void reverse_staged_cells(tape_reader<R> tape, std::size_t cells, F&& f)
{
  device::tile_pipeline<R, Stages>::reverse(
    tape, [&](std::size_t, R const* staged, std::size_t first, std::size_t count) {
      T const* const taped = reinterpret_cast<T const*>(staged);
      std::size_t const base = first * CellsPerRecord;
      std::size_t const staged_cells = count * CellsPerRecord;
      for (std::size_t k = threadIdx.x; k < staged_cells; k += blockDim.x) {
        std::size_t const cell = base + k;
        if (cell < cells) { f(cell, taped + k * ValuesPerCell); }
      }
    });
}

}  // namespace tapeflow::workloads

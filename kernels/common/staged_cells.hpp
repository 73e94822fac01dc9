// SPDX-License-Identifier: Apache-2.0
// The reverse of a workload whose tape holds values per cell, tile by tile on the CPU backend: a
// record holds the values of `CellsPerRecord` consecutive cells (`ValuesPerCell` each, cell by
// cell), so a staged run of records is the values of a run of cells (staged_cells.cuh: the GPU's).
#pragma once

#include <tapeflow/cpu/reverse.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/device/views.hpp>

#include <algorithm>
#include <cstddef>

namespace tapeflow::workloads {

/// cpu::reverse_tiles over such a tape of `cells` cells: f(taped, begin, end) for each staged
/// tile, `taped` holding the values of cells [begin, end) (the last record's padding left out),
/// cell c's from taped[(c - begin) * ValuesPerCell].
template <class T, std::size_t CellsPerRecord, class R, class F>
void reverse_staged_cells(tape_reader<R> tape, pipeline_plan const& plan, std::size_t cells, cpu::ring_stats* staging,
                          F&& f)
{
  cpu::reverse_tiles(
    tape, plan,
    [&](std::size_t, R const* staged, std::size_t first, std::size_t count) {
      f(reinterpret_cast<T const*>(staged), first * CellsPerRecord, std::min(cells, (first + count) * CellsPerRecord));
    },
    staging);
}

}  // namespace tapeflow::workloads

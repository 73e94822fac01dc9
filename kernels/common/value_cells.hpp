// SPDX-License-Identifier: Apache-2.0
// The tape layout and the neighbours of the stencil workloads that tape one value per cell of a
// periodic grid (Allen–Cahn, Burgers): a record holds the values of `cells_per_record<T>`
// consecutive cells (one 16-byte chunk), and index i's neighbours wrap around at 0 and n - 1.
// Each such workload's math.hpp names them in its namespace (`using value_cells::record;`, ...).
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/record.hpp>

#include <cstddef>

namespace tapeflow::workloads::value_cells {

/// One region of the tape: the values of `cells_per_record<T>` consecutive cells at one step.
template <class T>
using record = value_record<T, values_per_chunk<T>>;

template <class T>
inline constexpr std::size_t cells_per_record = values_per_chunk<T>;

/// Records one step writes for `cells` cells (the last one padded).
template <class T>
TAPEFLOW_HOST_DEVICE constexpr std::size_t records_for(std::size_t cells) noexcept
{
  return (cells + cells_per_record<T> - 1) / cells_per_record<T>;
}

/// The periodic neighbours of index i in [0, n).
TAPEFLOW_HOST_DEVICE constexpr std::size_t wrap_prev(std::size_t i, std::size_t n) noexcept
{
  return i == 0 ? n - 1 : i - 1;
}
TAPEFLOW_HOST_DEVICE constexpr std::size_t wrap_next(std::size_t i, std::size_t n) noexcept
{
  return i + 1 == n ? 0 : i + 1;
}

}  // namespace tapeflow::workloads::value_cells

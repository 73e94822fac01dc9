// SPDX-License-Identifier: Apache-2.0
// Records: everything one region (a cell's step, a thread's iteration) stores on the tape, as one
// contiguous, trivially copyable, 16-byte aligned struct (array-of-structs layout).
#pragma once

#include <tapeflow/config.hpp>

#include <cstddef>
#include <type_traits>

namespace tapeflow {

/// True for types that can be tape records: trivially copyable, aligned to `record_alignment`
/// and a whole number of 16-byte chunks (the unit of async copies and coalesced writes).
template <class R>
inline constexpr bool is_record_v = std::is_trivially_copyable_v<R> &&
                                    alignof(R) % record_alignment == 0 &&
                                    sizeof(R) % record_alignment == 0;

/// Fails compilation with a readable message when `R` cannot be a record.
template <class R>
TAPEFLOW_HOST_DEVICE constexpr void require_record() noexcept
{
  static_assert(std::is_trivially_copyable_v<R>, "tapeflow: a record must be trivially copyable");
  static_assert(alignof(R) % record_alignment == 0,
                "tapeflow: a record must be declared alignas(16) (tapeflow::record_alignment)");
  static_assert(sizeof(R) % record_alignment == 0,
                "tapeflow: a record's size must be a multiple of 16 bytes");
}

/// A record of `N` values of type `T`: the common case of a region storing a few scalars.
template <class T, std::size_t N>
struct alignas(record_alignment) value_record {
  T values[N];
};

/// How many values of type `T` fill one 16-byte chunk (4 floats, 2 doubles).
template <class T>
inline constexpr std::size_t values_per_chunk = record_alignment / sizeof(T);

}  // namespace tapeflow

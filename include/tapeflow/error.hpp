// SPDX-License-Identifier: Apache-2.0
// Typed host errors. Every error carries the file:line where it was raised; platform errors also
// carry the platform's error name (e.g. "cudaErrorMemoryAllocation").
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace tapeflow {

/// Base of every exception tapeflow throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The caller broke a precondition: bad sizes, wrong record type, a layer in the wrong state,
/// settings the device cannot hold. The runtime stays usable.
class logic_error : public error {
 public:
  using error::error;
};

/// A file could not be read or written, or had the wrong size.
class io_error : public error {
 public:
  using error::error;
};

/// The requested backend is not compiled in, or no device of that kind is present.
class unavailable_error : public error {
 public:
  using error::error;
};

/// A memory request failed, or does not fit a budget.
class out_of_memory : public error {
 public:
  out_of_memory(std::string const& what, std::size_t requested_bytes)
    : error(what), requested_bytes_(requested_bytes)
  {
  }
  [[nodiscard]] std::size_t requested_bytes() const noexcept { return requested_bytes_; }

 private:
  std::size_t requested_bytes_;
};

/// The tape does not fit the device-memory budget under the chosen policy.
class budget_error : public out_of_memory {
 public:
  using out_of_memory::out_of_memory;
};

/// A CUDA or HIP runtime call failed. `name()` is the platform's error name.
class platform_error : public error {
 public:
  platform_error(std::string const& what, std::string name, int code)
    : error(what), name_(std::move(name)), code_(code)
  {
  }
  [[nodiscard]] std::string const& name() const noexcept { return name_; }
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  std::string name_;
  int code_;
};

/// Ranks of a distributed run could not go on together: a rank failed (`failed_rank()` names it
/// and the message carries its error), a peer said nothing within the communicator's timeout, or
/// the ranks disagree (on a schedule, a size). Raised on every rank of the run; the communicator
/// that raised it is then unusable (docs/distributed.md).
class distributed_error : public error {
 public:
  distributed_error(std::string const& what, int failed_rank) : error(what), failed_rank_(failed_rank) {}
  /// The rank whose failure this reports; -1 for a timeout or a disagreement no one rank caused.
  [[nodiscard]] int failed_rank() const noexcept { return failed_rank_; }

 private:
  int failed_rank_;
};

namespace detail {
[[noreturn]] void throw_logic_error(char const* file, int line, std::string const& reason);
std::string where(char const* file, int line);
/// A real number as a message shows it: six significant digits ("%g": 1e-300, not 0.000000).
std::string shown(double value);
/// Bytes as a message shows them: "512 B", "4.00 KiB", "1.50 MiB", "25.00 GiB".
std::string shown_bytes(std::size_t bytes);
}  // namespace detail

}  // namespace tapeflow

/// Throws tapeflow::logic_error with file:line when `cond` is false.
#define TAPEFLOW_EXPECTS(cond, reason)                                      \
  do {                                                                      \
    if (!(cond)) { ::tapeflow::detail::throw_logic_error(__FILE__, __LINE__, (reason)); } \
  } while (0)

/// Throws the exception type `E` built from "tapeflow error at file:line: reason".
#define TAPEFLOW_FAIL(E, reason) \
  throw E(::tapeflow::detail::where(__FILE__, __LINE__) + (reason))

/// Throws the out_of_memory-derived type `E` for a request of `bytes` bytes.
#define TAPEFLOW_FAIL_BYTES(E, reason, bytes) \
  throw E(::tapeflow::detail::where(__FILE__, __LINE__) + (reason), (bytes))

// SPDX-License-Identifier: Apache-2.0
// Backends (where a tape and its kernels run) and the device limits the planner reads.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tapeflow {

/// Where tapes live and kernels run. `cpu` is the reference backend and is always available.
enum class backend { cpu, cuda, hip };

[[nodiscard]] std::string_view to_string(backend kind) noexcept;

/// Parses "cpu", "cuda" or "hip"; throws logic_error on anything else.
[[nodiscard]] backend parse_backend(std::string_view name);

/// True when the backend's code is compiled into this build of the library.
[[nodiscard]] bool backend_compiled(backend kind) noexcept;

/// True when the backend is compiled in and at least one device of its kind is present.
[[nodiscard]] bool backend_available(backend kind) noexcept;

/// Whether a backend can run, and if not, whether anything is there at all.
enum class backend_status {
  available,     ///< compiled in, and at least one device is present
  not_compiled,  ///< this build of tapeflow lacks the backend
  no_device,     ///< no device and no driver (or a driver that reports none)
  unusable,      ///< a driver or device is there but cannot be used: a driver older than the
                 ///< runtime, a failed initialisation. Not "no GPU": tests fail on it.
};

[[nodiscard]] backend_status query_backend_status(backend kind) noexcept;

namespace detail {
/// How a GPU backend reads a failed device count: `no_device`, and `insufficient_driver` with no
/// driver installed at all (the CUDA runtime's answer on a machine without one), mean there is
/// no device; anything else means one is there but unusable. Platform-neutral, so it is tested
/// without a GPU.
enum class count_failure { no_device, insufficient_driver, other };
[[nodiscard]] bool count_failure_means_unusable(count_failure failure, bool driver_installed) noexcept;
}  // namespace detail

/// Why `backend_available(kind)` is false, in words; empty when it is available.
[[nodiscard]] std::string backend_unavailable_reason(backend kind);

/// The fastest available backend: a GPU backend when one has a device, else `cpu`.
[[nodiscard]] backend best_available_backend() noexcept;

/// What the planner needs to know about a device. Read from the device for GPU backends, fixed
/// sensible values for the CPU backend (its "shared memory" is the staging ring).
struct device_limits {
  backend kind{backend::cpu};
  int ordinal{0};
  std::string name;
  int multiprocessors{1};                       ///< SMs / CUs / CPU threads
  std::size_t shared_mem_per_block{0};          ///< usable without opt-in
  /// Usable by a kernel that opts in (device::opt_in_shared; the same as shared_mem_per_block
  /// where there is nothing to opt in to: the CPU, HIP).
  std::size_t shared_mem_per_block_optin{0};
  std::size_t shared_mem_per_multiprocessor{0};
  int max_threads_per_block{1};
  int max_threads_per_multiprocessor{1};
  int warp_size{1};
  std::size_t global_mem_bytes{0};
  int compute_capability{0};                    ///< major*10+minor (CUDA); 0 elsewhere
  bool async_copy{false};                       ///< cp.async / worker-thread staging
  bool bulk_copy{false};                        ///< sm_90 bulk copies (TMA)
};

/// Limits of device `ordinal` of `kind`; throws unavailable_error when there is none.
[[nodiscard]] device_limits query_device_limits(backend kind, int ordinal = 0);

/// Every device of every compiled backend that is present (the CPU always is).
[[nodiscard]] std::vector<device_limits> list_devices();

}  // namespace tapeflow

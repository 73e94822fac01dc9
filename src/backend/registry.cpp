// SPDX-License-Identifier: Apache-2.0
// tapeflow/backend.hpp's functions, and the lookup of each backend's table (backend_ops.hpp).
#include "backend/backend_ops.hpp"

#include <tapeflow/error.hpp>

#include <array>

namespace tapeflow {

namespace detail {

backend_ops const* find_ops(backend kind) noexcept
{
  switch (kind) {
    case backend::cpu: return &cpu_backend_ops();
#if defined(TAPEFLOW_HAS_CUDA)
    case backend::cuda: return &cuda_backend_ops();
#endif
#if defined(TAPEFLOW_HAS_HIP)
    case backend::hip: return &hip_backend_ops();
#endif
    default: return nullptr;
  }
}

backend_ops const& ops(backend kind)
{
  backend_ops const* table = find_ops(kind);
  if (table == nullptr || table->device_count() == 0) {
    TAPEFLOW_FAIL(unavailable_error, backend_unavailable_reason(kind));
  }
  return *table;
}

bool count_failure_means_unusable(count_failure failure, bool driver_installed) noexcept
{
  switch (failure) {
    case count_failure::no_device: return false;
    case count_failure::insufficient_driver: return driver_installed;
    case count_failure::other: return true;
  }
  return true;
}

}  // namespace detail

std::string_view to_string(backend kind) noexcept
{
  switch (kind) {
    case backend::cpu: return "cpu";
    case backend::cuda: return "cuda";
    case backend::hip: return "hip";
  }
  return "unknown";
}

backend parse_backend(std::string_view name)
{
  for (backend kind : {backend::cpu, backend::cuda, backend::hip}) {
    if (name == to_string(kind)) { return kind; }
  }
  TAPEFLOW_FAIL(logic_error, "unknown backend '" + std::string{name} + "' (expected cpu, cuda or hip)");
}

bool backend_compiled(backend kind) noexcept { return detail::find_ops(kind) != nullptr; }

bool backend_available(backend kind) noexcept
{
  detail::backend_ops const* table = detail::find_ops(kind);
  return table != nullptr && table->device_count() > 0;
}

backend_status query_backend_status(backend kind) noexcept
{
  detail::backend_ops const* table = detail::find_ops(kind);
  if (table == nullptr) { return backend_status::not_compiled; }
  if (table->device_count() > 0) { return backend_status::available; }
  return table->device_unusable() ? backend_status::unusable : backend_status::no_device;
}

std::string backend_unavailable_reason(backend kind)
{
  detail::backend_ops const* table = detail::find_ops(kind);
  if (table == nullptr) {
    return "backend '" + std::string{to_string(kind)} + "' is not compiled into this build of tapeflow";
  }
  return table->unavailable_reason();
}

backend best_available_backend() noexcept
{
  for (backend kind : {backend::cuda, backend::hip}) {
    if (backend_available(kind)) { return kind; }
  }
  return backend::cpu;
}

device_limits query_device_limits(backend kind, int ordinal)
{
  detail::backend_ops const& table = detail::ops(kind);
  int const count = table.device_count();
  TAPEFLOW_EXPECTS(ordinal >= 0 && ordinal < count,
                   "device ordinal " + std::to_string(ordinal) + " out of range: backend " +
                     std::string{to_string(kind)} + " has " + std::to_string(count) + " device(s)");
  return table.limits(ordinal);
}

std::vector<device_limits> list_devices()
{
  std::vector<device_limits> devices;
  for (backend kind : {backend::cpu, backend::cuda, backend::hip}) {
    detail::backend_ops const* table = detail::find_ops(kind);
    if (table == nullptr) { continue; }
    for (int i = 0, n = table->device_count(); i < n; ++i) { devices.push_back(table->limits(i)); }
  }
  return devices;
}

}  // namespace tapeflow

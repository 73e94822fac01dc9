// SPDX-License-Identifier: Apache-2.0
// The CLI's workloads: one entry per registered description (kernels/CMakeLists.txt), in order.
#include "commands.hpp"

#include <tapeflow/workloads/registry.hpp>

namespace tapeflow::cli {

std::vector<workload const*> const& all_workloads()
{
  static std::vector<workload const*> const table = [] {
    std::vector<workload const*> entries;
    workloads::registered_workloads::for_each([&](auto d) { entries.push_back(&commands<decltype(d)>::entry()); });
    return entries;
  }();
  return table;
}

}  // namespace tapeflow::cli

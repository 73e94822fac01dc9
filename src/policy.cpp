// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/error.hpp>
#include <tapeflow/policy.hpp>

#include <string>

namespace tapeflow {

std::string_view to_string(tape_policy policy) noexcept
{
  switch (policy) {
    case tape_policy::automatic: return "auto";
    case tape_policy::store: return "store";
    case tape_policy::offload: return "offload";
    case tape_policy::recompute: return "recompute";
    case tape_policy::mixed: return "mixed";
  }
  return "unknown";
}

tape_policy parse_policy(std::string_view name)
{
  for (tape_policy p : {tape_policy::automatic, tape_policy::store, tape_policy::offload, tape_policy::recompute}) {
    if (name == to_string(p)) { return p; }
  }
  TAPEFLOW_FAIL(logic_error, "unknown policy '" + std::string{name} + "' (expected auto, store, offload or recompute)");
}

}  // namespace tapeflow

// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/error.hpp>

namespace tapeflow::detail {

std::string where(char const* file, int line)
{
  return std::string{"tapeflow error at "} + file + ":" + std::to_string(line) + ": ";
}

void throw_logic_error(char const* file, int line, std::string const& reason)
{
  throw logic_error(where(file, line) + reason);
}

}  // namespace tapeflow::detail

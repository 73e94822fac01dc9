// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/error.hpp>

#include <cstdio>

namespace tapeflow::detail {

std::string where(char const* file, int line)
{
  return std::string{"tapeflow error at "} + file + ":" + std::to_string(line) + ": ";
}

std::string shown(double value)
{
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string shown_bytes(std::size_t bytes)
{
  char text[32];
  double const b = static_cast<double>(bytes);
  if (bytes >= (std::size_t{1} << 30)) {
    std::snprintf(text, sizeof text, "%.2f GiB", b / double(1 << 30));
  } else if (bytes >= (std::size_t{1} << 20)) {
    std::snprintf(text, sizeof text, "%.2f MiB", b / double(1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(text, sizeof text, "%.2f KiB", b / 1024.0);
  } else {
    std::snprintf(text, sizeof text, "%zu B", bytes);
  }
  return text;
}

void throw_logic_error(char const* file, int line, std::string const& reason)
{
  throw logic_error(where(file, line) + reason);
}

}  // namespace tapeflow::detail

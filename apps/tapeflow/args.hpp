// SPDX-License-Identifier: Apache-2.0
// Command-line parsing for the tapeflow tool: "--flag value" and "--switch" options checked
// against a per-command table. Errors are usage_error (exit status 2).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tapeflow::cli {

/// Bad usage: unknown command or flag, missing or malformed value. Exit status 2.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct flag_spec {
  std::string name;   ///< without the leading "--"
  std::string value;  ///< placeholder shown in help; empty for a switch
  std::string help;
  bool required{false};
};

class parsed_args {
 public:
  parsed_args(std::vector<flag_spec> const& specs, std::vector<std::string> const& args);

  [[nodiscard]] bool has(std::string const& name) const { return values_.count(name) != 0; }
  [[nodiscard]] std::string text(std::string const& name, std::string const& fallback = {}) const;
  /// A non-negative integer; accepts K, M, G, T suffixes (powers of 1024) when `suffixes` is set.
  [[nodiscard]] std::size_t size(std::string const& name, std::size_t fallback, bool suffixes = false) const;

 private:
  std::map<std::string, std::string> values_;
};

/// Parses a non-negative integer with optional K/M/G/T (1024-based) suffix; throws usage_error.
std::size_t parse_size(std::string const& flag, std::string const& text, bool suffixes);

/// "  --name VALUE   help" lines for a command's help text.
std::string describe_flags(std::vector<flag_spec> const& specs);

}  // namespace tapeflow::cli

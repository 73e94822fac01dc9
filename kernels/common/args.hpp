// SPDX-License-Identifier: Apache-2.0
// Command-line parsing for the tapeflow tool and the workload descriptions: "--flag value" and
// "--switch" options checked against a per-command table. Errors are usage_error (exit status 2).
#pragma once

#include <cstddef>
#include <cstdint>
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
  bool shape{false};  ///< a workload's input files depend on it: `init` takes it too
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

// ---- values of flags (usage_error when malformed) ------------------------------------------
/// A required or defaulted integer flag within [lo, hi].
[[nodiscard]] std::size_t count_of(parsed_args const& args, std::string const& name, std::size_t lo, std::size_t hi,
                                   std::size_t fallback = 0);
/// A byte budget (--budget, --host-budget: K, M, G, T suffixes); 0 when not given: no limit. A
/// given 0 is a usage_error (the library reads 0 as no limit, the opposite of what it says).
[[nodiscard]] std::size_t budget_of(parsed_args const& args, std::string const& name);
/// A real-valued flag (finite).
[[nodiscard]] double real_of(parsed_args const& args, std::string const& name, double fallback);
/// `text` as a finite number, all of it; empty when it is not one.
[[nodiscard]] std::optional<double> finite_number(std::string const& text);
/// The items of a comma-separated flag value, empty ones included ("1,,2" has three).
[[nodiscard]] std::vector<std::string> comma_items(std::string const& text);
/// `value` as text that reads back as the same double (the flags a problem is written as).
[[nodiscard]] std::string exact(double value);
/// --seed (default 1).
[[nodiscard]] std::uint64_t seed_of(parsed_args const& args);

}  // namespace tapeflow::cli

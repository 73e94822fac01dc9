// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/workloads/common/args.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace tapeflow::cli {

parsed_args::parsed_args(std::vector<flag_spec> const& specs, std::vector<std::string> const& args)
{
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string const& arg = args[i];
    if (arg.rfind("--", 0) != 0) { throw usage_error("unexpected argument '" + arg + "'"); }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    auto spec = std::find_if(specs.begin(), specs.end(), [&](flag_spec const& s) { return s.name == name; });
    if (spec == specs.end()) { throw usage_error("unknown option '--" + name + "'"); }
    if (values_.count(name) != 0) { throw usage_error("option '--" + name + "' given twice"); }
    if (spec->value.empty()) {
      if (inline_value) { throw usage_error("option '--" + name + "' takes no value"); }
      values_[name] = "";
      continue;
    }
    if (inline_value) {
      values_[name] = *inline_value;
    } else if (i + 1 < args.size() && !(args[i + 1].size() > 2 && args[i + 1].rfind("--", 0) == 0)) {
      values_[name] = args[++i];  // a value that starts with "--" is given as --name=value
    } else {
      throw usage_error("option '--" + name + "' needs a value (" + spec->value + ")");
    }
  }
  for (flag_spec const& spec : specs) {
    if (spec.required && values_.count(spec.name) == 0) {
      throw usage_error("missing required option '--" + spec.name + " " + spec.value + "'");
    }
  }
}

std::string parsed_args::text(std::string const& name, std::string const& fallback) const
{
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::size_t parsed_args::size(std::string const& name, std::size_t fallback, bool suffixes) const
{
  auto it = values_.find(name);
  return it == values_.end() ? fallback : parse_size(name, it->second, suffixes);
}

std::size_t parse_size(std::string const& flag, std::string const& text, bool suffixes)
{
  auto bad = [&] {
    return usage_error("option '--" + flag + "' needs a non-negative integer" +
                       (suffixes ? " (optionally with K, M, G or T)" : "") + ", got '" + text + "'");
  };
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])) != 0) { ++digits; }
  if (digits == 0) { throw bad(); }
  std::size_t value = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    std::size_t const d = static_cast<std::size_t>(text[i] - '0');
    if (value > (std::numeric_limits<std::size_t>::max() - d) / 10) { throw bad(); }
    value = value * 10 + d;
  }
  std::string const suffix = text.substr(digits);
  if (suffix.empty()) { return value; }
  if (!suffixes) { throw bad(); }
  int shift = 0;
  if (suffix == "K" || suffix == "KiB") {
    shift = 10;
  } else if (suffix == "M" || suffix == "MiB") {
    shift = 20;
  } else if (suffix == "G" || suffix == "GiB") {
    shift = 30;
  } else if (suffix == "T" || suffix == "TiB") {
    shift = 40;
  } else {
    throw bad();
  }
  if (value > (std::numeric_limits<std::size_t>::max() >> shift)) { throw bad(); }
  return value << shift;
}

std::string describe_flags(std::vector<flag_spec> const& specs)
{
  std::string out;
  for (flag_spec const& spec : specs) {
    std::string left = "  --" + spec.name + (spec.value.empty() ? "" : " " + spec.value);
    if (left.size() < 26) { left.resize(26, ' '); } else { left += "  "; }
    // A help of several lines continues under its first.
    std::string help;
    for (char c : spec.help) { help += c == '\n' ? "\n" + std::string(26, ' ') : std::string(1, c); }
    out += left + help + (spec.required ? " (required)" : "") + "\n";
  }
  return out;
}

std::size_t count_of(parsed_args const& args, std::string const& name, std::size_t lo, std::size_t hi,
                     std::size_t fallback)
{
  std::size_t const value = args.size(name, fallback);
  if (value < lo || value > hi) {
    throw usage_error("--" + name + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " +
                      std::to_string(value));
  }
  return value;
}

std::optional<double> finite_number(std::string const& text)
{
  char* end = nullptr;
  double const value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) { return std::nullopt; }
  return value;
}

std::size_t budget_of(parsed_args const& args, std::string const& name)
{
  std::size_t const bytes = args.size(name, 0, true);
  if (args.has(name) && bytes == 0) {
    throw usage_error("--" + name + " 0 leaves the tape no room; leave --" + name + " out for no limit");
  }
  return bytes;
}

double real_of(parsed_args const& args, std::string const& name, double fallback)
{
  if (!args.has(name)) { return fallback; }
  std::string const text = args.text(name);
  std::optional<double> const value = finite_number(text);
  if (!value) { throw usage_error("option '--" + name + "' needs a finite number, got '" + text + "'"); }
  return *value;
}

std::string exact(double value)
{
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

std::uint64_t seed_of(parsed_args const& args) { return args.size("seed", 1); }

std::vector<std::string> comma_items(std::string const& text)
{
  std::vector<std::string> items;
  std::size_t at = 0;
  for (;;) {
    std::size_t const comma = text.find(',', at);
    items.push_back(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) { return items; }
    at = comma + 1;
  }
}

}  // namespace tapeflow::cli

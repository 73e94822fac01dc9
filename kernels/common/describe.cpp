// SPDX-License-Identifier: Apache-2.0
#include "describe.hpp"

#include <tapeflow/stencil/segment.hpp>

#include <numeric>
#include <stdexcept>

namespace tapeflow::workloads {

std::size_t bench_sizes::size(std::string const& key, std::size_t full, std::size_t quick_value) const
{
  auto const it = overrides_.find(key);
  if (it == overrides_.end()) { return quick_ ? quick_value : full; }
  std::size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(it->second, &used);
  } catch (std::exception const&) {
    used = 0;
  }
  TAPEFLOW_EXPECTS(used == it->second.size() && !it->second.empty() && it->second[0] != '-',
                   "--set " + key + "=" + it->second + ": not a non-negative integer");
  return static_cast<std::size_t>(value);
}

std::string bench_sizes::text(std::string const& key, std::string const& fallback) const
{
  auto const it = overrides_.find(key);
  return it == overrides_.end() ? fallback : it->second;
}

bool bench_sizes::overrides(std::vector<std::string> const& keys) const
{
  for (std::string const& key : keys) {
    if (overrides_.count(key) != 0) { return true; }
  }
  return false;
}

namespace detail {

std::string field_text(std::size_t value) { return std::to_string(value); }
std::string field_text(int value) { return std::to_string(value); }
std::string field_text(double value) { return cli::exact(value); }
std::string field_text(std::vector<std::size_t> const& values)
{
  std::string text;
  for (std::size_t v : values) { text += (text.empty() ? "" : ",") + std::to_string(v); }
  return text;
}

std::string shown_text(double value) { return ::tapeflow::detail::shown(value); }

void read_field(cli::parsed_args const& args, field_info const& f, std::size_t& to)
{
  to = cli::count_of(args, f.flag, f.lo, f.hi, to);
}

void read_field(cli::parsed_args const& args, field_info const& f, int& to)
{
  to = static_cast<int>(cli::count_of(args, f.flag, f.lo, f.hi, static_cast<std::size_t>(to)));
}

void read_field(cli::parsed_args const& args, field_info const& f, double& to) { to = cli::real_of(args, f.flag, to); }

void read_field(cli::parsed_args const& args, field_info const& f, std::vector<std::size_t>& to)
{
  if (!args.has(f.flag)) { return; }
  to.clear();
  for (std::string const& item : cli::comma_items(args.text(f.flag))) { to.push_back(cli::parse_size(f.flag, item, false)); }
}

}  // namespace detail

std::vector<cli::flag_spec> segment_flags()
{
  return {{"segment", "K|auto|measure",
           "steps per segment: 1 (default) one step per layer; K > 1 keeps every K-th state and\n"
           "recomputes each segment on chip in the reverse; auto lets the planner pick K; measure times\n"
           "one step per layer, 2 to 4 and auto's K with its neighbours on a short horizon of the\n"
           "grid here first and runs the fastest (docs/stencils.md)"},
          {"shared-opt-in", "",
           "GPU: a segment's tile may hold the shared memory a block gets on opt-in (227 KiB on an\n"
           "H100), not only 48 KiB: longer segments, fewer blocks resident (needs --segment K or auto)"},
          {"segment-threads", "N",
           "GPU: threads of a segment tile's block, a multiple of 32 from 32 to 1024 (default 256;\n"
           "needs --segment K or auto; the CPU runs a tile on one thread)"},
          {"ranks-grid", "PYxPX",
           "under mpirun: the ranks as PY rows along the grid's last axis by PX columns along the one\n"
           "before it, PY * PX ranks (default: the most square grid; a 1-D grid: Px1; docs/distributed.md)"}};
}

namespace {

/// --ranks-grid PYxPX against the run's ranks and the grid's `dims`.
tapeflow::stencil::ranks_grid ranks_grid_flag(cli::parsed_args const& args, stencil_options const& o, int dims)
{
  std::string const text = args.text("ranks-grid");
  std::size_t const x = text.find('x');
  auto const positive = [](std::string const& digits) {
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) { return 0; }
    return std::stoi(digits);
  };
  int const rows = x == std::string::npos ? 0 : positive(text.substr(0, x));
  int const cols = x == std::string::npos ? 0 : positive(text.substr(x + 1));
  if (rows < 1 || cols < 1) { throw cli::usage_error("--ranks-grid must be PYxPX (two positive counts), got '" + text + "'"); }
  int const ranks = o.ranks ? o.ranks->size() : 1;
  long long const arranged = static_cast<long long>(rows) * cols;  // up to 999999 each: past an int
  if (arranged != ranks) {
    throw cli::usage_error("--ranks-grid " + text + " arranges " + std::to_string(arranged) + " ranks; the run has " +
                           std::to_string(ranks) + (o.ranks ? "" : " (run it under mpirun)"));
  }
  if (dims == 1 && cols != 1) {
    throw cli::usage_error("--ranks-grid " + text + ": a 1-D grid is cut along its one axis only; give " +
                           std::to_string(ranks) + "x1");
  }
  return {rows, cols};
}

}  // namespace

void read_segment_options(cli::parsed_args const& args, stencil_options& o, int dims)
{
  if (args.has("ranks-grid")) { o.ranks_grid = ranks_grid_flag(args, o, dims); }
  std::string const segment = args.text("segment", "1");
  o.measure_segment = segment == "measure";
  if (segment == "auto" || o.measure_segment) {
    o.segment = 0;  // measure: what the trials decide (settle_segment); auto until then
  } else {
    if (segment.empty() || segment.find_first_not_of("0123456789") != std::string::npos) {
      throw cli::usage_error("--segment takes K (1 to " + std::to_string(tapeflow::stencil::max_segment_steps) +
                             "), auto or measure, got '" + segment + "'");
    }
    o.segment = static_cast<int>(cli::count_of(args, "segment", 1, tapeflow::stencil::max_segment_steps, 1));
  }
  o.shared_opt_in = args.has("shared-opt-in");
  if (o.shared_opt_in && o.segment == 1) {
    throw cli::usage_error("--shared-opt-in sizes a segment's tiles: give --segment K (K > 1) or --segment auto");
  }
  if (args.has("segment-threads")) {
    o.segment_threads = static_cast<int>(cli::count_of(args, "segment-threads", 32, 1024, 256));
    if (o.segment_threads % 32 != 0) {
      throw cli::usage_error("--segment-threads must be a multiple of 32 (whole warps), got " +
                             std::to_string(o.segment_threads));
    }
    if (o.segment == 1) {
      throw cli::usage_error("--segment-threads sizes a segment tile's block: give --segment K (K > 1) or --segment auto");
    }
  }
}

std::string segment_variant(stencil_options const& o)
{
  std::string const optin = o.shared_opt_in ? "-optin" : "";
  std::string const threads = o.segment_threads != 0 ? "-t" + std::to_string(o.segment_threads) : "";
  if (o.measure_segment) { return "segment-measured" + optin + threads; }
  if (o.segment == 0) { return "segment-auto" + optin + threads; }
  return o.segment > 1 ? "segment" + std::to_string(o.segment) + optin + threads : "";
}

std::optional<double> states_moved_per_step(tape_report const& r)
{
  for (auto const& [name, value] : r.facts) {
    if (name == "states_moved_per_step") { return value; }
  }
  return std::nullopt;
}

double stencil_bench_bytes(tape_report const& r, double state_bytes, std::size_t steps)
{
  if (auto const states = states_moved_per_step(r)) { return *states * state_bytes * static_cast<double>(steps); }
  return 2.0 * static_cast<double>(r.tape_bytes) + 4.0 * state_bytes * static_cast<double>(steps);
}

std::size_t total_values(std::vector<array_spec> const& parts) noexcept
{
  return std::accumulate(parts.begin(), parts.end(), std::size_t{0},
                         [](std::size_t sum, array_spec const& p) { return sum + p.values; });
}

}  // namespace tapeflow::workloads

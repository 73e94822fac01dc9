// SPDX-License-Identifier: Apache-2.0
#include "harness.hpp"

#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace tapeflow::bench {

std::string row::json() const
{
  cli::json_object o;
  o.add("workload", workload).add("variant", variant).add("size", size);
  if (primal_ms > 0) { o.add("primal_ms", primal_ms); }
  if (grad_ms > 0) { o.add("grad_ms", grad_ms); }
  if (primal_ms > 0 && grad_ms > 0) { o.add("grad_over_primal", grad_ms / primal_ms); }
  if (forward_ms > 0) { o.add("forward_ms", forward_ms); }
  if (reverse_ms > 0) { o.add("reverse_ms", reverse_ms); }
  o.add("tape_bytes", tape_bytes).add("peak_device_bytes", peak_device_bytes);
  if (achieved_GBps > 0) { o.add("achieved_GBps", achieved_GBps); }
  std::string text = o.str();
  std::string const more = extra.str();
  if (more.size() > 2) {  // splice the extra fields in: {...} + {...} -> {..., ...}
    text.pop_back();
    text += "," + more.substr(1);
  }
  return text;
}

context::context(backend kind, settings cfg)
  : kind_(kind), device_(query_device_limits(kind)), cfg_(std::move(cfg)), sizes_(cfg_.quick, cfg_.params)
{
  TAPEFLOW_EXPECTS(cfg_.warmup >= 0 && cfg_.repeats >= 1, "benchmarks need --warmup >= 0 and --repeats >= 1");
}

double context::d2d_GBps()
{
  if (d2d_GBps_ > 0) { return d2d_GBps_; }
  std::size_t const full = std::min<std::size_t>(std::size_t{1} << 30, device_.global_mem_bytes / 8);
  std::size_t const bytes = cfg_.quick ? std::min<std::size_t>(full, std::size_t{64} << 20) : full;
  device_buffer a(kind_, bytes, {});
  device_buffer b(kind_, bytes, {});
  a.fill(0x3c, {});
  timing const t = measure(1, [&](stopwatch& sw) {
    sw.start();
    b.copy_from(a, sw.stream());
    sw.lap();
  });
  d2d_GBps_ = 2.0 * static_cast<double>(bytes) / (t.total_ms * 1e6);  // bytes read + bytes written
  return d2d_GBps_;
}

std::size_t context::size(std::string const& key, std::size_t full, std::size_t quick_value) const
{
  return sizes_.size(key, full, quick_value);
}

std::string context::text(std::string const& key, std::string const& fallback) const
{
  return sizes_.text(key, fallback);
}

int context::warmup() const
{
  return static_cast<int>(size(suite_ + ".warmup", static_cast<std::size_t>(cfg_.warmup), static_cast<std::size_t>(cfg_.warmup)));
}

int context::repeats() const
{
  return static_cast<int>(size(suite_ + ".repeats", static_cast<std::size_t>(cfg_.repeats), static_cast<std::size_t>(cfg_.repeats)));
}

timing context::measure(std::size_t laps, std::function<void(stopwatch&)> const& body)
{
  int const warm = warmup();
  int const runs = repeats();
  TAPEFLOW_EXPECTS(warm >= 0 && runs >= 1, "measure() needs warmup >= 0 and repeats >= 1");
  stopwatch sw(kind_, {}, laps);
  for (int run = 0; run < warm + runs; ++run) {
    sw.timed_ = run >= warm;
    body(sw);
  }
  timing t;
  t.total_ms = sw.timer_.median_total_ms();
  for (std::size_t i = 0; i < laps; ++i) { t.laps_ms.push_back(sw.timer_.median_lap_ms(i)); }
  return t;
}

void context::add(row r)
{
  std::printf("%-10s %-28s %-26s", r.workload.c_str(), r.variant.c_str(), r.size.c_str());
  if (r.primal_ms > 0) { std::printf(" primal %9.3f ms", r.primal_ms); }
  if (r.grad_ms > 0) { std::printf(" grad %9.3f ms", r.grad_ms); }
  if (r.primal_ms > 0 && r.grad_ms > 0) { std::printf(" (x%.2f)", r.grad_ms / r.primal_ms); }
  if (r.reverse_ms > 0) { std::printf(" reverse %9.3f ms", r.reverse_ms); }
  if (r.achieved_GBps > 0) { std::printf(" %7.1f GB/s", r.achieved_GBps); }
  std::printf("\n");
  std::fflush(stdout);
  rows_.push_back(std::move(r));
}

std::vector<suite>& registry()
{
  static std::vector<suite> suites;
  return suites;
}

suite_registrar::suite_registrar(char const* name, int order, char const* help, suite_fn run)
{
  registry().push_back({name, order, help, std::move(run)});
}

}  // namespace tapeflow::bench

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

double median(std::vector<double> samples)
{
  TAPEFLOW_EXPECTS(!samples.empty(), "a median needs at least one sample");
  std::sort(samples.begin(), samples.end());
  std::size_t const m = samples.size() / 2;
  return samples.size() % 2 == 1 ? samples[m] : 0.5 * (samples[m - 1] + samples[m]);
}

stopwatch::stopwatch(backend kind, stream_view stream) : kind_(kind), stream_(stream), start_(kind) {}

void stopwatch::start()
{
  start_.record(stream_);
  used_ = 0;
  started_ = true;
}

void stopwatch::lap()
{
  TAPEFLOW_EXPECTS(started_, "stopwatch::lap() before start()");
  if (used_ == laps_.size()) { laps_.emplace_back(kind_); }
  laps_[used_++].record(stream_);
}

std::vector<double> stopwatch::read()
{
  TAPEFLOW_EXPECTS(started_ && used_ > 0, "a timed body must call start() and then lap() at least once");
  std::vector<double> ms;
  ms.reserve(used_);
  for (std::size_t i = 0; i < used_; ++i) { ms.push_back(elapsed_ms(start_, laps_[i])); }
  started_ = false;
  return ms;
}

context::context(backend kind, settings cfg)
  : kind_(kind), device_(query_device_limits(kind)), cfg_(std::move(cfg))
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
  timing const t = measure([&](stopwatch& sw) {
    sw.start();
    b.copy_from(a, sw.stream());
    sw.lap();
  });
  d2d_GBps_ = 2.0 * static_cast<double>(bytes) / (t.total_ms * 1e6);  // bytes read + bytes written
  return d2d_GBps_;
}

std::size_t context::size(std::string const& key, std::size_t full, std::size_t quick_value) const
{
  auto const it = cfg_.params.find(key);
  if (it == cfg_.params.end()) { return cfg_.quick ? quick_value : full; }
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

std::string context::text(std::string const& key, std::string const& fallback) const
{
  auto const it = cfg_.params.find(key);
  return it == cfg_.params.end() ? fallback : it->second;
}

timing context::measure(std::function<void(stopwatch&)> const& body)
{
  // `--set <suite>.warmup=N` / `--set <suite>.repeats=N` override the run's counts for one suite.
  auto const count = [&](char const* what, int fallback) {
    std::size_t const v = size(suite_ + "." + what, static_cast<std::size_t>(fallback), static_cast<std::size_t>(fallback));
    return static_cast<int>(v);
  };
  return measure(count("warmup", cfg_.warmup), count("repeats", cfg_.repeats), body);
}

timing context::measure(int warmup, int repeats, std::function<void(stopwatch&)> const& body)
{
  TAPEFLOW_EXPECTS(warmup >= 0 && repeats >= 1, "measure() needs warmup >= 0 and repeats >= 1");
  stopwatch sw(kind_, {});
  std::vector<double> totals;
  std::vector<std::vector<double>> laps;
  for (int run = 0; run < warmup + repeats; ++run) {
    body(sw);
    std::vector<double> const ms = sw.read();
    if (run < warmup) { continue; }
    TAPEFLOW_EXPECTS(laps.empty() || laps.size() == ms.size(), "a timed body must lap the same number of times");
    laps.resize(ms.size());
    for (std::size_t i = 0; i < ms.size(); ++i) {
      laps[i].push_back(i == 0 ? ms[0] : ms[i] - ms[i - 1]);
    }
    totals.push_back(ms.back());
  }
  timing t;
  t.total_ms = median(totals);
  for (auto& l : laps) { t.laps_ms.push_back(median(l)); }
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
  registry().push_back({name, order, help, run});
}

}  // namespace tapeflow::bench

// SPDX-License-Identifier: Apache-2.0
// Allen–Cahn timing on one GPU: primal vs gradient (store tier) for each tile-pipeline variant,
// with the same-run device-to-device copy bandwidth as the physical reference. Medians of
// warmed-up, CUDA-event-timed runs; writes one results file in the design brief's format.
//
//   tapeflow_bench [--n 4096] [--steps 50] [--warmup 2] [--repeats 10] [--dtype f32|f64]
//                  [--suite all|foundation|tiers] [--tiers-n 8192] [--tiers-steps 100]
//                  [--tiers-repeats 3] [--commit SHA] [--out bench/results/<date>-<device>.json]
#include "json.hpp"

#include <allen_cahn/cuda_step.cuh>
#include <tapeflow/chain.hpp>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/tiers.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace tapeflow;
namespace ac = tapeflow::workloads::allen_cahn;

struct event {
  cudaEvent_t handle{};
  event() { TAPEFLOW_CUDA_TRY(cudaEventCreate(&handle)); }
  ~event() { TAPEFLOW_ASSERT_CUDA_SUCCESS(cudaEventDestroy(handle)); }
  event(event const&) = delete;
  event& operator=(event const&) = delete;
  void record(cudaStream_t s) { TAPEFLOW_CUDA_TRY(cudaEventRecord(handle, s)); }
};

float elapsed_ms(event& start, event& stop)
{
  TAPEFLOW_CUDA_TRY(cudaEventSynchronize(stop.handle));
  float ms = 0;
  TAPEFLOW_CUDA_TRY(cudaEventElapsedTime(&ms, start.handle, stop.handle));
  return ms;
}

double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  std::size_t const m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

/// Median over `repeats` (after `warmup`) of a timed region; `body` records its own events and
/// returns the milliseconds it measured.
double timed(int warmup, int repeats, std::function<double()> const& body)
{
  for (int i = 0; i < warmup; ++i) { static_cast<void>(body()); }
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) { samples.push_back(body()); }
  return median(samples);
}

struct settings {
  std::size_t n{4096};
  std::size_t steps{50};
  int warmup{2};
  int repeats{10};
  std::string suite{"all"};      // foundation | tiers | all
  std::size_t tiers_n{8192};
  std::size_t tiers_steps{100};
  int tiers_repeats{3};
  std::string dtype{"f32"};
  std::string commit{"unknown"};
  std::string out;
};

std::string slug(std::string text)
{
  std::string s;
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!s.empty() && s.back() != '-') {
      s += '-';
    }
  }
  while (!s.empty() && s.back() == '-') { s.pop_back(); }
  return s;
}

double d2d_copy_gbps(settings const& cfg)
{
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  TAPEFLOW_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::size_t const bytes = std::min<std::size_t>(std::size_t{1} << 30, free_bytes / 4);
  device_buffer a(backend::cuda, bytes);
  device_buffer b(backend::cuda, bytes);
  a.fill(1, {});
  event start, stop;
  double const ms = timed(cfg.warmup, cfg.repeats, [&] {
    start.record(nullptr);
    TAPEFLOW_CUDA_TRY(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, nullptr));
    stop.record(nullptr);
    return static_cast<double>(elapsed_ms(start, stop));
  });
  return 2.0 * static_cast<double>(bytes) / (ms * 1e6);  // bytes read + bytes written
}

template <class T>
double primal_ms(settings const& cfg, std::vector<T> const& u0, int sms)
{
  std::size_t const bytes = u0.size() * sizeof(T);
  device_buffer a(backend::cuda, bytes);
  device_buffer b(backend::cuda, bytes);
  ac::coefficients<T> const k{T(0.05), T(1)};
  event start, stop;
  return timed(cfg.warmup, cfg.repeats, [&] {
    a.upload(u0.data(), bytes, {});
    start.record(nullptr);
    for (std::size_t s = 0; s < cfg.steps; ++s) {
      ac::detail::cuda_primal_step(a.data_as<T>(), b.data_as<T>(), cfg.n, k, sms, {});
      std::swap(a, b);
    }
    stop.record(nullptr);
    return static_cast<double>(elapsed_ms(start, stop));
  });
}

struct gradient_timing {
  double grad_ms;
  double forward_ms;
  double reverse_ms;
  chain_stats stats;
  std::size_t peak_device_bytes;
};

template <class T>
gradient_timing gradient_ms(settings const& cfg, std::vector<T> const& u0, int sms, chain_options options)
{
  std::size_t const bytes = u0.size() * sizeof(T);
  options.kind = backend::cuda;
  chain<ac::detail::cuda_step<T>> c(ac::detail::cuda_step<T>{cfg.n, {T(0.05), T(1)}, sms}, cfg.steps, options);
  device_buffer state(backend::cuda, bytes);
  device_buffer adjoint(backend::cuda, bytes);
  event start, middle, stop;
  std::vector<double> forward, reverse;
  reset_device_memory_peak(backend::cuda);
  double const grad = timed(cfg.warmup, cfg.repeats, [&] {
    state.upload(u0.data(), bytes, {});
    start.record(nullptr);
    c.forward(state);
    adjoint.copy_from(state, {});  // dL/du_T = u_T
    middle.record(nullptr);
    c.reverse(adjoint);
    stop.record(nullptr);
    double const total = elapsed_ms(start, stop);
    forward.push_back(elapsed_ms(start, middle));
    reverse.push_back(elapsed_ms(middle, stop));
    return total;
  });
  forward.erase(forward.begin(), forward.begin() + cfg.warmup);
  reverse.erase(reverse.begin(), reverse.begin() + cfg.warmup);
  return {grad, median(forward), median(reverse), c.stats(), device_memory_usage(backend::cuda).peak_bytes};
}

/// The fields every gradient row has (the brief's results format).
tapeflow::cli::json_object gradient_row(std::string const& variant, std::string const& size, double primal,
                                        gradient_timing const& g)
{
  tapeflow::cli::json_object row;
  row.add("workload", "allen-cahn")
    .add("variant", variant)
    .add("size", size)
    .add("primal_ms", primal)
    .add("grad_ms", g.grad_ms)
    .add("grad_over_primal", g.grad_ms / primal)
    .add("forward_ms", g.forward_ms)
    .add("reverse_ms", g.reverse_ms)
    .add("tape_bytes", g.stats.tape_bytes)
    .add("peak_device_bytes", g.peak_device_bytes);
  return row;
}

/// Many small layers (n = 256, T = 500): launch overhead dominates; the captured reverse (a CUDA
/// Graph over a resident tape) against the plain store tier.
template <class T>
std::string launch_bound_rows(settings const& cfg, device_limits const& device)
{
  settings small = cfg;
  small.n = 256;
  small.steps = 500;
  std::vector<T> u0(small.n * small.n);
  std::mt19937_64 rng(20261123);
  std::uniform_real_distribution<double> dist(-0.9, 0.9);
  for (T& v : u0) { v = static_cast<T>(dist(rng)); }
  double const primal = primal_ms<T>(small, u0, device.multiprocessors);
  std::string const size = "256x256 T500 " + cfg.dtype;
  std::string rows;
  for (bool graph : {false, true}) {
    chain_options o;
    o.policy = tape_policy::store;
    o.capture_reverse = graph;
    char const* name = graph ? "small-layers-store-graph" : "small-layers-store";
    gradient_timing const g = gradient_ms<T>(small, u0, device.multiprocessors, o);
    std::printf("%-28s grad %.3f ms (forward %.3f, reverse %.3f), grad/primal %.2f\n", name, g.grad_ms,
                g.forward_ms, g.reverse_ms, g.grad_ms / primal);
    tapeflow::cli::json_object row = gradient_row(name, size, primal, g);
    row.add("graph_captured", g.stats.graph_captured).add("plan", g.stats.plan.describe());
    rows += ",\n    " + row.str();
  }
  return rows;
}

/// Allen–Cahn at the tiers size under budgets of 100, 50, 25 and 10 % of the full tape with each
/// policy: grad time, stall, recompute, peak device tape bytes.
template <class T>
std::string tier_rows(settings const& cfg, device_limits const& device, bandwidths const& bw, bool first)
{
  settings tcfg = cfg;
  tcfg.n = cfg.tiers_n;
  tcfg.steps = cfg.tiers_steps;
  tcfg.repeats = cfg.tiers_repeats;
  tcfg.warmup = 1;
  std::vector<T> u0(tcfg.n * tcfg.n);
  std::mt19937_64 rng(20261122);
  std::uniform_real_distribution<double> dist(-0.9, 0.9);
  for (T& v : u0) { v = static_cast<T>(dist(rng)); }
  double const primal = primal_ms<T>(tcfg, u0, device.multiprocessors);
  std::string const size = std::to_string(tcfg.n) + "x" + std::to_string(tcfg.n) + " T" +
                           std::to_string(tcfg.steps) + " " + cfg.dtype;
  std::size_t const tape = tcfg.steps * ac::records_for<T>(tcfg.n * tcfg.n) * sizeof(ac::record<T>);
  std::string rows;
  for (int percent : {100, 50, 25, 10}) {
    for (tape_policy policy : {tape_policy::store, tape_policy::automatic, tape_policy::offload, tape_policy::recompute}) {
      if (policy == tape_policy::store && percent != 100) { continue; }
      chain_options o;
      o.policy = policy;
      o.budget_bytes = tape / 100 * static_cast<std::size_t>(percent);
      o.bw = bw;
      o.measure_time = true;
      std::string const name = "tiers-" + std::string{to_string(policy)} + "-" + std::to_string(percent) + "pct";
      gradient_timing g{};
      try {
        g = gradient_ms<T>(tcfg, u0, device.multiprocessors, o);
      } catch (budget_error const& e) {
        std::printf("%-28s does not fit: %s\n", name.c_str(), e.what());
        continue;
      }
      std::printf("%-28s grad %.1f ms, grad/primal %.2f, stall %.1f ms, recomputed %zu steps (%.1f ms), "
                  "peak tape %.2f GiB\n",
                  name.c_str(), g.grad_ms, g.grad_ms / primal, g.stats.stall_ms, g.stats.recompute_steps,
                  g.stats.recompute_ms, static_cast<double>(g.stats.peak_tape_bytes) / double(1 << 30));
      tapeflow::cli::json_object row = gradient_row(name, size, primal, g);
      row.add("budget_bytes", o.budget_bytes)
        .add("peak_tape_bytes", g.stats.peak_tape_bytes)
        .add("stall_ms", g.stats.stall_ms)
        .add("prefetches", g.stats.prefetches)
        .add("recompute_steps", g.stats.recompute_steps)
        .add("recompute_ms", g.stats.recompute_ms)
        .add("h2d_copy_GBps", bw.h2d_GBps)
        .add("plan", g.stats.tiers.describe());
      rows += (rows.empty() && first ? "" : ",\n    ") + row.str();
    }
  }
  return rows;
}

template <class T>
int run(settings const& cfg)
{
  device_limits const device = query_device_limits(backend::cuda);
  int driver = 0;
  TAPEFLOW_CUDA_TRY(cudaDriverGetVersion(&driver));
  std::printf("device: %s (sm_%d, %d SMs), driver %d\n", device.name.c_str(), device.compute_capability,
              device.multiprocessors, driver);

  std::vector<T> u0(cfg.n * cfg.n);
  std::mt19937_64 rng(20261121);
  std::uniform_real_distribution<double> dist(-0.9, 0.9);
  for (T& v : u0) { v = static_cast<T>(dist(rng)); }

  double const d2d = d2d_copy_gbps(cfg);
  std::printf("device-to-device copy: %.1f GB/s (read + write)\n", d2d);
  double const primal = primal_ms<T>(cfg, u0, device.multiprocessors);
  std::printf("primal: %.3f ms for %zu steps\n", primal, cfg.steps);

  struct variant {
    char const* name;
    chain_options options;
  };
  chain_options async_store;
  async_store.policy = tape_policy::store;
  chain_options plain_store = async_store;
  plain_store.pipeline.force_plain = true;
  std::vector<variant> const variants{{"tapeflow-store-cp.async", async_store},
                                      {"tapeflow-store-register-db", plain_store}};

  std::string const size = std::to_string(cfg.n) + "x" + std::to_string(cfg.n) + " T" + std::to_string(cfg.steps) +
                           " " + cfg.dtype;
  std::string rows;
  for (variant const& v : variants) {
    if (cfg.suite == "tiers") { break; }
    gradient_timing const g = gradient_ms<T>(cfg, u0, device.multiprocessors, v.options);
    double const state_bytes = static_cast<double>(u0.size() * sizeof(T));
    // Least traffic of a taped gradient: the tape written and read once, and each step's state
    // read and written once in the forward and in the reverse.
    double const moved = 2.0 * static_cast<double>(g.stats.tape_bytes) +
                         4.0 * state_bytes * static_cast<double>(cfg.steps);
    double const gbps = moved / (g.grad_ms * 1e6);
    std::printf("%-28s grad %.3f ms (forward %.3f, reverse %.3f), grad/primal %.2f, %.1f GB/s, tape %zu B\n"
                "%-28s plan: %s\n",
                v.name, g.grad_ms, g.forward_ms, g.reverse_ms, g.grad_ms / primal, gbps, g.stats.tape_bytes, "",
                g.stats.plan.describe().c_str());
    tapeflow::cli::json_object row = gradient_row(v.name, size, primal, g);
    row.add("achieved_GBps", gbps)
      .add("plan", g.stats.plan.describe());
    rows += (rows.empty() ? "" : ",\n    ") + row.str();
  }

  if (cfg.suite != "tiers") { rows += launch_bound_rows<T>(cfg, device); }

  bandwidths const bw = measure_bandwidths(backend::cuda, std::size_t{256} << 20);
  std::printf("pinned copies: H2D %.1f GB/s, D2H %.1f GB/s\n", bw.h2d_GBps, bw.d2h_GBps);
  if (cfg.suite != "foundation") { rows += tier_rows<T>(cfg, device, bw, rows.empty()); }

  std::time_t const now = std::time(nullptr);
  char date[16];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  tapeflow::cli::json_object head;
  head.add("device", device.name)
    .add("driver", driver)
    .add("commit", cfg.commit)
    .add("date", std::string{date})
    .add("d2d_copy_GBps", d2d)
    .add("h2d_copy_GBps", bw.h2d_GBps)
    .add("d2h_copy_GBps", bw.d2h_GBps)
    .add("warmup", cfg.warmup)
    .add("repeats", cfg.repeats);
  std::string text = head.str();
  text.pop_back();
  text += ",\n  \"rows\": [\n    " + rows + "\n  ]\n}\n";
  std::string const path =
    cfg.out.empty() ? "bench/results/" + std::string{date} + "-" + slug(device.name) + ".json" : cfg.out;
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) {
    std::fprintf(stderr, "tapeflow_bench: cannot write %s\n", path.c_str());
    return 1;
  }
  std::printf("wrote %s\n", path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv)
{
  settings cfg;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string const flag = argv[i];
      if (i + 1 >= argc) { throw std::invalid_argument("option " + flag + " needs a value"); }
      std::string const value = argv[++i];
      if (flag == "--n") {
        cfg.n = std::stoul(value);
      } else if (flag == "--steps") {
        cfg.steps = std::stoul(value);
      } else if (flag == "--warmup") {
        cfg.warmup = std::stoi(value);
      } else if (flag == "--repeats") {
        cfg.repeats = std::stoi(value);
      } else if (flag == "--dtype") {
        cfg.dtype = value;
      } else if (flag == "--commit") {
        cfg.commit = value;
      } else if (flag == "--suite") {
        cfg.suite = value;
      } else if (flag == "--tiers-n") {
        cfg.tiers_n = std::stoul(value);
      } else if (flag == "--tiers-steps") {
        cfg.tiers_steps = std::stoul(value);
      } else if (flag == "--tiers-repeats") {
        cfg.tiers_repeats = std::stoi(value);
      } else if (flag == "--out") {
        cfg.out = value;
      } else {
        throw std::invalid_argument("unknown option " + flag);
      }
    }
    if (cfg.n == 0 || cfg.steps == 0 || cfg.repeats < 1 || cfg.warmup < 0 ||
        (cfg.dtype != "f32" && cfg.dtype != "f64") ||
        (cfg.suite != "all" && cfg.suite != "foundation" && cfg.suite != "tiers")) {
      throw std::invalid_argument("need --n >= 1, --steps >= 1, --repeats >= 1, --warmup >= 0, --dtype f32|f64");
    }
  } catch (std::exception const& e) {
    std::fprintf(stderr, "tapeflow_bench: %s\n", e.what());
    return 2;
  }
  if (!backend_available(backend::cuda)) {
    std::fprintf(stderr, "tapeflow_bench: %s\n", backend_unavailable_reason(backend::cuda).c_str());
    return 2;
  }
  try {
    return cfg.dtype == "f32" ? run<float>(cfg) : run<double>(cfg);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "tapeflow_bench: failed: %s\n", e.what());
    return 1;
  }
}

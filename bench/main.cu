// SPDX-License-Identifier: Apache-2.0
// tapeflow_bench: every benchmark suite on one GPU in one run, with the same-run device-to-device
// copy bandwidth as the physical reference; writes bench/results/<date>-<device>.json in the
// design brief's format (docs/benchmarks.md).
//
//   tapeflow_bench [--suite all|NAME[,NAME...]] [--quick] [--warmup 2] [--repeats 10]
//                  [--set key=value ...] [--commit SHA] [--out FILE] [--list]
#include "harness.hpp"

#include <tapeflow/workloads/common/json.hpp>

#include <tapeflow/device/platform.hpp>
#include <tapeflow/error.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace tapeflow;

struct command_line {
  bench::settings cfg;
  std::vector<std::string> suites;  // empty: all
  std::string commit{"unknown"};
  std::string out;
  bool list{false};
};

std::string slug(std::string const& text)
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

int to_int(std::string const& flag, std::string const& value)
{
  std::size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(value, &used);
  } catch (std::exception const&) {
    used = 0;
  }
  if (used != value.size() || value.empty()) { throw std::invalid_argument(flag + " needs an integer, got '" + value + "'"); }
  return v;
}

command_line parse(int argc, char** argv)
{
  command_line c;
  for (int i = 1; i < argc; ++i) {
    std::string const flag = argv[i];
    if (flag == "--quick") {
      c.cfg.quick = true;
      continue;
    }
    if (flag == "--list") {
      c.list = true;
      continue;
    }
    if (i + 1 >= argc) { throw std::invalid_argument("option " + flag + " needs a value"); }
    std::string const value = argv[++i];
    if (flag == "--suite") {
      if (value != "all") {
        std::stringstream ss(value);
        for (std::string name; std::getline(ss, name, ',');) { c.suites.push_back(name); }
      }
    } else if (flag == "--warmup") {
      c.cfg.warmup = to_int(flag, value);
    } else if (flag == "--repeats") {
      c.cfg.repeats = to_int(flag, value);
    } else if (flag == "--set") {
      auto const eq = value.find('=');
      if (eq == std::string::npos || eq == 0) { throw std::invalid_argument("--set needs key=value, got '" + value + "'"); }
      c.cfg.params[value.substr(0, eq)] = value.substr(eq + 1);
    } else if (flag == "--commit") {
      c.commit = value;
    } else if (flag == "--out") {
      c.out = value;
    } else {
      throw std::invalid_argument("unknown option " + flag);
    }
  }
  if (c.cfg.warmup < 0 || c.cfg.repeats < 1) { throw std::invalid_argument("need --warmup >= 0 and --repeats >= 1"); }
  for (std::string const& name : c.suites) {
    auto const& all = bench::registry();
    if (std::none_of(all.begin(), all.end(), [&](bench::suite const& s) { return s.name == name; })) {
      throw std::invalid_argument("unknown suite '" + name + "' (tapeflow_bench --list names them)");
    }
  }
  return c;
}

/// The results file as it stands: the head and every row so far.
std::string results_text(bench::context const& ctx, command_line const& c, int driver, double d2d, std::string const& date,
                         std::vector<std::string> const& completed)
{
  cli::json_object head;
  head.add("device", ctx.device().name)
    .add("driver", "tapeflow_bench")
    .add("cuda_driver", driver)
    .add("commit", c.commit)
    .add("date", date)
    .add("d2d_copy_GBps", d2d)
    .add("warmup", c.cfg.warmup)
    .add("repeats", c.cfg.repeats)
    .add("quick", c.cfg.quick);
  std::string suites;
  for (std::string const& name : completed) { suites += (suites.empty() ? "" : ",") + name; }
  head.add("suites_completed", suites);
  std::string overrides;
  for (auto const& [key, value] : c.cfg.params) { overrides += (overrides.empty() ? "" : ",") + key + "=" + value; }
  head.add("settings", overrides);
  std::string text = head.str();
  text.pop_back();
  text += ",\n  \"rows\": [";
  for (std::size_t i = 0; i < ctx.rows().size(); ++i) {
    text += (i == 0 ? "\n    " : ",\n    ") + ctx.rows()[i].json();
  }
  text += "\n  ]\n}\n";
  return text;
}

/// Writes `text` to `path` through a temporary file and a rename, so a run cut off mid-write never
/// leaves a torn results file.
bool write_atomically(std::string const& path, std::string const& text)
{
  std::string const tmp = path + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) { return false; }
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

int run(command_line const& c)
{
  backend const kind = gpu_backend;
  bench::context ctx(kind, c.cfg);
  int driver = 0;
  TAPEFLOW_CUDA_TRY(cudaDriverGetVersion(&driver));
  std::printf("device: %s (cc %d, %d SMs), driver %d%s\n", ctx.device().name.c_str(), ctx.device().compute_capability,
              ctx.device().multiprocessors, driver, c.cfg.quick ? ", quick sizes" : "");
  double const d2d = ctx.d2d_GBps();
  std::printf("device-to-device copy: %.1f GB/s (bytes read + written)\n", d2d);

  std::time_t const now = std::time(nullptr);
  char date[16];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  std::string const path =
    c.out.empty() ? "bench/results/" + std::string{date} + "-" + slug(ctx.device().name) + ".json" : c.out;

  auto suites = bench::registry();
  std::stable_sort(suites.begin(), suites.end(), [](auto const& a, auto const& b) { return a.order < b.order; });
  std::vector<std::string> failed;
  std::vector<std::string> completed;
  for (bench::suite const& s : suites) {
    if (!c.suites.empty() && std::find(c.suites.begin(), c.suites.end(), s.name) == c.suites.end()) { continue; }
    std::printf("\n== %s: %s\n", s.name.c_str(), s.help.c_str());
    std::fflush(stdout);
    auto const began = std::chrono::steady_clock::now();
    ctx.begin_suite(s.name);
    try {
      s.run(ctx);
      completed.push_back(s.name);
    } catch (std::exception const& e) {
      // One suite's failure is reported and the run goes on; the exit status says so.
      std::fprintf(stderr, "tapeflow_bench: suite %s failed: %s\n", s.name.c_str(), e.what());
      failed.push_back(s.name);
    }
    double const seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    std::printf("== %s: %.1f s\n", s.name.c_str(), seconds);
    // The file is rewritten after every suite: a run stopped by a time limit keeps what it measured.
    if (!write_atomically(path, results_text(ctx, c, driver, d2d, date, completed))) {
      std::fprintf(stderr, "tapeflow_bench: cannot write %s\n", path.c_str());
      return 1;
    }
    std::fflush(stdout);
  }

  std::printf("\nwrote %s (%zu rows)\n", path.c_str(), ctx.rows().size());
  if (!failed.empty()) {
    std::fprintf(stderr, "tapeflow_bench: %zu suite(s) failed\n", failed.size());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv)
{
  command_line c;
  try {
    c = parse(argc, argv);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "tapeflow_bench: %s\n", e.what());
    return 2;
  }
  if (c.list) {
    auto suites = bench::registry();
    std::stable_sort(suites.begin(), suites.end(), [](auto const& a, auto const& b) { return a.order < b.order; });
    for (auto const& s : suites) { std::printf("%-14s %s\n", s.name.c_str(), s.help.c_str()); }
    return 0;
  }
  if (!backend_available(gpu_backend)) {
    std::fprintf(stderr, "tapeflow_bench: no GPU: %s\n", backend_unavailable_reason(gpu_backend).c_str());
    return 2;
  }
  try {
    return run(c);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "tapeflow_bench: failed: %s\n", e.what());
    return 1;
  }
}

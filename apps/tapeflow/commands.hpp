// SPDX-License-Identifier: Apache-2.0
// The four commands of a workload, made from its description (kernels/common/describe.hpp):
//   init   random inputs in the file format `run` reads
//   run    inputs in, the gradient through the tape, the gradient file out (--json: the stats)
//   plan   the tape's layout and tiers, without running
//   bench  the primal against the gradient: device-resident, event-timed medians
#pragma once

#include "common.hpp"

#include <tapeflow/workloads/common/describe.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace tapeflow::cli {

template <class D>
class commands {
 public:
  using described = workloads::described<D>;
  using problem = typename D::problem;
  using options = typename D::options;

  /// The workload's entry in the CLI's table.
  static workload const& entry()
  {
    static workload const w{D::text.name,
                            D::text.summary,
                            D::text.model,
                            D::text.files,
                            described::problem_flags(),
                            described::option_flags(),
                            D::tape,
                            D::precisions == workloads::precision::f64_only,
                            described::captures_reverse,
                            init,
                            run,
                            plan,
                            bench};
    return w;
  }

 private:
  static options options_of(parsed_args const& args)
  {
    if (launched_ranks() && launched_ranks()->size() > 1 && !described::decomposes) {
      throw usage_error(std::string{D::text.name} + " does not run cut over MPI ranks; run it as one process "
                        "(allen-cahn does: docs/distributed.md)");
    }
    options o;
    o.kind = backend_of(args);
    if constexpr (D::tape == workloads::tape_kind::chain) { read_run_options(args, o); }
    if constexpr (D::tape != workloads::tape_kind::arena) { o.pipeline = pipeline_of(args); }
    described::read_options(args, o);
    return o;
  }

  /// The problem and its inputs' parts, for the message of a wrong-sized input file.
  static std::string layout_of(problem const& p, std::string const& dtype)
  {
    return described::sizes(p) + ": " + parts_of(D::inputs(p), dtype);
  }

  static int init(parsed_args const& args)
  {
    problem const p = described::problem_of(args, true);
    std::string const dtype = dtype_of(args, entry());
    std::string const out = args.text("out");
    require_writable(args, {"out"});
    described::with_precision(dtype, [&](auto t) {
      write_values(out, D::template random_inputs<decltype(t)>(p, seed_of(args)));
      return 0;
    });
    std::printf("wrote %s: %s (seed %llu)\n", out.c_str(), parts_of(D::inputs(p), dtype).c_str(),
                static_cast<unsigned long long>(seed_of(args)));
    return 0;
  }

  static int run(parsed_args const& args)
  {
    problem const p = described::problem_of(args, false);
    options o = options_of(args);
    require_writable(args, {"grad-out", "json"});
    progress_bar const bar(args);
    o.progress = bar.callback();
    std::string const dtype = dtype_of(args, entry());
    return described::with_precision(dtype, [&](auto t) {
      using T = decltype(t);
      auto const parts = D::inputs(p);
      auto const inputs =
        workloads::split_values(read_values<T>(args.text("input"), workloads::total_values(parts), layout_of(p, dtype)),
                                parts);
      std::uint64_t read = 0;  // what this rank read, for the ranks to compare
      if (launched_ranks()) {
        read = distributed::fingerprint(nullptr, 0);
        for (auto const& part : inputs) { read = distributed::fingerprint(part.data(), part.size() * sizeof(T), read); }
      }
      start_together(read);  // every rank has its arguments and inputs
      print_header(command::run, entry(), described::sizes(p), dtype, o.kind);
      workloads::segment_measurement trials;
      o = workloads::settle_segment<D, T>(p, o, &trials);
      print_segment_trials(trials);
      print_plan(D::template plan<T>(p, o));
      auto const start = std::chrono::steady_clock::now();
      reset_device_memory_peak(o.kind);
      auto session = D::template open<T>(p, o);
      workloads::outcome<T> const r = workloads::gradient_of(*session, workloads::views_of(inputs), o.stream);
      finish_together();  // rank 0 holds the gradient; what is left, each rank does alone
      double const wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      std::printf("loss:   %.9e\n", static_cast<double>(r.loss));
      if (!std::isfinite(static_cast<double>(r.loss))) {  // finite inputs (read_values): the model diverged
        std::fprintf(stderr, "tapeflow: warning: the loss is not finite: the model diverged over these steps; "
                             "the gradient is written all the same\n");
      }
      print_summary(r.report, o.kind);
      write_values(args.text("grad-out"), r.gradients);
      std::printf("wrote %s: %s\n", args.text("grad-out").c_str(), parts_of(D::gradients(p), dtype).c_str());
      if (args.has("json")) {
        json_object stats;
        stats.add("workload", std::string{described::name()})
          .add("problem", described::problem_json(p))
          .add("dtype", dtype)
          .add("backend", std::string{to_string(o.kind)})
          .add("device", query_device_limits(o.kind).name)
          .add("loss", static_cast<double>(r.loss))
          .add("gradient_ms", wall_ms);
        add_report(stats, r.report, o.kind);
        if (!trials.trials.empty()) { stats.add("segment_trials", trials.json()); }
        stats.add("options", given_options(args));
        write_text(args.text("json"), stats.str());
      }
      return 0;
    });
  }

  static int plan(parsed_args const& args)
  {
    problem const p = described::problem_of(args, false);
    options const o = options_of(args);
    require_writable(args, {"json"}, true);
    std::string const dtype = dtype_of(args, entry());
    bool const quiet = args.has("json") && args.text("json") == "-";  // standard output is the JSON
    start_together();
    if (!quiet) { print_header(command::plan, entry(), described::sizes(p), dtype, o.kind); }
    workloads::segment_measurement trials;  // --segment measure runs its trials here
    workloads::tape_report const planned = described::with_precision(dtype, [&](auto t) {
      using T = decltype(t);
      return D::template plan<T>(p, workloads::settle_segment<D, T>(p, o, &trials));
    });
    finish_together();
    if (!quiet) {
      print_segment_trials(trials);
      print_plan(planned);
      if (planned.chain) { print_layer_tiers(*planned.chain); }
    }
    if (planned.chain) { write_plan_json(args, entry(), dtype, o.kind, *planned.chain, trials); }
    return 0;
  }

  static int bench(parsed_args const& args)
  {
    if (launched_ranks() && launched_ranks()->size() > 1) {
      throw usage_error("bench times one process; run it without mpirun");
    }
    problem const p = described::problem_of(args, false);
    options o = options_of(args);
    if constexpr (D::tape == workloads::tape_kind::chain) { o.measure_time = false; }  // events time it
    std::string const dtype = dtype_of(args, entry());
    int warmup = 0;
    int repeats = 0;
    bench_counts(args, warmup, repeats);
    require_writable(args, {"json"});
    print_header(command::bench, entry(), described::sizes(p), dtype, o.kind);
    std::printf("        %d warm-up + %d timed runs\n", warmup, repeats);
    return described::with_precision(dtype, [&](auto t) {
      using T = decltype(t);
      auto const inputs = D::template random_inputs<T>(p, seed_of(args));
      start_together();
      workloads::segment_measurement trials;
      options const settled = workloads::settle_segment<D, T>(p, o, &trials);
      print_segment_trials(trials);
      print_plan(D::template plan<T>(p, settled));
      reset_device_memory_peak(o.kind);
      auto session = D::template open<T>(p, settled);
      workloads::bench_result const r =
        workloads::benchmark(*session, workloads::views_of(inputs), o.stream, warmup, repeats);
      finish_together();
      std::printf("forward %.3f ms (augmented forward / primal: %.2f), reverse %.3f ms; after the first gradient "
                  "%zu allocations (%zu bytes)\n",
                  r.forward_ms, r.forward_ms / r.primal_ms, r.reverse_ms, r.repeat_allocations,
                  r.repeat_allocated_bytes);
      std::string variant = "tapeflow";
      if (r.report.chain) { variant += "-" + std::string{to_string(r.report.chain->policy)}; }
      if (std::string const own = described::variant_of(o); !own.empty()) { variant += "-" + own; }
      write_bench_row(args, entry(), variant, D::size_key(p, dtype), o.kind, r, [&](json_object& row) {
        row.add("repeat_allocations", r.repeat_allocations).add("repeat_allocated_bytes", r.repeat_allocated_bytes);
        if (!trials.trials.empty()) { row.add("segment_trials", trials.json()); }
        described::bench_facts(p, r.report, row);
      });
      return 0;
    });
  }

  /// "dL/du0 (262144) f32 values".
  static std::string parts_of(std::vector<workloads::array_spec> const& parts, std::string const& dtype)
  {
    std::string text;
    for (workloads::array_spec const& a : parts) {
      text += (text.empty() ? "" : ", ") + a.name + " (" + std::to_string(a.values) + ")";
    }
    return text + " " + dtype + " values";
  }

  /// The workload's own options as given on the command line.
  static json_object given_options(parsed_args const& args)
  {
    json_object given;
    for (flag_spec const& f : described::option_flags()) {
      if (args.has(f.name)) { given.add(f.name, args.text(f.name)); }
    }
    return given;
  }
};

}  // namespace tapeflow::cli

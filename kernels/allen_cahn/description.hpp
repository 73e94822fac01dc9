// SPDX-License-Identifier: Apache-2.0
// Allen–Cahn's description (kernels/common/describe.hpp): its CLI, benchmark suites and typed tests.
#pragma once

#include "allen_cahn.hpp"
#include "stencil.hpp"

#include <tapeflow/workloads/common/describe.hpp>
#include <tapeflow/workloads/common/state_chain.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tapeflow::workloads::allen_cahn {

struct description {
  static constexpr workload_text text{
    "allen-cahn", "Allen-Cahn on a periodic n x n grid: dL/du0 for L = 0.5 * sum(u_T^2)",
    "Computes L = 0.5 * sum(u_T^2) after T steps of u' = u + dt (eps2 lap(u) + u - u^3)\n"
    "(dt = 0.05, eps2 = 1, periodic n x n grid) and its gradient dL/du0 through the tape.",
    "  IN.bin   u0: n*n values of --dtype, row-major (cell (i, j) at i*n + j)\n"
    "  G.bin    dL/du0: the same layout"};
  static constexpr precision precisions = precision::f32_f64;
  static constexpr tape_kind tape = tape_kind::chain;
  /// Under mpirun, the grid is cut into slabs over the ranks (docs/distributed.md).
  static constexpr bool decomposes = true;
  using problem = allen_cahn::problem;
  using options = allen_cahn::options;
  static constexpr auto fields = std::make_tuple(
    count("n", &problem::n, "N", "grid side (the state holds N*N values)", "n", flag_use::shape_required, 1, 1U << 20),
    count("steps", &problem::steps, "T", "time steps", "T", flag_use::required, 1, std::size_t{1} << 32));

  static std::vector<cli::flag_spec> option_flags()
  {
    std::vector<cli::flag_spec> flags{
      {"tape", "values|partials", "what the tape holds per cell: u, or r'(u) by forward-mode duals (default values)"}};
    for (cli::flag_spec& f : segment_flags()) { flags.push_back(std::move(f)); }
    return flags;
  }
  static void read_options(cli::parsed_args const& args, options& o)
  {
    std::string const taped = args.text("tape", "values");
    if (taped != "values" && taped != "partials") {
      throw cli::usage_error("--tape must be values or partials, got '" + taped + "'");
    }
    o.content = taped == "values" ? tape_content::values : tape_content::partials;
    read_segment_options(args, o);
    if (o.segment != 1 && o.content == tape_content::partials) {
      throw cli::usage_error("--segment needs --tape values: a segment's layer is the state itself");
    }
  }
  static void validate(problem const& p) { allen_cahn::validate(p); }
  static std::string size_key(problem const& p, std::string const& dtype)
  {
    return std::to_string(p.n) + "x" + std::to_string(p.n) + " T" + std::to_string(p.steps) + " " + dtype;
  }
  static std::string variant_of(options const& o)
  {
    if (o.content == tape_content::partials) { return "partials"; }
    return segment_variant(o);
  }

  static std::vector<array_spec> inputs(problem const& p) { return {{"u0", p.n * p.n}}; }
  static std::vector<array_spec> gradients(problem const& p) { return {{"dL/du0", p.n * p.n}}; }
  template <class T>
  static std::vector<std::vector<T>> random_inputs(problem const& p, std::uint64_t seed)
  {
    return {random_state<T>(p.n, seed)};
  }
  template <class T>
  static auto open(problem const& p, options const& o) { return allen_cahn::open<T>(p, o); }
  template <class T>
  static tape_report plan(problem const& p, options const& o)
  {
    tape_report r = chain_report(allen_cahn::plan<T>(p, o));
    if (segmented(o)) { report_segments(r, segment_plan_of<T>(p, o)); }
    return r;
  }

  /// The least traffic of its gradient (stencil_bench_bytes).
  static double bench_bytes(problem const& p, tape_report const& r, std::size_t value_bytes)
  {
    return stencil_bench_bytes(r, static_cast<double>(p.n * p.n * value_bytes), p.steps);
  }
  static std::vector<bench_suite<description>> bench_suites();
  static problem test_problem() { return {24, 7}; }

 private:
  static options store_options()
  {
    options o;
    o.policy = tape_policy::store;
    return o;
  }
};

inline std::vector<bench_suite<description>> description::bench_suites()
{
  using case_t = bench_case<description>;
  return {
    {"allen_cahn", 10, "Allen–Cahn 8192² T100: primal vs gradient per pipeline variant and tape content",
     [](bench_sizes const& s, std::string const&) {
       problem const p{s.size("allen-cahn.n", 8192, 512), s.size("allen-cahn.steps", 100, 20)};
       std::vector<case_t> cases{{"tapeflow-store", p, store_options()}};
       cases.push_back({"tapeflow-store-register-db", p, store_options()});
       cases.back().options.pipeline.force_plain = true;
       cases.push_back({"tapeflow-store-bulk", p, store_options()});  // sm_90: tiles staged by the bulk-copy engine
       cases.back().options.pipeline.bulk_copy = true;
       cases.back().runs_on = [](device_limits const& d) { return d.bulk_copy; };
       // Forward mode on the tape: the reaction's partial 1 + dt(1 - 3u^2), computed by duals, instead of u.
       cases.push_back({"tapeflow-store-partials", p, store_options()});
       cases.back().options.content = tape_content::partials;
       // Segments (docs/stencils.md): every k-th state kept, each segment recomputed on chip.
       add_segment_cases(cases, p, store_options(), {0, 2, 4});
       // k = 4 on blocks of 128 and 512 threads instead of 256: a swept level's fixed cost per
       // thread against its cells (docs/benchmarks.md, "Stencil segments: column sweeps").
       for (int threads : {128, 512}) {
         cases.push_back({"tapeflow-segments-k4-t" + std::to_string(threads), p, store_options()});
         cases.back().options.segment = 4;
         cases.back().options.segment_threads = threads;
         cases.back().runs_on = [](device_limits const& d) { return d.kind != backend::cpu; };
       }
       return cases;
     }},
    {"launch_bound", 20, "Allen–Cahn 256² T500: small layers, store vs captured graph",
     [](bench_sizes const& s, std::string const&) {
       problem const p{s.size("launch-bound.n", 256, 128), s.size("launch-bound.steps", 500, 50)};
       std::vector<case_t> cases{{"small-layers-store", p, store_options()}, {"small-layers-store-graph", p, store_options()}};
       cases.back().options.capture_reverse = true;
       return cases;
     }},
    {"tiers", 30, "Allen–Cahn 8192² T100 under 100/50/25/10 % device budgets, every policy",
     [](bench_sizes const& s, std::string const& dtype) {
       problem const p{s.size("tiers.n", 8192, 512), s.size("tiers.steps", 100, 20)};
       std::size_t const tape = with_precision(dtype, [&](auto t) {
         return allen_cahn::plan<decltype(t)>(p, store_options()).tape_bytes;
       });
       std::vector<case_t> cases;
       for (int percent : {100, 50, 25, 10}) {
         for (tape_policy policy :
              {tape_policy::store, tape_policy::automatic, tape_policy::offload, tape_policy::recompute}) {
           if (policy == tape_policy::store && percent != 100) { continue; }
           case_t c{"tiers-" + std::string{to_string(policy)} + "-" + std::to_string(percent) + "pct", p};
           c.options.policy = policy;
           c.options.budget_bytes = tape / 100 * static_cast<std::size_t>(percent);
           c.tier_stats = true;
           c.may_not_fit = true;
           cases.push_back(std::move(c));
         }
       }
       return cases;
     }},
  };
}

}  // namespace tapeflow::workloads::allen_cahn

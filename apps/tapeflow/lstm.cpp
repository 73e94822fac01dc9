// SPDX-License-Identifier: Apache-2.0
// tapeflow init|run|plan|bench lstm
#include "common.hpp"
#include "state_chain.hpp"

#include <lstm/lstm.hpp>

#include <chrono>
#include <cstdio>
#include <random>

namespace tapeflow::cli {
namespace {

namespace ls = workloads::lstm;

constexpr std::size_t max_dim = std::size_t{1} << 24;

/// --lengths L0,L1,...: one count per sequence (the library checks the packing rules).
std::vector<std::size_t> lengths_of(std::string const& text)
{
  std::vector<std::size_t> lengths;
  for (std::string const& item : comma_items(text)) { lengths.push_back(parse_size("lengths", item, false)); }
  return lengths;
}

/// `init` reads the shape alone (the input file is padded to T steps whatever the lengths); the
/// other commands read --lengths too.
ls::problem problem_of(parsed_args const& args)
{
  ls::problem p;
  p.batch = count_of(args, "batch", 1, max_dim);
  p.steps = count_of(args, "steps", 1, max_dim);
  p.input = count_of(args, "input-size", 1, max_dim);
  p.hidden = count_of(args, "hidden", 1, max_dim);
  if (args.has("lengths")) { p.lengths = lengths_of(args.text("lengths")); }
  return p;
}

/// The input file's parts: W, U, b, x, h0, c0.
std::vector<std::size_t> input_parts(ls::problem const& p)
{
  std::size_t const g = 4 * p.hidden;
  return {g * p.input, g * p.hidden, g, p.steps * p.batch * p.input, p.batch * p.hidden, p.batch * p.hidden};
}

std::string sizes_of(ls::problem const& p)
{
  std::string sizes = "B = " + std::to_string(p.batch) + ", T = " + std::to_string(p.steps) +
                      ", I = " + std::to_string(p.input) + ", H = " + std::to_string(p.hidden);
  if (!p.lengths.empty()) {
    std::size_t steps = 0;
    for (std::size_t length : p.lengths) { steps += length; }
    sizes += ", packed: lengths " + std::to_string(p.lengths.front()) + " down to " + std::to_string(p.lengths.back()) +
             ", " + std::to_string(steps) + " sequence steps of " + std::to_string(p.batch * p.steps);
  }
  return sizes;
}

json_object problem_json(ls::problem const& p)
{
  json_object j;
  j.add("batch", p.batch).add("steps", p.steps).add("input_size", p.input).add("hidden", p.hidden);
  if (!p.lengths.empty()) { j.add("lengths", p.lengths); }
  return j;
}

ls::options options_of(parsed_args const& args, workload const& w)
{
  ls::options o;
  read_run_options(args, w, o);
  return o;
}

template <class T>
struct instance {
  ls::weights<T> params;
  ls::sequence<T> seq;
};

/// Uniform in [-0.9, 0.9]; the weights scaled by 0.6 to keep the gates away from saturation.
template <class T>
instance<T> random_instance(ls::problem const& p, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-0.9, 0.9);
  auto draw = [&](std::size_t n, double scale) {
    std::vector<T> v(n);
    for (T& x : v) { x = static_cast<T>(scale * dist(rng)); }
    return v;
  };
  std::vector<std::size_t> const parts = input_parts(p);
  instance<T> in;
  in.params.w = draw(parts[0], 0.6);
  in.params.u = draw(parts[1], 0.6);
  in.params.b = draw(parts[2], 1.0);
  in.seq.x = draw(parts[3], 1.0);
  in.seq.h0 = draw(parts[4], 1.0);
  in.seq.c0 = draw(parts[5], 1.0);
  return in;
}

template <class T>
instance<T> read_instance(std::string const& path, ls::problem const& p)
{
  std::vector<std::size_t> const parts = input_parts(p);
  std::size_t total = 0;
  for (std::size_t n : parts) { total += n; }
  std::vector<std::vector<T>> v = split(read_values<T>(path, total, sizes_of(p) + " (W, U, b, x, h0, c0)"), parts);
  instance<T> in;
  in.params = {std::move(v[0]), std::move(v[1]), std::move(v[2])};
  in.seq = {std::move(v[3]), std::move(v[4]), std::move(v[5])};
  return in;
}

template <class T>
void write_instance(std::string const& path, instance<T> const& in)
{
  write_values<T>(path, {&in.params.w, &in.params.u, &in.params.b, &in.seq.x, &in.seq.h0, &in.seq.c0});
}

int init(parsed_args const& args)
{
  ls::problem const p = problem_of(args);
  std::string const dtype = dtype_of(args, lstm_cli());
  if (dtype == "f32") {
    write_instance(args.text("out"), random_instance<float>(p, seed_of(args)));
  } else {
    write_instance(args.text("out"), random_instance<double>(p, seed_of(args)));
  }
  std::printf("wrote %s: W, U, b, x, h0, c0 of %s in %s (seed %llu)\n", args.text("out").c_str(), sizes_of(p).c_str(),
              dtype.c_str(), static_cast<unsigned long long>(seed_of(args)));
  return 0;
}

template <class T>
int run_as(parsed_args const& args, std::string const& dtype)
{
  workload const& w = lstm_cli();
  ls::problem const p = problem_of(args);
  ls::options o = options_of(args, w);
  progress_bar const bar(args);
  o.progress = bar.callback();
  instance<T> const in = read_instance<T>(args.text("input"), p);
  print_header(command::run, w, sizes_of(p), dtype, o.kind);
  print_chain_plan(ls::plan<T>(p, o));
  auto const start = std::chrono::steady_clock::now();
  ls::gradient_result<T> const r = ls::gradient(p, in.params, in.seq, o);
  double const wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("loss:   %.9e\n", static_cast<double>(r.loss));
  print_chain_summary(r.chain, r.peak_device_bytes, r.staging, o.kind);
  write_values<T>(args.text("grad-out"), {&r.gradient.w, &r.gradient.u, &r.gradient.b});
  std::printf("wrote %s: dL/dW (%zu), dL/dU (%zu), dL/db (%zu) %s values\n", args.text("grad-out").c_str(),
              r.gradient.w.size(), r.gradient.u.size(), r.gradient.b.size(), dtype.c_str());
  if (args.has("json")) {
    json_object stats;
    stats.add("workload", w.name)
      .add("problem", problem_json(p))
      .add("dtype", dtype)
      .add("backend", std::string{to_string(o.kind)})
      .add("device", query_device_limits(o.kind).name)
      .add("loss", static_cast<double>(r.loss))
      .add("gradient_ms", wall_ms)
      .add("host_budget_bytes", o.host_budget_bytes)
      .add("peak_device_bytes", r.peak_device_bytes);
    add_chain_stats(stats, r.chain);
    if (o.kind == backend::cpu) { add_staging(stats, r.staging); }
    write_text(args.text("json"), stats.str());
  }
  return 0;
}

int run(parsed_args const& args)
{
  std::string const dtype = dtype_of(args, lstm_cli());
  return dtype == "f32" ? run_as<float>(args, dtype) : run_as<double>(args, dtype);
}

int plan(parsed_args const& args)
{
  workload const& w = lstm_cli();
  std::string const dtype = dtype_of(args, w);
  ls::problem const p = problem_of(args);
  ls::options const o = options_of(args, w);
  bool const quiet = args.has("json") && args.text("json") == "-";  // standard output is the JSON
  if (!quiet) { print_header(command::plan, w, sizes_of(p), dtype, o.kind); }
  chain_stats const planned = dtype == "f32" ? ls::plan<float>(p, o) : ls::plan<double>(p, o);
  if (!quiet) {
    print_chain_plan(planned);
    print_layer_tiers(planned);
  }
  write_plan_json(args, w, dtype, o.kind, planned);
  return 0;
}

template <class T>
int bench_as(parsed_args const& args, std::string const& dtype)
{
  workload const& w = lstm_cli();
  ls::problem const p = problem_of(args);
  ls::options const o = options_of(args, w);
  int warmup = 0;
  int repeats = 0;
  bench_counts(args, warmup, repeats);
  instance<T> const in = random_instance<T>(p, seed_of(args));
  print_header(command::bench, w, sizes_of(p), dtype, o.kind);
  std::printf("        %d warm-up + %d timed runs\n", warmup, repeats);
  double const primal_ms = median_ms(warmup, repeats, [&] { static_cast<void>(ls::primal(p, in.params, in.seq, o)); });
  ls::gradient_result<T> last;
  double const grad_ms = median_ms(warmup, repeats, [&] { last = ls::gradient(p, in.params, in.seq, o); });
  print_chain_plan(last.chain);
  write_bench_row(args, w, "tapeflow-" + std::string{to_string(last.chain.policy)},
                  "B" + std::to_string(p.batch) + " T" + std::to_string(p.steps) + " I" + std::to_string(p.input) + " H" +
                    std::to_string(p.hidden) + (p.lengths.empty() ? "" : " packed") + " " + dtype,
                  o.kind, primal_ms, grad_ms, api_timing, last.chain.tape_bytes, last.peak_device_bytes,
                  chain_plan_json(last.chain));
  return 0;
}

int bench(parsed_args const& args)
{
  std::string const dtype = dtype_of(args, lstm_cli());
  return dtype == "f32" ? bench_as<float>(args, dtype) : bench_as<double>(args, dtype);
}

}  // namespace

workload const& lstm_cli()
{
  static std::vector<flag_spec> const shape{{"batch", "B", "sequences in the batch", true},
                                            {"steps", "T", "time steps", true},
                                            {"input-size", "I", "input features", true},
                                            {"hidden", "H", "hidden units", true}};
  static std::vector<flag_spec> const problem = [] {
    std::vector<flag_spec> flags = shape;
    flags.push_back({"lengths", "L0,L1,...", "packed variable-length sequences: B lengths, longest (T) first", false});
    return flags;
  }();
  static workload const w{
    "lstm",
    "a one-layer LSTM over a batch of sequences: dL/d(W, U, b) for L = sum(h_T)",
    "Computes L = sum(h_T) of a one-layer LSTM (gates i, f, g, o as in PyTorch) run for T steps\n"
    "over B sequences, and its gradient with respect to the weights W, U and the bias b.\n"
    "With --lengths the sequences are packed as PyTorch's pack_padded_sequence: sequence b runs\n"
    "its own L_b steps (non-increasing, L_0 = T), each step tapes only the sequences still running,\n"
    "and h_T is each sequence's h after its last step.",
    "  IN.bin   --dtype values: W (4H*I, row-major as PyTorch's weight_ih_l0), U (4H*H, as\n"
    "           weight_hh_l0), b (4H), x (T*B*I: x[t][b][i], padded to T steps), h0 (B*H), c0 (B*H)\n"
    "  G.bin    dL/dW (4H*I), dL/dU (4H*H), dL/db (4H), laid out as the weights",
    shape,
    problem,
    {},
    true,
    true,
    false,
    init,
    run,
    plan,
    bench,
  };
  return w;
}

}  // namespace tapeflow::cli

// SPDX-License-Identifier: Apache-2.0
// The workload description: one struct per workload (kernels/<workload>/description.hpp) from which
// the CLI's commands, the benchmark suites and the typed test suite are made. A workload is one
// folder and one registration line (kernels/CMakeLists.txt: tapeflow_workload(<folder>)); docs/guide.md
// ("Add a workload") walks through one. Consumers read a description through described<D>, which
// fills in what a description leaves out.
//
// A description D provides (static members; `T` is float or double):
//
//   static constexpr workload_text text;     name, one-line summary, what `run` computes, file layouts
//   static constexpr precision precisions;   f32_f64, or f64_only
//   static constexpr tape_kind tape;         chain, layer or arena: which common flags apply
//   using problem = ...;                     sizes and parameters (default-constructible)
//   using options = ...;                     derives from base_options (run_options for a chain)
//   static constexpr auto fields = std::make_tuple(...);
//       the problem's flags: count(), real() and list() of its members (the CLI's problem flags,
//       parsing, help, JSON and header line are made from them)
//   static void validate(problem const&);   the problem alone (its sizes, their products, its
//       parameters), a logic_error where the workload refuses it: every command checks it before
//       it reads or writes a file
//   static std::string size_key(problem const&, std::string const& dtype);
//       "512x512 T100 f32": the results' size, as the benchmark peers write it
//   static std::vector<array_spec> inputs(problem const&);      the input file's parts, in order
//   static std::vector<array_spec> gradients(problem const&);   the gradient file's parts: dL/d of
//                                                               the first inputs, in their order
//   template <class T> static std::vector<std::vector<T>> random_inputs(problem const&, std::uint64_t seed);
//   template <class T> static std::unique_ptr<session<T>> open(problem const&, options const&);
//   template <class T> static tape_report plan(problem const&, options const&);
//   static problem test_problem();           small: the typed test suites' problem
//
// and optionally:
//   static constexpr bool gpu = false;       no GPU kernels yet: its GPU tests and suites are not made
//   static constexpr bool decomposes = true; runs cut over MPI ranks (docs/distributed.md)
//   static constexpr bool captures_reverse = false;
//       a chain whose reverse cannot be replayed as one captured program: --capture-reverse
//       does not apply to it
//       (a stencil workload derives from stencil_description, which gives this and the next three)
//   static std::vector<cli::flag_spec> option_flags();          the workload's own options
//   static void read_options(cli::parsed_args const&, options&);
//   static std::string variant_of(options const&);
//       what sets a run's options apart in its benchmark row's variant ("partials")
//   static std::string sizes(problem const&);                   the header line (default: the fields)
//   static std::vector<bench_suite<D>> bench_suites();
//   static double bench_bytes(problem const&, tape_report const&, std::size_t value_bytes);
//       the least bytes one gradient moves (the benchmark rows' achieved_GBps)
//   static void bench_facts(problem const&, tape_report const&, cli::json_object& row);
//       the workload's own fields of a benchmark row
#pragma once

#include "args.hpp"
#include "json.hpp"
#include "run_options.hpp"
#include "session.hpp"

#include <tapeflow/error.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tapeflow::workloads {

/// The value types a workload runs in.
enum class precision { f32_f64, f64_only };

/// What a workload's tape is, which decides the common flags its commands take: a chain of
/// layers (--policy, --budget, --host-budget, ... and the tiling flags), one layer (the tiling
/// flags), or a per-thread arena (its own flags).
enum class tape_kind { chain, layer, arena };

/// A workload's words: its name (the CLI's and the results'), a line for 'tapeflow --help', what
/// `run` computes and the layouts of its input and gradient files (for the help of run and init).
struct workload_text {
  char const* name;
  char const* summary;
  char const* model;
  char const* files;
};

/// One part of a workload's input or gradient file.
struct array_spec {
  std::string name;       ///< "u0", "W"
  std::size_t values{0};  ///< how many values
};

/// Whether init takes a problem flag too (the input files' sizes depend on it), and whether every
/// command must be given it.
enum class flag_use { shape_required, shape, required, optional };

/// What the CLI shows and checks of one problem flag.
struct field_info {
  char const* flag;   ///< without the leading "--"
  char const* value;  ///< placeholder in the help ("N")
  char const* help;
  char const* label;  ///< its name in the header line ("T" for --steps)
  flag_use use;
  std::size_t lo{0};  ///< counts: the smallest and largest value taken
  std::size_t hi{0};
};

/// One flag of a workload's problem and the member it sets. Made by count(), real() and list().
template <class Problem, class Member>
struct field {
  using member_pointer = Member Problem::*;
  field_info info;
  member_pointer member;
};

/// A whole-number flag within [lo, hi]; where init does not read a required one, it takes `lo`.
template <class Problem, class Member>
constexpr field<Problem, Member> count(char const* flag, Member Problem::*member, char const* value, char const* help,
                                       char const* label, flag_use use, std::size_t lo, std::size_t hi)
{
  return {{flag, value, help, label, use, lo, hi}, member};
}
/// A finite real-valued flag.
template <class Problem>
constexpr field<Problem, double> real(char const* flag, double Problem::*member, char const* value, char const* help,
                                      char const* label, flag_use use = flag_use::optional)
{
  return {{flag, value, help, label, use, 0, 0}, member};
}
/// A comma-separated list of whole numbers.
template <class Problem>
constexpr field<Problem, std::vector<std::size_t>> list(char const* flag, std::vector<std::size_t> Problem::*member,
                                                        char const* value, char const* help)
{
  return {{flag, value, help, flag, flag_use::optional, 0, 0}, member};
}

/// Sizes and settings of a benchmark run: `--set key=value` overrides, else the full size, or the
/// quick one under --quick.
class bench_sizes {
 public:
  bench_sizes() = default;
  bench_sizes(bool quick, std::map<std::string, std::string> overrides)
    : quick_(quick), overrides_(std::move(overrides))
  {
  }
  [[nodiscard]] bool quick() const noexcept { return quick_; }
  /// `--set key=N` if given, else `full` (`quick_value` under --quick). Throws logic_error when the
  /// value is not a non-negative integer.
  [[nodiscard]] std::size_t size(std::string const& key, std::size_t full, std::size_t quick_value) const;
  /// `--set key=text` if given, else `fallback`.
  [[nodiscard]] std::string text(std::string const& key, std::string const& fallback) const;
  /// Whether any of `keys` is overridden.
  [[nodiscard]] bool overrides(std::vector<std::string> const& keys) const;

 private:
  bool quick_{false};
  std::map<std::string, std::string> overrides_;
};

/// One row a benchmark suite measures: a problem run with some options under a variant's name.
template <class D>
struct bench_case {
  std::string variant;  ///< "tapeflow-store", "arena-host", ...
  typename D::problem problem;
  typename D::options options{};
  /// Also run once more, untimed, with measure_time on (chain workloads): the row gets the stall,
  /// prefetch and recompute figures of the tiers.
  bool tier_stats{false};
  /// A budget the case may not fit (a budget_error is reported and the row left out).
  bool may_not_fit{false};
  /// Whether the case runs on a device (null: on every one); a row that does not is left out.
  bool (*runs_on)(device_limits const&){nullptr};
};

/// A benchmark suite of a workload: the driver registers it under `name` (`tapeflow_bench --suite`).
template <class D>
struct bench_suite {
  std::string name;  ///< "allen_cahn", "tiers", ...
  int order;         ///< where it runs in a full run (smaller first)
  std::string help;  ///< one line for `tapeflow_bench --list`
  std::vector<bench_case<D>> (*cases)(bench_sizes const&, std::string const& dtype);
};

/// A stencil workload's segment rows (docs/stencils.md), appended to `cases`: for each k of `ks`
/// under `base`, `tapeflow-segments-auto` (k = 0, the planner's) or `tapeflow-segments-k<k>`;
/// `tapeflow-segments-measured` (--segment measure: the trials before the timed runs, their times
/// in the row); then, on a GPU whose blocks get more shared memory on opt-in,
/// `tapeflow-segments-auto-optin`.
template <class D>
void add_segment_cases(std::vector<bench_case<D>>& cases, typename D::problem const& p,
                       typename D::options const& base, std::initializer_list<int> ks)
{
  for (int k : ks) {
    cases.push_back({k == 0 ? "tapeflow-segments-auto" : "tapeflow-segments-k" + std::to_string(k), p, base});
    cases.back().options.segment = k;
  }
  cases.push_back({"tapeflow-segments-measured", p, base});
  cases.back().options.segment = 0;
  cases.back().options.measure_segment = true;
  cases.push_back({"tapeflow-segments-auto-optin", p, base});
  cases.back().options.segment = 0;
  cases.back().options.shared_opt_in = true;
  cases.back().runs_on = [](device_limits const& d) { return d.shared_mem_per_block_optin > d.shared_mem_per_block; };
}

/// Sums of the parts' sizes.
[[nodiscard]] std::size_t total_values(std::vector<array_spec> const& parts) noexcept;

/// The parts of `all` (one file's values) cut at the sizes of `parts`.
template <class T>
[[nodiscard]] std::vector<std::vector<T>> split_values(std::vector<T> const& all, std::vector<array_spec> const& parts)
{
  TAPEFLOW_EXPECTS(all.size() == total_values(parts), "the values do not fill the parts");
  std::vector<std::vector<T>> out;
  auto at = all.begin();
  for (array_spec const& part : parts) {
    out.emplace_back(at, at + static_cast<std::ptrdiff_t>(part.values));
    at += static_cast<std::ptrdiff_t>(part.values);
  }
  return out;
}

/// Host views of `arrays`, in order (what a session loads).
template <class T>
[[nodiscard]] std::vector<host_array<T>> views_of(std::vector<std::vector<T>> const& arrays)
{
  return {arrays.begin(), arrays.end()};
}

/// The flags of a workload whose step is a stencil: --segment K|auto|measure
/// (stencil_options::segment, measure_segment), --shared-opt-in (stencil_options::shared_opt_in)
/// and --ranks-grid PYxPX (stencil_options::ranks_grid).
[[nodiscard]] std::vector<cli::flag_spec> segment_flags();
/// Reads them into `o` (its ranks already read), for a grid of `dims` axes (2: any but a 1-D
/// grid): the steps per segment (1 when absent, 0 for auto and for measure, which also sets
/// measure_segment), the opt-in and the process grid. Throws cli::usage_error for a segment other
/// than auto, measure or 1 to stencil::max_segment_steps, for --shared-opt-in without segments,
/// and for a process grid that is malformed, is not the run's ranks, or cuts a 1-D grid twice.
void read_segment_options(cli::parsed_args const& args, stencil_options& o, int dims = 2);

/// What a stencil workload's segments add to its benchmark row's variant: "" for one step per
/// layer, "segment-auto", "segment-measured", "segment4", "segment4-optin".
[[nodiscard]] std::string segment_variant(stencil_options const& o);

/// What the description of a workload whose step is a stencil derives from (`struct description :
/// stencil_description`): it runs cut over MPI ranks (docs/distributed.md), takes --segment
/// K|auto|measure and --shared-opt-in, and its benchmark rows name their segment length. A
/// workload with options of its own beside `segment` declares these itself (Allen–Cahn).
struct stencil_description {
  static constexpr bool decomposes = true;
  static std::vector<cli::flag_spec> option_flags() { return segment_flags(); }
  static void read_options(cli::parsed_args const& args, stencil_options& o) { read_segment_options(args, o); }
  static std::string variant_of(stencil_options const& o) { return segment_variant(o); }
};

/// The least bytes a stencil workload's gradient of `steps` steps over a state of `state_bytes`
/// moves: in segments, what their plan counts (the report's states_moved_per_step, halos
/// included: docs/stencils.md); one step per layer, the tape written and read once and each step's
/// state read and written once in the forward and once in the reverse.
[[nodiscard]] double stencil_bench_bytes(tape_report const& r, double state_bytes, std::size_t steps);

/// The states a step of stencil segments moves (report_segments' fact), or none for a run that was
/// not in segments.
[[nodiscard]] std::optional<double> states_moved_per_step(tape_report const& r);

/// Calls f(T{}) with T = float or double as `dtype` ("f32" or "f64") says.
template <class F>
decltype(auto) with_precision(std::string const& dtype, F&& f)
{
  if (dtype == "f64") { return f(double{}); }
  TAPEFLOW_EXPECTS(dtype == "f32", "a precision is f32 or f64, not '" + dtype + "'");
  return f(float{});
}

namespace detail {
/// One field of a problem as text (the flags a problem is written as), and back.
std::string field_text(std::size_t value);
std::string field_text(int value);
std::string field_text(double value);
std::string field_text(std::vector<std::size_t> const& values);
/// The same for a person (reals to 6 digits).
template <class Member>
std::string shown_text(Member const& value)
{
  return field_text(value);
}
std::string shown_text(double value);
void read_field(cli::parsed_args const& args, field_info const& f, std::size_t& to);
void read_field(cli::parsed_args const& args, field_info const& f, int& to);
void read_field(cli::parsed_args const& args, field_info const& f, double& to);
void read_field(cli::parsed_args const& args, field_info const& f, std::vector<std::size_t>& to);

#define TAPEFLOW_DESCRIPTION_HAS(trait, expression)                     \
  template <class D, class = void>                                     \
  struct trait : std::false_type {};                                   \
  template <class D>                                                   \
  struct trait<D, std::void_t<decltype(expression)>> : std::true_type {}
TAPEFLOW_DESCRIPTION_HAS(has_gpu, D::gpu);
TAPEFLOW_DESCRIPTION_HAS(has_decomposes, D::decomposes);
TAPEFLOW_DESCRIPTION_HAS(has_captures_reverse, D::captures_reverse);
TAPEFLOW_DESCRIPTION_HAS(has_option_flags, D::option_flags());
TAPEFLOW_DESCRIPTION_HAS(has_read_options,
                         D::read_options(std::declval<cli::parsed_args const&>(), std::declval<typename D::options&>()));
TAPEFLOW_DESCRIPTION_HAS(has_variant_of, D::variant_of(std::declval<typename D::options const&>()));
TAPEFLOW_DESCRIPTION_HAS(has_sizes, D::sizes(std::declval<typename D::problem const&>()));
TAPEFLOW_DESCRIPTION_HAS(has_bench_suites, D::bench_suites());
TAPEFLOW_DESCRIPTION_HAS(has_bench_bytes, D::bench_bytes(std::declval<typename D::problem const&>(),
                                                         std::declval<tape_report const&>(), std::size_t{}));
TAPEFLOW_DESCRIPTION_HAS(has_bench_facts, D::bench_facts(std::declval<typename D::problem const&>(),
                                                         std::declval<tape_report const&>(),
                                                         std::declval<cli::json_object&>()));
#undef TAPEFLOW_DESCRIPTION_HAS
}  // namespace detail

/// A description as its consumers read it: its own members where it has them, the defaults the
/// top of this file names where it does not, and what its fields make.
template <class D>
struct described {
  using problem = typename D::problem;
  using options = typename D::options;

  [[nodiscard]] static std::string name() { return D::text.name; }

  /// Whether D has GPU kernels (a description says `gpu = false` until it does).
  static constexpr bool gpu = [] {
    if constexpr (detail::has_gpu<D>::value) {
      return D::gpu;
    } else {
      return true;
    }
  }();

  /// Whether D runs cut over the ranks of an MPI run (a description says `decomposes = true`).
  static constexpr bool decomposes = [] {
    if constexpr (detail::has_decomposes<D>::value) {
      return D::decomposes;
    } else {
      return false;
    }
  }();

  /// Whether a chain workload's reverse can be captured (--capture-reverse; a description says
  /// `captures_reverse = false` where it cannot).
  static constexpr bool captures_reverse = [] {
    if constexpr (detail::has_captures_reverse<D>::value) {
      return D::captures_reverse;
    } else {
      return D::tape == tape_kind::chain;
    }
  }();

  /// The problem's flags, in the order of its fields.
  [[nodiscard]] static std::vector<cli::flag_spec> problem_flags()
  {
    std::vector<cli::flag_spec> flags;
    std::apply([&](auto const&... f) { (flags.push_back(spec(f)), ...); }, D::fields);
    return flags;
  }

  /// The problem the flags set; `shape_only` (init): the fields init does not read keep their
  /// defaults, or their smallest value where they are required. Throws what D::validate throws.
  [[nodiscard]] static problem problem_of(cli::parsed_args const& args, bool shape_only)
  {
    problem p{};
    std::apply([&](auto const&... f) { (read(args, shape_only, f, p), ...); }, D::fields);
    D::validate(p);  // before any file is read or written: init must not write a file run refuses
    return p;
  }

  /// problem_of's inverse: the problem as flags (name, value).
  [[nodiscard]] static std::vector<std::pair<std::string, std::string>> flags_of(problem const& p)
  {
    std::vector<std::pair<std::string, std::string>> flags;
    std::apply(
      [&](auto const&... f) {
        ((is_empty(p.*(f.member)) ? void() : void(flags.emplace_back(f.info.flag, detail::field_text(p.*(f.member))))),
         ...);
      },
      D::fields);
    return flags;
  }

  [[nodiscard]] static cli::json_object problem_json(problem const& p)
  {
    cli::json_object j;
    std::apply(
      [&](auto const&... f) { ((is_empty(p.*(f.member)) ? void() : void(j.add(key_of(f.info.flag), p.*(f.member)))), ...); },
      D::fields);
    return j;
  }

  /// "n = 512, T = 100": the header line of a command.
  [[nodiscard]] static std::string sizes(problem const& p)
  {
    if constexpr (detail::has_sizes<D>::value) {
      return D::sizes(p);
    } else {
      std::string line;
      std::apply(
        [&](auto const&... f) {
          ((line += (line.empty() ? "" : ", ") + std::string{f.info.label} + " = " + detail::shown_text(p.*(f.member))),
           ...);
        },
        D::fields);
      return line;
    }
  }

  [[nodiscard]] static std::vector<cli::flag_spec> option_flags()
  {
    if constexpr (detail::has_option_flags<D>::value) {
      return D::option_flags();
    } else {
      return {};
    }
  }

  static void read_options(cli::parsed_args const& args, options& o)
  {
    if constexpr (detail::has_read_options<D>::value) { D::read_options(args, o); }
  }

  /// What sets `o` apart in a benchmark row's variant name ("" where D says nothing).
  [[nodiscard]] static std::string variant_of(options const& o)
  {
    if constexpr (detail::has_variant_of<D>::value) {
      return D::variant_of(o);
    } else {
      static_cast<void>(o);
      return {};
    }
  }

  [[nodiscard]] static std::vector<bench_suite<D>> bench_suites()
  {
    if constexpr (detail::has_bench_suites<D>::value) {
      return D::bench_suites();
    } else {
      return {};
    }
  }

  /// The least bytes one gradient of `p` moves (0 where D does not say).
  [[nodiscard]] static double bench_bytes(problem const& p, tape_report const& r, std::size_t value_bytes)
  {
    if constexpr (detail::has_bench_bytes<D>::value) {
      return D::bench_bytes(p, r, value_bytes);
    } else {
      return 0;
    }
  }

  /// D's own fields of a benchmark row, where it has any.
  static void bench_facts(problem const& p, tape_report const& r, cli::json_object& row)
  {
    if constexpr (detail::has_bench_facts<D>::value) { D::bench_facts(p, r, row); }
  }

  /// with_precision() for D: an f64_only workload instantiates double alone.
  template <class F>
  static decltype(auto) with_precision(std::string const& dtype, F&& f)
  {
    if constexpr (D::precisions == precision::f64_only) {
      TAPEFLOW_EXPECTS(dtype == "f64", name() + " runs in f64 only, not " + dtype);
      return f(double{});
    } else {
      return workloads::with_precision(dtype, std::forward<F>(f));
    }
  }

 private:
  template <class Member>
  static cli::flag_spec spec(field<problem, Member> const& f)
  {
    flag_use const use = f.info.use;
    bool const required = use == flag_use::shape_required || use == flag_use::required;
    bool const shape = use == flag_use::shape_required || use == flag_use::shape;
    return {f.info.flag, f.info.value, f.info.help, required, shape};
  }

  template <class Member>
  static void read(cli::parsed_args const& args, bool shape_only, field<problem, Member> const& f, problem& p)
  {
    flag_use const use = f.info.use;
    if (!shape_only || use == flag_use::shape_required || use == flag_use::shape) {
      detail::read_field(args, f.info, p.*(f.member));
    } else if constexpr (std::is_same_v<Member, std::size_t>) {
      if (use == flag_use::required) { p.*(f.member) = f.info.lo; }
    }
  }

  template <class Member>
  static bool is_empty(Member const& value)
  {
    if constexpr (std::is_same_v<Member, std::vector<std::size_t>>) {
      return value.empty();
    } else {
      static_cast<void>(value);
      return false;
    }
  }

  static std::string key_of(std::string flag)
  {
    for (char& c : flag) {
      if (c == '-') { c = '_'; }
    }
    return flag;
  }
};

/// A list of workload descriptions (the registry: tapeflow/workloads/registry.hpp).
template <class... D>
struct description_list {
  /// Calls f(D{}) for each description, in registration order.
  template <class F>
  static void for_each(F&& f)
  {
    (f(D{}), ...);
  }
};

/// The descriptions of a list that `Keep<D>::value` keeps, in order.
template <template <class> class Keep, class List>
struct keep_descriptions;
template <template <class> class Keep>
struct keep_descriptions<Keep, description_list<>> {
  using type = description_list<>;
};
template <template <class> class Keep, class D, class... Rest>
struct keep_descriptions<Keep, description_list<D, Rest...>> {
  template <class... Kept>
  static description_list<D, Kept...> prepend(description_list<Kept...>);
  using rest = typename keep_descriptions<Keep, description_list<Rest...>>::type;
  using type = std::conditional_t<Keep<D>::value, decltype(prepend(rest{})), rest>;
};

}  // namespace tapeflow::workloads

// SPDX-License-Identifier: Apache-2.0
// A workload on one backend, its inputs loaded into the backend's memory: the one shape every
// workload's gradient takes, whatever its tape (a chain of layers, one layer, a per-thread arena).
// Each workload opens one (`<workload>::open<T>(problem, options)`); its typed entry points
// (allen_cahn::gradient, ...) run it through gradient_of(), and the CLI, the benchmarks and the
// tests run the same session through gradient_of() and benchmark().
#pragma once

#include <tapeflow/backend.hpp>
#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/tile_ring.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/stream.hpp>
#include <tapeflow/thread_tape.hpp>
#include <tapeflow/timing.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tapeflow::workloads {

/// Values handed to a session: where they are on the host and how many (not owned).
template <class T>
struct host_array {
  T const* data{nullptr};
  std::size_t size{0};

  host_array() = default;
  host_array(T const* values, std::size_t count) noexcept : data(values), size(count) {}
  // NOLINTNEXTLINE(google-explicit-constructor): a vector is the usual way to pass one
  host_array(std::vector<T> const& values) noexcept : data(values.data()), size(values.size()) {}
};

/// What a workload's tape did, or will do, in one shape for every kind of tape.
struct tape_report {
  std::optional<chain_stats> chain;        ///< a chain of layers: tiling, tiers, schedule, times
  std::optional<pipeline_plan> layer;      ///< one layer: its tiling
  std::optional<thread_tape_stats> arena;  ///< a per-thread tape arena
  std::size_t tape_bytes{0};               ///< tape bytes the gradient writes
  std::size_t peak_device_bytes{0};        ///< every tapeflow allocation on the backend, peak (runs only)
  std::size_t peak_host_bytes{0};          ///< every pinned allocation, peak (runs only)
  cpu::ring_stats staging{};               ///< the CPU backend's tiles (runs on the CPU only)
  std::vector<std::string> notes;          ///< lines the workload adds to its plan
  std::vector<std::pair<std::string, double>> facts;  ///< numbers the workload adds to its stats
};

/// The report of a chain's plan: its stats and its tape bytes.
[[nodiscard]] inline tape_report chain_report(chain_stats stats)
{
  tape_report r;
  r.tape_bytes = stats.tape_bytes;
  r.chain = std::move(stats);
  return r;
}

/// A chain session's report: its chain's stats and tape bytes where it has run one (`chain`, a
/// std::optional of the chain), and the peak device and pinned bytes on `kind` so far.
template <class Chain>
[[nodiscard]] tape_report chain_session_report(std::optional<Chain> const& chain, backend kind)
{
  tape_report r;
  if (chain) { r = chain_report(chain->stats()); }
  r.peak_device_bytes = device_memory_usage(kind).peak_bytes;
  r.peak_host_bytes = host_memory_usage(kind).peak_bytes;
  return r;
}

/// One problem on one backend with its buffers, loaded and run stream-ordered. A run is load(),
/// then primal() or forward(); loss() after either; reverse() and gradients() after forward().
/// Every call may throw what the workload's typed entry points throw; a session that threw can be
/// loaded and run again.
template <class T>
class session {
 public:
  using value_type = T;

  explicit session(backend kind) noexcept : kind_(kind) {}
  virtual ~session() = default;
  session(session const&) = delete;
  session& operator=(session const&) = delete;
  session(session&&) = delete;
  session& operator=(session&&) = delete;

  [[nodiscard]] backend kind() const noexcept { return kind_; }

  /// Copies the inputs, in the workload description's order, for the next primal() or forward()
  /// (a run may work on them in place). Throws logic_error when a count or a value is wrong.
  virtual void load(std::vector<host_array<T>> const& inputs, stream_view s) = 0;
  /// The primal without a tape.
  virtual void primal(stream_view s) = 0;
  /// The taped forward, and the seed of the reverse.
  virtual void forward(stream_view s) = 0;
  /// The loss of the last primal() or forward(); waits for it.
  [[nodiscard]] virtual T loss(stream_view s) = 0;
  /// The reverse of the last forward(). Throws logic_error when there is none to reverse.
  virtual void reverse(stream_view s) = 0;
  /// The gradients the last reverse() computed, in the description's order; waits for them.
  [[nodiscard]] virtual std::vector<std::vector<T>> gradients(stream_view s) = 0;
  /// What the last primal() or forward() computed (its final state, ...); waits for it.
  [[nodiscard]] virtual std::vector<std::vector<T>> outputs(stream_view s) = 0;
  /// What the tape did in the last forward() and reverse().
  [[nodiscard]] virtual tape_report report() const = 0;

 private:
  backend kind_;
};

/// L and its gradients for one set of inputs, with what the tape did.
template <class T>
struct outcome {
  T loss{};
  std::vector<std::vector<T>> gradients;
  tape_report report;
};

/// Loads `inputs`, runs the forward, reads L, runs the reverse and reads the gradients.
template <class T>
[[nodiscard]] outcome<T> gradient_of(session<T>& s, std::vector<host_array<T>> const& inputs, stream_view stream)
{
  s.load(inputs, stream);
  s.forward(stream);
  outcome<T> r;
  r.loss = s.loss(stream);
  s.reverse(stream);
  r.gradients = s.gradients(stream);
  r.report = s.report();
  return r;
}

/// Where a workload's `open<T>(problem, options)` is found: in the workload's namespace, by
/// argument-dependent lookup from the entry points below and in state_gradient.hpp. (C++17 reads
/// `open<T>(...)` as a call of a template only where some template of that name is declared: this
/// one, which nothing calls.)
template <class T>
void open() = delete;

/// The common part of a chain workload's typed gradient entry point: opens a session of `p` on
/// `o.kind`, the peak device bytes counted from here, and runs one gradient of `inputs` on it.
/// Throws what the workload's open() and the session throw.
template <class T, class Problem, class Options>
[[nodiscard]] outcome<T> gradient_on_new_session(Problem const& p, std::vector<host_array<T>> const& inputs,
                                                 Options const& o)
{
  reset_device_memory_peak(o.kind);
  std::unique_ptr<session<T>> const run = open<T>(p, o);
  return gradient_of(*run, inputs, o.stream);
}

/// A chain workload's typed result `Result` (state_gradient, or its own with the same members)
/// from `r`: L and what the chain did (its stats moved out of `r`); the caller moves the gradients in.
template <class Result, class T>
[[nodiscard]] Result chain_result(outcome<T>& r)
{
  Result g;
  g.loss = r.loss;
  g.chain = std::move(*r.report.chain);
  g.peak_device_bytes = r.report.peak_device_bytes;
  g.staging = r.report.staging;
  return g;
}

/// Medians of event-timed runs after a warm-up, the inputs loaded before each run (not timed).
struct bench_result {
  double primal_ms{0};    ///< primal()
  double grad_ms{0};      ///< forward() + reverse()
  double forward_ms{0};   ///< forward(): the taped forward and the seed
  double reverse_ms{0};
  tape_report report;     ///< of the last gradient
  /// Device and pinned allocations (and their bytes) made by every run after the first: a chain's
  /// tape memory comes from its pools, so 0 for every chain workload.
  std::size_t repeat_allocations{0};
  std::size_t repeat_allocated_bytes{0};
};

/// Times `s`: the primal, and the gradient with its forward and reverse laps, each run after a
/// load() of `inputs`; `warmup` untimed runs, then the medians of `repeats`. Throws logic_error
/// unless repeats >= 1 and warmup >= 0.
template <class T>
[[nodiscard]] bench_result benchmark(session<T>& s, std::vector<host_array<T>> const& inputs, stream_view stream,
                                     int warmup, int repeats)
{
  TAPEFLOW_EXPECTS(repeats >= 1 && warmup >= 0, "a benchmark needs repeats >= 1 and warmup >= 0");
  backend const kind = s.kind();
  auto allocated = [kind] {
    memory_usage const d = device_memory_usage(kind);
    memory_usage const h = host_memory_usage(kind);
    return std::pair<std::size_t, std::size_t>{d.allocations + h.allocations, d.allocated_bytes + h.allocated_bytes};
  };
  std::pair<std::size_t, std::size_t> after_first{};
  lap_timer primal(kind, stream, 1);
  lap_timer gradient(kind, stream, 2);
  for (int run = 0; run < warmup + repeats; ++run) {
    if (run == 1) { after_first = allocated(); }
    bool const timed = run >= warmup;
    s.load(inputs, stream);
    primal.start();
    s.primal(stream);
    primal.lap(timed);
    s.load(inputs, stream);
    gradient.start();
    s.forward(stream);
    gradient.lap(timed);
    s.reverse(stream);
    gradient.lap(timed);
  }
  bench_result r;
  r.primal_ms = primal.median_total_ms();
  r.grad_ms = gradient.median_total_ms();
  r.forward_ms = gradient.median_lap_ms(0);
  r.reverse_ms = gradient.median_lap_ms(1);
  r.report = s.report();
  if (warmup + repeats > 1) {
    r.repeat_allocations = allocated().first - after_first.first;
    r.repeat_allocated_bytes = allocated().second - after_first.second;
  }
  return r;
}

/// The GPU backend compiled into this build (CUDA or HIP), if any.
#if defined(TAPEFLOW_HAS_HIP)
inline constexpr std::optional<backend> compiled_gpu = backend::hip;
#elif defined(TAPEFLOW_HAS_CUDA)
inline constexpr std::optional<backend> compiled_gpu = backend::cuda;
#else
inline constexpr std::optional<backend> compiled_gpu = std::nullopt;
#endif

/// Which GPU backends a workload has kernels for.
enum class gpu_kernels { cuda_and_hip, cuda_only };

/// `cpu()` on the CPU backend, `gpu(kind)` on this build's GPU backend where the workload has
/// kernels for it (`which`); any other backend is an unavailable_error naming `workload`. `gpu` is
/// a generic callable: a build without those kernels never instantiates it, so it may name what
/// that build does not have.
template <gpu_kernels which = gpu_kernels::cuda_and_hip, class Cpu, class Gpu>
decltype(auto) on_backend(backend kind, std::string_view workload, Cpu&& cpu, Gpu&& gpu)
{
  if (kind == backend::cpu) { return cpu(); }
  constexpr bool has_kernels =
    compiled_gpu.has_value() && (which == gpu_kernels::cuda_and_hip || compiled_gpu == backend::cuda);
  if constexpr (has_kernels) {
    if (kind == *compiled_gpu) { return gpu(kind); }
  }
  TAPEFLOW_FAIL(unavailable_error, std::string{workload} + " has no " + std::string{to_string(kind)} +
                                     " kernels in this build" +
                                     (which == gpu_kernels::cuda_only ? " (its GPU path is CUDA only)" : ""));
}

}  // namespace tapeflow::workloads

// SPDX-License-Identifier: Apache-2.0
// A stencil gradient over MPI ranks (docs/distributed.md): each rank owns a part of an n x n periodic
// grid (a slab of rows; over 4 or more ranks, a block of rows and columns). A collective chain runs
// segments of k steps on the part, and the ranks exchange ghost cells once per segment. The program:
//   - checks its gradient against central finite differences of the loss in a random direction
//     (exit 1 if they disagree);
//   - prints where the time went: the forward, the reverse, and the part of both spent in ghost
//     exchanges.
// CTest runs it on 4 ranks, as 2 x 2 blocks (example_distributed_stencil, label mpi).
//
//   mpiexec -n 4 tapeflow_example_distributed_stencil [n] [steps] [k] [store|recompute|auto]
#include <tapeflow/distributed/mpi.hpp>
#include <tapeflow/tapeflow.hpp>

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace st = tapeflow::stencil;
namespace dist = tapeflow::distributed;

// u' = u + a lap(u) + b (u - u^3), the gather-form adjoint λ = λ'(1 - 4a + b (1 - 3u^2)) + a Σ λ'_neighbours.
struct reaction_diffusion {
  using value_type = double;
  static constexpr int dims = 2;
  static constexpr int fields = 1;
  using forward_taps = st::taps<st::tap<0, 0>, st::tap<-1, 0>, st::tap<1, 0>, st::tap<0, -1>, st::tap<0, 1>>;
  using adjoint_taps = forward_taps;
  double a;
  double b;

  TAPEFLOW_HOST_DEVICE void forward(double const* u, double* out) const
  {
    out[0] = u[0] + a * (u[1] + u[2] + u[3] + u[4] - 4 * u[0]) + b * (u[0] - u[0] * u[0] * u[0]);
  }
  TAPEFLOW_HOST_DEVICE void adjoint(double const* u, double const* g, double* lambda) const
  {
    lambda[0] = g[0] * (1 - 4 * a + b * (1 - 3 * u[0] * u[0])) + a * (g[1] + g[2] + g[3] + g[4]);
  }
};

/// A communicator that times the exchanges of the one it wraps: posting them, and waiting for
/// what the work done in between (the interior tiles) did not hide.
class timed : public dist::communicator {
 public:
  explicit timed(std::shared_ptr<dist::communicator> inner) : inner_(std::move(inner)) {}
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  void allgather(void const* send, void* receive, std::size_t bytes) override { inner_->allgather(send, receive, bytes); }
  dist::exchange_ticket start_exchange(std::vector<dist::outgoing> const& sends,
                                       std::vector<dist::incoming> const& receives) override
  {
    auto const start = std::chrono::steady_clock::now();
    dist::exchange_ticket const ticket = inner_->start_exchange(sends, receives);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return ticket;
  }
  void finish_exchange(dist::exchange_ticket ticket) override
  {
    auto const start = std::chrono::steady_clock::now();
    inner_->finish_exchange(ticket);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  void announce_failure(std::string const& what) noexcept override { inner_->announce_failure(what); }
  double seconds{0};

 private:
  std::shared_ptr<dist::communicator> inner_;
};

double ms_since(std::chrono::steady_clock::time_point start)
{
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

int run(int argc, char** argv)
{
  std::size_t const n = argc > 1 ? std::stoul(argv[1]) : 256;
  std::size_t const steps = argc > 2 ? std::stoul(argv[2]) : 40;
  int const k = argc > 3 ? std::stoi(argv[3]) : 4;
  std::string const policy = argc > 4 ? argv[4] : "recompute";

  auto const comm = std::make_shared<timed>(std::make_shared<dist::mpi_communicator>());
  reaction_diffusion const s{0.1, 0.1};
  st::grid<double> const whole{n, n, 1};
  st::segment_request request;
  request.k = k;
  auto const plan = st::plan_slab_segments<reaction_diffusion>(whole, steps, tapeflow::query_device_limits(tapeflow::backend::cpu),
                                                               request, *comm);
  auto step = st::make_cpu_segments(s, whole, plan, comm);
  st::block const mine = st::cut_for<reaction_diffusion>(whole, plan, *comm).where;  // rows, and columns over 4+ ranks
  std::size_t const first_col = mine.cut_inner() ? mine.inner.offset : 0;
  std::size_t const cols = mine.cut_inner() ? mine.inner.extent : n;

  tapeflow::chain_options o;
  o.policy = tapeflow::parse_policy(policy);
  o.budget_bytes = policy == "store" ? 0 : 4 * step.state_size() * sizeof(double);
  o.collective = comm;
  tapeflow::chain<decltype(step)> chain(step, step.segments(), o);

  // The same random u_0 and direction v on every rank; each keeps its part's cells.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> d(-0.9, 0.9);
  std::vector<double> u0(step.state_size(), 0.0);
  std::vector<double> v(step.state_size(), 0.0);
  for (std::size_t i = 0; i < n * n; ++i) {
    double const ui = d(rng);
    double const vi = d(rng);
    std::size_t const row = i / n;
    std::size_t const col = i % n;
    if (row >= mine.outer.offset && row < mine.outer.offset + mine.outer.extent && col >= first_col &&
        col < first_col + cols) {
      std::size_t const at = (row - mine.outer.offset) * cols + (col - first_col);
      u0[at] = ui;
      v[at] = vi;
    }
  }
  std::size_t const bytes = u0.size() * sizeof(double);

  // L = Σ_ranks ½ Σ_{own cells} u_T²: each rank seeds λ_T with its own cells' u_T only.
  tapeflow::device_buffer state(tapeflow::backend::cpu, bytes, {});
  state.upload(u0.data(), bytes, {});
  auto const start = std::chrono::steady_clock::now();
  chain.forward(state);
  double const forward_ms = ms_since(start);
  double const forward_exchange_ms = comm->seconds * 1e3;
  tapeflow::device_buffer adjoint(tapeflow::backend::cpu, bytes, {});
  adjoint.copy_from(state, {});
  auto const reverse_start = std::chrono::steady_clock::now();
  chain.reverse(adjoint);
  double const reverse_ms = ms_since(reverse_start);
  double const reverse_exchange_ms = comm->seconds * 1e3 - forward_exchange_ms;
  std::vector<double> gradient(u0.size());
  adjoint.download(gradient.data(), bytes, {});

  // ⟨dL/du_0, v⟩ against (L(u_0 + h v) - L(u_0 - h v)) / 2h, the loss by the untaped steps.
  auto loss = [&](double h) {
    std::vector<double> u(u0.size());
    std::vector<double> next(u0.size());
    for (std::size_t i = 0; i < u.size(); ++i) { u[i] = u0[i] + h * v[i]; }
    for (std::size_t j = 0; j < step.segments(); ++j) {
      step.forward(j, u.data(), next.data(), {});
      u.swap(next);
    }
    double half = 0;
    for (double x : u) { half += 0.5 * x * x; }
    return dist::sum_in_rank_order(*comm, half);
  };
  double mine_dot = 0;
  for (std::size_t i = 0; i < v.size(); ++i) { mine_dot += gradient[i] * v[i]; }
  double const dot = dist::sum_in_rank_order(*comm, mine_dot);
  double const h = 1e-6;
  double const fd = (loss(h) - loss(-h)) / (2 * h);
  double const relative = std::abs(dot - fd) / std::abs(fd);

  double const worst_forward = dist::max_over_ranks(*comm, forward_ms);
  double const worst_reverse = dist::max_over_ranks(*comm, reverse_ms);
  double const exchange = dist::max_over_ranks(*comm, forward_exchange_ms + reverse_exchange_ms);
  if (comm->rank() == 0) {
    std::printf("%d rank(s), %zu x %zu grid, %zu steps in segments of %d, policy %s: %s\n", comm->size(), n, n, steps,
                plan.k, policy.c_str(), chain.stats().tiers.describe().c_str());
    std::printf("forward %.2f ms, reverse %.2f ms (slowest rank); ghost exchanges not hidden by the interior tiles %.2f ms of them (%.0f %%)\n",
                worst_forward, worst_reverse, exchange, 100 * exchange / (worst_forward + worst_reverse));
    std::printf("<dL/du0, v> = %.12e, finite differences %.12e, relative difference %.1e\n", dot, fd, relative);
  }
  // Central differences of a loss this nonlinear in a random direction agree to about 1e-7 at
  // 512² T100 and 2e-6 at 1024² T200 (truncation above h = 1e-6, rounding below); a wrong halo or
  // adjoint is off by far more.
  return relative < 1e-5 ? 0 : 1;
}

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rc = 0;
  try {
    rc = run(argc, argv);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}

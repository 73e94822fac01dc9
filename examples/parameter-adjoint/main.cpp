// SPDX-License-Identifier: Apache-2.0
// The guide's parameter-adjoint example (docs/guide.md, "Parameter adjoints"): dL/dnu, the
// gradient of L = ½ Σ u_T² with respect to the viscosity of Burgers' equation, from a chain on the
// CPU backend — under three policies, each giving the same bits, checked against central finite
// differences. CTest runs it (example_parameter_adjoint).
#include <tapeflow/tapeflow.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

// u'_j = u_j - a u_j (u_{j+1} - u_{j-1}) + b (u_{j+1} - 2 u_j + u_{j-1}) on a periodic line, with
// a = dt / (2 dx) and b = nu dt / dx². A record holds a cell's three inputs, so the reverse needs
// no halo (kernels/burgers stores each value once and reads its neighbours through a halo).
using record = tapeflow::value_record<double, 4>;

struct burgers_step {
  using value_type = double;
  using record_type = record;

  std::size_t n;
  double dt;
  double dx;
  double nu;  // θ: the parameter whose adjoint the chain accumulates
  std::shared_ptr<std::vector<double>> partial = std::make_shared<std::vector<double>>(n);

  double a() const { return dt / (2 * dx); }
  double b() const { return nu * dt / (dx * dx); }
  std::size_t left(std::size_t j) const { return j == 0 ? n - 1 : j - 1; }
  std::size_t right(std::size_t j) const { return j + 1 == n ? 0 : j + 1; }
  double next(double l, double u, double r) const { return u - a() * u * (r - l) + b() * (r - 2 * u + l); }

  std::size_t state_size() const { return n; }
  std::size_t records_per_step() const { return n; }
  std::size_t parameter_size() const { return 1; }  // declares θ = (nu)

  void forward(std::size_t, double const* in, double* out, tapeflow::stream_view) const
  {
    for (std::size_t j = 0; j < n; ++j) { out[j] = next(in[left(j)], in[j], in[right(j)]); }
  }

  void augmented_forward(std::size_t, double const* in, double* out, tapeflow::tape_writer<record> tape,
                         tapeflow::stream_view) const
  {
    for (std::size_t j = 0; j < n; ++j) {
      tape.write(j, record{{in[left(j)], in[j], in[right(j)], 0.0}});
      out[j] = next(in[left(j)], in[j], in[right(j)]);
    }
  }

  // With parameters, the reverse also gets the chain's parameter adjoint and adds this step's
  // dL/dnu = Σ_j g_j ∂u'_j/∂nu to it. Tiles run on several threads at once, so each cell's share
  // goes to its own slot first and the shares are summed in index order: the same bits whatever
  // the thread count, and under every policy (the chain calls the reverses in one fixed order).
  void reverse(std::size_t, tapeflow::tape_reader<record> tape, tapeflow::pipeline_plan const& plan, double const* g,
               double* g_in, double* g_nu, tapeflow::stream_view) const
  {
    std::vector<double>& share = *partial;
    tapeflow::cpu::reverse_tiles(tape, plan, [&](std::size_t, record const* staged, std::size_t first,
                                                 std::size_t count) {
      for (std::size_t k = 0; k < count; ++k) {
        std::size_t const j = first + k;
        double const l = staged[k].values[0];
        double const u = staged[k].values[1];
        double const r = staged[k].values[2];
        // What u_j fed into u'_{j-1}, u'_j and u'_{j+1} (its own record holds both neighbours).
        g_in[j] = g[j] * (1 - a() * (r - l) - 2 * b()) + g[left(j)] * (b() - a() * l) + g[right(j)] * (b() + a() * r);
        share[j] = g[j] * (r - 2 * u + l) * dt / (dx * dx);
      }
    });
    double sum = 0;
    for (double s : share) { sum += s; }
    g_nu[0] += sum;
  }
};

// L = ½ Σ u_T² for a viscosity, by the untaped primal.
double loss(burgers_step step, std::vector<double> u, std::size_t steps)
{
  std::vector<double> next(u.size());
  for (std::size_t t = 0; t < steps; ++t) {
    step.forward(t, u.data(), next.data(), {});
    u.swap(next);
  }
  double sum = 0;
  for (double v : u) { sum += 0.5 * v * v; }
  return sum;
}

int main()
{
  std::size_t const n = 256;
  std::size_t const steps = 200;
  double const dx = 1.0 / static_cast<double>(n);
  burgers_step const step{n, 0.2 * dx, dx, 0.004};  // a = 0.1, b = 0.2048 (stable: b <= 1/2)
  std::vector<double> u0(n);
  double const two_pi = 2 * std::acos(-1.0);
  for (std::size_t j = 0; j < n; ++j) { u0[j] = 0.5 * std::sin(two_pi * static_cast<double>(j) * dx) + 0.1; }
  std::size_t const bytes = n * sizeof(double);

  int failures = 0;
  double first = 0;
  for (tapeflow::tape_policy policy :
       {tapeflow::tape_policy::store, tapeflow::tape_policy::automatic, tapeflow::tape_policy::recompute}) {
    tapeflow::chain_options o;
    o.policy = policy;
    o.budget_bytes = policy == tapeflow::tape_policy::store ? 0 : steps * n * sizeof(record) / 5;
    tapeflow::chain<burgers_step> c(step, steps, o);
    tapeflow::device_buffer u(tapeflow::backend::cpu, bytes, {});
    tapeflow::device_buffer g(tapeflow::backend::cpu, bytes, {});
    u.upload(u0.data(), bytes, {});
    c.forward(u);          // u: u_0 in, u_T out
    g.copy_from(u, {});    // dL/du_T = u_T
    c.reverse(g);          // g: dL/du_0 out; the parameter adjoint: dL/dnu
    double dl_dnu = 0;
    c.parameter_adjoint().download(&dl_dnu, sizeof dl_dnu, {});
    std::printf("policy %-9s dL/dnu = %.15e\n", std::string{tapeflow::to_string(c.stats().policy)}.c_str(), dl_dnu);
    if (policy == tapeflow::tape_policy::store) {
      first = dl_dnu;
    } else if (std::memcmp(&dl_dnu, &first, sizeof first) != 0) {
      std::printf("  differs from the store policy's bits\n");
      ++failures;
    }
  }

  // Central finite differences of the primal.
  double const h = 1e-6 * step.nu;
  burgers_step up = step;
  burgers_step down = step;
  up.nu += h;
  down.nu -= h;
  double const fd = (loss(up, u0, steps) - loss(down, u0, steps)) / (2 * h);
  double const error = std::fabs(first - fd) / std::fabs(fd);
  std::printf("finite differences    = %.15e (relative difference %.1e)\n", fd, error);
  if (!(error < 1e-6)) { ++failures; }
  return failures == 0 ? 0 : 1;
}

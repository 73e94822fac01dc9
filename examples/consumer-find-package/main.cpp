// SPDX-License-Identifier: Apache-2.0
// A program that uses tapeflow as a library, through the umbrella header: a chain of its own step
// on the CPU backend, checked against the chain rule, and the shipped Allen–Cahn workload's
// gradient. Built by examples/consumer-find-package (installed package, also with
// -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON against a CPU-only install), by CI through
// pkg-config, and by examples/consumer-subdirectory (tapeflow's source tree). Exits 1 unless the
// gradients are right and finite.
#include <tapeflow/tapeflow.hpp>

#include <tapeflow/workloads/allen_cahn.hpp>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <vector>

namespace {

/// x' = x + x^3 / 10 elementwise, 2 values per record.
struct cubic_step {
  using value_type = double;
  using record_type = tapeflow::value_record<double, 2>;
  std::size_t n;

  std::size_t state_size() const { return n; }
  std::size_t records_per_step() const { return (n + 1) / 2; }
  void forward(std::size_t, double const* in, double* out, tapeflow::stream_view) const
  {
    for (std::size_t i = 0; i < n; ++i) { out[i] = in[i] + 0.1 * in[i] * in[i] * in[i]; }
  }
  void augmented_forward(std::size_t t, double const* in, double* out, tapeflow::tape_writer<record_type> tape,
                         tapeflow::stream_view s) const
  {
    forward(t, in, out, s);
    for (std::size_t r = 0; r < tape.size(); ++r) {
      tape.write(r, record_type{{in[2 * r], 2 * r + 1 < n ? in[2 * r + 1] : 0.0}});
    }
  }
  void reverse(std::size_t, tapeflow::tape_reader<record_type> tape, tapeflow::pipeline_plan const& plan,
               double const* g_out, double* g_in, tapeflow::stream_view) const
  {
    tapeflow::cpu::reverse_tiles(tape, plan, [&](std::size_t, record_type const* recs, std::size_t first, std::size_t count) {
      for (std::size_t r = 0; r < count; ++r) {
        for (std::size_t c = 0; c < 2 && 2 * (first + r) + c < n; ++c) {
          std::size_t const i = 2 * (first + r) + c;
          double const x = recs[r].values[c];
          g_in[i] = g_out[i] * (1 + 0.3 * x * x);
        }
      }
    });
  }
};

bool own_step_is_right()
{
  std::size_t const n = 9;
  std::size_t const steps = 6;
  std::vector<double> x0(n);
  for (std::size_t i = 0; i < n; ++i) { x0[i] = 0.1 * static_cast<double>(i) - 0.4; }
  tapeflow::chain_options o;
  o.kind = tapeflow::backend::cpu;
  tapeflow::chain<cubic_step> c(cubic_step{n}, steps, o);
  tapeflow::device_buffer x(o.kind, n * sizeof(double), {});
  x.upload(x0.data(), x.size(), {});
  c.forward(x);
  std::vector<double> const ones(n, 1.0);
  tapeflow::device_buffer g(o.kind, n * sizeof(double), {});
  g.upload(ones.data(), g.size(), {});  // L = sum(x_T)
  c.reverse(g);
  std::vector<double> grad(n);
  g.download(grad.data(), g.size(), {});
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double x_t = x0[i];
    double d = 1;
    for (std::size_t s = 0; s < steps; ++s) {
      d *= 1 + 0.3 * x_t * x_t;
      x_t += 0.1 * x_t * x_t * x_t;
    }
    worst = std::fmax(worst, std::fabs(grad[i] - d));
  }
  std::printf("own step: %zu layers, %s; largest error vs the chain rule %.1e\n", c.stats().steps,
              c.stats().plan.describe().c_str(), worst);
  return worst < 1e-12;
}

}  // namespace

int main()
{
  bool ok = own_step_is_right();

  namespace ac = tapeflow::workloads::allen_cahn;
  ac::problem const p{32, 10};  // a 32 x 32 periodic grid, 10 steps
  std::vector<float> u0(p.n * p.n);
  for (std::size_t i = 0; i < u0.size(); ++i) { u0[i] = 0.5f * std::sin(0.1f * static_cast<float>(i)); }
  ac::options o;
  o.kind = tapeflow::backend::cpu;
  ac::gradient_result<float> const r = ac::gradient(p, u0, o);
  bool finite = std::isfinite(r.loss) && r.gradient.size() == u0.size();
  for (float g : r.gradient) { finite = finite && std::isfinite(g); }
  std::printf("tapeflow %d.%d.%d: Allen-Cahn n = %zu, T = %zu, loss %.9e, %zu gradient values, %s\n",
              TAPEFLOW_VERSION_MAJOR, TAPEFLOW_VERSION_MINOR, TAPEFLOW_VERSION_PATCH, p.n, p.steps,
              static_cast<double>(r.loss), r.gradient.size(), finite ? "all finite" : "NOT FINITE");
  return ok && finite ? 0 : 1;
}

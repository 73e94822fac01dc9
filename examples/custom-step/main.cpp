// SPDX-License-Identifier: Apache-2.0
// The guide's complete example (docs/guide.md): a user-defined differentiated step run as a chain
// on the CPU backend, under two policies. CTest runs it (example_custom_step).
#include <tapeflow/tapeflow.hpp>  // the whole host API

#include <cmath>
#include <cstdio>
#include <vector>

// 1. A record: everything one region's reverse needs, 16-byte aligned. Here a region is 4
//    consecutive elements of the state and the record holds their inputs.
using record = tapeflow::value_record<float, 4>;

// 2. A step: x' = x + 0.1 * sin(x), elementwise.
struct sine_step {
  using value_type = float;
  using record_type = record;

  std::size_t n;

  std::size_t state_size() const { return n; }
  std::size_t records_per_step() const { return (n + 3) / 4; }

  // The primal (the recompute tier re-runs it).
  void forward(std::size_t, float const* in, float* out, tapeflow::stream_view) const
  {
    for (std::size_t i = 0; i < n; ++i) { out[i] = in[i] + 0.1f * std::sin(in[i]); }
  }

  // The augmented forward: the primal, and one record per region through the writer view.
  void augmented_forward(std::size_t, float const* in, float* out, tapeflow::tape_writer<record> tape,
                         tapeflow::stream_view) const
  {
    for (std::size_t r = 0; r < tape.size(); ++r) {
      record rec{};
      for (std::size_t c = 0; c < 4 && 4 * r + c < n; ++c) {
        rec.values[c] = in[4 * r + c];
        out[4 * r + c] = in[4 * r + c] + 0.1f * std::sin(in[4 * r + c]);
      }
      tape.write(r, rec);
    }
  }

  // The reverse: tiles of records arrive one by one, last first (on the CPU backend through
  // cpu::reverse_tiles, several at once on the CPU's threads; a GPU step would launch a kernel that
  // uses tapeflow::device::tile_pipeline).
  void reverse(std::size_t, tapeflow::tape_reader<record> tape, tapeflow::pipeline_plan const& plan,
               float const* g_out, float* g_in, tapeflow::stream_view) const
  {
    tapeflow::cpu::reverse_tiles(tape, plan, [&](std::size_t, record const* staged, std::size_t first, std::size_t count) {
      for (std::size_t k = 0; k < count; ++k) {
        for (std::size_t c = 0; c < 4 && 4 * (first + k) + c < n; ++c) {
          std::size_t const i = 4 * (first + k) + c;
          g_in[i] = g_out[i] * (1.0f + 0.1f * std::cos(staged[k].values[c]));
        }
      }
    });
  }
};

// 3. Run it: forward, seed, reverse, on the device buffers of the chosen backend.
std::vector<float> gradient(tapeflow::chain_options const& options, std::vector<float> const& x0, std::size_t steps)
{
  tapeflow::chain<sine_step> c(sine_step{x0.size()}, steps, options);
  std::printf("  %s\n", c.stats().tiers.describe().c_str());
  std::size_t const bytes = x0.size() * sizeof(float);
  tapeflow::device_buffer x(options.kind, bytes, {});
  x.upload(x0.data(), bytes, {});
  c.forward(x);                         // x: the final state
  tapeflow::device_buffer g(options.kind, bytes, {});
  std::vector<float> const ones(x0.size(), 1.0f);
  g.upload(ones.data(), bytes, {});     // L = sum(x_T): dL/dx_T = 1
  c.reverse(g);                         // g: dL/dx_0
  std::vector<float> out(x0.size());
  g.download(out.data(), bytes, {});
  return out;
}

int main()
{
  std::size_t const n = 1000;
  std::size_t const steps = 20;
  std::vector<float> x0(n);
  for (std::size_t i = 0; i < n; ++i) { x0[i] = std::sin(0.01f * static_cast<float>(i)); }

  tapeflow::chain_options store;
  store.kind = tapeflow::backend::cpu;
  store.policy = tapeflow::tape_policy::store;
  tapeflow::chain_options small = store;
  small.policy = tapeflow::tape_policy::automatic;
  small.budget_bytes = 16 * 1024;  // a fifth of the 80 KB tape

  std::printf("store:\n");
  std::vector<float> const a = gradient(store, x0, steps);
  std::printf("auto under a 16 KiB budget:\n");
  std::vector<float> const b = gradient(small, x0, steps);

  // Check against the chain rule, element by element, in double.
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double x = x0[i];
    double d = 1;
    for (std::size_t s = 0; s < steps; ++s) {
      d *= 1 + 0.1 * std::cos(x);
      x += 0.1 * std::sin(x);
    }
    worst = std::max(worst, std::fabs(a[i] - d) / std::fabs(d));
    if (a[i] != b[i]) {
      std::printf("the two policies disagree at %zu\n", i);
      return 1;
    }
  }
  std::printf("largest relative error vs the chain rule: %.2e\n", worst);
  return worst < 1e-5 ? 0 : 1;
}

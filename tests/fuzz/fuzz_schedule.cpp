// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the mixed schedule's optimiser on its own, on chains of up to 600 steps —
// past the 400 unequal steps whose tables it solves, so its blocks and the other long-chain
// candidates too. Every schedule it returns must replay at its predicted cost within both
// budgets; a model that fits nothing is a budget_error; any other exception aborts. (A long chain
// takes tenths of a second to plan, so this is a target of its own: in fuzz_planner it would
// starve the fast checks.)
#include <tapeflow/error.hpp>
#include <tapeflow/schedule.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include "require.hpp"

#include <cstdint>
#include <random>

namespace {

using tapeflow::fuzz::require;

void check_schedule(FuzzedDataProvider& in)
{
  using namespace tapeflow;
  // A long chain's steps come from a generator seeded by the input (a few bytes each would leave
  // most steps of a long chain at the provider's defaults once its bytes run out).
  schedule_model m;
  std::size_t const n = in.ConsumeIntegralInRange<std::size_t>(1, 600);
  bool const uniform = in.ConsumeBool();
  std::size_t const largest = std::size_t{1} << in.ConsumeIntegralInRange<int>(0, 24);
  bool const host_costs = in.ConsumeBool();
  std::mt19937_64 draw(in.ConsumeIntegral<std::uint64_t>());
  std::uniform_int_distribution<std::size_t> size(1, largest);
  std::uniform_real_distribution<double> ms(0.0, 10.0);
  std::uniform_real_distribution<double> taped(1.0, 2.0);
  std::size_t const common = size(draw);
  for (std::size_t i = 0; i < n; ++i) {
    double const f = ms(draw);
    m.steps.push_back({f, f * taped(draw), 2.0 * ms(draw), uniform ? common : size(draw)});
    if (host_costs) { m.host_layer_ms.push_back(ms(draw) / 2.0); }
  }
  m.state_bytes = in.ConsumeIntegralInRange<std::size_t>(1, largest);
  // Budgets as shares of the tape (up to all of it and a fifth more): where plans must choose.
  double tape = 0;
  for (step_cost const& c : m.steps) { tape += static_cast<double>(c.layer_bytes); }
  m.device_bytes = static_cast<std::size_t>(tape * in.ConsumeFloatingPointInRange<double>(0.0, 1.2));
  m.host_bytes = static_cast<std::size_t>(tape * in.ConsumeFloatingPointInRange<double>(0.0, 1.2));
  for (int k = 0; k < 2; ++k) {
    m.write_ms[k] = in.ConsumeFloatingPointInRange<double>(0.0, 1.0);
    m.read_ms[k] = in.ConsumeFloatingPointInRange<double>(0.0, 1.0);
    m.checkpoints[k] = in.ConsumeBool();
  }
  m.device_layers = in.ConsumeBool();
  m.host_layers = in.ConsumeBool();
  schedule s;
  try {
    s = optimal_schedule(m);
  } catch (budget_error const&) {
    return;
  }
  require(s.fate.size() == n && s.recomputed.size() == n, "a schedule covers every step");
  require(evaluate_schedule(m, s.actions, s.unit_bytes) == s.predicted_ms, "a schedule replays at its prediction");
  require(s.peak_device_bytes <= m.device_bytes, "the device budget holds");
  require(s.peak_host_bytes <= m.host_bytes, "the host budget holds");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size)
{
  FuzzedDataProvider in(data, size);
  check_schedule(in);
  return 0;
}

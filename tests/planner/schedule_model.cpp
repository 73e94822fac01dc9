// SPDX-License-Identifier: Apache-2.0
// Reads cost models, one a line, and prints the cost of tapeflow's optimal schedule for each
// (or "infeasible"): the C++ side of tests/planner/test_reference.py, which compares it with the
// schedules of checkpoint-schedules on the same cost model.
//
// A line: steps device_bytes host_bytes state_bytes layer_bytes forward_ms aug_forward_ms
//         reverse_ms write_device read_device write_host read_host host_layer_ms
//         device_layers host_layers device_checkpoints host_checkpoints
#include <tapeflow/error.hpp>
#include <tapeflow/schedule.hpp>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

int main()
{
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::size_t steps = 0;
    std::size_t layer = 0;
    double f = 0;
    double a = 0;
    double b = 0;
    double pen = 0;
    int flags[4] = {0, 0, 0, 0};
    tapeflow::schedule_model m;
    in >> steps >> m.device_bytes >> m.host_bytes >> m.state_bytes >> layer >> f >> a >> b >> m.write_ms[0] >>
      m.read_ms[0] >> m.write_ms[1] >> m.read_ms[1] >> pen >> flags[0] >> flags[1] >> flags[2] >> flags[3];
    if (!in) {
      std::fprintf(stderr, "schedule_model: cannot read the line '%s'\n", line.c_str());
      return 2;
    }
    m.steps.assign(steps, tapeflow::step_cost{f, a, b, layer});
    m.host_layer_ms.assign(steps, pen);
    m.device_layers = flags[0] != 0;
    m.host_layers = flags[1] != 0;
    m.checkpoints[0] = flags[2] != 0;
    m.checkpoints[1] = flags[3] != 0;
    try {
      tapeflow::schedule const s = tapeflow::optimal_schedule(m);
      std::printf("%.17g %zu\n", s.predicted_ms, s.actions.size());
    } catch (tapeflow::budget_error const&) {
      std::printf("infeasible\n");
    }
  }
  return 0;
}

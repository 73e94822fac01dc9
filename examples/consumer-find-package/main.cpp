// SPDX-License-Identifier: Apache-2.0
// A program that uses tapeflow as a library: the Allen–Cahn gradient dL/du0 on the CPU backend.
// Built by examples/consumer-find-package (installed package) and examples/consumer-subdirectory
// (tapeflow's source tree); exits 1 unless the loss and every gradient value are finite.
#include <allen_cahn/allen_cahn.hpp>
#include <tapeflow/config.hpp>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <vector>

int main()
{
  namespace ac = tapeflow::workloads::allen_cahn;
  ac::problem const p{32, 10};  // a 32 x 32 periodic grid, 10 steps
  std::vector<float> u0(p.n * p.n);
  for (std::size_t i = 0; i < u0.size(); ++i) { u0[i] = 0.5f * std::sin(0.1f * static_cast<float>(i)); }

  ac::options o;
  o.kind = tapeflow::backend::cpu;
  ac::gradient_result<float> const r = ac::gradient(p, u0, o);

  bool finite = std::isfinite(r.loss);
  for (float g : r.gradient) { finite = finite && std::isfinite(g); }
  std::printf("tapeflow %d.%d.%d: Allen-Cahn n = %zu, T = %zu, loss %.9e, %zu gradient values, %s\n",
              TAPEFLOW_VERSION_MAJOR, TAPEFLOW_VERSION_MINOR, TAPEFLOW_VERSION_PATCH, p.n, p.steps,
              static_cast<double>(r.loss), r.gradient.size(), finite ? "all finite" : "NOT FINITE");
  return finite && r.gradient.size() == u0.size() ? 0 : 1;
}

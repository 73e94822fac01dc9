// SPDX-License-Identifier: Apache-2.0
// The wave workload on the CPU backend in double (cpu.hpp).
#include "cpu.hpp"

namespace tapeflow::workloads::wave::detail {

template std::unique_ptr<session<double>> open_cpu(problem const&, options const&);

}  // namespace tapeflow::workloads::wave::detail

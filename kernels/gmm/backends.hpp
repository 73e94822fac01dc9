// SPDX-License-Identifier: Apache-2.0
// GMM's session on each backend: cpu.cpp, and cuda.cu where this build has CUDA (its reductions run
// on CUB; no rocPRIM twin yet).
#pragma once

#include "gmm.hpp"

namespace tapeflow::workloads::gmm::detail {

std::unique_ptr<session<double>> open_cpu(problem const& p, options const& o);
std::unique_ptr<session<double>> open_gpu(problem const& p, options const& o);

}  // namespace tapeflow::workloads::gmm::detail

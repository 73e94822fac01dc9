// SPDX-License-Identifier: Apache-2.0
// The wave workload's session on each backend: cpu.cpp, and cuda.cu (CUDA or HIP) where this build
// has a GPU.
#pragma once

#include "wave.hpp"

namespace tapeflow::workloads::wave::detail {

template <class T>
std::unique_ptr<session<T>> open_cpu(problem const& p, options const& o);
template <class T>
std::unique_ptr<session<T>> open_gpu(problem const& p, options const& o);

}  // namespace tapeflow::workloads::wave::detail

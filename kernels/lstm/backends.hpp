// SPDX-License-Identifier: Apache-2.0
// The LSTM's session on each backend: cpu.cpp, and cuda.cu where this build has CUDA (cuBLAS for
// the matrix products; there is no hipBLAS here, so no HIP twin).
#pragma once

#include "lstm.hpp"

namespace tapeflow::workloads::lstm::detail {

template <class T>
std::unique_ptr<session<T>> open_cpu(problem const& p, options const& o);
template <class T>
std::unique_ptr<session<T>> open_gpu(problem const& p, options const& o);

}  // namespace tapeflow::workloads::lstm::detail

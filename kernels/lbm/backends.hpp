// SPDX-License-Identifier: Apache-2.0
// LBM's session on each backend: cpu.cpp, and cuda.cu (CUDA or HIP) where this build has a GPU.
#pragma once

#include "lbm.hpp"
#include "stencil.hpp"

namespace tapeflow::workloads::lbm::detail {

template <class T>
[[nodiscard]] T omega_of(problem const& p) noexcept
{
  return static_cast<T>(1.0 / p.tau);
}

template <class T>
std::unique_ptr<session<T>> open_cpu(problem const& p, options const& o);
template <class T>
std::unique_ptr<session<T>> open_gpu(problem const& p, options const& o);

}  // namespace tapeflow::workloads::lbm::detail

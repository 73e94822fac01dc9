// SPDX-License-Identifier: Apache-2.0
// Burgers' session on each backend: cpu.cpp, and cuda.cu (CUDA or HIP) where this build has a GPU.
#pragma once

#include "burgers.hpp"
#include "stencil.hpp"

namespace tapeflow::workloads::burgers::detail {

template <class T>
[[nodiscard]] coefficients<T> coefficients_of(problem const& p) noexcept
{
  return {static_cast<T>(p.a), static_cast<T>(p.b)};
}

template <class T>
std::unique_ptr<session<T>> open_cpu(problem const& p, options const& o);
template <class T>
std::unique_ptr<session<T>> open_gpu(problem const& p, options const& o);

}  // namespace tapeflow::workloads::burgers::detail

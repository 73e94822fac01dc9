// SPDX-License-Identifier: Apache-2.0
// The per-backend entry points of the LSTM workload (cpu.cpp, cuda.cu), dispatched by api.cpp.
#pragma once

#include "lstm.hpp"

namespace tapeflow::workloads::lstm::detail {

template <class T>
gradient_result<T> gradient_cpu(problem const& p, weights<T> const& params, sequence<T> const& seq, options const& o);
template <class T>
final_state<T> primal_cpu(problem const& p, weights<T> const& params, sequence<T> const& seq, options const& o);

#if defined(TAPEFLOW_HAS_CUDA)
/// The CUDA backend (cuBLAS for the matrix products): cuda.cu. There is no HIP twin.
template <class T>
gradient_result<T> gradient_cuda(problem const& p, weights<T> const& params, sequence<T> const& seq,
                                 options const& o);
template <class T>
final_state<T> primal_cuda(problem const& p, weights<T> const& params, sequence<T> const& seq, options const& o);
#endif

}  // namespace tapeflow::workloads::lstm::detail

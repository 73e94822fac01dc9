// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "tape_bound.hpp"

namespace tapeflow::workloads::tape_bound::detail {

std::vector<float> gradient_cpu(std::vector<float> const& u, std::vector<float> const& g_out, variant v,
                                pipeline_request pipeline);
#if defined(TAPEFLOW_HAS_CUDA) || defined(TAPEFLOW_HAS_HIP)
/// Whether this binary's bulk-copy kernels run on the current device (sm_90 code on an sm_90+ GPU).
bool bulk_kernels_runnable();
std::vector<float> gradient_gpu(std::vector<float> const& u, std::vector<float> const& g_out, variant v,
                                pipeline_request pipeline);
#endif

}  // namespace tapeflow::workloads::tape_bound::detail

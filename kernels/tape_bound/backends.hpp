// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "tape_bound.hpp"

namespace tapeflow::workloads::tape_bound::detail {

std::vector<float> gradient_cpu(std::vector<float> const& u, std::vector<float> const& g_out, variant v,
                                pipeline_request pipeline);
// The GPU side (cuda.cu), defined in builds with a GPU backend and called only there (on_backend).
/// Whether this binary's bulk-copy kernels run on the current device (sm_90 code on an sm_90+ GPU).
bool bulk_kernels_runnable();
std::vector<float> gradient_gpu(std::vector<float> const& u, std::vector<float> const& g_out, variant v,
                                pipeline_request pipeline);
sweep_timing benchmark_gpu(std::vector<float> const& u, std::vector<float> const& g_out, variant v, int warmup,
                           int repeats, pipeline_request pipeline);

}  // namespace tapeflow::workloads::tape_bound::detail

// SPDX-License-Identifier: Apache-2.0
// The emulated device's <cuda_runtime.h>: the runtime API subset tapeflow uses and, as nvcc gives
// every .cu file, the kernel builtins (threadIdx, __syncthreads, atomics, warp votes).
#pragma once

#include <tapeflow/emulated/device.hpp>
#include <tapeflow/emulated/runtime.hpp>

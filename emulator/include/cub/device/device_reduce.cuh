// SPDX-License-Identifier: Apache-2.0
// The emulated device's <cub/device/device_reduce.cuh>: cub::DeviceReduce (tapeflow/emulated/cub.hpp).
#pragma once

#include <tapeflow/emulated/cub.hpp>

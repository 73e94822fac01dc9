// SPDX-License-Identifier: Apache-2.0
// The emulated device's <cub/device/device_segmented_reduce.cuh>: cub::DeviceSegmentedReduce
// (tapeflow/emulated/cub.hpp).
#pragma once

#include <tapeflow/emulated/cub.hpp>

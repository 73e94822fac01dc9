// SPDX-License-Identifier: Apache-2.0
// The emulated device's <cub/block/block_reduce.cuh>: cub::BlockReduce (tapeflow/emulated/cub.hpp).
#pragma once

#include <tapeflow/emulated/cub.hpp>

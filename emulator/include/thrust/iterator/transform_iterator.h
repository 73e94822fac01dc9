// SPDX-License-Identifier: Apache-2.0
// The emulated device's <thrust/iterator/transform_iterator.h> (tapeflow/emulated/thrust.hpp).
#pragma once

#include <tapeflow/emulated/thrust.hpp>

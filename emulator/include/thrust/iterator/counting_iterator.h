// SPDX-License-Identifier: Apache-2.0
// The emulated device's <thrust/iterator/counting_iterator.h> (tapeflow/emulated/thrust.hpp).
#pragma once

#include <tapeflow/emulated/thrust.hpp>

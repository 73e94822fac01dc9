// SPDX-License-Identifier: Apache-2.0
// The emulated device's <cublas_v2.h> (tapeflow/emulated/cublas.hpp).
#pragma once

#include <tapeflow/emulated/cublas.hpp>

// SPDX-License-Identifier: Apache-2.0
// The distributed tests (rank_tests.hpp) on the CPU backend, one process per rank under mpiexec.
#include "rank_tests.hpp"

// SPDX-License-Identifier: Apache-2.0
// main() of the programs that run as every rank of an MPI run: MPI around GoogleTest.
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int const failed = RUN_ALL_TESTS();
  MPI_Finalize();
  return failed;
}

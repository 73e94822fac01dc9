# SPDX-License-Identifier: Apache-2.0
# `mpirun -np 3 tapeflow run allen-cahn ...` gives the one-process gradient's bits, in segments and in
# one-step slabs; a workload that does not decompose, and bench, are refused under mpirun (exit 2).
# Run by CTest (cli_ranks, label mpi) with -DCLI=<tapeflow> -DMPIEXEC=<mpiexec> -DFLAGS=<flags;...>
# -DWORK=<scratch folder>.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

function(run_or_fail)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${WORK}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN}\nexited ${rc}:\n${out}\n${err}")
  endif()
endfunction()

run_or_fail("${CLI}" init allen-cahn --n 48 --out u0.bin --seed 5)
foreach(segment 1 3)
  set(problem allen-cahn --n 48 --steps 9 --segment ${segment} --input u0.bin)
  run_or_fail("${CLI}" run ${problem} --grad-out one.bin)
  run_or_fail("${MPIEXEC}" -n 3 ${FLAGS} "${CLI}" run ${problem} --grad-out ranks.bin --json ranks.json)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${WORK}/one.bin" "${WORK}/ranks.bin" RESULT_VARIABLE same)
  if(NOT same EQUAL 0)
    message(FATAL_ERROR "--segment ${segment}: the gradient over 3 ranks differs from one process's")
  endif()
  file(READ "${WORK}/ranks.json" stats)
  if(NOT stats MATCHES "\"ranks\": 3")
    message(FATAL_ERROR "--segment ${segment}: the JSON does not say the run had 3 ranks:\n${stats}")
  endif()
endforeach()

execute_process(COMMAND "${MPIEXEC}" -n 2 ${FLAGS} "${CLI}" run lbm --nx 8 --ny 8 --steps 2 --input u0.bin --grad-out x.bin
                WORKING_DIRECTORY "${WORK}" RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(rc EQUAL 0 OR NOT err MATCHES "does not run cut over MPI ranks")
  message(FATAL_ERROR "lbm under mpirun was not refused (exit ${rc}):\n${err}")
endif()
execute_process(COMMAND "${MPIEXEC}" -n 2 ${FLAGS} "${CLI}" bench allen-cahn --n 16 --steps 2
                WORKING_DIRECTORY "${WORK}" RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(rc EQUAL 0 OR NOT err MATCHES "bench times one process")
  message(FATAL_ERROR "bench under mpirun was not refused (exit ${rc}):\n${err}")
endif()
message(STATUS "3 ranks gave the one-process gradient's bits; lbm and bench were refused")

# SPDX-License-Identifier: Apache-2.0
# `mpirun -np 3 tapeflow run allen-cahn ...` (and 2 ranks of burgers, of lbm and of the 2-D wave,
# 3 of the 3-D wave; 4 and 6 as blocks) gives the one-process gradient's bits, in segments and in
# one-step parts; a workload that does not decompose, and bench, are refused under mpirun (exit 2).
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

# The gradient of `tapeflow run <ARGN>` over `ranks` ranks is the bits of one process's, and the
# JSON says how many ranks ran it.
function(same_bits_over ranks)
  set(one ${ARGN})  # one process takes no --ranks-grid
  list(FIND one --ranks-grid at)
  if(at GREATER -1)
    list(REMOVE_AT one ${at})
    list(REMOVE_AT one ${at})
  endif()
  run_or_fail("${CLI}" run ${one} --grad-out one.bin)
  run_or_fail("${MPIEXEC}" -n ${ranks} ${FLAGS} "${CLI}" run ${ARGN} --grad-out ranks.bin --json ranks.json)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${WORK}/one.bin" "${WORK}/ranks.bin" RESULT_VARIABLE same)
  if(NOT same EQUAL 0)
    message(FATAL_ERROR "${ARGN}: the gradient over ${ranks} ranks differs from one process's")
  endif()
  file(READ "${WORK}/ranks.json" stats)
  if(NOT stats MATCHES "\"ranks\": ${ranks}")
    message(FATAL_ERROR "${ARGN}: the JSON does not say the run had ${ranks} ranks:\n${stats}")
  endif()
endfunction()

# The last run's JSON names its process grid: `rows` x `columns`.
function(process_grid_was rows columns)
  file(READ "${WORK}/ranks.json" stats)
  if(NOT stats MATCHES "\"ranks_rows\": ${rows}[^0-9.]" OR NOT stats MATCHES "\"ranks_columns\": ${columns}[^0-9.]")
    message(FATAL_ERROR "the JSON does not say the ranks ran as ${rows} x ${columns}:\n${stats}")
  endif()
endfunction()

run_or_fail("${CLI}" init allen-cahn --n 48 --out u0.bin --seed 5)
run_or_fail("${CLI}" init burgers --n 301 --out b0.bin --seed 6)
run_or_fail("${CLI}" init lbm --nx 9 --ny 14 --out f0.bin --seed 7)
run_or_fail("${CLI}" init wave --nx 14 --ny 17 --steps 10 --out w2.bin --seed 8)
run_or_fail("${CLI}" init wave --nx 6 --ny 5 --nz 13 --steps 6 --out w3.bin --seed 9)
foreach(segment 1 3)
  same_bits_over(3 allen-cahn --n 48 --steps 9 --segment ${segment} --input u0.bin)
  # One process at --segment 1 runs Burgers' own CPU chain; the ranks, the stencil library's slabs.
  same_bits_over(2 burgers --n 301 --steps 11 --segment ${segment} --input b0.bin)
  # The same for LBM, whose own chain tapes the velocities.
  same_bits_over(2 lbm --nx 9 --ny 14 --steps 7 --segment ${segment} --input f0.bin)
  # And for the wave, whose m is cut with the grid and whose traces lie on one rank.
  same_bits_over(2 wave --nx 14 --ny 17 --steps 10 --segment ${segment} --input w2.bin)
endforeach()
same_bits_over(3 wave --nx 6 --ny 5 --nz 13 --steps 6 --segment 2 --input w3.bin)
# --segment measure: every rank times the same candidates and all run the one the slowest rank
# found fastest (a rank that chose apart would deadlock or fail the segment length's check).
same_bits_over(3 wave --nx 6 --ny 5 --nz 13 --steps 6 --segment measure --input w3.bin)
file(READ "${WORK}/ranks.json" stats)
if(NOT stats MATCHES "\"segment_trials\": {\"chosen\": [0-9]")
  message(FATAL_ERROR "--segment measure over ranks: the JSON holds no trials:\n${stats}")
endif()
# Blocks: 4 ranks as 2 x 2 (LBM's diagonal taps read the corners; the 2-D wave's receivers' row is
# cut, and its ranks gather the traces), 6 as 3 x 2 and as 2 x 3.
same_bits_over(4 allen-cahn --n 48 --steps 9 --segment 3 --input u0.bin)
process_grid_was(2 2)
same_bits_over(4 lbm --nx 9 --ny 14 --steps 7 --segment 1 --input f0.bin)
same_bits_over(4 wave --nx 14 --ny 17 --steps 10 --segment 2 --input w2.bin)
same_bits_over(4 wave --nx 6 --ny 5 --nz 13 --steps 6 --segment 1 --input w3.bin)
same_bits_over(6 allen-cahn --n 48 --steps 9 --segment 2 --input u0.bin)
process_grid_was(3 2)
same_bits_over(6 lbm --nx 9 --ny 14 --steps 7 --segment 1 --ranks-grid 2x3 --input f0.bin)
process_grid_was(2 3)

# A refusal is met before anything crosses ranks, or once the crossing work is done: every rank
# exits 2, the message printed once, and MPI finalised rather than aborted (MPICH's launcher may
# drop what a rank printed before an abort).
function(refused_under_ranks reason)
  execute_process(COMMAND "${MPIEXEC}" -n 2 ${FLAGS} "${CLI}" ${ARGN}
                  WORKING_DIRECTORY "${WORK}" RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  string(REGEX MATCHALL "tapeflow: " said "${err}")
  list(LENGTH said times)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "${reason}" OR NOT times EQUAL 1 OR err MATCHES "MPI_[Aa][Bb][Oo][Rr][Tt]")
    message(FATAL_ERROR "${ARGN}: under mpirun not refused once, with exit 2 and no abort (exit ${rc}):\n${err}")
  endif()
endfunction()
refused_under_ranks("does not run cut over MPI ranks" run rk4 --particles 8 --input none.bin --grad-out x.bin)
refused_under_ranks("bench times one process" bench allen-cahn --n 16 --steps 2)
refused_under_ranks("arranges 3 ranks; the run has 2" run allen-cahn --n 48 --steps 3 --ranks-grid 3x1 --input u0.bin --grad-out x.bin)
refused_under_ranks("1-D grid is cut along its one axis only" run burgers --n 301 --steps 3 --ranks-grid 1x2 --input b0.bin --grad-out x.bin)
# Rank 0 writes the files, and finds out before the ranks start that it cannot.
refused_under_ranks("cannot open output file" run allen-cahn --n 48 --steps 3 --input u0.bin --grad-out /nonexistent/g.bin)
# A write that fails after the run (a full disk) meets the other ranks as one before the run does.
refused_under_ranks("writing output file '/dev/full' failed" run allen-cahn --n 48 --steps 3 --input u0.bin --grad-out /dev/full)
refused_under_ranks("writing output file '/dev/full' failed" plan allen-cahn --n 48 --steps 3 --json /dev/full)

# Ranks that fail apart before they start together (one launch, each rank its own arguments): every
# rank exits 2, MPI finalised, and only the lowest failed rank's message is printed, once.
function(fails_apart said not_said)
  set(run run allen-cahn --n 48 --steps 3 --grad-out x.bin --input)
  execute_process(COMMAND "${MPIEXEC}" ${FLAGS} -n 1 "${CLI}" ${run} ${ARGV2} : -n 1 "${CLI}" ${run} ${ARGV3}
                          : -n 1 "${CLI}" ${run} ${ARGV4}
                  WORKING_DIRECTORY "${WORK}" RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  string(REGEX MATCHALL "tapeflow: " printed "${err}")
  list(LENGTH printed times)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "${said}" OR err MATCHES "${not_said}" OR NOT times EQUAL 1
     OR err MATCHES "MPI_[Aa][Bb][Oo][Rr][Tt]")
    message(FATAL_ERROR "inputs ${ARGN}: not stopped with exit 2 and one message, naming ${said} (exit ${rc}):\n${err}")
  endif()
endfunction()
fails_apart("missing-1[.]bin" "missing-2" u0.bin missing-1.bin missing-2.bin)  # ranks 1 and 2 fail
fails_apart("missing-0[.]bin" "missing-2" missing-0.bin u0.bin missing-2.bin)  # ranks 0 and 2 fail

# Ranks whose inputs differ: each would run its part of another problem. Every rank exits 2 before
# the run, and one message names it. Another file of the same size on one rank (its command line
# differs too), and, where the launcher gives a rank a working directory of its own (Open MPI's
# -wdir; Hydra's is global), the same command line on a file of the same name but other values,
# as on nodes whose disks differ.
function(disagree input)  # rank 2 reads `input`, launched with the options ARGN
  execute_process(COMMAND "${MPIEXEC}" ${FLAGS} -n 2 "${CLI}" run allen-cahn --n 48 --steps 3 --grad-out x.bin --input u0.bin
                          : -n 1 ${ARGN} "${CLI}" run allen-cahn --n 48 --steps 3 --grad-out x.bin --input ${input}
                  WORKING_DIRECTORY "${WORK}" RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  string(REGEX MATCHALL "tapeflow: " printed "${err}")
  list(LENGTH printed times)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "the ranks disagree on the command line and the inputs: rank\\(s\\) 2 differ"
     OR NOT times EQUAL 1)
    message(FATAL_ERROR "rank 2 given ${input} (${ARGN}): not stopped with exit 2 and one message (exit ${rc}):\n${err}")
  endif()
endfunction()
file(MAKE_DIRECTORY "${WORK}/other")
run_or_fail("${CLI}" init allen-cahn --n 48 --out other/u0.bin --seed 6)
disagree(other/u0.bin)
execute_process(COMMAND "${MPIEXEC}" --version OUTPUT_VARIABLE launcher ERROR_VARIABLE launcher)
if(launcher MATCHES "Open MPI|OpenRTE")
  disagree(u0.bin -wdir "${WORK}/other")
endif()
message(STATUS "the ranks gave the one-process gradients' bits; rk4 and bench were refused; ranks failing "
               "apart stopped together")

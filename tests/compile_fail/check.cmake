# SPDX-License-Identifier: Apache-2.0
# Compiles SOURCE with COMPILER (-fsyntax-only) and passes only when the compiler refuses it with
# exactly one error, and that error carries EXPECT: the library names the mistake itself, once,
# instead of errors from deep inside its templates.
#   cmake -DCOMPILER=... -DINCLUDE=... -DSOURCE=... -DEXPECT=... -P check.cmake
execute_process(COMMAND ${COMPILER} -std=c++17 -fsyntax-only -I${INCLUDE} ${SOURCE}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(log "${out}${err}")
if(status EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled; it must not")
endif()
string(REGEX MATCHALL "error:" errors "${log}")
list(LENGTH errors count)
string(FIND "${log}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the compiler's output does not say '${EXPECT}':\n${log}")
endif()
if(NOT count EQUAL 1)
  message(FATAL_ERROR "expected exactly one error, the compiler gave ${count}:\n${log}")
endif()
message(STATUS "refused with one error: ${EXPECT}")

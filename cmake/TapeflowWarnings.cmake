# SPDX-License-Identifier: Apache-2.0
# tapeflow_set_warnings(target): warnings on for C++ and CUDA sources; errors with
# TAPEFLOW_WARNINGS_AS_ERRORS (CI).
function(tapeflow_set_warnings target)
  set(cxx_flags -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wconversion -Wno-sign-conversion)
  if(TAPEFLOW_WARNINGS_AS_ERRORS)
    list(APPEND cxx_flags -Werror)
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${cxx_flags}>)
  set(cuda_flags -Xcompiler=-Wall,-Wextra)
  if(TAPEFLOW_WARNINGS_AS_ERRORS)
    list(APPEND cuda_flags -Werror=all-warnings)
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${cuda_flags}>)
endfunction()

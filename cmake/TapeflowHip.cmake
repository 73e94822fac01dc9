# SPDX-License-Identifier: Apache-2.0
# The HIP backend (TAPEFLOW_HIP=ON): the same device sources as CUDA, mapped to HIP by
# include/tapeflow/device/platform.hpp and compiled by hipcc as the C++ compiler (CMake 3.25's HIP
# language does not find Debian's hip-lang layout). The `hip` preset configures it.
option(TAPEFLOW_HIP "Build the HIP backend (configure with CMAKE_CXX_COMPILER=hipcc)" OFF)
set(TAPEFLOW_HIP_ARCHITECTURES "gfx90a" CACHE STRING "AMD GPU targets for the HIP backend (;-list)")

set(TAPEFLOW_HAS_HIP OFF)
if(TAPEFLOW_HIP)
  if(NOT CMAKE_CXX_COMPILER MATCHES "hipcc")
    message(FATAL_ERROR "TAPEFLOW_HIP=ON needs hipcc as the C++ compiler (-DCMAKE_CXX_COMPILER=hipcc, or the hip preset)")
  endif()
  if(TAPEFLOW_HAS_CUDA)
    message(FATAL_ERROR "one build holds one GPU backend: configure TAPEFLOW_HIP=ON with TAPEFLOW_CUDA=OFF")
  endif()
  set(TAPEFLOW_HAS_HIP ON)
  set(TAPEFLOW_HIP_OFFLOAD_FLAGS "")
  foreach(arch IN LISTS TAPEFLOW_HIP_ARCHITECTURES)
    list(APPEND TAPEFLOW_HIP_OFFLOAD_FLAGS "--offload-arch=${arch}")
  endforeach()
endif()

# tapeflow_device_sources(target file...): adds device sources (.cu) to a target, compiled by nvcc
# as CUDA in a CUDA build, or by hipcc as HIP for TAPEFLOW_HIP_ARCHITECTURES in a HIP build.
function(tapeflow_device_sources target)
  target_sources(${target} PRIVATE ${ARGN})
  if(TAPEFLOW_HAS_HIP)
    set_source_files_properties(${ARGN} PROPERTIES LANGUAGE CXX COMPILE_OPTIONS "-xhip")
    target_compile_options(${target} PRIVATE ${TAPEFLOW_HIP_OFFLOAD_FLAGS})
    target_link_options(${target} PRIVATE ${TAPEFLOW_HIP_OFFLOAD_FLAGS})
  endif()
endfunction()

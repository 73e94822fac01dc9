# SPDX-License-Identifier: Apache-2.0
# Decides whether the CUDA backend is built (TAPEFLOW_CUDA = AUTO | ON | OFF) and enables the CUDA
# language with tapeflow's default architectures (80;90: Ampere and Hopper), overridable with
# -DCMAKE_CUDA_ARCHITECTURES=...
include(CheckLanguage)

set(TAPEFLOW_HAS_CUDA OFF)
if(NOT TAPEFLOW_CUDA STREQUAL "OFF")
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
    find_package(CUDAToolkit REQUIRED)
    set(TAPEFLOW_HAS_CUDA ON)
  elseif(TAPEFLOW_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TAPEFLOW_CUDA=ON but no CUDA compiler was found (is nvcc on PATH?)")
  else()
    message(STATUS "tapeflow: no CUDA compiler found; building the CPU backend only")
  endif()
endif()

# SPDX-License-Identifier: Apache-2.0
# The emulated device (TAPEFLOW_EMULATED, on by default with the tests): tapeflow's library, the
# CUDA backend's source, every workload's kernels and the GPU tests compiled as plain C++ against
# include/tapeflow/emulated/ (the CUDA runtime's names, kernels as fibers on the CPU). The device
# sources are compiled through generated one-line translation units, since in this build tree the
# .cu files themselves are CUDA sources of the real library.
option(TAPEFLOW_EMULATED "Build the emulated device and the GPU tests' emulated twins (no CUDA toolkit needed)"
       ${TAPEFLOW_BUILD_TESTS})

set(TAPEFLOW_HAS_EMULATED OFF)
if(TAPEFLOW_EMULATED AND NOT TAPEFLOW_HAS_HIP)
  set(TAPEFLOW_HAS_EMULATED ON)

  add_library(tapeflow_emulated STATIC
    ${TAPEFLOW_LIBRARY_SOURCES}
    src/backend/cuda/cuda_backend.cpp
    src/emulated/fiber.cpp
    src/emulated/runtime.cpp
    src/emulated/scheduler.cpp)
  add_library(tapeflow::emulated ALIAS tapeflow_emulated)
  target_include_directories(tapeflow_emulated PUBLIC ${PROJECT_SOURCE_DIR}/include PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_features(tapeflow_emulated PUBLIC cxx_std_17)
  # The emulated device stands in for the CUDA backend: backend::cuda is the emulator here.
  target_compile_definitions(tapeflow_emulated PUBLIC TAPEFLOW_HAS_CUDA=1 TAPEFLOW_EMULATED=1)
  target_link_libraries(tapeflow_emulated PUBLIC Threads::Threads)
  set_target_properties(tapeflow_emulated PROPERTIES POSITION_INDEPENDENT_CODE ON)
  tapeflow_set_warnings(tapeflow_emulated)

  set(device_units)
  foreach(source IN LISTS TAPEFLOW_WORKLOAD_DEVICE_SOURCES)
    string(REPLACE "/" "_" unit_name ${source})
    set(unit ${PROJECT_BINARY_DIR}/emulated/${unit_name}.cpp)
    file(CONFIGURE OUTPUT ${unit} CONTENT "#include \"${PROJECT_SOURCE_DIR}/${source}\"\n")
    list(APPEND device_units ${unit})
  endforeach()
  list(TRANSFORM TAPEFLOW_WORKLOAD_SOURCES PREPEND ${PROJECT_SOURCE_DIR}/ OUTPUT_VARIABLE workload_sources)
  add_library(tapeflow_emulated_workloads STATIC ${workload_sources} ${device_units})
  add_library(tapeflow::emulated_workloads ALIAS tapeflow_emulated_workloads)
  target_include_directories(tapeflow_emulated_workloads PUBLIC ${TAPEFLOW_WORKLOADS_INCLUDE_DIR})
  target_link_libraries(tapeflow_emulated_workloads PUBLIC tapeflow_emulated)
  set_target_properties(tapeflow_emulated_workloads PROPERTIES POSITION_INDEPENDENT_CODE ON)
  tapeflow_set_warnings(tapeflow_emulated_workloads)
  tapeflow_workload_tools(tapeflow_emulated_workload_tools tapeflow_emulated_workloads)
  add_library(tapeflow::emulated_workload_tools ALIAS tapeflow_emulated_workload_tools)
endif()

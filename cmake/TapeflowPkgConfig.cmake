# SPDX-License-Identifier: Apache-2.0
# pkg-config files beside the CMake package, for builds that do not use CMake:
#   c++ -std=c++17 app.cpp $(pkg-config --cflags --libs tapeflow-workloads)
# tapeflow.pc is the host library (and the header-only device side); tapeflow-workloads.pc the
# shipped workloads on top of it. The libraries are static, so Libs carries what they link.
# Relocatable: the prefix is found from the .pc file's own directory.
set(TAPEFLOW_PKGCONFIG_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig" CACHE STRING
    "Where the installed package's .pc files go, relative to the prefix")
file(RELATIVE_PATH tapeflow_pc_to_prefix "/prefix/${TAPEFLOW_PKGCONFIG_DIR}" "/prefix")
string(REGEX REPLACE "/$" "" tapeflow_pc_to_prefix "${tapeflow_pc_to_prefix}")

set(tapeflow_pc_cflags "-I\${includedir}")
set(tapeflow_pc_libs "-L\${libdir} -ltapeflow -pthread")
set(tapeflow_pc_workload_libs "-L\${libdir} -ltapeflow_workloads")
# The library's public definitions, as its CMake consumers get them: every file that includes
# tapeflow's headers must agree on what config.hpp reads (TAPEFLOW_NO_CPU_CLONES, ...).
get_target_property(tapeflow_pc_definitions tapeflow INTERFACE_COMPILE_DEFINITIONS)
foreach(definition IN LISTS tapeflow_pc_definitions)
  if(definition MATCHES "[$<>]")
    message(FATAL_ERROR "tapeflow.pc: the public definition '${definition}' is a generator expression")
  endif()
  string(APPEND tapeflow_pc_cflags " -D${definition}")
endforeach()
if(TAPEFLOW_HAS_NVTX)
  string(APPEND tapeflow_pc_cflags " -isystem \${includedir}/tapeflow/third_party")
  foreach(lib IN LISTS CMAKE_DL_LIBS)
    string(APPEND tapeflow_pc_libs " -l${lib}")
  endforeach()
endif()
if(TAPEFLOW_HAS_CUDA)
  foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
    string(APPEND tapeflow_pc_cflags " -isystem ${dir}")
  endforeach()
  string(APPEND tapeflow_pc_libs " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lrt -ldl")
  string(APPEND tapeflow_pc_workload_libs " -L${CUDAToolkit_LIBRARY_DIR} -lcublas")
endif()
if(TAPEFLOW_HAS_HIP)
  list(JOIN TAPEFLOW_HIP_OFFLOAD_FLAGS " " tapeflow_pc_hip)
  string(APPEND tapeflow_pc_libs " ${tapeflow_pc_hip}")
endif()

foreach(pc IN ITEMS tapeflow tapeflow-workloads)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${TAPEFLOW_PKGCONFIG_DIR})
endforeach()

# SPDX-License-Identifier: Apache-2.0
# The workloads' registration (kernels/CMakeLists.txt has one line per workload):
#
#   tapeflow_workload(<folder> [CUDA_ONLY] [KERNELS_ONLY] [NO_INSTALL])
#
# registers kernels/<folder>/ — namespace tapeflow::workloads::<folder> — into tapeflow::workloads:
#   - its *.cpp, compiled for the host;
#   - its cuda.cu, compiled for this build's GPU (CUDA, or HIP unless CUDA_ONLY) and for the
#     emulated device;
#   - its headers, reachable as <tapeflow/workloads/<folder>/<header>> in the build tree, and
#     <folder>.hpp also as <tapeflow/workloads/<folder>.hpp>; installed (unless NO_INSTALL): <folder>.hpp
#     and, where it has one, math.hpp (its per-element math), at those same names;
#   - unless KERNELS_ONLY, its description (description.hpp, `<folder>::description`) into the
#     registry <tapeflow/workloads/registry.hpp>, from which the CLI's commands, the benchmark
#     suites and the typed test suite are made, in registration order.
#
# tapeflow_workload_common() does the same for kernels/common/ (its sources are the tooling the
# CLI, the benchmarks and the tests share; its public headers install with the workloads).
# tapeflow_workloads_finish() writes the registry and hands the source lists to the parent scope.

set(TAPEFLOW_WORKLOADS_INCLUDE_DIR ${PROJECT_BINARY_DIR}/include)

# A one-line header at <tapeflow/workloads/<name>> in the build tree that includes `source`.
function(tapeflow_forward_header source name)
  file(CONFIGURE OUTPUT ${TAPEFLOW_WORKLOADS_INCLUDE_DIR}/tapeflow/workloads/${name}
       CONTENT "// Generated: the build tree's name of ${source}\n#pragma once\n#include \"${source}\"\n")
endfunction()

# Forwards every header of kernels/<folder>/ as <tapeflow/workloads/<folder>/<header>>.
function(tapeflow_forward_folder folder)
  file(GLOB headers CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${folder}/*.hpp ${CMAKE_CURRENT_SOURCE_DIR}/${folder}/*.cuh)
  foreach(header IN LISTS headers)
    get_filename_component(name ${header} NAME)
    tapeflow_forward_header(${header} ${folder}/${name})
  endforeach()
endfunction()

function(tapeflow_workload folder)
  cmake_parse_arguments(arg "CUDA_ONLY;KERNELS_ONLY;NO_INSTALL" "" "" ${ARGN})
  set(dir ${CMAKE_CURRENT_SOURCE_DIR}/${folder})
  if(NOT EXISTS ${dir}/${folder}.hpp)
    message(FATAL_ERROR "tapeflow_workload(${folder}): kernels/${folder}/${folder}.hpp (its public header) is missing")
  endif()
  file(GLOB host CONFIGURE_DEPENDS ${dir}/*.cpp)
  set_property(GLOBAL APPEND PROPERTY TAPEFLOW_WORKLOAD_SOURCES ${host})
  if(EXISTS ${dir}/cuda.cu)
    set_property(GLOBAL APPEND PROPERTY TAPEFLOW_WORKLOAD_DEVICE_SOURCES ${dir}/cuda.cu)
    if(arg_CUDA_ONLY)
      set_property(GLOBAL APPEND PROPERTY TAPEFLOW_WORKLOAD_CUDA_ONLY_SOURCES ${dir}/cuda.cu)
    endif()
  endif()
  tapeflow_forward_folder(${folder})
  tapeflow_forward_header(${dir}/${folder}.hpp ${folder}.hpp)
  if(NOT arg_NO_INSTALL)
    set_property(GLOBAL APPEND PROPERTY TAPEFLOW_WORKLOAD_INSTALL "${dir}/${folder}.hpp|.")
    if(EXISTS ${dir}/math.hpp)
      set_property(GLOBAL APPEND PROPERTY TAPEFLOW_WORKLOAD_INSTALL "${dir}/math.hpp|${folder}")
    endif()
  endif()
  if(NOT arg_KERNELS_ONLY)
    if(NOT EXISTS ${dir}/description.hpp)
      message(FATAL_ERROR "tapeflow_workload(${folder}): kernels/${folder}/description.hpp is missing "
                          "(or register it KERNELS_ONLY)")
    endif()
    set_property(GLOBAL APPEND PROPERTY TAPEFLOW_WORKLOAD_DESCRIPTIONS ${folder})
  endif()
endfunction()

function(tapeflow_workload_common)
  tapeflow_forward_folder(common)
  foreach(header IN ITEMS run_options.hpp session.hpp staged_cells.cuh staged_cells.hpp state_gradient.hpp value_cells.hpp)
    set_property(GLOBAL APPEND PROPERTY TAPEFLOW_WORKLOAD_INSTALL "${CMAKE_CURRENT_SOURCE_DIR}/common/${header}|common")
  endforeach()
endfunction()

# Writes <tapeflow/workloads/registry.hpp> and sets, in the caller's parent scope,
#   TAPEFLOW_WORKLOAD_SOURCES         host sources of every workload
#   TAPEFLOW_WORKLOAD_DEVICE_SOURCES  every cuda.cu (paths relative to the project root)
#   TAPEFLOW_WORKLOAD_CUDA_ONLY_SOURCES  those of them that are CUDA-only (no HIP)
function(tapeflow_workloads_finish)
  get_property(folders GLOBAL PROPERTY TAPEFLOW_WORKLOAD_DESCRIPTIONS)
  set(includes "")
  set(names "")
  foreach(folder IN LISTS folders)
    string(APPEND includes "#include <tapeflow/workloads/${folder}/description.hpp>\n")
    list(APPEND names "${folder}::description")
  endforeach()
  list(JOIN names ",\n                                      " listed)
  file(CONFIGURE OUTPUT ${TAPEFLOW_WORKLOADS_INCLUDE_DIR}/tapeflow/workloads/registry.hpp CONTENT
"// Generated from kernels/CMakeLists.txt: every registered workload's description, in registration order.
#pragma once

${includes}
namespace tapeflow::workloads {
using registered_workloads = description_list<${listed}>;
}  // namespace tapeflow::workloads
")
  foreach(list IN ITEMS TAPEFLOW_WORKLOAD_SOURCES TAPEFLOW_WORKLOAD_DEVICE_SOURCES TAPEFLOW_WORKLOAD_CUDA_ONLY_SOURCES)
    get_property(files GLOBAL PROPERTY ${list})
    set(relative "")
    foreach(file IN LISTS files)
      file(RELATIVE_PATH path ${PROJECT_SOURCE_DIR} ${file})
      list(APPEND relative ${path})
    endforeach()
    set(${list} ${relative} PARENT_SCOPE)
  endforeach()
endfunction()

# Installs every registered public header under <prefix>/include/tapeflow/workloads/.
function(tapeflow_install_workload_headers)
  get_property(entries GLOBAL PROPERTY TAPEFLOW_WORKLOAD_INSTALL)
  foreach(entry IN LISTS entries)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 file)
    list(GET parts 1 where)
    install(FILES ${file} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tapeflow/workloads/${where})
  endforeach()
endfunction()

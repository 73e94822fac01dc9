# SPDX-License-Identifier: Apache-2.0
# Real Enzyme (TAPEFLOW_ENZYME=ON): sources compiled through
#   clang-15 -O2 -emit-llvm  ->  opt-15 -passes=enzyme,tapeflow-enzyme-cache  ->  clang-15 / llc
# with Enzyme's LLVM 15 plugin (installed by .ci/install-enzyme.sh) and tapeflow's pass plugin
# (tools/enzyme), which routes Enzyme's cache allocations into tapeflow's cache pool.
#
#   tapeflow_enzyme_object(<target> <source> [INCLUDES dirs...])
#       host: adds the Enzyme-compiled object of <source> to <target>.
#   tapeflow_enzyme_ptx(<name> <source> [CUBIN sm_XX...] [PASSES list] [INCLUDES dirs...])
#       device: <name>.ptx for sm_80 (clang-15 -x cuda -nocudainc, Enzyme, tapeflow's passes,
#       libdevice, LLVM 15's NVPTX backend, whose newest target is sm_86) and <name>.<sm_XX>.cubin
#       by ptxas for each CUBIN architecture; target <name> builds them. Needs a CUDA toolkit's
#       libdevice.10.bc and ptxas (TAPEFLOW_ENZYME_DEVICE says whether they were found); the host
#       route needs no CUDA.
#
# The functions work in tapeflow's tree and in a project that adds it with add_subdirectory (they
# build tapeflow's pass plugin there); the installed package does not ship them.
option(TAPEFLOW_ENZYME "Build and test the Enzyme route (clang-15 + Enzyme's LLVM 15 plugin; .ci/install-enzyme.sh)" OFF)
if(NOT TAPEFLOW_ENZYME)
  return()
endif()

set(TAPEFLOW_ENZYME_ROOT "$ENV{TAPEFLOW_ENZYME_ROOT}" CACHE PATH "Where .ci/install-enzyme.sh put LLVMEnzyme-15.so")
if(NOT TAPEFLOW_ENZYME_ROOT)
  set(TAPEFLOW_ENZYME_ROOT "/opt/tapeflow-enzyme" CACHE PATH "" FORCE)
endif()
# Searched again when the root changes (a cached find_file result would outlive it).
if(NOT TAPEFLOW_ENZYME_ROOT STREQUAL TAPEFLOW_ENZYME_ROOT_SEARCHED)
  unset(TAPEFLOW_ENZYME_PLUGIN CACHE)
  set(TAPEFLOW_ENZYME_ROOT_SEARCHED "${TAPEFLOW_ENZYME_ROOT}" CACHE INTERNAL "")
endif()
find_file(TAPEFLOW_ENZYME_PLUGIN LLVMEnzyme-15.so PATHS "${TAPEFLOW_ENZYME_ROOT}" NO_DEFAULT_PATH)
find_program(TAPEFLOW_ENZYME_CLANG NAMES clang++-15 PATHS /usr/lib/llvm-15/bin)
find_program(TAPEFLOW_ENZYME_OPT NAMES opt-15 PATHS /usr/lib/llvm-15/bin)
find_program(TAPEFLOW_ENZYME_LLVM_CONFIG NAMES llvm-config-15 PATHS /usr/lib/llvm-15/bin)
find_program(TAPEFLOW_ENZYME_LLVM_LINK NAMES llvm-link-15 PATHS /usr/lib/llvm-15/bin)
find_program(TAPEFLOW_ENZYME_PTXAS NAMES ptxas PATHS /usr/local/cuda/bin)
find_file(TAPEFLOW_ENZYME_LIBDEVICE libdevice.10.bc PATHS /usr/local/cuda/nvvm/libdevice /usr/lib/cuda/nvvm/libdevice)
if(TAPEFLOW_ENZYME_LIBDEVICE AND TAPEFLOW_ENZYME_PTXAS)
  set(TAPEFLOW_ENZYME_DEVICE ON)
else()
  set(TAPEFLOW_ENZYME_DEVICE OFF)
  message(STATUS "tapeflow: Enzyme's device route (PTX, cubins) needs CUDA's libdevice.10.bc and ptxas; "
                 "found neither or one: the host route only")
endif()
foreach(var TAPEFLOW_ENZYME_PLUGIN TAPEFLOW_ENZYME_CLANG TAPEFLOW_ENZYME_OPT TAPEFLOW_ENZYME_LLVM_CONFIG
            TAPEFLOW_ENZYME_LLVM_LINK)
  if(NOT ${var})
    message(FATAL_ERROR "TAPEFLOW_ENZYME=ON needs ${var}: run .ci/install-enzyme.sh (Debian's clang-15, llvm-15-dev "
                        "and Enzyme's plugin from PyPI) or set ${var}")
  endif()
endforeach()

# tapeflow's pass plugin, against LLVM 15 (built without RTTI, like LLVM).
execute_process(COMMAND ${TAPEFLOW_ENZYME_LLVM_CONFIG} --includedir OUTPUT_VARIABLE tapeflow_llvm_include
                OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
add_library(tapeflow_enzyme_pass MODULE ${PROJECT_SOURCE_DIR}/tools/enzyme/cache_routing_pass.cpp)
target_include_directories(tapeflow_enzyme_pass SYSTEM PRIVATE ${tapeflow_llvm_include})
target_compile_options(tapeflow_enzyme_pass PRIVATE -fno-rtti)
target_compile_definitions(tapeflow_enzyme_pass PRIVATE __STDC_CONSTANT_MACROS __STDC_FORMAT_MACROS __STDC_LIMIT_MACROS)
set_target_properties(tapeflow_enzyme_pass PROPERTIES PREFIX "" OUTPUT_NAME TapeflowEnzymeCache)

# What the functions need from tapeflow's tree, kept where a caller in another directory (an
# add_subdirectory consumer, whose PROJECT_SOURCE_DIR is its own) finds them.
set(TAPEFLOW_ENZYME_PASSES "enzyme,tapeflow-enzyme-cache" CACHE INTERNAL "Enzyme's pass and tapeflow's cache routing")
set(TAPEFLOW_ENZYME_INCLUDES "${PROJECT_SOURCE_DIR}/include;${PROJECT_BINARY_DIR}/include" CACHE INTERNAL
    "tapeflow's headers and its generated workload headers (TapeflowWorkloads.cmake)")
set(TAPEFLOW_ENZYME_NOCUDAINC "${PROJECT_SOURCE_DIR}/include/tapeflow/device/clang_nocudainc.hpp" CACHE INTERNAL
    "What clang -nocudainc needs of CUDA's runtime header")

function(tapeflow_enzyme_ir source out_ir)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "FLAGS;INCLUDES;PASSES")
  if(NOT arg_PASSES)
    set(arg_PASSES ${TAPEFLOW_ENZYME_PASSES})
  endif()
  string(REPLACE ";" "," passes "${arg_PASSES}")
  set(includes ${TAPEFLOW_ENZYME_INCLUDES} ${arg_INCLUDES})
  list(TRANSFORM includes PREPEND "-I")
  get_filename_component(name ${out_ir} NAME_WE)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/enzyme)
  add_custom_command(
    OUTPUT ${out_ir}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${TAPEFLOW_ENZYME_CLANG} -std=c++17 -O2 -DTAPEFLOW_WITH_ENZYME ${includes} ${arg_FLAGS}
            -MD -MF ${dir}/${name}.d -MT ${dir}/${name}.ll -emit-llvm -S ${source} -o ${dir}/${name}.ll
    COMMAND ${TAPEFLOW_ENZYME_OPT} --load-pass-plugin=${TAPEFLOW_ENZYME_PLUGIN}
            --load-pass-plugin=$<TARGET_FILE:tapeflow_enzyme_pass> -passes=${passes}
            ${dir}/${name}.ll -o ${out_ir}
    DEPENDS ${source} tapeflow_enzyme_pass
    DEPFILE ${dir}/${name}.d
    COMMENT "Enzyme: ${source} -> ${out_ir}"
    VERBATIM COMMAND_EXPAND_LISTS)
endfunction()

function(tapeflow_enzyme_object target source)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "INCLUDES")
  get_filename_component(name ${source} NAME_WE)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/enzyme)
  tapeflow_enzyme_ir(${source} ${dir}/${name}.enzyme.bc FLAGS -fPIC INCLUDES ${arg_INCLUDES})
  add_custom_command(
    OUTPUT ${dir}/${name}.enzyme.o
    COMMAND ${TAPEFLOW_ENZYME_CLANG} -O2 -fPIC -c ${dir}/${name}.enzyme.bc -o ${dir}/${name}.enzyme.o
    DEPENDS ${dir}/${name}.enzyme.bc
    COMMENT "Enzyme: ${name}.enzyme.o"
    VERBATIM)
  target_sources(${target} PRIVATE ${dir}/${name}.enzyme.o)
endfunction()

function(tapeflow_enzyme_ptx name source)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "CUBIN;INCLUDES;PASSES")
  if(NOT TAPEFLOW_ENZYME_LIBDEVICE)
    message(FATAL_ERROR "tapeflow_enzyme_ptx needs CUDA's libdevice.10.bc (TAPEFLOW_ENZYME_LIBDEVICE; "
                        "TAPEFLOW_ENZYME_DEVICE is OFF)")
  endif()
  if(NOT arg_PASSES)
    set(arg_PASSES ${TAPEFLOW_ENZYME_PASSES} tapeflow-libdevice-math)
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/enzyme)
  tapeflow_enzyme_ir(${source} ${dir}/${name}.enzyme.bc INCLUDES ${arg_INCLUDES} PASSES ${arg_PASSES}
    FLAGS -x cuda -nocudainc -nocudalib --cuda-device-only --cuda-gpu-arch=sm_80 -Wno-unknown-cuda-version
          -include ${TAPEFLOW_ENZYME_NOCUDAINC})
  # libdevice after Enzyme (Enzyme differentiates __nv_sin and friends by name), then NVPTX.
  add_custom_command(
    OUTPUT ${dir}/${name}.ptx
    COMMAND ${TAPEFLOW_ENZYME_LLVM_LINK} ${dir}/${name}.enzyme.bc --internalize --only-needed
            ${TAPEFLOW_ENZYME_LIBDEVICE} -o ${dir}/${name}.linked.bc
    COMMAND ${TAPEFLOW_ENZYME_CLANG} -x ir --target=nvptx64-nvidia-cuda -march=sm_80 -O2 -S
            ${dir}/${name}.linked.bc -o ${dir}/${name}.ptx
    DEPENDS ${dir}/${name}.enzyme.bc
    COMMENT "Enzyme: ${name}.ptx (sm_80)"
    VERBATIM)
  set(outputs ${dir}/${name}.ptx)
  foreach(arch IN LISTS arg_CUBIN)
    if(NOT TAPEFLOW_ENZYME_PTXAS)
      message(FATAL_ERROR "tapeflow_enzyme_ptx: CUBIN ${arch} needs ptxas (TAPEFLOW_ENZYME_PTXAS)")
    endif()
    add_custom_command(
      OUTPUT ${dir}/${name}.${arch}.cubin
      COMMAND ${TAPEFLOW_ENZYME_PTXAS} -arch=${arch} ${dir}/${name}.ptx -o ${dir}/${name}.${arch}.cubin
      DEPENDS ${dir}/${name}.ptx
      COMMENT "ptxas: ${name}.${arch}.cubin"
      VERBATIM)
    list(APPEND outputs ${dir}/${name}.${arch}.cubin)
  endforeach()
  add_custom_target(${name} ALL DEPENDS ${outputs})
endfunction()

message(STATUS "tapeflow: Enzyme ${TAPEFLOW_ENZYME_PLUGIN} with ${TAPEFLOW_ENZYME_CLANG}, ${TAPEFLOW_ENZYME_OPT}")

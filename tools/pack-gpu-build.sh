#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds here, for a GPU machine that compiles nothing (no GoogleTest, no MPI library there), what
# bench/gpu-check.sh runs, and packs it into one archive to carry there (docs/gpu-validation.md):
#   - the gpu-sm90 preset (gtest and cudart static, tests listed at build time), with MPI against
#     PyPI's MPICH unpacked into .mpich/ (downloaded once; its bin/ and lib/ travel too), NCCL, and
#     the Enzyme-generated cubins where Enzyme is installed (.ci/install-enzyme.sh);
#   - from it the binaries, the CTest files and the cubins: no object files, no static libraries,
#     no build system files, xz-compressed (about 26 MB with everything on);
#   - the CLI alone built for sm_80 only (build/cli-sm80/tapeflow): on an sm_90 GPU it runs as
#     compute_80 code, which gpu-check.sh's cli stage asks for bulk copies.
#
#   tools/pack-gpu-build.sh [ARCHIVE]          default: build-carry/gpu.tar.xz
#
# Environment: BUILD_DIR (build/gpu-sm90), MPI (ON|OFF, ON), MPICH_VERSION (5.0.2), ENZYME
# (auto|ON|OFF, auto: ON where .ci/install-enzyme.sh installed clang-15 and Enzyme's plugin),
# SM80 (ON|OFF, ON: the sm_80-only CLI),
# TAPEFLOW_ENZYME_ROOT (/opt/tapeflow-enzyme), PACK_ONLY=1 (pack an
# existing build without configuring or building it).
# On the GPU machine, in a checkout of the same commit:
#   tar -xJf gpu.tar.xz && COMMIT=<sha> bench/gpu-check.sh env tests sanitize mpi enzyme ...
set -euo pipefail
cd "$(dirname "$0")/.."

archive=${1:-build-carry/gpu.tar.xz}
build=${BUILD_DIR:-build/gpu-sm90}
mpi=${MPI:-ON}
mpich_version=${MPICH_VERSION:-5.0.2}
enzyme=${ENZYME:-auto}

if [ "${PACK_ONLY:-0}" != 1 ]; then
  flags=(-DTAPEFLOW_EMULATED=OFF)
  if [ "$mpi" = ON ]; then
    if [ ! -x .mpich/bin/mpiexec ]; then
      wheels=$(mktemp -d)
      python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$wheels" "mpich==$mpich_version"
      unzip -q "$wheels"/mpich-*.whl 'mpich-*.data/data/*' -d "$wheels/x"
      mkdir -p .mpich
      cp -r "$wheels"/x/mpich-*.data/data/. .mpich/
      rm -rf "$wheels"
    fi
    flags+=(-DTAPEFLOW_MPI=ON -DTAPEFLOW_NCCL=ON "-DMPI_HOME=$PWD/.mpich")
  fi
  if [ "$enzyme" = auto ]; then  # installed by .ci/install-enzyme.sh (TAPEFLOW_ENZYME_ROOT)
    enzyme=OFF
    if [ -f "${TAPEFLOW_ENZYME_ROOT:-/opt/tapeflow-enzyme}/LLVMEnzyme-15.so" ] && command -v clang++-15 >/dev/null; then
      enzyme=ON
    fi
  fi
  flags+=("-DTAPEFLOW_ENZYME=$enzyme")
  echo "configuring $build: gpu-sm90 ${flags[*]}"
  cmake --preset gpu-sm90 -B "$build" "${flags[@]}" >/dev/null
  cmake --build "$build"
  if [ "${SM80:-ON}" = ON ]; then
    cmake --preset release -B build/cli-sm80 -DTAPEFLOW_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=80 >/dev/null
    cmake --build build/cli-sm80 --target tapeflow_cli
  fi
fi

[ -f "$build/CTestTestfile.cmake" ] || { echo "error: $build holds no CTest files: build it first" >&2; exit 2; }
mkdir -p "$(dirname "$archive")"
list=$(mktemp)
trap 'rm -f "$list"' EXIT
find "$build" -type f ! -name '*.o' ! -name '*.a' ! -name '*.bc' ! -name '*.ll' ! -name '*.d' ! -name '*.ptx' \
  ! -name '*.ninja' ! -name '.ninja*' ! -path '*/CMakeFiles/*' >"$list"
if [ "$mpi" = ON ] && [ -d .mpich ]; then find .mpich/bin .mpich/lib -type f -o -type l >>"$list"; fi
if [ "${SM80:-ON}" = ON ] && [ -x build/cli-sm80/tapeflow ]; then echo build/cli-sm80/tapeflow >>"$list"; fi
tar -cf - -T "$list" | xz -T0 -6 >"$archive"
echo "packed $(wc -l <"$list") files into $archive ($(du -h "$archive" | cut -f1))"

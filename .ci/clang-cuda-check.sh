#!/usr/bin/env bash
# clang compiles every CUDA source of tapeflow (workload kernels, the GPU pipeline tests, the
# benchmark driver) for sm_80 and sm_90: the compiler Enzyme users build CUDA with is stricter than
# nvcc (no initialisers on __shared__ variables, no host calls from device code).
#
# Debian's clang-19, with a CUDA 12 toolkit's headers assembled from PyPI wheels
# (nvidia-cuda-runtime-cu12 and -nvcc-cu12 12.5, the newest CUDA clang-19 knows; CCCL 12.6, whose
# headers clang-19 parses: 12.5's cuda/barrier has an asm operand list clang rejects) and CUDA 13's
# cuBLAS header for the LSTM. Device side only (--cuda-device-only -S: the PTX clang generates),
# which is where clang and nvcc differ; the host side is the same C++ g++ already builds.
# Usage: .ci/clang-cuda-check.sh [TOOLKIT_DIR]   (default build/clang-cuda12; configures build/cpu if absent)
set -euo pipefail
cd "$(dirname "$0")/.."
root="${1:-build/clang-cuda12}"

if ! command -v clang++-19 >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq clang-19 >/dev/null
fi
if [ ! -f "$root/include/cuda_runtime.h" ] || [ ! -f "$root/nvvm/libdevice/libdevice.10.bc" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux2014_x86_64 -d "$work" \
    nvidia-cuda-runtime-cu12==12.5.82 nvidia-cuda-nvcc-cu12==12.5.82 nvidia-cuda-cccl-cu12==12.6.77
  for wheel in "$work"/*.whl; do unzip -q -o "$wheel" 'nvidia/*' -d "$work/x"; done
  rm -rf "$root"
  mkdir -p "$root/include" "$root/bin"
  cp -r "$work/x/nvidia/cuda_runtime/include/." "$work/x/nvidia/cuda_nvcc/include/." "$work/x/nvidia/cuda_cccl/include/." \
    "$root/include/"
  cp -r "$work/x/nvidia/cuda_nvcc/nvvm" "$root/"
  cp "$work/x/nvidia/cuda_nvcc/bin/ptxas" "$root/bin/"
fi
cuda13=/usr/local/cuda/include  # only for what the CUDA 12 wheels lack (cublas_v2.h), searched last

# The workloads' public names (<tapeflow/workloads/...>) are forwarding headers a configured build
# tree generates (cmake/TapeflowWorkloads.cmake); the CPU-only preset's configure step makes them.
tree=build/cpu
[ -f "$tree/include/tapeflow/workloads/registry.hpp" ] || cmake --preset cpu >/dev/null

sources=$(ls kernels/*/cuda.cu tests/*.cu tests/stencil/*.cu bench/*.cu)
# One clang per source and architecture, as many at once as the machine has cores (each is one
# single-threaded compiler; on CI's two cores this halves the step).
compile() {  # compile SOURCE ARCH
  clang++-19 -x cuda --cuda-path="$root" --cuda-gpu-arch="$2" --cuda-device-only -Wno-unknown-cuda-version \
    -std=c++17 -O2 -Werror -Wno-deprecated-declarations -DTAPEFLOW_HAS_CUDA=1 -Iinclude -I"$tree/include" -Ikernels -Itests -Ibench -Iapps/tapeflow -idirafter "$cuda13" \
    -S "$1" -o /dev/null || return 1
  echo "clang-19: $1 ($2)"
}
export -f compile
export root tree cuda13
pairs=$(for source in $sources; do printf '%s sm_80\n%s sm_90\n' "$source" "$source"; done)
# xargs exits non-zero when any compile failed (set -e ends the script there).
xargs -P "$(nproc)" -n 2 bash -c 'compile "$@"' _ <<<"$pairs"
echo "clang-19 compiled $(wc -l <<<"$pairs") source/architecture pairs"

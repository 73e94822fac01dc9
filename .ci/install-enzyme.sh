#!/usr/bin/env bash
# Installs real Enzyme for TAPEFLOW_ENZYME=ON from what CI machines reach (Debian packages, PyPI):
#   - Debian's clang-15, llvm-15 (opt, llc, llvm-link), llvm-15-dev (headers for tapeflow's pass
#     plugin) and patchelf;
#   - Enzyme's LLVM 15 plugin, LLVMEnzyme-15.so, from PyPI's numba-enzyme-cuda 0.2.2 wheel (its only
#     wheel is manylinux_2_38, but the plugin needs glibc 2.32; pinned by hash), relinked against
#     Debian's libLLVM-15.so.1.
# Usage: .ci/install-enzyme.sh [PREFIX]   (default /opt/tapeflow-enzyme; CMake: TAPEFLOW_ENZYME_ROOT)
set -euo pipefail
prefix="${1:-${TAPEFLOW_ENZYME_ROOT:-/opt/tapeflow-enzyme}}"
wheel_version=0.2.2
wheel_sha256=e29ae7abf33b110cccebdcba4952ac9573a0c04e26610ebf451d1dcb400cf322

missing=()
for tool in clang++-15 opt-15 llc-15 llvm-link-15 llvm-config-15 patchelf unzip; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
[ -f /usr/lib/llvm-15/include/llvm/Passes/PassPlugin.h ] || missing+=(llvm-15-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-enzyme: installing Debian packages for: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq clang-15 llvm-15 llvm-15-dev patchelf unzip >/dev/null
fi

if [ -f "$prefix/LLVMEnzyme-15.so" ] && [ -f "$prefix/wheel.sha256" ] && [ "$(cat "$prefix/wheel.sha256")" = "$wheel_sha256" ]; then
  echo "install-enzyme: $prefix/LLVMEnzyme-15.so is installed"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_38_x86_64 \
  "numba-enzyme-cuda==$wheel_version" -d "$work"
wheel=$(echo "$work"/numba_enzyme_cuda-"$wheel_version"-*.whl)
echo "$wheel_sha256  $wheel" | sha256sum --check --quiet
unzip -q -o "$wheel" 'numba_enzyme/_vendor/enzyme/LLVMEnzyme-15.so' 'numba_enzyme_cuda-*.dist-info/licenses/*' -d "$work"
mkdir -p "$prefix"
plugin="$prefix/LLVMEnzyme-15.so"
cp "$work/numba_enzyme/_vendor/enzyme/LLVMEnzyme-15.so" "$plugin.tmp"
needed=$(patchelf --print-needed "$plugin.tmp" | grep '^libLLVM-15' || true)
[ -n "$needed" ] || { echo "install-enzyme: the plugin links no libLLVM-15" >&2; exit 1; }
patchelf --replace-needed "$needed" libLLVM-15.so.1 --remove-rpath "$plugin.tmp"
mv "$plugin.tmp" "$plugin"
cp "$work"/numba_enzyme_cuda-*.dist-info/licenses/* "$prefix/"
echo "$wheel_sha256" >"$prefix/wheel.sha256"
# The plugin must load into Debian's opt-15 and know Enzyme's pass.
echo 'define double @f(double %x) { ret double %x }' >"$work/t.ll"
opt-15 --load-pass-plugin="$plugin" -passes=enzyme "$work/t.ll" -disable-output
echo "install-enzyme: $plugin (Enzyme from numba-enzyme-cuda $wheel_version, relinked to Debian's libLLVM-15)"

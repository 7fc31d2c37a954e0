#!/usr/bin/env bash
# bootstrap.sh [BUILD_DIR] [CMAKE_ARGS...] [--target T...] — installs the Debian packages mixcheck
# needs (when missing; needs root), then configures and builds into BUILD_DIR (default: build); the
# arguments after --target name the targets to build (default: all); `bootstrap.sh --deps` only
# installs. clang and libclang-rt-14-dev (libFuzzer) are for the fuzz build of .ci/run (-DMIXCHECK_FUZZ=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(build-essential cmake pkg-config libhdf5-dev libyaml-dev libcmocka-dev libopenblas-dev
          python3-numpy python3-h5py hdf5-tools clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
[ "${1:-}" = --deps ] && exit 0
build=${1:-build}
shift || true
cmake_args=() targets=()
while [ $# -gt 0 ]; do
  if [ "$1" = --target ]; then shift; targets=("$@"); break; fi
  cmake_args+=("$1"); shift
done
cmake -S . -B "$build" "${cmake_args[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" ${targets[@]:+--target "${targets[@]}"}

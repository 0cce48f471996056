#!/usr/bin/env bash
# Installs what ragged needs to build, test and benchmark that a machine lacks (Debian/Ubuntu): CMake, Ninja,
# Catch2 (v2) and Google Benchmark. The CUDA Toolkit must already be installed (nvcc on PATH or in
# /usr/local/cuda/bin). Source it (". scripts/setup-deps.sh") or run it; it changes nothing already present.
set -euo pipefail

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
command -v nvcc >/dev/null 2>&1 || { echo "setup-deps: nvcc not found; install the CUDA Toolkit first" >&2; exit 1; }

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
dpkg -s catch2 >/dev/null 2>&1 || [ -f /usr/lib/cmake/Catch2/Catch2Config.cmake ] || missing+=(catch2)
dpkg -s libbenchmark-dev >/dev/null 2>&1 || missing+=(libbenchmark-dev)

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

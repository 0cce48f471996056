#!/usr/bin/env bash
# Installs what ragged needs to build, test and benchmark that a machine lacks (Debian/Ubuntu): CMake, Ninja,
# Catch2 (v2) and Google Benchmark. The CUDA Toolkit must already be installed (nvcc on PATH or in
# /usr/local/cuda/bin). Run it, or source it from a script that has `set -euo pipefail` itself (scripts/build.sh
# does, to keep the PATH it sets); it changes nothing already present.

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
command -v nvcc >/dev/null 2>&1 || {
  echo "setup-deps: nvcc not found; install the CUDA Toolkit first" >&2
  return 1 2>/dev/null || exit 1
}

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
dpkg -s catch2 >/dev/null 2>&1 || [ -f /usr/lib/cmake/Catch2/Catch2Config.cmake ] || missing+=(catch2)
dpkg -s libbenchmark-dev >/dev/null 2>&1 || missing+=(libbenchmark-dev)

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-deps: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
      echo "setup-deps: need root or sudo to install ${missing[*]}" >&2
      return 1 2>/dev/null || exit 1
    }
    sudo="sudo"
  fi
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
    echo "setup-deps: apt-get could not install ${missing[*]}" >&2
    return 1 2>/dev/null || exit 1
  fi
fi

# CMakeLists.txt needs 3.25 (Debian 12's); an older distribution cmake is not upgraded here.
cmake_version=$(cmake --version | sed -n 's/^cmake version \([0-9]*\.[0-9]*\).*/\1/p')
if [ "$(printf '%s\n3.25\n' "$cmake_version" | sort -V | head -n1)" != "3.25" ]; then
  echo "setup-deps: CMake $cmake_version found, 3.25 or newer needed (e.g. pip install cmake)" >&2
  return 1 2>/dev/null || exit 1
fi

# The tests use Catch2 v2 (catch2/catch.hpp, find_package(Catch2 2)); newer distributions may package v3, which
# installs fine and then fails the configure step, so say it here.
catch2_version=$(dpkg-query -W -f='${Version}' catch2 2>/dev/null || true)
if [ -n "$catch2_version" ] && [ "${catch2_version%%.*}" != 2 ]; then
  echo "setup-deps: the catch2 package is version $catch2_version; the tests need Catch2 v2 (2.13: Debian 12's," \
    "or v2.13.x from source)" >&2
  return 1 2>/dev/null || exit 1
fi

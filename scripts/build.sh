#!/usr/bin/env bash
# Configures and builds ragged into ${RAGGED_BUILD_DIR:-build}. Extra arguments go to CMake's configure step
# (e.g. -DCMAKE_CUDA_ARCHITECTURES=90). No GPU is needed to build.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup-deps.sh
build=${RAGGED_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja "$@"
cmake --build "$build" --parallel "${RAGGED_BUILD_JOBS:-$(nproc)}"

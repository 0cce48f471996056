#!/usr/bin/env bash
# README command 2: install what is missing, build, run every test. CPU tests run anywhere; GPU tests report
# "Not Run" (skip code 77) on a machine without a CUDA device. Then the GPU test programs and the benchmarks'
# GPU suites (shrunk, once each) run on the kernel emulator (docs/emulator.md: the kernels' code executed on the
# CPU; RAGGED_SKIP_EMULATOR=1 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh "$@"
ctest --test-dir "${RAGGED_BUILD_DIR:-build}" --output-on-failure
if [[ "${RAGGED_SKIP_EMULATOR:-0}" != 1 ]]; then
  EMU_TIER=ci EMU_WITH_BENCH=1 tests/emu/run.sh "${RAGGED_BUILD_DIR:-build}/emu"
fi

#!/usr/bin/env bash
# README command 2: install what is missing, build, run every test. CPU tests run anywhere; GPU tests report
# "Not Run" (skip code 77) on a machine without a CUDA device. Then the GPU test programs and the benchmarks'
# GPU suites (shrunk, once each) run on the kernel emulator (docs/emulator.md: the kernels' code executed on the
# CPU; RAGGED_SKIP_EMULATOR=1 skips it). RAGGED_TEST_BUDGET (seconds, default 4500; 0: none) bounds the whole
# command: the emulated runs get what the build and ctest leave of it (tests/emu/run.sh's EMU_DEADLINE), so that
# CI, whose limit is 90 minutes, ends in time on a slower machine (its last two runs took 61 and 81 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh "$@"
ctest --test-dir "${RAGGED_BUILD_DIR:-build}" --output-on-failure
if [[ "${RAGGED_SKIP_EMULATOR:-0}" != 1 ]]; then
  budget="${RAGGED_TEST_BUDGET:-4500}"
  [[ "$budget" =~ ^(0|[1-9][0-9]*)$ ]] || { echo "RAGGED_TEST_BUDGET must be whole seconds, not '$budget'" >&2; exit 2; }
  deadline=()
  if (( budget > 0 )); then deadline=("EMU_DEADLINE=$((budget - SECONDS))"); fi
  env "${deadline[@]}" EMU_TIER=ci EMU_WITH_BENCH=1 tests/emu/run.sh "${RAGGED_BUILD_DIR:-build}/emu"
fi

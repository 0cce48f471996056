#!/usr/bin/env bash
# README command 2: install what is missing, build, run every test. CPU tests run anywhere; GPU tests report
# "Not Run" (skip code 77) on a machine without a CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh "$@"
ctest --test-dir "${RAGGED_BUILD_DIR:-build}" --output-on-failure

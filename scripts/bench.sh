#!/usr/bin/env bash
# README command 1: install what is missing, build, run the ragged-vs-padded benchmarks. Without a CUDA device
# the program says so and runs the CPU benchmarks only. Benchmark flags may follow, e.g.
# scripts/bench.sh --benchmark_filter=ragged_to_padded --benchmark_out=bench.json
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
"${RAGGED_BUILD_DIR:-build}"/bench/ragged_bench "$@"

#!/usr/bin/env bash
# Runs the benchmark program's GPU suites on the kernel emulator (docs/emulator.md): builds ragged_bench against
# it, then scripts/bench_verify.sh runs every suite shrunk (RAGGED_BENCH_SCALE), one iteration per case, with
# each result held against ragged's CPU reference (RAGGED_BENCH_VERIFY=1, bench/common/verify.h). So every
# benchmark body (workspace queries, the padded, CUB and cuBLAS baselines, the counters) has executed, and been
# seen computing what its name says, before a GPU run depends on it. Then the suites' JSON goes through what
# scripts/gpu-check.sh does with it (scripts/merge_bench_json.py, scripts/summarize_targets.py). The emulator's
# timings mean nothing and are never results.
#   tests/emu/run_bench.sh [BUILD_DIR]     (default build/emu-bench; skipped on machines that are not x86-64)
# EMU_BENCH_SUITES picks suites (default: scripts/bench_verify.sh's, all four GPU suites); BENCH_VERIFY_ALL=1
# runs every RNN case.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build/emu-bench}"
if [[ "$(uname -m)" != x86_64 ]]; then
  echo "emulated benchmarks: skipped (the emulator's fiber switch is x86-64 only)"
  exit 0
fi
suites=(${EMU_BENCH_SUITES:-})

# EMU_PREBUILT=1 takes the program already built in BUILD_DIR (tests/emu/run.sh with EMU_WITH_BENCH=1).
if [[ "${EMU_PREBUILT:-0}" == 1 ]]; then
  [[ -x "$build/emu_ragged_bench" ]] || { echo "emulated benchmarks: no $build/emu_ragged_bench to run" >&2; exit 1; }
else
  echo "emulated benchmarks: building into $build"
  "$here/build.sh" "$build" ragged_bench
fi
out="$build/results"
rm -rf "$out"
failed=0
# Two suites at a time (the slowest first), as the emulated tests run, unless BENCH_VERIFY_JOBS says otherwise
# (run.sh's queue takes one).
BENCH_VERIFY_JOBS="${BENCH_VERIFY_JOBS:-2}" "$root/scripts/bench_verify.sh" "$build/emu_ragged_bench" "$out" \
  "${suites[@]}" || failed=1

# What gpu-check.sh does with the files: one bench.json (of the suites bench_verify.sh wrote), then the targets
# report.
mapfile -t ran < <(cd "$out" && ls -- *.json 2>/dev/null | sed 's/\.json$//')
python3 "$root/scripts/merge_bench_json.py" "$out/bench.json" "$out" "${ran[@]}" || failed=1
python3 "$root/scripts/summarize_targets.py" --bench "$out/bench.json" --out "$out/targets.md" || failed=1
grep -q "Not a result: a shrunk run" "$out/targets.md" || { echo "targets.md does not say the run was shrunk"; failed=1; }
if [[ $failed != 0 ]]; then
  echo "emulated benchmarks: FAILED (logs in $out)"
  exit 1
fi
echo "emulated benchmarks: all ran and matched the CPU references (their times are the emulator's, not results)"

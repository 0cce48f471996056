#!/usr/bin/env bash
# Runs ragged_bench's GPU suites shrunk (RAGGED_BENCH_SCALE), once per case, with every result held against
# ragged's CPU reference (RAGGED_BENCH_VERIFY=1, bench/common/verify.h): a check that each benchmark, the
# padded, CUB and cuBLAS baselines included, computes what its name says. Not a measurement. Used by
# tests/emu/run_bench.sh (the program built against the kernel emulator) and scripts/gpu-check.sh (on the GPU).
#   scripts/bench_verify.sh RAGGED_BENCH OUTDIR [SUITE ...]
# Default suites: rnn_gpu attention_gpu segment_gpu convert_gpu. Writes OUTDIR/<suite>.json and .log and prints
# one line per suite. Exits 1 if a suite fails, registers no benchmark, or has a benchmark that errored or
# carries no verify_error. Environment: BENCH_VERIFY_JOBS suites at a time (default 1); BENCH_VERIFY_ALL=1
# runs every RNN case (by default one hidden-1024 shape per mode and variant: their CPU references, and their
# emulation, take the longest); BENCH_VERIFY_DEADLINE seconds for the whole run (each suite gets what is left).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 RAGGED_BENCH OUTDIR [SUITE ...]" >&2
  exit 2
fi
bench="$1"
out="$2"
shift 2
suites=("$@")
if [ ${#suites[@]} -eq 0 ]; then suites=(rnn_gpu attention_gpu segment_gpu convert_gpu); fi
jobs="${BENCH_VERIFY_JOBS:-1}"
deadline=$((SECONDS + ${BENCH_VERIFY_DEADLINE:-86400}))
# How far each suite is shrunk: attention's work goes as the scale, the RNN's steps as its square root.
declare -A scale=([segment_gpu]=0.001 [convert_gpu]=0.001 [attention_gpu]=0.0001 [rnn_gpu]=0.0001)
declare -A filter=([rnn_gpu]='hidden:256|/uniform/dtype:bf16/batch:16/hidden:1024')
if [ "${BENCH_VERIFY_ALL:-0}" = 1 ]; then filter=(); fi
mkdir -p "$out"

# run_suite SUITE: runs one suite, prints its line, returns non-zero if it failed or any benchmark is not verified.
run_suite() {
  local suite="$1" start=$SECONDS rc=0 verdict left=$((deadline - SECONDS))
  if [ "$left" -le 0 ]; then
    printf '%-14s not run (deadline)\n' "$suite"
    return 1
  fi
  # --foreground: the benchmark stays in the caller's process group, so that a timeout around this script
  # (tests/emu/run.sh's time budget) stops it too.
  RAGGED_BENCH_VERIFY=1 RAGGED_BENCH_SCALE="${scale[$suite]:-0.001}" RAGGED_BENCH_SUITES="$suite" \
    timeout --foreground "$left" "$bench" --benchmark_min_time=0 --benchmark_filter="${filter[$suite]:-.}" \
    --benchmark_out="$out/$suite.json" --benchmark_out_format=json >"$out/$suite.log" 2>&1 || rc=$?
  verdict=$(python3 - "$out/$suite.json" <<'PY'
import json, sys
try:
    runs = json.load(open(sys.argv[1]))["benchmarks"]
except (OSError, ValueError, KeyError) as error:
    print(f"no readable JSON ({error})")
    sys.exit(1)
errors = [r for r in runs if r.get("error_occurred")]
unverified = [r for r in runs if not r.get("error_occurred") and "verify_error" not in r]
worst = max((r["verify_error"] for r in runs if "verify_error" in r), default=0.0)
print(f"{len(runs)} benchmarks, {len(errors)} with errors, {len(unverified)} unverified, "
      f"largest verify_error {worst:.3g}")
for r in unverified[:10]:
    print(f"  {r['name']}: no verify_error counter")
for r in errors[:10]:
    print(f"  {r['name']}: {r.get('error_message', '?')}")
sys.exit(1 if errors or unverified or not runs else 0)
PY
  ) || rc=1
  printf '%-14s %s (%ds): %s\n' "$suite" "$([ "$rc" = 0 ] && echo passed || echo "FAILED rc=$rc")" \
    $((SECONDS - start)) "$verdict"
  if [ "$rc" != 0 ]; then tail -20 "$out/$suite.log"; fi
  return "$rc"
}

failed=0
pids=()
for suite in "${suites[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
  run_suite "$suite" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
exit "$failed"

#!/usr/bin/env bash
# Runs the benchmark program's GPU suites on the kernel emulator (docs/emulator.md), shrunk by
# RAGGED_BENCH_SCALE, one iteration per case: every benchmark body (workspace queries, the padded, CUB and
# cuBLAS baselines, the counters) executes before a GPU run depends on it, and with RAGGED_BENCH_VERIFY=1 each
# one's result is held against ragged's CPU reference (bench/common/verify.h), so every implementation a
# benchmark times, baselines included, is seen computing what its name says. Then the suites' JSON goes through
# what scripts/gpu-check.sh does with it (scripts/merge_bench_json.py, scripts/summarize_targets.py). Fails if a
# suite fails, registers no benchmark or reports a benchmark error, or if the merge or the report fails. The
# emulator's timings mean nothing and are never results.
#   tests/emu/run_bench.sh [BUILD_DIR]     (default build/emu-bench; skipped on machines that are not x86-64)
# EMU_BENCH_SUITES picks suites (default: all four GPU suites); EMU_BENCH_ALL=1 runs every case of the RNN suite.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build/emu-bench}"
if [[ "$(uname -m)" != x86_64 ]]; then
  echo "emulated benchmarks: skipped (the emulator's fiber switch is x86-64 only)"
  exit 0
fi

suites=(${EMU_BENCH_SUITES:-rnn_gpu attention_gpu segment_gpu convert_gpu})
# How far each suite is shrunk: attention's work goes as the scale, the RNN's steps as its square root, and both
# run the tensor-core paths through the emulated mma, so they get less.
declare -A scale=([segment_gpu]=0.001 [convert_gpu]=0.001 [attention_gpu]=0.0001 [rnn_gpu]=0.0001)
# The RNN's hidden-1024 cases take 10 to 70 s each here: one shape per mode and path covers them (EMU_BENCH_ALL=1
# runs every case).
declare -A filter=([rnn_gpu]='hidden:256|/uniform/dtype:bf16/batch:16/hidden:1024')
[[ "${EMU_BENCH_ALL:-0}" == 1 ]] && filter=()

echo "emulated benchmarks: building into $build"
"$here/build.sh" "$build" ragged_bench
out="$build/results"
rm -rf "$out" && mkdir -p "$out"

# run_suite SUITE: runs one suite, prints its line, returns non-zero if it failed or any benchmark errored.
run_suite() {
  local suite="$1" start=$SECONDS rc=0 verdict
  RAGGED_BENCH_VERIFY=1 RAGGED_BENCH_SCALE="${scale[$suite]:-0.001}" RAGGED_BENCH_SUITES="$suite" \
    "$build/emu_ragged_bench" \
    --benchmark_min_time=0 --benchmark_filter="${filter[$suite]:-.}" --benchmark_out="$out/$suite.json" \
    --benchmark_out_format=json >"$out/$suite.log" 2>&1 || rc=$?
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
  printf '%-14s %s (%ds): %s\n' "$suite" "$([[ $rc == 0 ]] && echo passed || echo "FAILED rc=$rc")" \
    $((SECONDS - start)) "$verdict"
  if [[ $rc != 0 ]]; then tail -20 "$out/$suite.log"; fi
  return $rc
}

# Two suites at a time, the slowest first.
failed=0
pids=()
for suite in "${suites[@]}"; do
  while (( $(jobs -rp | wc -l) >= 2 )); do sleep 1; done
  run_suite "$suite" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done

# What gpu-check.sh does with the files: one bench.json, then the targets report.
python3 "$root/scripts/merge_bench_json.py" "$out/bench.json" "$out" "${suites[@]}" || failed=1
python3 "$root/scripts/summarize_targets.py" --bench "$out/bench.json" --out "$out/targets.md" || failed=1
grep -q "Not a result: a shrunk run" "$out/targets.md" || { echo "targets.md does not say the run was shrunk"; failed=1; }
if [[ $failed != 0 ]]; then
  echo "emulated benchmarks: FAILED (logs in $out)"
  exit 1
fi
echo "emulated benchmarks: all ran (their times are the emulator's, not results)"

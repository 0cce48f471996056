#!/usr/bin/env bash
# A benchmark run stopped by its time limit keeps what it measured: ragged_bench flushes its JSON after every
# benchmark and scripts/merge_bench_json.py closes the cut file (what scripts/gpu-check.sh relies on when a suite
# outruns its timeout on the device). Runs the CPU planner suite, at 0.5 s a benchmark (8 of them), under a 3 s limit;
# then appends the same file as an A/B run of a switch (merge_bench_json.py --append, SUITE@NAME=VALUE). The suites'
# --benchmark_list_tests lists (SUITE.list) become the context's expected_benchmarks.
#   check_cut_short.sh RAGGED_BENCH WORKDIR     (run from the repository root)
set -euo pipefail
bench=$1
work=$2
rm -rf "$work" && mkdir -p "$work/suites"
rc=0
RAGGED_BENCH_SUITES=planner timeout 3 "$bench" --benchmark_min_time=0.5 \
  --benchmark_out="$work/suites/planner.json" --benchmark_out_format=json >"$work/bench.log" 2>&1 || rc=$?
if [ "$rc" -ne 124 ]; then
  echo "FAIL: expected the run to be stopped by its time limit (exit 124), got exit $rc"
  exit 1
fi
# What each suite meant to run (gpu-check.sh lists it before the run): kept in the context's expected_benchmarks,
# for a suite whose run left no file (missing_suite: two made-up names) as for the one cut short.
RAGGED_BENCH_SUITES=planner "$bench" --benchmark_list_tests >"$work/suites/planner.list"
printf 'made_up/ragged/a\nmade_up/ragged/b\n' >"$work/suites/missing_suite.list"
python3 scripts/merge_bench_json.py "$work/bench.json" "$work/suites" planner missing_suite
python3 - "$work/bench.json" "$work/suites/planner.list" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
runs = data["benchmarks"]
assert runs, "no complete benchmark was kept"
assert all(r["name"].startswith("plan_batches") and r["real_time"] > 0 for r in runs), runs
assert data["context"].get("truncated_suites") == "planner", data["context"]
listed = open(sys.argv[2]).read().split()
expected = data["context"].get("expected_benchmarks")
assert expected == listed + ["made_up/ragged/a", "made_up/ragged/b"], expected
assert len(listed) > len(runs) and all(r["name"] in listed for r in runs), (listed, runs)
print(f"ok: {len(runs)} finished benchmark(s) kept from a run cut short; {len(expected)} expected")
PY
cp "$work/suites/planner.json" "$work/suites/planner@RAGGED_SEGMENT_STREAM=0.json"
python3 scripts/merge_bench_json.py --append "$work/bench.json" "$work/suites" "planner@RAGGED_SEGMENT_STREAM=0"
python3 - "$work/bench.json" <<'PY'
import json, re, sys
data = json.load(open(sys.argv[1]))
names = [r["name"] for r in data["benchmarks"]]
plain = [n for n in names if "/with:" not in n]
tagged = [n for n in names if "/with:" in n]
assert plain and len(tagged) == len(plain), names
assert all(re.sub(r"/with:RAGGED_SEGMENT_STREAM=0(?=/manual_time$|/real_time$|$)", "", t) in plain for t in tagged), tagged
assert data["context"].get("ab_settings") == "RAGGED_SEGMENT_STREAM=0", data["context"]
assert data["context"].get("truncated_suites") == "planner,planner@RAGGED_SEGMENT_STREAM=0", data["context"]
print(f"ok: {len(tagged)} A/B benchmark(s) appended under their default names + /with:RAGGED_SEGMENT_STREAM=0")
PY

#!/usr/bin/env bash
# Full check on a GPU machine, in this order: the device description, configure + build, ctest, the benchmarks
# (one run per suite), the PyTorch comparisons, the benchmarks shrunk and checked against the CPU references,
# then every GPU test under compute-sanitizer (memcheck, racecheck, initcheck, synccheck). Run from the
# repository root:
#
#   scripts/gpu-check.sh OUTDIR
#
# Writes (eight files, so that a device run's $OUT brings every one back):
#   OUTDIR/summary.md       pass/fail table, one row per step and per sanitizer tool x test, with exit codes and
#                           seconds;
#                           then the issues' targets judged from this run (scripts/summarize_targets.py)
#   OUTDIR/build.log        cmake configure + ninja build
#   OUTDIR/ctest.log        ctest --output-on-failure
#   OUTDIR/sanitizers.log   every compute-sanitizer run, one section per tool x test
#   OUTDIR/device.txt       nvidia-smi -q, nvcc --version, cmake --version, the commit
#   OUTDIR/bench.json       Google Benchmark JSON (--benchmark_out); scripts/torch_attention.py merges its SDPA
#                           timings (attention/torch_*) and its "torch_attention" correctness section into it
#   OUTDIR/bench.log        the benchmark console output (and scripts/torch_rnn.py's and torch_attention.py's)
#   OUTDIR/torch_rnn.json   ragged vs torch.nn.LSTM / GRU on a PackedSequence: checks and timings (only when
#                           python3 can import torch; see scripts/torch_rnn.py)
# Every step runs even when an earlier one failed (the build keeps going past a broken file; only a failed
# configure stops the check), as long as it fits before RAGGED_DEADLINE; the exit code is non-zero if any step
# failed or did not run. Results are meant to be committed under docs/results/<date>-<gpu>-<commit>/ (summary.md
# names that folder).
#
# Environment:
#   RAGGED_CUDA_ARCHS          CMAKE_CUDA_ARCHITECTURES (default: native)
#   RAGGED_BUILD_DIR           build folder (default: build)
#   RAGGED_SANITIZER_FILTER    Catch2 test spec passed to the GPU tests under the sanitizers (default: all)
#   RAGGED_SANITIZER_TOOLS     tools to run (default: "memcheck racecheck initcheck synccheck")
#   RAGGED_SANITIZER_PROGRAMS  GPU test programs to run under them, by name and in that order (default: every
#                              gpu_test_* but gpu_test_large_tensors, by name), e.g.
#                              "gpu_test_segment_softmax gpu_test_rnn" for a short call on what a change touched.
#                              gpu_test_large_tensors runs only when named: instrumented, its passes over 4-5 GB
#                              would outlast any limit, and its kernels are sanitized at ordinary sizes elsewhere
#   RAGGED_SANITIZER_JOBS      sanitizer runs at once (default: the CPU count; they are mostly CPU-bound)
#   RAGGED_SANITIZER_SPLIT_TOOLS  tools that run each test case as its own run (default: "memcheck racecheck
#                              initcheck": racecheck and initcheck took over 480 s on gpu_test_attention /
#                              gpu_test_rnn whole, memcheck over 100 s on gpu_test_segment_reduce and 150 s on
#                              gpu_test_rnn in the 2026-11-27 runs); the others run a program at a time. The log
#                              gives every run's seconds, the summary each program's slowest run
#   RAGGED_SANITIZER_TEST_SCALE  RAGGED_TEST_SCALE for the GPU tests under the sanitizers (default: 0.25): the
#                              segment tests' large generated inputs at a quarter of their elements (ctest runs
#                              them whole; tests/common/test_util.h says which inputs keep their sizes)
#   RAGGED_SANITIZER_SEED      Catch2 --rng-seed of the sanitizer runs (default: time, a fresh one each run; each
#                              run's log prints it, "Randomness seeded to", so a failure can be replayed)
#   RAGGED_SANITIZER_TIMEOUT   seconds per sanitizer run, a program or a test case (default: 150; a timeout
#                              counts as a failure, unless the deadline had cut the run's limit below this)
#   RAGGED_BENCH_SUITES        benchmark suites, run one program each (default: "convert_gpu segment_gpu
#                              attention_gpu rnn_gpu planner convert_cpu"); their JSON is merged into bench.json
#   RAGGED_BENCH_TIMEOUT       seconds per benchmark suite (default: 150)
#   RAGGED_BENCH_ARGS          extra arguments for ragged_bench (e.g. --benchmark_filter=/tile:)
#   RAGGED_BENCH_AB            library switches to A/B in the same run, NAME=VALUE words (default:
#                              "RAGGED_SEGMENT_STAGED_MERGES=0 RAGGED_SEGMENT_ROW_PREFETCH=0
#                              RAGGED_SEGMENT_WARP_ROWS=0 RAGGED_CONVERT_TOKEN_GROUPS=0 RAGGED_SEGMENT_SUBWARP_ROWS=0
#                              RAGGED_SEGMENT_SCALAR_ROWS=0 RAGGED_SEGMENT_STREAM=0 RAGGED_SEGMENT_BLOCK_ROWS=0
#                              RAGGED_DEPENDENT_LAUNCH=0 RAGGED_SEGMENT_PREFETCH=0",
#                              the never-timed first; "none"
#                              for none): after the PyTorch comparisons, RAGGED_BENCH_AB_SUITES run again with each
#                              set, their benchmarks merged into bench.json as <name>/with:NAME=VALUE, and the targets
#                              report gives each one's time against the default run's
#   RAGGED_BENCH_AB_SUITES     suites of those runs (default: convert_gpu for the RAGGED_CONVERT_* switches,
#                              segment_gpu for the others, each only where RAGGED_BENCH_SUITES has it)
#   RAGGED_BENCH_AB_FILTER     --benchmark_filter of every one of those runs ("all": none; a --benchmark_filter in
#                              RAGGED_BENCH_ARGS is used instead). Default: the ragged rows the switch can move
#                              (ab_filter below), since the A/B table compares ragged rows only and a library switch
#                              does not move the CUB, padded and floor baselines
#   RAGGED_BENCH_ATTENTION     attention shapes of the benchmarks and of scripts/torch_attention.py, exported to both
#                              (default: targets, the 28 cases issue 5's targets are judged on: max_len 1k, 4k, 8k
#                              causal and not, and 512; "default" for ragged_bench's own 8; RAGGED_BENCH_FULL=1 takes
#                              the full matrix over either: bench/attention_cases.h)
#   RAGGED_SKIP_BENCH=1        skip the benchmarks (and the A/B runs)
#   RAGGED_SKIP_BENCH_VERIFY=1 skip the shrunk run that holds every benchmark's result against the CPU
#                              references (scripts/bench_verify.sh; after the PyTorch comparisons, before the
#                              sanitizers; RAGGED_SKIP_BENCH does not skip it)
#   RAGGED_SKIP_TORCH=1        skip the PyTorch comparisons (scripts/torch_rnn.py, scripts/torch_attention.py)
#   RAGGED_TORCH_COMPARISONS   which of them run (default: "rnn attention"; empty: none), e.g. "rnn" for a call
#                              whose benchmark suites leave out attention_gpu (the attention comparison's ragged
#                              side); one left out is a "not run (not asked)" row of summary.md
#   RAGGED_TORCH_TIMEOUT       seconds per PyTorch comparison (default: 240)
#   RAGGED_SKIP_TESTS=1        skip ctest (e.g. in a second device call that only runs sanitizers)
#   RAGGED_SKIP_SANITIZERS=1   skip the compute-sanitizer runs (e.g. to split a check across two device calls,
#                              each under the device's 10-minute limit per command)
#   RAGGED_DEADLINE            seconds the whole check may take (default: 560, under the device's 600 s per
#                              call): every step's timeout is cut to what is left, steps that no longer fit are
#                              recorded as "not run (deadline)", and summary.md is rewritten after every step, so
#                              a check cut short still says how far it got
# A .deps/usr folder (from shared/gpu-deps.sh) is added to CMAKE_PREFIX_PATH when present.
set -euo pipefail
source "$(dirname "$0")/gpu_common.sh"
gpu_script_start "$0" "$@"
build=${RAGGED_BUILD_DIR:-build}
archs=${RAGGED_CUDA_ARCHS:-native}
tools=${RAGGED_SANITIZER_TOOLS:-memcheck racecheck initcheck synccheck}
jobs=${RAGGED_SANITIZER_JOBS:-$(nproc)}
sanitizer_timeout=${RAGGED_SANITIZER_TIMEOUT:-150}
sanitizer_test_scale=${RAGGED_SANITIZER_TEST_SCALE:-0.25}
sanitizer_seed=${RAGGED_SANITIZER_SEED:-time}
split_tools=${RAGGED_SANITIZER_SPLIT_TOOLS:-memcheck racecheck initcheck}
bench_timeout=${RAGGED_BENCH_TIMEOUT:-150}
torch_timeout=${RAGGED_TORCH_TIMEOUT:-240}
torch_comparisons=${RAGGED_TORCH_COMPARISONS-rnn attention}  # set and empty: none
for comparison in $torch_comparisons; do
  if [ "$comparison" != rnn ] && [ "$comparison" != attention ]; then
    echo "gpu-check.sh: RAGGED_TORCH_COMPARISONS: '$comparison' is not 'rnn' or 'attention'" >&2
    exit 2
  fi
done
bench_suites=${RAGGED_BENCH_SUITES:-convert_gpu segment_gpu attention_gpu rnn_gpu planner convert_cpu}
deadline=${RAGGED_DEADLINE:-560}
# Never timed first (staged merges, the row passes' prefetch, warp rows, token groups: added after the 087a77a run),
# then those that run timed: a run that reaches its deadline drops the last ones.
default_ab="RAGGED_SEGMENT_STAGED_MERGES=0 RAGGED_SEGMENT_ROW_PREFETCH=0 RAGGED_SEGMENT_WARP_ROWS=0
RAGGED_CONVERT_TOKEN_GROUPS=0 RAGGED_SEGMENT_SUBWARP_ROWS=0 RAGGED_SEGMENT_SCALAR_ROWS=0 RAGGED_SEGMENT_STREAM=0
RAGGED_SEGMENT_BLOCK_ROWS=0 RAGGED_DEPENDENT_LAUNCH=0 RAGGED_SEGMENT_PREFETCH=0"
bench_ab=${RAGGED_BENCH_AB:-$default_ab}
if [ "$bench_ab" = none ]; then bench_ab=""; fi
# ab_suites SETTING: the suites of SETTING's A/B runs.
ab_suites() {
  if [ -n "${RAGGED_BENCH_AB_SUITES:-}" ]; then echo "$RAGGED_BENCH_AB_SUITES"; return; fi
  local suite=segment_gpu
  case "$1" in RAGGED_CONVERT_*) suite=convert_gpu ;; esac
  # Only a suite this call times: the report compares an A/B run with the default run's rows.
  if [[ " $(echo $bench_suites) " == *" $suite "* ]]; then echo "$suite"; fi
}
# ab_filter SETTING: the --benchmark_filter of SETTING's A/B run (empty: every benchmark). By default the ragged
# rows SETTING can move: the conversions at D = 1 for the token groups (bench_convert.cu's names); in the segment
# suite (bench_segment.cu's names) the sub-warp row pass runs at D = 64 to 2048 (the suite's 64 and 1024), the
# scalar row pass at D = 1 only (device_reduce's rows are D = 1), the warp rows in the forward reductions and the
# softmax (forward and backward) at D = 1 only, the row passes' prefetch where those and the sub-warp rows run,
# block rows in the softmax only, staged merges where D has 16-byte vectors (the suite's D = 64 and 1024).
ab_filter() {
  if [[ " ${RAGGED_BENCH_ARGS:-} " == *" --benchmark_filter"* ]]; then return; fi
  if [ -n "${RAGGED_BENCH_AB_FILTER:-}" ]; then
    if [ "$RAGGED_BENCH_AB_FILTER" != all ]; then echo "$RAGGED_BENCH_AB_FILTER"; fi
    return
  fi
  case "$1" in
    RAGGED_CONVERT_TOKEN_GROUPS=*) echo '^(ragged_to_padded|padded_to_ragged)/ragged/.*/inner:1/' ;;
    RAGGED_SEGMENT_SUBWARP_ROWS=*) echo '/ragged/.*/inner:(64|1024)/' ;;
    RAGGED_SEGMENT_SCALAR_ROWS=*) echo '^device_reduce/ragged/|/ragged/.*/inner:1/' ;;
    RAGGED_SEGMENT_ROW_PREFETCH=*) echo '^segment_(sum|mean|max|min|argmax|argmin|(log_)?softmax(_backward)?)/ragged/.*/inner:(1|64|1024)/' ;;
    RAGGED_SEGMENT_WARP_ROWS=*) echo '^segment_(sum|mean|max|min|argmax|argmin|(log_)?softmax(_backward)?)/ragged/.*/inner:1/' ;;
    RAGGED_SEGMENT_BLOCK_ROWS=*) echo '^segment_(log_)?softmax(_backward)?/ragged/' ;;
    RAGGED_SEGMENT_STAGED_MERGES=*) echo '/ragged/.*/inner:(64|1024)/' ;;
    *) echo '/ragged/' ;;
  esac
}
export RAGGED_BENCH_ATTENTION=${RAGGED_BENCH_ATTENTION:-targets}
if [ "$RAGGED_BENCH_ATTENTION" != targets ] && [ "$RAGGED_BENCH_ATTENTION" != default ]; then
  echo "gpu-check.sh: RAGGED_BENCH_ATTENTION: '$RAGGED_BENCH_ATTENTION' is not 'targets' or 'default'" >&2
  exit 2
fi
for setting in $bench_ab; do
  if ! [[ "$setting" =~ ^RAGGED_[A-Z0-9_]+=[A-Za-z0-9_.-]*$ ]]; then
    echo "gpu-check.sh: RAGGED_BENCH_AB: '$setting' is not NAME=VALUE with NAME a RAGGED_ variable" >&2
    exit 2
  fi
done
filter=${RAGGED_SANITIZER_FILTER:-}
start_time=$(date +%s)

rows=()        # summary table rows
targets_report=""  # issues 3-5 targets from this run's JSON (scripts/summarize_targets.py), appended to summary.md
failures=0
cut=0
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo uncommitted)
if [ -n "$(git status --porcelain 2>/dev/null || true)" ]; then commit="$commit-dirty"; fi
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true)
gpu_name=${gpu_name:-unknown-gpu}
gpu_slug=$(echo "$gpu_name" | tr '[:upper:]' '[:lower:]' | sed -e 's/^nvidia //' -e 's/[^a-z0-9]\+/-/g' -e 's/-$//')

write_summary() {  # write_summary [final]: rewritten after every step, so a check cut short keeps its table
  local elapsed=$(($(date +%s) - start_time)) state
  if [ "${1:-}" = "final" ]; then
    state=$([ "$failures" -eq 0 ] && echo "all passed" || echo "$failures step(s) failed")
  else
    state="in progress ($failures failure(s) so far)"
  fi
  if [ "$cut" -gt 0 ]; then state="$state; $cut step(s) not run or cut short (deadline)"; fi
  {
    echo "# ragged GPU check"
    echo
    echo "- commit: \`$commit\`"
    echo "- GPU: $gpu_name"
    echo "- date: $(date -u +%Y-%m-%d) (UTC), took ${elapsed}s (deadline ${deadline}s)"
    echo "- CUDA architectures: $archs; sanitizer filter: ${filter:-all tests}; sanitizer test scale: $sanitizer_test_scale; sanitizer seed: $sanitizer_seed"
    echo "- results folder: \`docs/results/$(date -u +%Y-%m-%d)-$gpu_slug-${commit%-dirty}/\`"
    echo "- verdict: $state"
    echo
    echo "| step | result | exit code | log | s |"
    echo "| --- | --- | --- | --- | --- |"
    printf '%s\n' "${rows[@]}"
    if [ -n "$targets_report" ] && [ -f "$targets_report" ]; then
      echo
      sed -e 's/^#/##/' "$targets_report"  # one level down: a section of this summary
    fi
  } >"$out/summary.md"
}
# record STEP RESULT RC LOG: a row of the table, its last column the wall seconds since the previous row (the
# steps run one after another, so this is the step's time; a sanitizer row's is since the previous run finished):
# what the next call's plan fits into a device session's minutes.
last_row_time=$start_time
record() {
  local now seconds
  now=$(date +%s)
  seconds=$((now - last_row_time))
  last_row_time=$now
  rows+=("| $1 | $2 | $3 | $4 | $seconds |")
  printf '%-48s %-6s rc=%-4s %ss\n' "$1" "$2" "$3" "$seconds"
  case "$2" in
    pass | "not run (no case matches the filter)" | "not run (not asked)") ;;
    # A step the deadline left no time for is planned (the last A/B runs, usually), not a failure: the
    # verdict counts it apart; so is a benchmark run the deadline stopped, its limit cut below
    # RAGGED_BENCH_TIMEOUT when it started (what it finished is kept). A step that reached its own full limit
    # fails (exit code 124).
    "not run (deadline)" | "cut short (deadline)") cut=$((cut + 1)) ;;
    *) failures=$((failures + 1)) ;;
  esac
  write_summary
}
verdict() { if [ "$1" -eq 0 ]; then echo pass; else echo FAIL; fi; }
# step_timeout WANTED: WANTED seconds or what is left before the deadline (keeping 15 s to write up), 0 if
# under 20 s are left.
step_timeout() {
  local left=$((deadline - ($(date +%s) - start_time) - 15))
  if [ "$left" -lt 20 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

# One ragged_bench run of SUITE into FOLDER/SUITE.json, recorded in the summary; with SETTING (NAME=VALUE, an A/B
# run of RAGGED_BENCH_AB) set in its environment and written to FOLDER/SUITE@SETTING.json. Returns 1 when the
# deadline left it no time.
bench_suite() {  # bench_suite FOLDER SUITE [SETTING]
  local folder=$1 suite=$2 setting=${3:-} key=$2 label="benchmarks $2" rc=0 limit errors what
  if [ -n "$setting" ]; then key="$suite@$setting" label="benchmarks $suite with $setting"; fi
  # What the run means to time, listed first, deadline or not (listing runs nothing): merge_bench_json.py keeps
  # it in bench.json, and summarize_targets.py counts a listed case that a crash or the deadline left out as "no
  # data", not as absent.
  if [ -z "$setting" ]; then
    # shellcheck disable=SC2086  # RAGGED_BENCH_ARGS is a list of arguments
    RAGGED_BENCH_SUITES="$suite" timeout -k 5 20 "$build/bench/ragged_bench" --benchmark_list_tests \
      ${RAGGED_BENCH_ARGS:-} >"$folder/$key.list" 2>>"$out/bench.log" ||
      { rm -f "$folder/$key.list"; echo "listing suite $suite failed: a case of it that does not run leaves the" \
        "targets' counts" >>"$out/bench.log"; }
  fi
  limit=$(step_timeout "$bench_timeout")
  if [ "$limit" -eq 0 ]; then
    record "$label" "not run (deadline)" "-" "-"
    return 1
  fi
  local ab_filter_args=() filter_regex=""
  if [ -n "$setting" ]; then filter_regex=$(ab_filter "$setting"); fi
  if [ -n "$filter_regex" ]; then ab_filter_args=(--benchmark_filter="$filter_regex"); fi
  echo "== ragged_bench, suite $suite${setting:+ with $setting}${ab_filter_args[*]:+ (${ab_filter_args[*]})}" \
    "(timeout ${limit}s)" >>"$out/bench.log"
  # shellcheck disable=SC2086  # RAGGED_BENCH_ARGS is a list of arguments
  env ${setting:+"$setting"} RAGGED_BENCH_SUITES="$suite" timeout -k 10 "$limit" "$build/bench/ragged_bench" \
    --benchmark_out="$folder/$key.json" --benchmark_out_format=json ${RAGGED_BENCH_ARGS:-} \
    ${ab_filter_args[@]+"${ab_filter_args[@]}"} >>"$out/bench.log" 2>&1 || rc=$?
  errors=$(grep -c '"error_occurred": true' "$folder/$key.json" 2>/dev/null || true)
  what="$label (${errors:-0} with errors)"
  if [ "${errors:-0}" -gt 0 ] && [ "$rc" -eq 0 ]; then rc=1; fi
  local result
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    what="$label (timed out after ${limit}s: the benchmarks it finished are kept)"
    # Stopped by the call's plan, not by its own slowness (see record).
    if [ "$limit" -lt "$bench_timeout" ] && [ "${errors:-0}" -eq 0 ]; then result="cut short (deadline)"; fi
  fi
  # On a GPU machine the GPU suites must have run.
  if [[ "$suite" == *_gpu ]] && grep -q "No CUDA device found" "$out/bench.log"; then
    what="$label (no CUDA device: skipped)"
    if [ "$rc" -eq 0 ]; then rc=1; fi
  fi
  record "$what" "${result:-$(verdict "$rc")}" "$rc" "bench.json, bench.log"
}

# ---- device description --------------------------------------------------------------------------------
{
  echo "# commit: $commit"
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo; echo "## nvcc --version"; nvcc --version 2>&1 || echo "nvcc not found"
  echo; echo "## cmake --version"; cmake --version 2>&1 | head -n 1 || true
  echo; echo "## compute-sanitizer --version"; compute-sanitizer --version 2>&1 || echo "compute-sanitizer not found"
  echo; echo "## nvidia-smi -q"; nvidia-smi -q 2>&1 || echo "nvidia-smi failed"
} >"$out/device.txt"

# ---- configure + build ------------------------------------------------------------------------------------
configure_command
configure_rc=0
"${configure[@]}" >"$out/build.log" 2>&1 || configure_rc=$?
record "configure" "$(verdict $configure_rc)" "$configure_rc" "build.log"
if [ "$configure_rc" -eq 0 ]; then
  # -k 0: build every target that can be built, so that one broken file leaves the rest checkable.
  build_rc=0
  ninja -C "$build" -k 0 -j "$(nproc)" >>"$out/build.log" 2>&1 || build_rc=$?
  record "build" "$(verdict $build_rc)" "$build_rc" "build.log"
  # ---- ctest ----------------------------------------------------------------------------------------------
  if [ "${RAGGED_SKIP_TESTS:-0}" = "1" ]; then
    echo "ctest skipped (RAGGED_SKIP_TESTS=1)" >"$out/ctest.log"
  elif [ "$(step_timeout 300)" -eq 0 ]; then
    record "ctest" "not run (deadline)" "-" "-"
  else
    ctest_rc=0
    ctest_limit=$(step_timeout 300)
    # --timeout 180: a test that hangs (a kernel that never ran on a GPU before) costs 180 s, not the whole step;
    # the slowest took 68 s on the H200 (gpu_test_segment_softmax, a910134). -k: SIGKILL 10 s after a SIGTERM
    # that did not end it.
    # The tests see the environment CI gives them: this call's RAGGED_* settings (RAGGED_BENCH_SUITES for the
    # benchmark steps, RAGGED_PROFILE_SECONDS for gpu-session.sh, ...) would change what the bench and script
    # tests run and expect. RAGGED_TEST_* (the tests' own knobs) stay.
    ctest_env=()
    for name in $(compgen -e | grep '^RAGGED_' | grep -v '^RAGGED_TEST_' || true); do ctest_env+=(-u "$name"); done
    timeout -k 10 "$ctest_limit" env ${ctest_env[@]+"${ctest_env[@]}"} ctest --test-dir "$build" \
      --output-on-failure -j 4 --timeout 180 >"$out/ctest.log" 2>&1 || ctest_rc=$?
    ctest_line=$(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -n 1 || true)
    # GPU tests skip (exit 77) when they see no device; on this machine a skip is a failure. torch_reference
    # (a CPU test) skips where python3 cannot import torch, which says nothing about the GPU.
    skipped=$(grep '\*\*\*Skipped' "$out/ctest.log" | grep -vc ' torch_reference ' || true)
    if [ "${skipped:-0}" -gt 0 ]; then
      ctest_line="$ctest_line; $skipped skipped"
      if [ "$ctest_rc" -eq 0 ]; then ctest_rc=77; fi
    fi
    if [ "$ctest_rc" -eq 124 ] || [ "$ctest_rc" -eq 137 ]; then ctest_line="timed out${ctest_line:+; $ctest_line}"; fi
    record "ctest${ctest_line:+ ($ctest_line)}" "$(verdict $ctest_rc)" "$ctest_rc" "ctest.log"
  fi

  # ---- benchmarks: one program run per suite, so a slow suite costs only its own results ------------------
  if [ "${RAGGED_SKIP_BENCH:-0}" != "1" ] && [ ! -x "$build/bench/ragged_bench" ]; then
    record "benchmarks" FAIL "-" "$build/bench/ragged_bench was not built"
  elif [ "${RAGGED_SKIP_BENCH:-0}" != "1" ]; then
    : >"$out/bench.log"
    suite_json=$(mktemp -d)
    for suite in $bench_suites; do
      bench_suite "$suite_json" "$suite" || true
      # Also after every suite (quietly: the last merge below reports), so that a call stopped from outside
      # still brings back what ran.
      python3 scripts/merge_bench_json.py "$out/bench.json" "$suite_json" $bench_suites >/dev/null 2>&1 || true
    done
    # One bench.json: the first suite's context, every suite's benchmarks; a suite cut short by its timeout keeps
    # the benchmarks it finished (ragged_bench flushes its JSON after each one).
    python3 scripts/merge_bench_json.py "$out/bench.json" "$suite_json" $bench_suites >>"$out/bench.log" 2>&1 || true
    rm -rf "$suite_json"
  fi

  # ---- PyTorch comparisons (issue 4: packed LSTM / GRU; issue 5: SDPA) -------------------------------------
  # Run only where python3 imports torch; their console output is appended to bench.log. The attention script
  # checks correctness against SDPA and merges its timings (attention/torch_*) into bench.json.
  if [ "${RAGGED_SKIP_TORCH:-0}" = "1" ] || ! python3 -c "import torch" >/dev/null 2>&1; then
    echo "torch comparisons: skipped (RAGGED_SKIP_TORCH=1 or python3 cannot import torch)" | tee -a "$out/bench.log"
  else
    limit=$(step_timeout "$torch_timeout")
    if [[ " $torch_comparisons " != *" rnn "* ]]; then
      record "torch rnn comparison" "not run (not asked)" "-" "RAGGED_TORCH_COMPARISONS"
    elif [ "$limit" -eq 0 ]; then
      record "torch rnn comparison" "not run (deadline)" "-" "-"
    else
      torch_rc=0
      {
        echo
        echo "== scripts/torch_rnn.py (timeout ${limit}s)"
        PYTHONUNBUFFERED=1 timeout -k 10 "$limit" python3 scripts/torch_rnn.py \
          --driver "$build/bench/ragged_rnn_driver" --out "$out/torch_rnn.json" 2>&1
      } >>"$out/bench.log" || torch_rc=$?
      record "torch rnn comparison" "$(verdict "$torch_rc")" "$torch_rc" "torch_rnn.json, bench.log"
    fi
    limit=$(step_timeout "$torch_timeout")
    if [[ " $torch_comparisons " != *" attention "* ]]; then
      record "torch attention comparison" "not run (not asked)" "-" "RAGGED_TORCH_COMPARISONS"
    elif [ "$limit" -eq 0 ]; then
      record "torch attention comparison" "not run (deadline)" "-" "-"
    else
      torch_rc=0
      torch_args=(--build "$build" --out "$out/bench.json" --merge)
      if [ "${RAGGED_SKIP_BENCH:-0}" = "1" ]; then torch_args+=(--skip-timing); fi
      {
        echo
        echo "== scripts/torch_attention.py (timeout ${limit}s)"
        PYTHONUNBUFFERED=1 timeout -k 10 "$limit" python3 scripts/torch_attention.py "${torch_args[@]}" 2>&1
      } >>"$out/bench.log" || torch_rc=$?
      record "torch attention comparison" "$(verdict "$torch_rc")" "$torch_rc" "bench.json, bench.log"
    fi
    # A script killed by its timeout while rewriting its JSON leaves FILE.part beside it: not a result, and the
    # device brings back 8 files at most.
    rm -f "$out"/*.part
  fi

  # ---- A/B runs of library switches (RAGGED_BENCH_AB), merged into bench.json as <name>/with:NAME=VALUE -----
  # Last of the benchmarks, so that a tight deadline cuts them and not the runs the targets are judged on.
  if [ "${RAGGED_SKIP_BENCH:-0}" != "1" ] && [ -n "$bench_ab" ] && [ -f "$out/bench.json" ]; then
    ab_json=$(mktemp -d)
    ab_ran=()
    for setting in $bench_ab; do
      for suite in $(ab_suites "$setting"); do
        if bench_suite "$ab_json" "$suite" "$setting"; then ab_ran+=("$suite@$setting"); fi
      done
    done
    if [ ${#ab_ran[@]} -gt 0 ]; then
      python3 scripts/merge_bench_json.py --append "$out/bench.json" "$ab_json" "${ab_ran[@]}" >>"$out/bench.log" 2>&1 || true
    fi
    rm -rf "$ab_json"
  fi

  # ---- the issues' targets, judged from this run's JSON (appended to summary.md: the device brings back 8 files) --
  if [ "${RAGGED_SKIP_BENCH:-0}" != "1" ] && [ -f "$out/bench.json" ]; then
    targets_rc=0
    torch_rnn_args=()
    if [ -f "$out/torch_rnn.json" ]; then torch_rnn_args=(--torch-rnn "$out/torch_rnn.json"); fi
    python3 scripts/summarize_targets.py --bench "$out/bench.json" ${torch_rnn_args[@]+"${torch_rnn_args[@]}"} \
      --out "$build/targets.md" >>"$out/bench.log" 2>&1 || targets_rc=$?
    if [ "$targets_rc" -eq 0 ]; then targets_report="$build/targets.md"; fi
    record "targets report (issues 3-5)" "$(verdict "$targets_rc")" "$targets_rc" "summary.md (below), bench.log"
  fi

  # ---- every benchmark's result against the CPU references, shrunk (scripts/bench_verify.sh) ---------------
  # Seconds of GPU time; the CPU references take most of it. Checks the baselines (CUB, cuBLAS, padded) on the
  # real libraries, which the emulator's run (tests/emu/run_bench.sh) could only check against stand-ins.
  # It runs whether or not RAGGED_SKIP_BENCH is set, so a sanitizer call runs it where call 1 ran out of time.
  if [ "${RAGGED_SKIP_BENCH_VERIFY:-0}" != "1" ] && [ -x "$build/bench/ragged_bench" ]; then
    limit=$(step_timeout 120)
    if [ "$limit" -eq 0 ]; then
      record "benchmarks verified against the CPU references (shrunk)" "not run (deadline)" "-" "-"
    else
      verify_rc=0
      {
        echo
        echo "== scripts/bench_verify.sh (within ${limit}s)"
        BENCH_VERIFY_JOBS=2 BENCH_VERIFY_DEADLINE="$limit" scripts/bench_verify.sh "$build/bench/ragged_bench" \
          "$build/bench_verify" 2>&1
      } >>"$out/bench.log" || verify_rc=$?
      record "benchmarks verified against the CPU references (shrunk)" "$(verdict "$verify_rc")" "$verify_rc" \
        "bench.log"
    fi
  fi

  # ---- GPU tests under compute-sanitizer ------------------------------------------------------------------
  mapfile -t gpu_tests < <(find "$build/tests" -maxdepth 1 -type f -name 'gpu_test_*' -perm -u+x | sort)
  if [ -n "${RAGGED_SANITIZER_PROGRAMS:-}" ]; then  # only the named programs (those a change touched), in that order
    picked=()
    for wanted in $RAGGED_SANITIZER_PROGRAMS; do
      for test in "${gpu_tests[@]}"; do
        if [ "$(basename "$test")" = "$wanted" ]; then picked+=("$test"); fi
      done
    done
    gpu_tests=(${picked[@]+"${picked[@]}"})
  else
    kept=()
    for test in "${gpu_tests[@]}"; do
      if [ "$(basename "$test")" != gpu_test_large_tensors ]; then kept+=("$test"); fi
    done
    gpu_tests=(${kept[@]+"${kept[@]}"})
  fi
  if [ "${RAGGED_SKIP_SANITIZERS:-0}" = "1" ]; then
    echo "compute-sanitizer runs skipped (RAGGED_SKIP_SANITIZERS=1)" >"$out/sanitizers.log"
  elif ! command -v compute-sanitizer >/dev/null 2>&1; then
    record "compute-sanitizer" "FAIL" "127" "not found on PATH or in /usr/local/cuda/bin"
  elif [ ${#gpu_tests[@]} -eq 0 ]; then
    named=${RAGGED_SANITIZER_PROGRAMS:+ named in RAGGED_SANITIZER_PROGRAMS}
    record "compute-sanitizer" "FAIL" "-" "no $build/tests/gpu_test_* executables$named"
  else
    : >"$out/sanitizers.log"
    runs=$(mktemp -d)
    # Where compute-sanitizer cannot attach (seen on gVisor machines: "Device not supported", then error 999),
    # every run below would fail the same way: probe once on one small case and say so instead.
    probe_test=${gpu_tests[0]}
    for test in "${gpu_tests[@]}"; do
      if [ "$(basename "$test")" = gpu_test_offsets ]; then probe_test=$test; fi
    done
    probe_case=$("$probe_test" --list-test-names-only 2>/dev/null | grep -E '^[A-Za-z0-9 _-]+$' | head -n 1 || true)
    probe_rc=0
    # --report-api-errors no: the tests make failing CUDA calls on purpose (gpu_test_offsets allocates 4 TiB to see
    # that ragged clears the error it reports), which the default would count as errors; every other CUDA result
    # is checked by the tests themselves, so a failing call still fails its run.
    # timeout 0 would mean no limit: with no time left the probe is skipped (and the runs below, by their own
    # deadline checks).
    probe_limit=$(step_timeout 120)
    : >"$runs/probe.log"
    if [ "$probe_limit" -gt 0 ]; then
      timeout -k 10 "$probe_limit" compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 86 \
        "$probe_test" ${probe_case:+"$probe_case"} >"$runs/probe.log" 2>&1 || probe_rc=$?
    fi
    if grep -qiE "device not supported|failed to initialize|unable to (attach|initialize)" "$runs/probe.log"; then
      {
        echo "== compute-sanitizer probe: $(basename "$probe_test") \"$probe_case\" -> rc=$probe_rc"
        head -c 20000 "$runs/probe.log"
      } >>"$out/sanitizers.log"
      record "compute-sanitizer (cannot run on this machine: see the probe)" "not run (unavailable)" "$probe_rc" \
        "sanitizers.log"
      tools=""  # nothing below runs
    fi
    # memcheck, racecheck and initcheck run each Catch2 test case of a program on its own
    # (RAGGED_SANITIZER_SPLIT_TOOLS), side by side: under them a program takes minutes, and split it takes its
    # slowest case's time rather than the sum of its cases'. The other tools run a program at a time; with a
    # filter, every tool does.
    sanitize() {  # sanitize TOOL TEST KEY LIMIT [SPEC] -> $runs/KEY.{log,rc}
      local tool=$1 test=$2 key=$3 limit=$4 rc=0
      local args=(--rng-seed "$sanitizer_seed")
      if [ $# -ge 5 ] && [ -n "$5" ]; then args+=("$5"); fi
      # The tests fill workspaces with NaN bytes (test::poison_workspace), which would hide from initcheck a read
      # of a byte the op never wrote: under initcheck they leave them as allocated.
      local unset_workspace=0
      if [ "$tool" = initcheck ]; then unset_workspace=1; fi
      local began=$SECONDS
      RAGGED_TEST_SCALE=$sanitizer_test_scale RAGGED_TEST_UNSET_WORKSPACE=$unset_workspace timeout -k 10 "$limit" \
        compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 86 --print-limit 50 \
        "$test" "${args[@]}" >"$runs/$key.log" 2>&1 || rc=$?
      echo $((SECONDS - began)) >"$runs/$key.secs"  # each run's seconds, to plan the next call's budget by
      echo "$rc" >"$runs/$key.rc"
      # A line in $OUT as each run ends (one short append: whole even with runs ending together), so that a call
      # stopped from outside before the sections below are written still says what ran and how it ended.
      echo "finished: $tool $(basename "$test") [${5:-all cases}] rc=$rc $((SECONDS - began))s" >>"$out/sanitizers.log"
    }
    # What a run the deadline cut short had already found, from its log: 86 for a sanitizer report, 1 for a failed
    # Catch2 check other than the kill itself (Catch2 reports the SIGTERM as one more failure), else 0.
    cut_run_findings() {  # cut_run_findings LOG
      local log=$1 failures kills
      # Any sanitizer line but the banner and clean summaries belongs to a report. One awk, not grep | grep -q:
      # under pipefail the first grep's SIGPIPE, when grep -q stops reading a long log early, read as "none".
      local clean='^========= (COMPUTE-SANITIZER|ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed)'
      if awk -v clean="$clean" '/^========= / && $0 !~ clean { found = 1; exit } END { exit !found }' "$log"; then
        echo 86; return
      fi
      failures=$(grep -c 'FAILED:' "$log" || true)
      kills=$(grep -c 'SIGTERM - Termination request signal' "$log" || true)
      if [ "$failures" -gt "$kills" ]; then echo 1; else echo 0; fi
    }
    # Catch2 v2 test specs: a backslash makes the next character literal (names hold commas and brackets).
    catch_spec() { printf '%s' "$1" | sed -e 's/[][\\,~*"]/\\&/g'; }
    declare -A run_count=()
    running=0
    for test in "${gpu_tests[@]}"; do
      name=$(basename "$test")
      case_specs=()
      filter_matches=0
      if [ -z "$filter" ]; then
        mapfile -t names < <("$test" --list-test-names-only 2>/dev/null | grep . || true)
        for case_name in "${names[@]}"; do case_specs+=("$(catch_spec "$case_name")"); done
      else
        # Catch2 v2 exits 0 when a filter matches nothing: a program without a matching case is not run, and
        # a filter that matches no case anywhere fails the step (below), so a typo cannot pass as clean.
        filter_matches=$("$test" --list-test-names-only "$filter" 2>/dev/null | grep -c . || true)
      fi
      for tool in $tools; do
        if [ -n "$filter" ]; then
          specs=("$filter")
          if [ "$filter_matches" -eq 0 ]; then specs=(); fi
        elif [[ " $split_tools " == *" $tool "* ]] && [ ${#case_specs[@]} -gt 0 ]; then
          specs=("${case_specs[@]}")
        else
          specs=("")  # the whole program
        fi
        run_count[$tool.$name]=${#specs[@]}
        for i in "${!specs[@]}"; do
          key="$tool.$name.$i"
          echo "${specs[$i]:-all cases}" >"$runs/$key.spec"
          limit=$(step_timeout "$sanitizer_timeout")
          if [ "$limit" -eq 0 ]; then
            echo deadline >"$runs/$key.rc"
            continue
          fi
          echo "$limit" >"$runs/$key.limit"
          sanitize "$tool" "$test" "$key" "$limit" "${specs[$i]}" &
          running=$((running + 1))
          if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
        done
      done
    done
    wait || true
    matched=0
    for tool in $tools; do
      for test in "${gpu_tests[@]}"; do
        name=$(basename "$test")
        cases=${run_count[$tool.$name]:-0}
        if [ "$cases" -eq 0 ]; then
          record "$tool $name" "not run (no case matches the filter)" "-" "-"
          continue
        fi
        matched=$((matched + 1))
        # cut_runs, not cut: that one counts the summary's steps the deadline stopped (record, write_summary).
        worst=0 not_run=0 cut_runs=0 timed_out=0 errors=0 failed=0 limit="" slowest=0
        {
          echo "=============================================================================================="
          echo "== $tool $name${filter:+ [filter: $filter]}: $cases run(s)"
          echo "=============================================================================================="
        } >>"$out/sanitizers.log"
        for ((i = 0; i < cases; i++)); do
          key="$tool.$name.$i"
          rc=$(cat "$runs/$key.rc" 2>/dev/null || echo missing)
          verdict=$rc  # what the run counts as in the row: its exit code; for a cut run, what its log found
          case "$rc" in
            deadline) not_run=$((not_run + 1)); continue ;;
            0) ;;
            86) errors=$((errors + 1)) ;;
            124 | 137)
              # A run whose limit the deadline had cut below RAGGED_SANITIZER_TIMEOUT was stopped by the call's
              # plan, not by its own slowness: like a run the deadline never started, it is not a failure.
              # What it found before the kill still counts.
              if [ "$(cat "$runs/$key.limit")" -lt "$sanitizer_timeout" ]; then
                cut_runs=$((cut_runs + 1))
                verdict=$(cut_run_findings "$runs/$key.log")
                case $verdict in
                  86) errors=$((errors + 1)) ;;
                  1) failed=$((failed + 1)) ;;
                esac
              else
                timed_out=$((timed_out + 1)); limit=$(cat "$runs/$key.limit")
              fi ;;
            *) failed=$((failed + 1)) ;;
          esac
          if [ "$verdict" != 0 ] && { [ "$worst" = 0 ] || [ "$verdict" = 86 ]; }; then worst=$verdict; fi
          secs=$(cat "$runs/$key.secs" 2>/dev/null || echo 0)
          if [ "$secs" -gt "$slowest" ]; then slowest=$secs; fi
          {
            echo "---- $(cat "$runs/$key.spec") -> rc=$rc (${secs}s)"
            # Keep the log bounded: a repeated hazard can print for pages.
            head -c 400000 "$runs/$key.log" 2>/dev/null || true
            echo
          } >>"$out/sanitizers.log"
        done
        note=""
        if [ "$errors" -gt 0 ]; then note+=", $errors with sanitizer errors"; fi
        if [ "$timed_out" -gt 0 ]; then note+=", $timed_out timed out after ${limit}s"; fi
        if [ "$failed" -gt 0 ]; then note+=", $failed failed"; fi
        if [ "$cut_runs" -gt 0 ]; then note+=", $cut_runs cut short by the deadline"; fi
        if [ "$not_run" -gt 0 ]; then note+=", $not_run not run (deadline)"; fi
        what="$tool $name"
        if [ "$cases" -gt 1 ]; then
          what+=" ($cases runs, the slowest ${slowest}s$note)"
        else
          what+=" (${slowest}s$note)"
        fi
        if [ "$worst" = 0 ] && [ "$not_run" -eq 0 ] && [ "$cut_runs" -eq 0 ]; then
          record "$what" pass 0 "sanitizers.log"
        elif [ "$worst" = 0 ]; then
          record "$what" "not run (deadline)" "-" "sanitizers.log"
        else
          record "$what" FAIL "$worst" "sanitizers.log"
        fi
      done
    done
    if [ -n "$filter" ] && [ -n "$tools" ] && [ "$matched" -eq 0 ]; then
      record "compute-sanitizer" FAIL "-" "RAGGED_SANITIZER_FILTER '$filter' matches no test case"
    fi
    rm -rf "$runs"
  fi
fi

write_summary final
echo "summary: $out/summary.md ($(($(date +%s) - start_time))s, $failures failure(s))"
[ "$failures" -eq 0 ]

#!/usr/bin/env bash
# Nsight Compute profiles of the cases docs/gpu-runbook.md names as first suspects, in one device call after
# scripts/gpu-check.sh (it reuses the build folder, and builds it if missing). Each case runs one benchmark of
# ragged_bench under ncu, profiling a few launches of the kernels that matter, with the metrics that tell a
# memory-bound kernel from a latency- or issue-bound one. Run from the repository root:
#
#   scripts/gpu-profile.sh OUTDIR
#
# Writes:
#   OUTDIR/profile.md    one row per profiled launch: case, kernel, time, DRAM and L2 traffic, throughput, occupancy,
#                        issue and tensor activity, plus the metrics the machine's ncu did not know
#   OUTDIR/profile.csv   ncu's raw CSV of every case, a "case" column added in front
#   OUTDIR/profile.log   the commands and ncu's console output
#   OUTDIR/profile_cases.tsv  the case table below (case, suite, benchmark), for summarize_targets.py --profile-dir
#
# Environment:
#   RAGGED_BUILD_DIR         build folder (default: build)
#   RAGGED_CUDA_ARCHS        CMAKE_CUDA_ARCHITECTURES if a build is needed (default: native)
#   RAGGED_PROFILE_CASES     case names from the table below (default: all, in the table's order)
#   RAGGED_PROFILE_TIMEOUT   seconds per case (default: 120)
#   RAGGED_DEADLINE          seconds the whole profile may take (default: 560); cases that no longer fit are
#                            listed as not run
#   RAGGED_PROFILE_DETAIL=1  also profile one launch per case with every section (--set full) into
#                            OUTDIR/detail/CASE.details.txt (stall reasons, memory and scheduler tables) and
#                            CASE.sass.csv (per-instruction executed counts and stall samples: which lines the
#                            time goes to); the .ncu-rep itself is deleted unless RAGGED_PROFILE_KEEP_REPORTS=1
#   RAGGED_PROFILE_DRY_RUN=1 print the commands and check that every case names a benchmark ragged_bench lists;
#                            runs no benchmark, needs no GPU or ncu (ctest profile_cases runs this)
# Exit code: non-zero when a case failed, ncu could not read counters or the build failed; cases the deadline
# left out are listed in profile.md as "(deadline)" without failing the call (the table's order is the plan).
set -euo pipefail
source "$(dirname "$0")/gpu_common.sh"
gpu_script_start "$0" "$@"
build=${RAGGED_BUILD_DIR:-build}
archs=${RAGGED_CUDA_ARCHS:-native}
case_timeout=${RAGGED_PROFILE_TIMEOUT:-120}
deadline=${RAGGED_DEADLINE:-560}
dry_run=${RAGGED_PROFILE_DRY_RUN:-0}
start_time=$(date +%s)

# name ; suite ; benchmark (exact name) ; ncu kernel filter ; launches skipped ; launches profiled
# Skipping the first launches leaves out the benchmark's warm-up and correctness call.
cases=(
  "sum_tiny_d1;segment_gpu;segment_sum/ragged/uniform/inner:1/batch:8388608/mean:2/manual_time;regex:segment_reduce;4;2"
  # Rows of 0..4 tokens at D = 64: since 2026-11-29 the row pass finishes them, a sub-warp of D / V lanes per row
  # (segment_*_subwarp_rows_kernel; the first pass then walks no unit). Instructions per row, issue activity and
  # DRAM throughput of that launch; with RAGGED_SEGMENT_SUBWARP_ROWS=0 both ops stream them in the first pass
  # instead (a warp per row), and RAGGED_SEGMENT_STREAM=0 on top walks them as units.
  "sum_tiny_d64;segment_gpu;segment_sum/ragged/uniform/inner:64/batch:131072/mean:2/manual_time;regex:segment_reduce;4;2"
  # Rows of 0..4 tokens at D = 1024: units of the first pass, a warp per (row, column tile), until 2026-12-01; since
  # then a warp per row in the row pass (wide_short_row_pass), 4 column tiles of loads at once.
  "sum_tiny_d1024;segment_gpu;segment_sum/ragged/uniform/inner:1024/batch:8192/mean:2/manual_time;regex:segment_reduce;4;2"
  # D = 1, rows of ~256 floats: a unit per row in the first run (max at 0.54x CUB), then streamed, since
  # 2026-12-01 a warp each in the row pass (the unit kernel then finds no units); and the warp-per-row floor's one
  # kernel on the same rows (bench/warp_row_floor.h).
  "max_uniform_d1;segment_gpu;segment_max/ragged/uniform/inner:1/batch:65536/mean:256/manual_time;regex:segment_reduce;4;2"
  "max_uniform_d1_floor;segment_gpu;segment_max/floor/uniform/inner:1/batch:65536/mean:256/kind:warp/manual_time;regex:warp_max_floor;2;1"
  "softmax_tiny_d64;segment_gpu;segment_softmax/ragged/uniform/inner:64/batch:131072/mean:2/manual_time;regex:segment_softmax;6;3"
  # One row of 16M floats at D = 64: 2048 (sum) or 16K (softmax) chunk partials per column, merged by the
  # row's merge tree inside the first-pass kernel; its tail (the last merges after the last chunk) is the time
  # the kernel runs past its DRAM traffic.
  "sum_one_huge_d64;segment_gpu;segment_sum/ragged/one_huge/inner:64/batch:16/mean:16384/manual_time;regex:segment_;4;2"
  "softmax_one_huge_d64;segment_gpu;segment_softmax/ragged/one_huge/inner:64/batch:16/mean:16384/manual_time;regex:segment_softmax;6;3"
  "softmax_one_huge_d1_bf16;segment_gpu;segment_softmax/ragged/one_huge/inner:1/batch:16/mean:2097152/dtype:bf16/manual_time;regex:segment_softmax;6;3"
  # The fixed cost: 4096 floats in one row took 19.1 us against cub::DeviceReduce's 3.85 (H200, a910134). Each
  # kernel's time here, one launch at a time, says how much is the row pass, the unit kernel, or between them.
  "reduce_fixed_4096;segment_gpu;device_reduce/ragged/floats:4096/flush:clean/manual_time;regex:segment_reduce;4;2"
  # The same for CUB's single-tile kernel, and both on 64 MiB: the no-instruction stall share against CUB's
  # says whether ragged's code (far larger) is fetched at a cost the flush makes every launch pay.
  "reduce_fixed_4096_cub;segment_gpu;device_reduce/cub/floats:4096/flush:clean/manual_time;regex:DeviceReduce;2;1"
  # One row at D = 1024: each column tile's merge tree. The bfloat16 sum took 89.9 us at 087a77a against 45.8 for
  # float (same bytes; tiles of 256 columns: 3 levels of nodes of 32 round trips each then, 4 since the staged
  # merges); the float softmax 380 us, 3x its D = 1 row. The first-pass kernel's time past its DRAM traffic is
  # the tail; the softmax's second pass is its own launch.
  "sum_one_huge_d1024_bf16;segment_gpu;segment_sum/ragged/one_huge/inner:1024/batch:16/mean:2048/dtype:bf16/manual_time;regex:segment_;4;2"
  "softmax_one_huge_d1024;segment_gpu;segment_softmax/ragged/one_huge/inner:1024/batch:16/mean:1024/manual_time;regex:segment_softmax;6;3"
  # The floor of ragged's chain: two launches around a one-block sum (bench/reduce_chain_floor.h).
  "reduce_fixed_4096_floor;segment_gpu;device_reduce/floor/floats:4096/flush:clean/kernels:2/manual_time;regex:floor_;4;2"
  "reduce_64mib;segment_gpu;device_reduce/ragged/floats:16777216/flush:clean/manual_time;regex:segment_reduce;4;2"
  "reduce_64mib_cub;segment_gpu;device_reduce/cub/floats:16777216/flush:clean/manual_time;regex:DeviceReduce;4;2"
  "sum_power_law_d64;segment_gpu;segment_sum/ragged/power_law/inner:64/batch:1024/mean:256/manual_time;regex:segment_;4;2"
  "softmax_power_law_d1;segment_gpu;segment_softmax/ragged/power_law/inner:1/batch:65536/mean:256/manual_time;regex:segment_softmax;6;3"
  # Rows of 0..512 tokens at D = 64 (64 KB on average): block rows, each held in one block's shared memory by
  # the second-pass kernel; compare with a RAGGED_SEGMENT_BLOCK_ROWS=0 profile (chunks, merge tree, second read).
  "softmax_uniform_d64;segment_gpu;segment_softmax/ragged/uniform/inner:64/batch:1024/mean:256/manual_time;regex:segment_softmax;6;3"
  "softmax_bf16_d1024;segment_gpu;segment_softmax/ragged/uniform/inner:1024/batch:128/mean:256/dtype:bf16/manual_time;regex:segment_softmax;6;3"
  # The rest of issue 3's target cases in float, one per regime and D (with the cases above, every regime at D = 1,
  # 64 and 1024 for the sum and the softmax; the max and argmax run the sum's kernels): summarize_targets.py
  # --profile-dir puts each beside its miss.
  "sum_one_huge_d1;segment_gpu;segment_sum/ragged/one_huge/inner:1/batch:16/mean:1048576/manual_time;regex:segment_;4;2"
  "sum_one_huge_d1024;segment_gpu;segment_sum/ragged/one_huge/inner:1024/batch:16/mean:1024/manual_time;regex:segment_;4;2"
  "sum_power_law_d1;segment_gpu;segment_sum/ragged/power_law/inner:1/batch:65536/mean:256/manual_time;regex:segment_reduce;4;2"
  "sum_power_law_d1024;segment_gpu;segment_sum/ragged/power_law/inner:1024/batch:64/mean:256/manual_time;regex:segment_;4;2"
  "sum_uniform_d1;segment_gpu;segment_sum/ragged/uniform/inner:1/batch:65536/mean:256/manual_time;regex:segment_reduce;4;2"
  "sum_uniform_d64;segment_gpu;segment_sum/ragged/uniform/inner:64/batch:1024/mean:256/manual_time;regex:segment_;4;2"
  "sum_uniform_d1024;segment_gpu;segment_sum/ragged/uniform/inner:1024/batch:64/mean:256/manual_time;regex:segment_;4;2"
  "softmax_tiny_d1;segment_gpu;segment_softmax/ragged/uniform/inner:1/batch:8388608/mean:2/manual_time;regex:segment_softmax;6;3"
  "softmax_tiny_d1024;segment_gpu;segment_softmax/ragged/uniform/inner:1024/batch:8192/mean:2/manual_time;regex:segment_softmax;6;3"
  "softmax_power_law_d64;segment_gpu;segment_softmax/ragged/power_law/inner:64/batch:1024/mean:256/manual_time;regex:segment_softmax;6;3"
  "softmax_power_law_d1024;segment_gpu;segment_softmax/ragged/power_law/inner:1024/batch:64/mean:256/manual_time;regex:segment_softmax;6;3"
  "softmax_uniform_d1;segment_gpu;segment_softmax/ragged/uniform/inner:1/batch:65536/mean:256/manual_time;regex:segment_softmax;6;3"
  "softmax_uniform_d1024;segment_gpu;segment_softmax/ragged/uniform/inner:1024/batch:64/mean:256/manual_time;regex:segment_softmax;6;3"
  "lstm_bf16_b64_h1024;rnn_gpu;rnn_lstm/ragged/uniform/dtype:bf16/batch:64/hidden:1024/mean:128/manual_time;regex:rnn_persistent;1;1"
  "lstm_bf16_b16_h256;rnn_gpu;rnn_lstm/ragged/uniform/dtype:bf16/batch:16/hidden:256/mean:128/algo:persistent/manual_time;regex:rnn_persistent;1;1"
  # The per-step path, one launch a step streaming the block's W_hh slice through shared memory: 4 chunks of a
  # row at H = 1024, 8 at H = 2048 (both forced: the persistent kernels run them by default; H = 2048 was the
  # case slower than cuDNN). DRAM against L2 traffic tells a bandwidth-bound stream (W_hh from DRAM every
  # step) from a latency-bound one (each chunk a round trip). Steps 20 to 22 of the first call, while most
  # sequences are still active.
  "lstm_bf16_b16_h1024_step;rnn_gpu;rnn_lstm/ragged/uniform/dtype:bf16/batch:16/hidden:1024/mean:128/algo:per_step/manual_time;regex:rnn_gates_step;20;3"
  "lstm_bf16_b16_h2048_step;rnn_gpu;rnn_lstm/ragged/lognormal/dtype:bf16/batch:16/hidden:2048/mean:128/algo:per_step/manual_time;regex:rnn_gates_step;20;3"
  # H = 2048's default since stop 39: the same stream inside one persistent launch (the L2 hit rate of its weight
  # reads says whether W_hh stays in L2 from step to step).
  "lstm_bf16_b16_h2048_streamed;rnn_gpu;rnn_lstm/ragged/lognormal/dtype:bf16/batch:16/hidden:2048/mean:128/manual_time;regex:rnn_persistent;1;1"
  # Its weights floor: the same stream of W_hh through shared memory with nothing computed (bench/rnn_step_floor.h);
  # its DRAM against L2 bytes and time per step, next to the case above.
  "lstm_bf16_b16_h2048_weights_floor;rnn_gpu;rnn_lstm/floor/lognormal/dtype:bf16/batch:16/hidden:2048/mean:128/kind:weights/manual_time;regex:weights_floor;1;1"
  "projection_invariant;rnn_gpu;rnn_lstm/ragged/uniform/dtype:bf16/batch:64/hidden:1024/mean:128/proj:invariant/manual_time;regex:projection_gemm;1;1"
  # cuBLAS's GEMM kernels, by the name families it is known to use (nvjet_*, sm90_xmma_*, ampere_*, cutlass*,
  # its split-K reduction); none of ragged's or CUB's kernels starts so.
  "projection_cublas;rnn_gpu;rnn_lstm/ragged/uniform/dtype:bf16/batch:64/hidden:1024/mean:128/manual_time;regex:^(nvjet|sm[0-9]+_|ampere|cutlass|Kernel|gemm|xmma|splitK);1;1"
  # Issue 5 (resolved) and the conversions: last, the first to go when the deadline cuts the list.
  "attention_tile128;attention_gpu;attention/ragged/pad0/long/len:4096/batch:16/heads:16/dim:128/causal:0/tile:128/manual_time;regex:attention_mma;1;1"
  "attention_tile64;attention_gpu;attention/ragged/pad0/long/len:4096/batch:16/heads:16/dim:128/causal:0/tile:64/manual_time;regex:attention_mma;1;1"
  "to_padded_d64;convert_gpu;ragged_to_padded/ragged/lognormal/inner:64/batch:1024/mean:256/manual_time;regex:ragged_to_padded;1;1"
)

# What each number answers (docs/gpu-runbook.md): time; DRAM bytes and % of peak (memory-bound or not); L2 read
# sectors and hit rate (the RNN's h broadcast, the softmax re-read); achieved occupancy; issue-slot activity and
# instructions (instruction-bound); tensor-pipe activity (mma kernels); registers per thread; the share of
# active warp cycles stalled for want of an instruction (code fetched from L2 or DRAM: the segment kernels' code
# is 41-175 KB per kernel on sm_90, and the flush before each timed launch evicts it) and for a global load.
metrics=(
  gpu__time_duration.sum
  dram__bytes_read.sum
  dram__bytes_write.sum
  dram__throughput.avg.pct_of_peak_sustained_elapsed
  lts__t_sectors_op_read.sum
  lts__t_sector_hit_rate.pct
  sm__warps_active.avg.pct_of_peak_sustained_active
  smsp__issue_active.avg.pct_of_peak_sustained_active
  sm__inst_executed.sum
  sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
  smsp__warp_issue_stalled_no_instruction_per_warp_active.pct
  smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct
  launch__registers_per_thread
  launch__grid_size
)

log="$out/profile.log"
: >"$log"
# The case table as run (scripts/summarize_targets.py --profile-dir matches its benchmarks to the targets' cases).
{
  printf 'case\tsuite\tbenchmark\n'
  for entry in "${cases[@]}"; do
    IFS=';' read -r name suite bench _ <<<"$entry"
    printf '%s\t%s\t%s\n' "$name" "$suite" "$bench"
  done
} >"$out/profile_cases.tsv"
csv="$out/profile.csv"
: >"$csv"
not_run=()  # every case without counters, for the table: failed, or "(deadline)"
failed=0    # those that failed or could not run (not those the deadline left out, which the plan expects)
counters_unavailable=""  # set when ncu cannot read the counters here: the cases left are not run
unknown_metrics=()

left() { echo $((deadline - ($(date +%s) - start_time) - 15)); }

if [ "$dry_run" != "1" ]; then
  if ! command -v ncu >/dev/null 2>&1; then
    echo "# ragged GPU profile"$'\n\n'"ncu was not found on PATH or in /usr/local/cuda/bin: nothing profiled." >"$out/profile.md"
    echo "ncu not found" | tee -a "$log"
    exit 1
  fi
  if [ ! -x "$build/bench/ragged_bench" ]; then
    configure_command
    build_rc=0
    { timeout -k 10 "$(left)" "${configure[@]}" && timeout -k 10 "$(left)" ninja -C "$build" ragged_bench; } \
      >>"$log" 2>&1 || build_rc=$?
    if [ "$build_rc" -ne 0 ]; then
      printf '# ragged GPU profile (ncu)\n\nNot run: building ragged_bench failed (rc=%s; profile.log).\n' "$build_rc" \
        >"$out/profile.md"
      exit 1
    fi
  fi
  # A metric this ncu does not know would fail every case: keep the known ones, list the others. The launch__
  # attributes are not in --query-metrics' list (the H100 run of 1c910f2 left them out for that) but every ncu
  # has them.
  known=$(ncu --query-metrics 2>>"$log" | awk '{print $1}' || true)
  kept=()
  for metric in "${metrics[@]}"; do
    if [[ "$metric" == launch__* ]] || grep -qx "${metric%%.*}" <<<"$known"; then kept+=("$metric")
    else unknown_metrics+=("$metric"); fi
  done
  metrics=("${kept[@]}")
  if [ ${#kept[@]} -eq 0 ] && grep -qE "Failed to initialize the profiler|LibraryNotLoaded|ERR_NVGPUCTRPERM" "$log"; then
    counters_unavailable=$(grep -ohE "Failed to initialize the profiler.*|ERR_NVGPUCTRPERM.*" "$log" | head -n 1)
    unknown_metrics=()
  fi
fi
metric_list=$(IFS=,; echo "${metrics[*]}")

listed=""
if [ "$dry_run" = "1" ]; then
  listed=$("$build/bench/ragged_bench" --benchmark_list_tests 2>/dev/null) || {
    echo "cannot list the benchmarks of $build/bench/ragged_bench" >&2
    exit 1
  }
fi
missing=0
selected=${RAGGED_PROFILE_CASES:-}
for entry in "${cases[@]}"; do
  IFS=';' read -r name suite bench kernels skip count <<<"$entry"
  if [ -n "$selected" ] && [[ " $selected " != *" $name "* ]]; then continue; fi
  if [ -n "${counters_unavailable:-}" ]; then
    not_run+=("$name")
    failed=$((failed + 1))
    continue
  fi
  limit=$(left)
  if [ "$limit" -lt 20 ]; then
    not_run+=("$name (deadline)")
    continue
  fi
  if [ "$limit" -gt "$case_timeout" ]; then limit=$case_timeout; fi
  # --clock-control none: profile at the clocks the benchmarks run at (ncu would otherwise lock them to base).
  run_bench=("$build/bench/ragged_bench" "--benchmark_filter=^${bench}\$" --benchmark_min_time=0.01
             --benchmark_repetitions=1)
  command=(ncu --clock-control none --csv --page raw --print-units base --metrics "$metric_list" --kernel-name "$kernels" --launch-skip "$skip"
           --launch-count "$count" "${run_bench[@]}")
  echo "== $name (suite $suite, timeout ${limit}s): RAGGED_BENCH_SUITES=$suite RAGGED_BENCH_NO_CEILINGS=1 ${command[*]}" >>"$log"
  if [ "$dry_run" = "1" ]; then
    echo "RAGGED_BENCH_SUITES=$suite RAGGED_BENCH_NO_CEILINGS=1 timeout $limit ${command[*]}"
    if ! grep -qxF "$bench" <<<"$listed"; then
      echo "case $name: ragged_bench has no benchmark $bench" >&2
      missing=$((missing + 1))
    fi
    continue
  fi
  rc=0
  # No ceilings: their copy and 8192^3 cuBLAS GEMM would meet the kernel filters and launch counts.
  RAGGED_BENCH_SUITES=$suite RAGGED_BENCH_NO_CEILINGS=1 timeout -k 10 "$limit" "${command[@]}" >"$out/.case.out" \
    2>>"$log" || rc=$?
  # ncu prints its CSV (quoted lines) among the benchmark's own output.
  grep '^"' "$out/.case.out" | sed "s/^/\"$name\",/" >>"$csv" || true
  grep -v '^"' "$out/.case.out" >>"$log" || true
  echo "-> rc=$rc" >>"$log"
  if [ "$rc" -ne 0 ]; then
    not_run+=("$name (rc=$rc)")
    failed=$((failed + 1))
  fi
  if [ "$rc" -eq 0 ] && [ "${RAGGED_PROFILE_DETAIL:-0}" = "1" ] && [ "$(left)" -ge 40 ]; then
    mkdir -p "$out/detail"
    report="$out/detail/$name"
    detail_limit=$(left)
    if [ "$detail_limit" -gt "$case_timeout" ]; then detail_limit=$case_timeout; fi
    detail=(ncu --clock-control none --set full --import-source no -f -o "$report" --kernel-name "$kernels"
            --launch-skip "$skip" --launch-count 1 "${run_bench[@]}")
    echo "== $name, every section (timeout ${detail_limit}s): ${detail[*]}" >>"$log"
    detail_rc=0
    RAGGED_BENCH_SUITES=$suite RAGGED_BENCH_NO_CEILINGS=1 timeout -k 10 "$detail_limit" "${detail[@]}" >>"$log" 2>&1 ||
      detail_rc=$?
    echo "-> rc=$detail_rc" >>"$log"
    if [ -f "$report.ncu-rep" ]; then
      ncu --import "$report.ncu-rep" --page details >"$report.details.txt" 2>>"$log" || true
      ncu --import "$report.ncu-rep" --page source --csv --print-source sass >"$report.sass.csv" 2>>"$log" || true
      if [ "${RAGGED_PROFILE_KEEP_REPORTS:-0}" != "1" ]; then rm -f "$report.ncu-rep"; fi
    fi
  fi
  # Where ncu cannot read the counters at all (seen on gVisor machines: "Failed to initialize the profiler:
  # LibraryNotLoaded"), every case would fail the same way: stop and say so.
  if [ "$rc" -ne 0 ] && grep -qE "Failed to initialize the profiler|LibraryNotLoaded|ERR_NVGPUCTRPERM" "$out/.case.out" "$log"; then
    counters_unavailable=$(grep -ohE "Failed to initialize the profiler[^\"]*|ERR_NVGPUCTRPERM[^\"]*" "$out/.case.out" "$log" | head -n 1)
  fi
done
rm -f "$out/.case.out"
if [ "$dry_run" = "1" ]; then exit $((missing > 0)); fi

python3 "$(dirname "$0")/profile_table.py" "$csv" "$out/profile.md" "${counters_unavailable:-}" "${#not_run[@]}" \
  ${not_run[@]+"${not_run[@]}"} -- ${unknown_metrics[@]+"${unknown_metrics[@]}"}
echo "profile: $out/profile.md ($(($(date +%s) - start_time))s, $failed failed, ${#not_run[@]} without counters)"
# Cases the deadline left out are the plan's (the table's last ones), not a failure.
[ "$failed" -eq 0 ]

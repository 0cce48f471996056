#!/usr/bin/env bash
# Runs the GPU test programs on the kernel emulator (docs/emulator.md): builds them into BUILD_DIR (default
# build/emu), then runs each with fresh random inputs, two at a time, and prints one line per program. Exits
# non-zero if any fails. Machines that are not x86-64 skip it (the fiber switch is x86-64 assembly).
#   tests/emu/run.sh [BUILD_DIR]
# EMU_SMS (default 8) sets the SM count the launches size their grids by; scripts/test.sh runs this after ctest.
# The programs that take seconds start first, then the slowest. EMU_DEADLINE (seconds from the start, build
# included; unset: no limit) is a time budget: a run still going then is stopped and reported "cut short", one
# not started "not run", neither a failure (scripts/test.sh sets it, so that CI ends within its 90 minutes on a
# machine slower than this one); the last line names them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build/emu}"
if [[ "$(uname -m)" != x86_64 ]]; then
  echo "emulated kernel tests: skipped (the emulator's fiber switch is x86-64 only)"
  exit 0
fi

# Every GPU test program. test_rnn runs as on an H100 (132 SMs): its persistent cases need room for that many
# resident blocks. A run named program:tag runs that program again with its own SM count and test specs:
# test_rnn:20sms gives the persistent RNN kernel 27 to 30 hidden units per block in its bidirectional H = 264 /
# 300 cases, so that a block's first batch chunk has more epilogue items than its threads hold (rnn_common.cuh),
# which no test shape reaches on 132 SMs. test_rnn:19sms runs the same cases on 19 SMs, where those counts need
# 20 blocks and blocks of more than 113 KB fit one per SM: the plan takes the next count (18 blocks) for them,
# as it would on a GPU with an odd number of SMs; and the resident staging-depth case, whose deeper layouts must
# not move the plan off the two-buffer layout's count there (test_rnn:65sms runs that case alone on 65 SMs,
# where one of its shapes would move without the fallback). test_rnn:20sms also runs the kept-chunk case there:
# two buffers and one or two chunks kept (the layout bfloat16 H = 2048 takes on an H100 / H200); and the resident
# staging-depth case: 26 units a block, held items short of the first batch chunk, bfloat16 three buffers deep,
# float GRU three of its five chunks (the float LSTM's weights do not fit there). test_rnn:99kb runs the per-step
# path as on a device with 99 KB of shared memory per block and 20 SMs: float LSTM blocks of 16 units fit there
# at no pipeline depth, so the launcher takes 12 units and two stages instead of three (the persistent kernel
# with streamed weights fits at no count there: that case is not run). test_rnn:99kb65 runs the same test on 65
# SMs: 8 units per block, whose streamed weights fit two stages deep only, on both paths, the projection's W_hr
# included.
# test_segment_reduce:100kb runs the merge-staging cases with 100 KB of shared memory per SM and room for 3
# blocks (sm_86 / sm_89 and the float reductions' register bound): the first-pass launcher lowers the staging to
# 2 or 1 KB a warp there (fit_first_pass_shared), and keeps 4 KB for the smallest plans and past 131,072 rows.
# test_rnn:invariant runs test_rnn's batch-invariant projection cases and test_rnn the others: as one program it
# was the emulated run's long pole (3007 s of a 76-minute CI run here, the other slot idle for much of it). The
# invariant cases run on 32 SMs: a persistent grid has a block per SM, and a round of the emulator switches to
# every thread of the grid, so on 132 SMs their persistent path took 6x as long (one case: 160 s against 27) for
# the same check (bits that do not depend on the batch); test_rnn runs every path on 132 SMs.
# The :shuffled runs take a block's ready threads in a random order and the blocks last to first (EMU_ORDER,
# EMU_BLOCKS): the fixed order lets a missing barrier pass wherever a lower thread or block writes what a higher
# one reads. test_attention:skewed runs each warp up to its block barrier before the next (EMU_ORDER=warps) with
# cp.async copies landing at issue (EMU_CP_ASYNC=early): a refill of a K / V buffer without the barrier after its
# last reads fails there, in the lockstep order it passed (a mutation that removed attention_mma.cu's barrier).
# test_rnn:skewed does the same for the RNN's pipelined products on 132 SMs (the matrix, streamed and resident
# weights, several blocks; the batch-invariant projection GEMM in the misaligned cases): with the barrier after
# chunk_product's reads removed, it failed 14 assertions where the plain order passed them all.
# The :waves runs run a launch's blocks as many at once as the device holds (EMU_BLOCKS=waves), their threads
# interleaved: the segment ops' merge trees, whose last-arriving warp merges, then meet other arrival orders
# across blocks than one block after another gives. The softmax's runs only the cases of many blocks and merges
# (153 s here; all 56 cases took 1089 s of a 64-minute CI run).
# test_large_tensors runs at 1/1024 of its size (its full size needs 11 GB of device memory and 2^31 elements,
# far past what the emulator gets through): the test's own logic, not the 64-bit indices it is for.
# The :132sms runs put the segment tests on an H100's SM count. Their persistent grids are sized by it: on 8 SMs
# a block walks many shares, on 132 many blocks get little or no work and the shares split rows elsewhere. Their
# generated inputs are a quarter of the size (RAGGED_TEST_SCALE, as under the GPU sanitizers): at full size the
# reduce test took 48 min on 132 SMs here (niced beside a CI run), at a quarter 7.5 to 9.7 (two at a time). Left to the 8-SM runs: the reduce's NaN and
# ties cases (per-row semantics, 115 s on 132 SMs), the softmax's warp-row and D > 32 sub-warp cases (50 s each on
# 132 SMs at any scale).
# The quick runs first: all twelve take under a minute together (two at a time), so that a time budget never
# leaves them out (on 2026-12-07 a slow day here cut 9 of the CI tier's 25 runs, 5 of them a minute or less).
quick=(test_dynamic test_workspace_query test_offsets test_masks test_dependent_launch test_offsets:shuffled
       test_masks:shuffled test_rnn:99kb test_rnn:99kb65 test_packing test_packing:shuffled test_large_tensors)
runs=("${quick[@]}"
      test_rnn test_rnn:invariant test_segment_softmax test_segment_reduce:132sms test_segment_softmax:waves
      test_attention test_segment_softmax:132sms test_convert test_rnn:skewed test_segment_reduce
      test_segment_reduce:waves test_segment_reduce:100kb test_rnn:20sms test_rnn:19sms test_rnn:65sms
      test_convert:shuffled test_attention:skewed)
# The runs CI leaves out (EMU_TIER=ci, as scripts/test.sh runs it): the same programs in other orders and on
# other SM counts, which took 2286 of the emulated tests' 5708 CPU seconds (2026-12-06 here, two at a time),
# after which a CI run went past its 90 minutes. Run them all (the default, EMU_TIER=full) after changing a kernel.
full_only=(test_segment_softmax:132sms test_segment_reduce:132sms test_segment_reduce:waves test_attention:skewed
           test_rnn:skewed)
chosen=()
if [[ -n "${EMU_RUNS:-}" ]]; then
  # EMU_RUNS (space-separated names from the list above) runs only those, in the list's order, whatever the tier.
  for r in $EMU_RUNS; do
    if [[ " ${runs[*]} " != *" $r "* ]]; then
      echo "emulated kernel tests: EMU_RUNS names '$r', which is not one of: ${runs[*]}" >&2
      exit 2
    fi
  done
  for r in "${runs[@]}"; do [[ " $EMU_RUNS " == *" $r "* ]] && chosen+=("$r"); done
else
  case "${EMU_TIER:-full}" in
    full) chosen=("${runs[@]}") ;;
    ci) for r in "${runs[@]}"; do [[ " ${full_only[*]} " == *" $r "* ]] || chosen+=("$r"); done ;;
    *) echo "emulated kernel tests: EMU_TIER must be full or ci, not '${EMU_TIER}'" >&2; exit 2 ;;
  esac
fi
runs=("${chosen[@]}")
mapfile -t programs < <(printf '%s\n' "${runs[@]%%:*}" | awk '!seen[$0]++')
declare -A sms=([test_rnn]=132 [test_rnn:invariant]=32 [test_rnn:20sms]=20 [test_rnn:19sms]=19 [test_rnn:65sms]=65
                [test_rnn:99kb]=20 [test_rnn:99kb65]=65 [test_workspace_query]=132 [test_segment_reduce:132sms]=132
                [test_segment_softmax:132sms]=132 [test_rnn:skewed]=132)
declare -A test_scale=([test_segment_reduce:132sms]=0.25 [test_segment_softmax:132sms]=0.25
                        [test_large_tensors]=0.0009765625)
# A 99 KB device (sm_86, sm_89) holds 100 KB per SM: one such block.
declare -A smem_optin=([test_rnn:99kb]=101376 [test_rnn:99kb65]=101376 [test_segment_reduce:100kb]=101376)
declare -A smem_per_sm=([test_rnn:99kb]=102400 [test_rnn:99kb65]=102400 [test_segment_reduce:100kb]=102400)
# Resident blocks per SM the emulator allows (EMU_BLOCKS_PER_SM; it sees no registers), where not its default 2.
declare -A blocks_per_sm=([test_segment_reduce:100kb]=3)
declare -A block_order=([test_segment_reduce:waves]=waves [test_segment_softmax:waves]=waves)
declare -A thread_order=([test_convert:shuffled]=shuffle [test_offsets:shuffled]=shuffle [test_masks:shuffled]=shuffle
                         [test_packing:shuffled]=shuffle [test_attention:skewed]=warps [test_rnn:skewed]=warps)
# Catch2 test specs per run (also to exclude a known failure while it is being fixed: none now), as one
# argument with alternatives separated by commas (Catch2 v2 does not OR separate arguments: it ANDs them, as the
# softmax's :132sms run does to leave out two cases). A spec that matches no test case fails the run
# (--warn NoTests).
declare -A filters=([test_rnn]='~"rnn_forward with the batch-invariant projection*"'
                    [test_rnn:invariant]='"rnn_forward with the batch-invariant projection*"'
                    [test_rnn:20sms]='"rnn_forward with hidden sizes that need several blocks*","rnn_forward with streamed weights: the chunks*","rnn_forward with resident weights: the depth*"'
                    [test_rnn:19sms]='"rnn_forward with hidden sizes that need several blocks*","rnn_forward with resident weights: the depth*"'
                    [test_rnn:65sms]='"rnn_forward with resident weights: the depth*"'
                    [test_rnn:99kb]='"rnn_forward with streamed weights streams more k chunks than it has buffers"'
                    [test_rnn:99kb65]='"rnn_forward with streamed weights streams more k chunks than it has buffers"'
                    [test_segment_reduce:100kb]='"*stag*"'
                    [test_rnn:skewed]='"rnn_forward matches the reference across modes*","rnn_forward with streamed weights*","rnn_forward with resident weights: the depth*","rnn_forward with hidden sizes that need several blocks*","rnn_forward with every array off 16-byte alignment*"'
                    [test_segment_reduce:132sms]='~"segment_reduce on the device: NaN*"'
                    [test_segment_softmax:132sms]='~"segment_softmax: warp rows give*" ~"segment_softmax: short rows at D > 32*"'
                    [test_segment_softmax:waves]='"segment_softmax is deterministic and batch-invariant*","segment_softmax: merges staged*","segment_softmax rows on both sides*","segment_softmax block rows*","segment_softmax on the device: a plan too large*"')

# EMU_WITH_BENCH=1 (scripts/test.sh) also builds ragged_bench, with the same library objects, and runs
# tests/emu/run_bench.sh on it as one more job of the two-at-a-time queue: a build of its own took 4 minutes and
# its own queue left a core idle at the end.
with_bench="${EMU_WITH_BENCH:-0}"
built=("${programs[@]}")
if [[ "$with_bench" == 1 ]]; then
  built+=(ragged_bench)
  # The benchmarks (15 minutes) go third among the slow runs, after the two longest.
  queued=() slow_seen=0
  for r in "${runs[@]}"; do
    queued+=("$r")
    if [[ " ${quick[*]} " != *" $r "* ]] && (( ++slow_seen == 2 )); then queued+=(benchmarks); fi
  done
  (( slow_seen >= 2 )) || queued+=(benchmarks)
  runs=("${queued[@]}")
fi
deadline=""
if [[ -n "${EMU_DEADLINE:-}" ]]; then
  # No leading zero: bash would read 0560 as octal.
  [[ "$EMU_DEADLINE" =~ ^-?(0|[1-9][0-9]*)$ ]] ||
    { echo "emulated kernel tests: EMU_DEADLINE must be whole seconds, not '$EMU_DEADLINE'" >&2; exit 2; }
  deadline=$((SECONDS + EMU_DEADLINE))
fi
if [[ "${EMU_PREBUILT:-0}" == 1 ]]; then
  # EMU_PREBUILT=1 reruns the programs already in BUILD_DIR (the build takes 6 minutes here).
  for b in "${built[@]}"; do
    [[ -x "$build/emu_$b" ]] || { echo "emulated kernel tests: EMU_PREBUILT=1 but no $build/emu_$b" >&2; exit 2; }
  done
else
  echo "emulated kernel tests: building into $build"
  "$here/build.sh" "$build" "${built[@]}"
fi
mkdir -p "$build/logs"
rm -f "$build/logs/"*.cut
bench_sms="${EMU_SMS:-132}"  # the benchmarks run on an H100's count unless told otherwise, as run_bench.sh alone
export EMU_SMS="${EMU_SMS:-8}"

# budget_left: seconds until EMU_DEADLINE (a day when there is none).
budget_left() { if [[ -n "$deadline" ]]; then echo $((deadline - SECONDS)); else echo 86400; fi; }

# cut_by_budget RC: whether a run that exited with RC was stopped by timeout at EMU_DEADLINE.
cut_by_budget() { [[ -n "$deadline" ]] && (( $1 == 124 || $1 == 137 )) && (( $(budget_left) <= 0 )); }

# A run the budget stopped or never started leaves logs/<run>.cut, which the last line counts.
run_one() {
  local p="$1" start=$SECONDS rc=0 left
  left=$(budget_left)
  if (( left <= 0 )); then
    printf '%-22s not run: the time budget (EMU_DEADLINE) was spent\n' "$p"
    touch "$build/logs/$p.cut"
    return 0
  fi
  # timeout signals its own process group, which holds every process of the run (bench_verify.sh's own timeout
  # runs in the foreground for that reason).
  local limit="timeout --kill-after=30 $left"
  if [[ "$p" == benchmarks ]]; then
    EMU_SMS=$bench_sms EMU_PREBUILT=1 BENCH_VERIFY_JOBS=1 $limit "$here/run_bench.sh" "$build" \
      > "$build/logs/$p.txt" 2>&1 || rc=$?
    if cut_by_budget "$rc"; then
      printf '%-22s cut short by the time budget (EMU_DEADLINE) after %ds; the suites that finished:\n' "$p" \
        $((SECONDS - start))
      touch "$build/logs/$p.cut"
      rc=0
    else
      printf '%-22s %s (%ds): tests/emu/run_bench.sh, one line a suite:\n' "$p" \
        "$([[ $rc == 0 ]] && echo passed || echo "FAILED rc=$rc")" $((SECONDS - start))
    fi
    grep -E '^[a-z]+_gpu ' "$build/logs/$p.txt" | sed 's/^/  /' || true
    [[ $rc != 0 ]] && tail -40 "$build/logs/$p.txt"
    return $rc
  fi
  eval "EMU_SMS=${sms[$p]:-$EMU_SMS} ${smem_optin[$p]:+EMU_SMEM_OPTIN=${smem_optin[$p]}}" \
    "${smem_per_sm[$p]:+EMU_SMEM_PER_SM=${smem_per_sm[$p]}}" \
    "${blocks_per_sm[$p]:+EMU_BLOCKS_PER_SM=${blocks_per_sm[$p]}}" \
    "${test_scale[$p]:+RAGGED_TEST_SCALE=${test_scale[$p]}}" \
    "${thread_order[$p]:+EMU_ORDER=${thread_order[$p]} EMU_BLOCKS=reverse}" \
    "${block_order[$p]:+EMU_BLOCKS=${block_order[$p]}}" \
    "$([[ ${thread_order[$p]:-} == warps ]] && echo EMU_CP_ASYNC=early)" \
    "$limit \"$build/emu_${p%%:*}\" --rng-seed time --warn NoTests ${filters[$p]:-}" > "$build/logs/$p.txt" 2>&1 ||
    rc=$?
  local summary
  summary="$(grep -E '^(All tests passed|test cases:)' "$build/logs/$p.txt" | tail -1 || true)"
  if cut_by_budget "$rc"; then
    touch "$build/logs/$p.cut"
    # Catch2 reports the SIGTERM as one failed assertion; any other failure before the cut is still a failure.
    local failures terms
    failures=$(grep -c 'FAILED:' "$build/logs/$p.txt" || true)
    terms=$(grep -c 'SIGTERM - Termination request signal' "$build/logs/$p.txt" || true)
    if (( failures > terms )); then
      printf '%-22s FAILED before the time budget (EMU_DEADLINE) cut it short after %ds\n' "$p" $((SECONDS - start))
      tail -40 "$build/logs/$p.txt"
      return 1
    fi
    printf '%-22s cut short by the time budget (EMU_DEADLINE) after %ds, no failure before it\n' "$p" \
      $((SECONDS - start))
    return 0
  fi
  printf '%-22s %s (%ds)%s\n' "$p" "$([[ $rc == 0 ]] && echo passed || echo "FAILED rc=$rc")" $((SECONDS - start)) \
    "${summary:+: $summary}"
  if [[ $rc != 0 ]]; then
    grep -m1 "Randomness seeded to" "$build/logs/$p.txt" || true
    tail -40 "$build/logs/$p.txt"
  fi
  return $rc
}

failed=0
pids=()
names=()
for p in "${runs[@]}"; do
  while (( $(jobs -rp | wc -l) >= 2 )); do sleep 1; done
  run_one "$p" &
  pids+=($!)
  names+=("$p")
done
for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed=1; done
cut=()
for p in "${runs[@]}"; do [[ -e "$build/logs/$p.cut" ]] && cut+=("$p"); done
if [[ $failed != 0 ]]; then
  echo "emulated kernel tests: FAILED (logs in $build/logs)${cut[*]:+; cut short or not run by the time budget: ${cut[*]}}"
  exit 1
fi
if (( ${#cut[@]} > 0 )); then
  echo "emulated kernel tests: no failure; ${#cut[@]} of ${#runs[@]} runs cut short or not run by the" \
    "time budget (EMU_DEADLINE=$EMU_DEADLINE s): ${cut[*]}"
else
  echo "emulated kernel tests: all passed"
fi

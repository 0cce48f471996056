#!/usr/bin/env bash
# One device call holding what a 15-minute device session has room for: scripts/gpu-check.sh (build, tests,
# benchmarks, PyTorch comparisons, targets report; no sanitizers unless RAGGED_SKIP_SANITIZERS=0), then
# scripts/gpu-profile.sh in the seconds kept for it, with the logs folded so that no more than the device's 8 files
# come back. Run from the repository root:
#
#   scripts/gpu-session.sh OUTDIR
#
# Writes (7 files):
#   OUTDIR/summary.md, ctest.log, bench.json, bench.log, torch_rnn.json   gpu-check.sh's (torch_rnn.json where
#                                                                        the RNN comparison ran)
#   OUTDIR/profile.md                                                    gpu-profile.sh's table
#   OUTDIR/logs.tar.gz                                                   build.log, device.txt, sanitizers.log,
#                                                                        profile.log, profile.csv, detail/
#
# Environment (every other variable reaches both scripts as they document it):
#   RAGGED_DEADLINE          seconds the whole call may take (default: 560)
#   RAGGED_PROFILE_SECONDS   of those, the seconds kept for the profile (default: 120; 0: no profile). The check
#                            gets the rest, and the profile whatever the check leaves
#   RAGGED_CHECK_SCRIPT, RAGGED_PROFILE_SCRIPT  the two scripts (default: scripts/gpu-check.sh and
#                            scripts/gpu-profile.sh; ctest script_test_gpu_session runs this one with stand-ins)
# Exit code: non-zero if either script failed.
set -euo pipefail
source "$(dirname "$0")/gpu_common.sh"
gpu_script_start "$0" "$@"
deadline=${RAGGED_DEADLINE:-560}
profile_seconds=${RAGGED_PROFILE_SECONDS:-120}
check_script=${RAGGED_CHECK_SCRIPT:-scripts/gpu-check.sh}
profile_script=${RAGGED_PROFILE_SCRIPT:-scripts/gpu-profile.sh}
for value in "$deadline" "$profile_seconds"; do
  if ! [[ "$value" =~ ^(0|[1-9][0-9]*)$ ]]; then
    echo "gpu-session.sh: RAGGED_DEADLINE and RAGGED_PROFILE_SECONDS must be whole seconds" >&2
    exit 2
  fi
done
if [ "$profile_seconds" -ge "$deadline" ]; then
  echo "gpu-session.sh: RAGGED_PROFILE_SECONDS ($profile_seconds) leaves the check no time of RAGGED_DEADLINE ($deadline)" >&2
  exit 2
fi
start_time=$(date +%s)

check_rc=0
RAGGED_SKIP_SANITIZERS=${RAGGED_SKIP_SANITIZERS:-1} RAGGED_DEADLINE=$((deadline - profile_seconds)) \
  bash "$check_script" "$out" || check_rc=$?

# The profile's own folder, folded below; it reuses the check's build folder.
profile_dir="$out/profile-run"
profile_rc=0
left=$((deadline - ($(date +%s) - start_time) - 10))
if [ "$profile_seconds" -gt 0 ] && [ "$left" -ge 30 ]; then
  RAGGED_DEADLINE=$left bash "$profile_script" "$profile_dir" || profile_rc=$?
elif [ "$profile_seconds" -gt 0 ]; then
  mkdir -p "$profile_dir"
  printf '# ragged GPU profile (ncu)\n\nNot run: the check left %s s of the call.\n' "$left" >"$profile_dir/profile.md"
  profile_rc=1
fi

# Fold: the tables and the files read first stay apart, the rest goes into one archive.
if [ -f "$profile_dir/profile.md" ]; then mv "$profile_dir/profile.md" "$out/profile.md"; fi
folded=()
for name in build.log device.txt sanitizers.log; do
  if [ -e "$out/$name" ]; then folded+=("$name"); fi
done
if [ -d "$profile_dir" ] && [ -n "$(ls -A "$profile_dir")" ]; then folded+=("profile-run"); fi
fold_rc=0
if [ ${#folded[@]} -gt 0 ]; then
  # The files stay as they are if the archive fails (more than 8 of them then: the device keeps 8).
  if tar -czf "$out/logs.tar.gz" -C "$out" "${folded[@]}"; then
    (cd "$out" && rm -rf "${folded[@]}")
  else
    fold_rc=$?
    echo "gpu-session: tar failed (rc=$fold_rc): the logs are left unfolded" >&2
  fi
fi
echo "gpu-session: check rc=$check_rc, profile rc=$profile_rc, $(($(date +%s) - start_time))s; files in $out:"
ls "$out"
if [ "$check_rc" -ne 0 ]; then exit "$check_rc"; fi
if [ "$profile_rc" -ne 0 ]; then exit "$profile_rc"; fi
exit "$fold_rc"

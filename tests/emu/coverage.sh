#!/usr/bin/env bash
# Which lines of the library the emulated GPU tests run: builds the programs with gcov's counters
# (EMU_COVERAGE=1), runs them as run.sh does (all its runs, or the ones named), and writes the lines no run
# reached to BUILD_DIR/coverage.txt (tests/emu/coverage_report.py), printing its table. A check by hand, not CI's:
# the counters make the emulated kernels 5 to 13 times slower (docs/emulator.md). Exits non-zero if a run failed
# (the report is written all the same).
#   tests/emu/coverage.sh BUILD_DIR [RUN ...]        e.g. tests/emu/coverage.sh /tmp/emucov test_offsets test_masks
set -uo pipefail
if (( $# < 1 )); then
  echo "usage: tests/emu/coverage.sh BUILD_DIR [RUN ...]" >&2
  exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
build="$(mkdir -p "$1" && cd "$1" && pwd)"
shift
rm -f "$build"/obj/*.gcda
EMU_COVERAGE=1 EMU_RUNS="$*" "$here/run.sh" "$build"
rc=$?
python3 "$here/coverage_report.py" "$build" > "$build/coverage.txt" || exit 1
sed -n '/^$/q;p' "$build/coverage.txt"
echo "emulated coverage: the lines never run are listed in $build/coverage.txt"
exit $rc

#!/bin/sh
# Compiler launcher for the library's CUDA sources (RAGGED_KERNEL_RESOURCES): runs the compile command it is
# given, keeps ptxas's resource report (the "ptxas info" lines of --resource-usage: registers, stack, spills per
# function and architecture) in REPORT_DIR/<object name>.txt for scripts/check_kernel_resources.py, and passes
# every other line of the compiler's stderr through, so warnings still reach the build log.
# Usage: keep_ptxas_report.sh REPORT_DIR COMMAND...
report_dir=$1
shift
object=""
previous=""
for arg in "$@"; do
  [ "$previous" = "-o" ] && object=$arg
  previous=$arg
done
mkdir -p "$report_dir" || exit 1
stderr_file=$(mktemp) || exit 1
"$@" 2> "$stderr_file"
status=$?
# ptxas prints a function's properties as an "info" line followed by an indented line of byte counts.
grep -v -e '^ptxas info' -e '^    [0-9][0-9]* bytes stack frame' "$stderr_file" >&2
if [ "$status" -eq 0 ] && [ -n "$object" ]; then
  report="$report_dir/$(basename "$object").txt"
  # The first line names the object, so that the check can drop the report of a source that is gone.
  case $object in
    /*) echo "# object $object" ;;
    *) echo "# object $(pwd)/$object" ;;
  esac > "$report.tmp"
  grep -e '^ptxas info' -e '^    [0-9][0-9]* bytes stack frame' "$stderr_file" >> "$report.tmp"
  mv "$report.tmp" "$report"
fi
rm -f "$stderr_file"
exit "$status"

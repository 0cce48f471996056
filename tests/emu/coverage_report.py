#!/usr/bin/env python3
"""Lists the library's source lines that no emulated test ran, from an EMU_COVERAGE=1 build's gcov counters.

  tests/emu/coverage_report.py BUILD_DIR [BUILD_DIR ...] [--context N]

Reads every kernels_*.gcno and src_*.gcno in BUILD_DIR/obj with gcov (an object no program ran counts as run
zero times), sums each line's count over the objects and template instances that hold it, and over the build
folders given (readings taken apart, e.g. a long program on its own, of the same sources), and prints, for the
files of include/, kernels/ and src/ (not the headers the emulator replaces): a table of lines with code and
lines run, then each run of lines never run, with the source text of its first line. A line gcc compiled away (inlined into nothing, a constant branch)
has no counter and is not listed: coverage at -O2 says which code ran, not that every source line is code.
"""
import argparse
import collections
import json
import os
import subprocess
import sys


def gcov_records(obj_dir, gcno):
    out = subprocess.run(["gcov", "--json-format", "--stdout", gcno], cwd=obj_dir, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"coverage_report: gcov failed on {gcno}:\n{out.stderr}")
    for line in out.stdout.splitlines():
        if line.strip():
            yield json.loads(line)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build_dirs", nargs="+", metavar="BUILD_DIR")
    parser.add_argument("--context", type=int, default=100, help="characters of a range's first line to print")
    args = parser.parse_args()

    # The headers build.sh replaces by the emulator's own (tests/emu/device/) are the emulator's code, not the library's.
    replaced = {"kernels/" + name for name in os.listdir(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                       "device"))}
    counts = collections.defaultdict(lambda: collections.defaultdict(int))  # file -> line -> times run
    source_of = {}  # file -> its path in the first build folder that holds it, for the text of unrun lines
    for build_dir in args.build_dirs:
        obj_dir = os.path.join(os.path.abspath(build_dir), "obj")
        tree = os.path.join(os.path.abspath(build_dir), "tree") + os.sep
        if not os.path.isdir(obj_dir):
            sys.exit(f"coverage_report: no folder {obj_dir} (an emulator build: tests/emu/build.sh)")
        gcnos = sorted(f for f in os.listdir(obj_dir) if f.endswith(".gcno") and f.startswith(("kernels_", "src_")))
        if not gcnos:
            sys.exit(f"coverage_report: no kernels_*.gcno in {obj_dir} (build with EMU_COVERAGE=1)")
        if not any(f.endswith(".gcda") for f in os.listdir(obj_dir)):
            sys.exit(f"coverage_report: no .gcda in {obj_dir}: no program ran since the build")
        for gcno in gcnos:
            for record in gcov_records(obj_dir, gcno):
                for f in record["files"]:
                    path = f["file"]
                    if not path.startswith(tree):
                        continue
                    rel = path[len(tree):]
                    if not rel.startswith(("include/", "kernels/", "src/")) or rel in replaced:
                        continue
                    source_of.setdefault(rel, path)
                    for line in f["lines"]:
                        counts[rel][line["line_number"]] += line["count"]

    total_code = total_run = 0
    print(f"{'file':48} {'lines':>6} {'run':>6} {'%':>6}")
    for rel in sorted(counts):
        lines = counts[rel]
        run = sum(1 for c in lines.values() if c > 0)
        total_code += len(lines)
        total_run += run
        print(f"{rel:48} {len(lines):6} {run:6} {100.0 * run / len(lines):6.1f}")
    print(f"{'all':48} {total_code:6} {total_run:6} {100.0 * total_run / max(total_code, 1):6.1f}")

    print("\nLines never run (first line .. last line: the first line's text):")
    for rel in sorted(counts):
        with open(source_of[rel], encoding="utf-8") as source:
            text = source.read().splitlines()
        never = sorted(n for n, c in counts[rel].items() if c == 0)
        ranges = []
        for n in never:
            # Lines with no counter between two unrun lines (comments, braces) do not break a range.
            if ranges and all(m not in counts[rel] for m in range(ranges[-1][1] + 1, n)):
                ranges[-1][1] = n
            else:
                ranges.append([n, n])
        if ranges:
            print(f"\n{rel}:")
        for first, last in ranges:
            span = f"{first}" if first == last else f"{first}..{last}"
            print(f"  {span:>11}: {text[first - 1].strip()[:args.context]}")


if __name__ == "__main__":
    main()

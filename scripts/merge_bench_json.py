#!/usr/bin/env python3
"""Merges the Google Benchmark JSON files of several ragged_bench runs (one per suite) into one file.

    merge_bench_json.py OUT FOLDER SUITE [SUITE ...]

Reads FOLDER/SUITE.json for each suite and writes OUT: the first readable suite's context, every suite's
benchmarks. A suite stopped by a time limit leaves a file without its closing brackets (ragged_bench flushes it
after every benchmark): it is closed after its last complete benchmark, and the suite is listed in the context's
"truncated_suites". A suite with no readable file is left out and said so on stdout. Exit status 0 when OUT was
written, 1 when no suite could be read.
"""
import json
import os
import sys

# JSONReporter writes each run as an object indented by four spaces: "    {" ... "    }".
RUN_END = "\n    }"
BENCHMARKS_OPEN = '"benchmarks": ['


def close_truncated(text):
    """The JSON text of a file cut after its last complete benchmark, closed; None if nothing is usable."""
    start = text.find(BENCHMARKS_OPEN)
    if start < 0:
        return None
    end = text.rfind(RUN_END)
    if end < start:
        return text[: start + len(BENCHMARKS_OPEN)] + "\n  ]\n}\n"
    return text[: end + len(RUN_END)] + "\n  ]\n}\n"


def read_suite(path):
    """(data, truncated) for one suite's file; raises OSError or ValueError when it cannot be used."""
    with open(path) as f:
        text = f.read()
    try:
        return json.loads(text), False
    except ValueError:
        closed = close_truncated(text)
        if closed is None:
            raise
        return json.loads(closed), True


def merge(out, folder, suites):
    merged, truncated = None, []
    for suite in suites:
        path = os.path.join(folder, suite + ".json")
        try:
            data, cut = read_suite(path)
        except (OSError, ValueError) as error:
            print(f"bench.json: suite {suite} left out ({error.__class__.__name__})")
            continue
        if cut:
            truncated.append(suite)
            print(f"bench.json: suite {suite} was cut short; kept its {len(data.get('benchmarks', []))} "
                  "complete benchmark(s)")
        if merged is None:
            merged = data
        else:
            merged.setdefault("benchmarks", []).extend(data.get("benchmarks", []))
    if merged is None:
        return False
    if truncated:
        merged.setdefault("context", {})["truncated_suites"] = ",".join(truncated)
    with open(out, "w") as f:
        json.dump(merged, f, indent=1)
    return True


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    return 0 if merge(argv[1], argv[2], argv[3:]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Merges the Google Benchmark JSON files of several ragged_bench runs (one per suite) into one file.

    merge_bench_json.py [--append] OUT FOLDER SUITE [SUITE ...]

Reads FOLDER/SUITE.json for each suite and writes OUT: the first readable suite's context, every suite's
benchmarks, and each suite's own denominators (copy bandwidth, bf16 GEMM rate: every suite measures its own) in
the context's "suite_denominators". With --append, OUT's own content (when it can be read) comes first and keeps its context. A suite
named SUITE@NAME=VALUE is a run of SUITE with the environment variable NAME set to VALUE (an A/B run of a library
switch, scripts/gpu-check.sh's RAGGED_BENCH_AB): each of its benchmarks is renamed with "/with:NAME=VALUE" before
its "/manual_time", so that it pairs with the default run's benchmark of the same name, and NAME=VALUE is listed in
the context's "ab_settings". A suite stopped by a time limit leaves a file without its closing brackets (ragged_bench flushes it
after every benchmark): it is closed after its last complete benchmark, and the suite is listed in the context's
"truncated_suites". A suite with no readable file is left out and said so on stdout. FOLDER/SUITE.list, where
present, holds what `ragged_bench --benchmark_list_tests` lists for SUITE (scripts/gpu-check.sh writes it before the
run): its names go to the context's "expected_benchmarks", read or not, so that scripts/summarize_targets.py counts
a case the run never finished (a crash, a deadline) as "no data". Exit status 0 when OUT was written, 1 when no
suite could be read.
"""
import json
import os
import re
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


def tag_runs(data, setting):
    """Renames every benchmark of an A/B run: <name>/with:<setting>[/manual_time]."""
    for run in data.get("benchmarks", []):
        for key in ("name", "run_name"):
            if key in run:
                run[key] = re.sub(r"(/manual_time|/real_time)?$", lambda m: "/with:" + setting + (m.group(1) or ""),
                                  run[key], count=1)


def merge(out, folder, suites, append=False):
    merged, truncated, settings, denominators, expected = None, [], [], {}, []
    if append and os.path.exists(out):
        try:
            merged, _ = read_suite(out)
        except (OSError, ValueError) as error:
            print(f"{out}: not appended to ({error.__class__.__name__}); written anew")
    for suite in suites:
        listed = os.path.join(folder, suite + ".list")
        if "@" not in suite and os.path.exists(listed):
            with open(listed) as f:
                expected += [line.strip() for line in f if line.strip()]
        path = os.path.join(folder, suite + ".json")
        try:
            data, cut = read_suite(path)
        except (OSError, ValueError) as error:
            print(f"bench.json: suite {suite} left out ({error.__class__.__name__})")
            continue
        if "@" in suite:
            setting = suite.split("@", 1)[1]
            tag_runs(data, setting)
            settings.append(setting)
        if cut:
            truncated.append(suite)
            print(f"bench.json: suite {suite} was cut short; kept its {len(data.get('benchmarks', []))} "
                  "complete benchmark(s)")
        # Each suite measures its own denominators (copy bandwidth, bf16 GEMM rate) and divides its rows by them:
        # keep every suite's, as the merged context holds only the first one's.
        own = {key: data.get("context", {}).get(key)
               for key in ("copy_bytes_per_second", "bf16_gemm_flops_per_second")
               if data.get("context", {}).get(key) is not None}
        if own and "@" not in suite:
            denominators[suite] = own
        if merged is None:
            merged = data
        else:
            merged.setdefault("benchmarks", []).extend(data.get("benchmarks", []))
    if merged is None:
        return False
    context = merged.setdefault("context", {})
    if truncated:
        context["truncated_suites"] = ",".join(filter(None, [context.get("truncated_suites")] + truncated))
    if denominators:
        context["suite_denominators"] = dict(context.get("suite_denominators", {}), **denominators)
    if expected:
        context["expected_benchmarks"] = list(dict.fromkeys(context.get("expected_benchmarks", []) + expected))
    if settings:
        context["ab_settings"] = ",".join(filter(None, [context.get("ab_settings")] + settings))
    with open(out, "w") as f:
        json.dump(merged, f, indent=1)
    return True


def main(argv):
    append = len(argv) > 1 and argv[1] == "--append"
    args = argv[2:] if append else argv[1:]
    if len(args) < 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    return 0 if merge(args[0], args[1], args[2:], append) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Checks one GPU run's benchmark results against the targets of issues 3, 4 and 5 and writes a Markdown report.

    summarize_targets.py --bench OUTDIR/bench.json [--torch-rnn OUTDIR/torch_rnn.json] [--profile-dir DIR]
                         [--expected NAMES.txt] --out OUTDIR/targets.md

--profile-dir: a folder of scripts/gpu-profile.sh's output (profile.csv, profile_cases.tsv; in a gpu-session.sh run,
logs.tar.gz's profile-run/): the launches it profiled of each missed case's benchmark are listed beside the misses.

--expected: the benchmarks the run meant to time, one name a line as `ragged_bench --benchmark_list_tests` lists
them; by default the bench file's context "expected_benchmarks" (scripts/gpu-check.sh lists each suite before
running it, and scripts/merge_bench_json.py keeps the lists). A ragged case listed and missing from the JSON (a
suite cut short by a deadline or a crash) is "no data" for each target it feeds, as is a PyTorch RNN timing that
torch_rnn.json planned ("planned_timings") and does not hold. Without such a list, a case missing from the JSON
drops out of the counts, and the report says so.

Every figure is computed from the JSON files given (one run: ratios are taken between cases measured in that
run); nothing is assumed. A target whose cases are all missing from the run is reported as "no data", never as
met, and so is a case whose ragged row or baseline reported an error (or, for issue 4, lacks its padded twin or
PyTorch timing).
Benchmark names pair up as <op>/<impl>/<case...>: the same case under different implementations.

Targets (from the issues):
  issue 3  sum and max (every dtype and regime, D = 1 and D >= 64 as the issue states it; all cases hold about
           64 MB of values): copy_frac >= 0.85, judged on the drained time (below) where the run has it;
           ragged >= 2x faster than CUB for rows of length <= 16 and for one huge row, and never slower than CUB;
           softmax forward: copy_frac >= 0.75 where a row fits on chip, judged on the drained time (drained_us:
           the write-back of what the op left dirty in L2 included, bench/common/gpu_timer.h) where the run has
           it; the one-huge-row regime, whose row exceeds L2 and shared memory, is judged apart against the floor
           of a row that does not fit: two reads and one write of the values (this report's reading: the issue
           gives the floor of a row that fits only)
  issue 4  ragged time <= 1.15 x real_frac x padded time; ragged peak_bytes <= 1.1 x real_frac x padded
           peak_bytes, judged twice: with the layer's weights, the same on both sides, in both peaks (the issue's
           words, "peak memory", leave nothing out) and without them (what packing can change); with
           torch_rnn.json: ragged >= 2x faster than PyTorch packed (cuDNN) for batch <= 64 and
           hidden 256..1024, never slower elsewhere
  issue 5  long sequences (len >= 1024), bf16, head_dim 128: ragged TFLOP/s >= 0.9 x PyTorch's flash backend
           (the fastest of torch_jagged, torch_varlen and, at 0% padding, torch_dense); at 50% padding ragged >= 1.8x
           faster than SDPA on the padded batch with a mask (torch_padded_mask); at 0% padding ragged time
           <= 1.05 x the padded fused kernel. Short sequences (len <= 512) are reported separately. Against
           PyTorch, whose timings are medians, ragged's time is its median (median_us) where the run has it
A/B runs of library switches (benchmarks named <name>/with:NAME=VALUE, scripts/gpu-check.sh's RAGGED_BENCH_AB)
are kept out of the targets and reported last: per switch and op, the time with it set against the default run's.
Exit status: 0 when the report was written (whatever the verdicts), 2 when the bench file cannot be read.
"""
import argparse
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import profile_table  # noqa: E402  (scripts/profile_table.py, beside this one)

# Every target judged below, so that one without a case in the run still shows.
ALL_TARGETS = [
    "issue 3: sum/max copy_frac >= 0.85",
    "issue 3: softmax copy_frac >= 0.75",
    "issue 3: softmax, one huge row: >= 0.75 of 3V floor",
    "issue 3: >= 2x CUB (tiny rows, one huge row)",
    "issue 3: never slower than CUB",
    "issue 4: ragged time <= 1.15 x real_frac x padded",
    "issue 4: ragged peak <= 1.1 x real_frac x padded (weights included)",
    "issue 4: ragged peak <= 1.1 x real_frac x padded (weights excluded)",
    "issue 4: >= 2x faster than PyTorch packed",
    "issue 4: never slower than PyTorch packed",
    "issue 5: >= 0.9 x PyTorch flash (long, bf16, d128)",
    "issue 5: >= 1.8x padded SDPA with mask at 50%",
    "issue 5: within 5% of padded fused kernel at 0%",
]
TIME_SCALE = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
# Benchmarks that ran and reported an error: {name without /manual_time: message}. A case whose ragged row or
# baseline errored is judged "no data" for the targets it feeds, never left out.
ERRORED = {}
# Benchmarks --expected lists that the JSON holds no run of: {name: why}. Judged as ERRORED's are.
MISSING = {}


def unrun():
    """The ragged cases and baselines with no result: errored or missing, {name: why}."""
    return {**MISSING, **ERRORED}


def load_expected(names, runs):
    """Fills MISSING with the expected benchmarks (names as --benchmark_list_tests prints them) that have no run in
    `runs` and no error."""
    for name in (re.sub(r"/(manual_time|real_time)$", "", n.strip()) for n in names if n.strip()):
        if name not in runs and name not in ERRORED and not AB_TAG.search(name):
            MISSING[name] = "did not run: listed by --benchmark_list_tests, missing from the results"


def load_runs(path):
    """{name without /manual_time: run} for the successful iteration runs of a Google Benchmark JSON file (A/B
    runs, named .../with:NAME=VALUE, included: split_ab separates them)."""
    with open(path) as f:
        data = json.load(f)
    runs = {}
    for run in data.get("benchmarks", []):
        if run.get("error_occurred") and "name" in run:
            ERRORED[re.sub(r"/(manual_time|real_time)$", "", run["name"])] = run.get("error_message", "?")
            continue
        if run.get("run_type", "iteration") != "iteration" or "real_time" not in run:
            continue
        name = re.sub(r"/(manual_time|real_time)$", "", run["name"])
        run = dict(run)
        run["seconds"] = run["real_time"] * TIME_SCALE.get(run.get("time_unit", "ns"), 1e-9)
        runs[name] = run
    return data.get("context", {}), runs, data.get("torch_attention")


AB_TAG = re.compile(r"/with:([^/]+)$")


def split_ab(runs):
    """(default runs, {setting: {default name: run}}) of load_runs' runs."""
    plain, ab = {}, {}
    for name, run in runs.items():
        m = AB_TAG.search(name)
        if m:
            ab.setdefault(m.group(1), {})[name[: m.start()]] = run
        else:
            plain[name] = run
    return plain, ab


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def ab_section(report, runs, ab):
    """Per library switch and op: how the ragged rows' time with the switch set compares with the default run's
    (both in this run), as the geometric mean, the least and the greatest ratio with their cases."""
    if not ab:
        return
    report.add("### Library switches, A/B in this run")
    report.add()
    report.add("Time with the switch set / time of the default run, ragged rows only (> 1: the default is faster); "
               "the segment softmax rows use the drained time where they have it. Each case is in bench.json under "
               "its default name + `/with:NAME=VALUE`.")
    report.add()
    rows = []
    for setting in sorted(ab):
        by_op = {}
        for name, run in ab[setting].items():
            base = runs.get(name)
            op, impl, case = split(name)
            if base is None or impl != "ragged" or base["seconds"] <= 0 or run["seconds"] <= 0:
                continue
            with_us = run.get("drained_us") or run["seconds"] * 1e6
            base_us = base.get("drained_us") or base["seconds"] * 1e6
            by_op.setdefault(op, []).append((with_us / base_us, case))
        for op in sorted(by_op):
            ratios = sorted(by_op[op])
            rows.append([setting, op, len(ratios), fmt(geomean([r for r, _ in ratios])),
                         f"{fmt(ratios[0][0])} ({ratios[0][1]})", f"{fmt(ratios[-1][0])} ({ratios[-1][1]})"])
    report.table(["switch", "op", "cases", "geomean with / default", "least", "greatest"], rows)


def split(name):
    """(op, impl, case) of <op>/<impl>/<case...>."""
    parts = name.split("/")
    return parts[0], parts[1] if len(parts) > 1 else "", "/".join(parts[2:])


def field(case, key):
    """The value of key:value in a case name, or None."""
    m = re.search(r"(?:^|/)" + re.escape(key) + r":([^/]+)", case)
    return m.group(1) if m else None


class Report:
    def __init__(self):
        self.lines = []
        self.verdicts = []  # (target, met: True / False / None, case)
        self.worst = {}  # target -> (margin, value, limit, case) of the worst case (furthest below its limit)

    def add(self, text=""):
        self.lines.append(text)

    def table(self, header, rows):
        self.add("| " + " | ".join(header) + " |")
        self.add("|" + "|".join(" --- " for _ in header) + "|")
        for row in rows:
            self.add("| " + " | ".join(str(c) for c in row) + " |")
        self.add()

    def judge(self, target, value, limit, case, at_least=True):
        """Records whether value >= limit (at_least) or value <= limit for one case; None: no data."""
        assert target in ALL_TARGETS, target
        met = None if value is None else (value >= limit if at_least else value <= limit)
        self.verdicts.append((target, met, case))
        if met is not None:
            margin = value / limit if at_least else limit / value  # < 1: missed by that factor
            worst = self.worst.get(target)
            if worst is None or margin < worst[0]:
                self.worst[target] = (margin, value, limit, case)
        return "no data" if met is None else ("met" if met else "MISSED")


def natural_key(text):
    """Sort key that orders the numbers inside names by value ("hidden:256" before "hidden:1024")."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def fmt(x, digits=3):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def reduce_ceiling(report, runs):
    """The device_reduce rows (bench_segment.cu): one 64 MiB row summed by ragged and by CUB's device-wide
    reduction, after a clean and after a dirty L2 flush, and a row of 4096 floats (each pipeline's fixed cost);
    both sizes also with the kernels' code put back in L2 after a clean flush (`/code:warm`); the 4096-float
    row's floors, one launch and a chain of two (`floor/.../kernels:N`)."""
    rows = []
    for name, run in sorted(runs.items()):
        op, impl, case = split(name)
        if op != "device_reduce":
            continue
        flush = field(case, "flush")
        code = field(case, "code") or "cold"
        # The row it differs from by one setting: the plain clean row of the same impl and size.
        plain = f"{op}/{impl}/floats:{field(case, 'floats')}/flush:clean"
        base = runs.get(plain) if name != plain else None
        kernels = field(case, "kernels")
        label = f"{impl} ({kernels} kernel{'s' if kernels != '1' else ''})" if kernels else impl
        rows.append([label, field(case, "floats") or "-", flush, code, fmt(run["seconds"] * 1e6),
                     fmt(run.get("bytes_per_second", 0) * 1e-9), fmt(run.get("copy_frac")),
                     fmt(run["seconds"] / base["seconds"]) if base else "-"])
    if not rows:
        return
    report.add("One row of 64 MiB of floats summed (`device_reduce`): cub's clean copy_frac is what a plain read of "
               "those bytes reaches in this run's timing; the dirty rows time the same op after a memset flush, the "
               "first H100 run's (1c910f2), which left L2 dirty for the op to write back (bench/common/l2_flush.h). "
               "The row of 4096 floats times each pipeline's fixed cost (launches and steps, next to nothing read). "
               "Code warm: after the flush the same op ran untimed on other buffers of the same size, so the timed "
               "one found its kernels' code in L2 and its data cold. Floor (4096 floats): one block sums the row "
               "in one launch, or in ragged's chain of two (a first kernel hands on the row's length, the sum "
               "follows it as a programmatic dependent; bench/reduce_chain_floor.h): ragged's row less the "
               "two-kernel floor is what its kernels add to the launches.")
    report.add()
    report.table(["impl", "floats", "L2 flush", "code", "us", "GB/s", "copy_frac", "time / clean cold row"], rows)
    # Issue 3's ">= 2x CUB" is against DeviceSegmentedReduce (a block per row: one block for the one-huge-row
    # regime); the device-wide reduction is the stronger CUB baseline for one row, so say where ragged stands.
    for floats in sorted({field(split(n)[2], "floats") for n in runs if split(n)[0] == "device_reduce"} - {None}):
        ragged = runs.get(f"device_reduce/ragged/floats:{floats}/flush:clean")
        cub = runs.get(f"device_reduce/cub/floats:{floats}/flush:clean")
        if ragged and cub:
            report.add(f"One row of {floats} floats, clean L2: ragged takes {fmt(ragged['seconds'] / cub['seconds'])}x "
                       "the time of CUB's device-wide reduction (DeviceReduce::Sum); the issue's CUB baseline, "
                       "DeviceSegmentedReduce, gives that row one block.")
            report.add()


def drained_copy_frac(run):
    """copy_frac over the drained time (drained_us, ops that write their input's size), or None."""
    us, frac = run.get("drained_us"), run.get("copy_frac")
    if us is None or frac is None or us <= 0:
        return None
    return frac * run["seconds"] / (us * 1e-6)


def softmax_offsets_ceiling(run, case):
    """The most copy_frac a softmax row can reach against issue 3's floor (one read and one write of the values)
    when the kernel must also read the int32 offsets: 2V / (2V + 4 (batch + 1)). At D = 1 and a mean length of 2
    that is 0.667 in bfloat16 (4 bytes a token against 6) and 0.8 in float. None without the counters."""
    tokens, batch, inner = run.get("tokens"), run.get("batch"), field(case, "inner")
    if tokens is None or batch is None or inner is None:
        return None
    values = 2.0 * tokens * int(inner) * (2 if field(case, "dtype") == "bf16" else 4)
    return values / (values + 4.0 * (batch + 1)) if values > 0 else None


def expects_cub(op, case):
    """Whether bench_segment.cu times a cub row for this ragged case (its has_cub: float sum, max and argmax at
    D = 1), so that a missing one is "no data" (a suite cut short between the two rows), not a target left out."""
    return (op in ("segment_sum", "segment_max", "segment_argmax") and field(case, "inner") == "1"
            and field(case, "dtype") != "bf16")


def sum_max_judged(op, case):
    """Whether issue 3's sum / max copy_frac target covers the case: the issue states it for D = 1 and D >= 64
    (RAGGED_BENCH_FULL=1 adds D = 3 and 256)."""
    inner = int(field(case, "inner") or 0)
    return op in ("segment_sum", "segment_max") and (inner == 1 or inner >= 64)


def cub_targets(case):
    """The CUB targets of a case that has a CUB row: ">= 2x" on tiny rows and one huge row, "never slower"."""
    regime, mean = case.split("/")[0], int(field(case, "mean") or 0)
    tiny = regime == "uniform" and mean <= 16
    return ((["issue 3: >= 2x CUB (tiny rows, one huge row)"] if tiny or regime == "one_huge" else [])
            + ["issue 3: never slower than CUB"])


SOFTMAX_FITS = "issue 3: softmax copy_frac >= 0.75"
SOFTMAX_HUGE = "issue 3: softmax, one huge row: >= 0.75 of 3V floor"


def segment_section(report, runs):
    report.add("## Issue 3: segment reductions and softmax")
    report.add()
    reduce_ceiling(report, runs)
    rows = []
    for name, run in sorted(runs.items()):
        op, impl, case = split(name)
        if not op.startswith("segment_") or impl != "ragged":
            continue
        cub = runs.get(f"{op}/cub/{case}")
        padded = runs.get(f"{op}/padded/{case}")
        frac = run.get("copy_frac")
        drained = drained_copy_frac(run)
        mean = int(field(case, "mean") or 0)
        regime = case.split("/")[0]
        tiny = regime == "uniform" and mean <= 16
        one_huge = regime == "one_huge"
        over_cub = cub["seconds"] / run["seconds"] if cub else None
        over_padded = padded["seconds"] / run["seconds"] if padded else None
        peak_ratio = (padded["peak_bytes"] / run["peak_bytes"]
                      if padded and run.get("peak_bytes") and padded.get("peak_bytes") else None)
        checks = []
        if over_cub is None and (f"{op}/cub/{case}" in unrun() or expects_cub(op, case)):
            for target in cub_targets(case):
                verdict = report.judge(target, None, 2.0 if "2x" in target else 1.0, name)
            checks.append(">=cub " + verdict)
        # Both copy_frac targets on the drained time where the run has it (bench_segment.cu drains every op since
        # 2026-12-05; earlier runs drained the softmax family only): the output's write-back is part of the bytes.
        judged = drained if drained is not None else frac
        drained_label = "drained " if drained is not None else ""
        if sum_max_judged(op, case) and frac is not None:
            checks.append(drained_label + "copy_frac>=0.85 " +
                          report.judge("issue 3: sum/max copy_frac >= 0.85", judged, 0.85, name))
        if op == "segment_softmax" and frac is not None and not one_huge:
            checks.append(drained_label + "copy_frac>=0.75 " + report.judge(SOFTMAX_FITS, judged, 0.75, name))
            ceiling = softmax_offsets_ceiling(run, case)
            if ceiling is not None and ceiling < 0.75:
                checks.append(f"(unattainable: reading the offsets caps it at {ceiling:.3f})")
        if op == "segment_softmax" and frac is not None and one_huge:
            # copy_frac counts 2V; a row that does not fit on chip is read twice (its statistic, then the
            # normalisation), so its floor moves 3V: 1.5 x copy_frac of it.
            checks.append(drained_label + "of 3V floor>=0.75 " + report.judge(SOFTMAX_HUGE, 1.5 * judged, 0.75, name))
        if over_cub is not None:
            if tiny or one_huge:
                checks.append(">=2x cub " + report.judge("issue 3: >= 2x CUB (tiny rows, one huge row)", over_cub, 2.0,
                                                         name))
            checks.append(">=cub " + report.judge("issue 3: never slower than CUB", over_cub, 1.0, name))
        # tiny: rows of 0..4 tokens; short: 0..16 (issue 3's "rows of length <= 16", its upper end).
        label = ("tiny" if mean <= 4 else "short") if tiny else regime
        rows.append([op, label, field(case, "inner"), field(case, "dtype") or "f32", fmt(run["seconds"] * 1e6),
                     fmt(run.get("bytes_per_second", 0) * 1e-9), fmt(frac), fmt(drained), fmt(over_cub),
                     fmt(over_padded), fmt(peak_ratio), "; ".join(checks)])
    for name in sorted(unrun()):  # errored or missing: each target the case feeds has no data
        op, impl, case = split(name)
        if not op.startswith("segment_") or impl != "ragged" or AB_TAG.search(name):
            continue
        if sum_max_judged(op, case):
            report.judge("issue 3: sum/max copy_frac >= 0.85", None, 0.85, name)
        if op == "segment_softmax":
            report.judge(SOFTMAX_HUGE if case.startswith("one_huge/") else SOFTMAX_FITS, None, 0.75, name)
        if f"{op}/cub/{case}" in runs or f"{op}/cub/{case}" in unrun() or expects_cub(op, case):
            for target in cub_targets(case):
                report.judge(target, None, 2.0 if "2x" in target else 1.0, name)
    # The order of regimes, then D as a number (the names sort "1024" before "64").
    regime_order = {"tiny": 0, "short": 1, "power_law": 2, "one_huge": 3, "uniform": 4}
    rows.sort(key=lambda r: (r[0], regime_order.get(r[1], len(regime_order)), r[1], int(r[2] or 0), r[3] != "f32"))
    report.add("copy_frac drained: over the time with the write-back of what the op left dirty in L2 "
               "(drained_us). The copy_frac targets are judged on it where the run has it (every op since "
               "2026-12-05; the softmax family and backward passes before).")
    report.add()
    report.table(["op", "regime", "D", "dtype", "ragged us", "GB/s", "copy_frac", "copy_frac drained",
                  "cub/ragged time", "padded/ragged time", "padded/ragged peak", "targets"], rows)
    subwarp_floors(report, runs)


def floor_rows(runs, kind):
    """The `<op>/floor/<case>/kind:<kind>` runs next to ragged's time on the same case; the softmax rows by their
    drained time, as the softmax target is judged."""
    rows = []
    for name, run in sorted(runs.items(), key=lambda item: natural_key(item[0])):
        op, impl, case = split(name)
        if not op.startswith("segment_") or impl != "floor" or field(case, "kind") != kind:
            continue
        ragged = runs.get(f"{op}/ragged/{case.replace('/kind:' + kind, '')}")
        floor_us = run.get("drained_us") or run["seconds"] * 1e6
        ragged_us = (ragged.get("drained_us") or ragged["seconds"] * 1e6) if ragged else None
        frac = drained_copy_frac(run) or run.get("copy_frac")
        rows.append([op, case.split("/")[0], field(case, "inner"), field(case, "dtype") or "f32", fmt(ragged_us),
                     fmt(floor_us), fmt(frac), fmt(ragged_us / floor_us) if ragged_us and floor_us > 0 else "-"])
    return rows


FLOOR_COLUMNS = ["op", "regime", "D", "dtype", "ragged us", "floor us", "floor copy_frac", "ragged / floor time"]


def subwarp_floors(report, runs):
    """The sub-warp row floors (bench/subwarp_row_floor.h) and the warp row floors (bench/warp_row_floor.h)."""
    rows = floor_rows(runs, "subwarp")
    if rows:
        report.add("Sub-warp row floor (tiny rows, 0 to 4 tokens): one kernel that gives each row D / V lanes, one "
                   "vector column each, and does nothing else (bench/subwarp_row_floor.h): the floor of ragged's "
                   "sub-warp row pass on these rows, without its plan and first-pass launch. Softmax by drained time "
                   "and copy_frac.")
        report.add()
        report.table(FLOOR_COLUMNS, rows)
    rows = floor_rows(runs, "warp")
    if rows:
        report.add("Warp row floor (D = 1, rows of a few hundred tokens): one kernel that gives each row a warp and "
                   "does nothing else, no load balancing (bench/warp_row_floor.h): the plain CSR design ragged's row "
                   "streams are meant to beat. Above 1 in the last column, the plain design is faster. A power-law "
                   "row of tens of thousands of tokens is one warp's serial walk there. Softmax by drained time and "
                   "copy_frac.")
        report.add()
        report.table(FLOOR_COLUMNS, rows)


def cut_short(torch_report):
    """The PyTorch scripts mark their JSON "complete": false until they end (a timeout keeps what finished)."""
    return " The run was cut short: these are the entries it finished." if torch_report.get("complete") is False else ""


def rnn_weights_bytes(op, case, run):
    """The layer's weights and biases in bytes: bench_rnn.cu's weights_bytes counter, or for runs without it one
    unidirectional layer of input size H, as bench_rnn.cu builds it, from the case name."""
    if run.get("weights_bytes"):
        return run["weights_bytes"]
    gates = {"rnn_lstm": 4, "rnn_gru": 3}.get(op)
    hidden = field(case, "hidden")
    if gates is None or hidden is None:
        return None
    element = 2 if field(case, "dtype") in ("bf16", "f16") else 4
    h = int(hidden)
    return float(element * (2 * gates * h * h + 2 * gates * h))


RNN_TIME = "issue 4: ragged time <= 1.15 x real_frac x padded"
RNN_PEAK_WITH = "issue 4: ragged peak <= 1.1 x real_frac x padded (weights included)"
RNN_PEAK_WITHOUT = "issue 4: ragged peak <= 1.1 x real_frac x padded (weights excluded)"
TORCH_2X = "issue 4: >= 2x faster than PyTorch packed"
TORCH_1X = "issue 4: never slower than PyTorch packed"


def rnn_variant(case):
    """Whether an RNN case is a variant of a plain one (another path forced, a setting changed), reported beside
    it and judged nowhere."""
    return any(field(case, key) for key in ("algo", "cublas_ws", "proj", "launch", "kept", "stages"))


def torch_target(case):
    """(target, limit) of a PyTorch timing: 2x in the issue's region (batch <= 64, hidden 256..1024), else 1x."""
    batch, hidden = int(field(case, "batch") or 0), int(field(case, "hidden") or 0)
    return (TORCH_2X, 2.0) if batch <= 64 and 256 <= hidden <= 1024 else (TORCH_1X, 1.0)


def rnn_section(report, runs, torch_rnn):
    report.add("## Issue 4: packed LSTM / GRU")
    report.add()
    rows, with_weights = [], []
    for name, run in sorted(runs.items(), key=lambda item: natural_key(item[0])):
        op, impl, case = split(name)
        if not op.startswith("rnn_") or impl != "ragged" or rnn_variant(case):
            continue
        padded = runs.get(f"{op}/padded/{case}")
        per_step = runs.get(f"{op}/ragged/{case}/algo:per_step")
        # The path kAuto did not take, forced (bench_rnn.cu): the per-step one, or where kAuto steps the persistent
        # one.
        other = per_step or runs.get(f"{op}/ragged/{case}/algo:persistent")
        # Both sides again with 4 MiB of cuBLAS workspace (the default is none): what it buys in time and costs
        # in peak.
        ragged_ws = runs.get(f"{op}/ragged/{case}/cublas_ws:4MiB")
        padded_ws = runs.get(f"{op}/padded/{case}/cublas_ws:4MiB")
        invariant = runs.get(f"{op}/ragged/{case}/proj:invariant")
        # The per-step path with ordinary launches (its plain runs launch each step as a programmatic dependent of
        # the one before): against the default run where that path is the default, else against the forced one.
        per_step_run = run if int(run.get("algo", 0)) == 1 else per_step
        ordinary = runs.get(f"{op}/ragged/{case}/launch:ordinary") or runs.get(
            f"{op}/ragged/{case}/algo:per_step/launch:ordinary")
        ordinary_ratio = ordinary["seconds"] / per_step_run["seconds"] if ordinary and per_step_run else None
        # The streamed persistent kernel keeping none of its chunks / those three buffers leave room for
        # (bench_rnn.cu kept:none|spare), over the plain run (kept_chunks of k_chunks kept).
        kept_runs = [runs.get(f"{op}/ragged/{case}/kept:{policy}") for policy in ("none", "spare")]
        kept = "-"
        if any(kept_runs) or run.get("kept_chunks") is not None:
            kept = (f"{fmt(run.get('kept_chunks'))} of {fmt(run.get('k_chunks'))}: "
                    + " / ".join(fmt(k["seconds"] / run["seconds"]) if k else "-" for k in kept_runs))
        # The resident persistent kernel staging h two buffers deep (bench_rnn.cu stages:2), over the plain run
        # (its stage count in the counter stages).
        two_stages = runs.get(f"{op}/ragged/{case}/stages:2")
        stages = (f"{fmt(run.get('stages'))}: {fmt(two_stages['seconds'] / run['seconds'])}" if two_stages
                  else "-")
        real = run.get("real_frac")
        checks, time_ratio, peak_ratio, peak_with_weights = [], None, None, None
        if not (padded and real):  # the padded twin errored or is missing: no verdict either way
            checks.append("time " + report.judge(RNN_TIME, None, 1.15, name, at_least=False))
            checks.append("peak with weights " + report.judge(RNN_PEAK_WITH, None, 1.1, name, at_least=False))
            checks.append("peak without " + report.judge(RNN_PEAK_WITHOUT, None, 1.1, name, at_least=False))
        if padded and real:
            time_ratio = run["seconds"] / (real * padded["seconds"])
            checks.append("time " + report.judge(RNN_TIME, time_ratio, 1.15, name, at_least=False))
            if run.get("peak_bytes") and padded.get("peak_bytes"):
                peak_ratio = run["peak_bytes"] / (real * padded["peak_bytes"])
                # The weights, the same on both sides, are left out of peak_bytes (bench_rnn.cu); with them in,
                # the ratio grows where they weigh against the activations (small batches, large H).
                weights = rnn_weights_bytes(op, case, run)
                if weights is not None:
                    peak_with_weights = (run["peak_bytes"] + weights) / (real * (padded["peak_bytes"] + weights))
                    with_weights.append(peak_with_weights)
            checks.append("peak with weights " + report.judge(RNN_PEAK_WITH, peak_with_weights, 1.1, name,
                                                              at_least=False))
            checks.append("peak without " + report.judge(RNN_PEAK_WITHOUT, peak_ratio, 1.1, name, at_least=False))
        ws_time = ragged_ws["seconds"] / run["seconds"] if ragged_ws else None
        ws_peak = None
        if ragged_ws and padded_ws and real and ragged_ws.get("peak_bytes") and padded_ws.get("peak_bytes"):
            ws_peak = ragged_ws["peak_bytes"] / (real * padded_ws["peak_bytes"])
        steps = run.get("steps")
        algo = {1: "per-step", 2: "persistent", 3: "persistent streamed"}.get(int(run.get("algo", 0)), "?")
        # The persistent grid's step floors (bench/rnn_step_floor.h), in us per step, and the exchange floor's
        # share of ragged's step; the weights floors (their stream over the streamed kernel's grid, in the kernel's
        # order and two others of the same bytes) where they ran.
        floors = [runs.get(f"{op}/floor/{case}/kind:{kind}")
                  for kind in ("barrier", "exchange", "weights", "weights_rotated", "weights_packed")]
        floor_us = [f["seconds"] * 1e6 / steps if f and steps else None for f in floors]
        ragged_us = run["seconds"] * 1e6 / steps if steps else None
        # Host time spent enqueueing over GPU time (bench/common/gpu_timer.h): near 1 or above, the launches (one
        # per step on the per-step path) may be what the GPU waits for.
        enqueue = "/".join(fmt(r["enqueue_us"] * 1e-6 / r["seconds"]) if r and r.get("enqueue_us") else "-"
                           for r in (run, other))
        rows.append([op, case, fmt(run["seconds"] * 1e3), algo,
                     fmt(other["seconds"] * 1e3) if other else "-",
                     fmt(padded["seconds"] * 1e3) if padded else "-", fmt(real), fmt(time_ratio), fmt(peak_ratio),
                     fmt(peak_with_weights),
                     fmt(ragged_us), fmt(floor_us[0]), fmt(floor_us[1]),
                     fmt(floor_us[1] / ragged_us) if floor_us[1] and ragged_us else "-",
                     "/".join(fmt(f) for f in floor_us[2:]), enqueue,
                     fmt(run.get("peak_frac")),
                     fmt(ws_time), fmt(ws_peak),
                     fmt(invariant["seconds"] / run["seconds"]) if invariant else "-", fmt(ordinary_ratio),
                     kept, stages, "; ".join(checks)])
    for name in sorted(unrun()):  # errored or missing: each target the case feeds has no data
        op, impl, case = split(name)
        if op.startswith("rnn_") and impl == "ragged" and not AB_TAG.search(name) and not rnn_variant(case):
            for target in (RNN_TIME, RNN_PEAK_WITH, RNN_PEAK_WITHOUT):
                report.judge(target, None, 1.15 if target == RNN_TIME else 1.1, name, at_least=False)
    report.table(["op", "case", "ragged ms", "path", "other path forced ms", "padded ms", "real_frac",
                  "time / (real_frac x padded)", "peak without weights / (real_frac x padded)",
                  "peak with weights / (real_frac x padded with weights)", "ragged us/step",
                  "floor us/step: barrier", "floor us/step: barrier + h exchange", "exchange floor / ragged step",
                  "floor us/step: weights streamed, row-major / rotated / packed",
                  "host enqueue / time: ragged / other path forced", "of GEMM peak",
                  "4 MiB cuBLAS ws: time / default", "4 MiB cuBLAS ws: peak / (real_frac x padded)",
                  "batch-invariant projection: time / default",
                  "per-step path, ordinary launches: time / dependent",
                  "streamed chunks kept (of k chunks): time keeping none / three buffers' spare, over default",
                  "resident h stages: time with 2, over default",
                  "targets"], rows)
    if with_weights:
        over = sum(1 for ratio in with_weights if ratio > 1.1)
        report.add(f"peak_bytes holds the input, output, final states and workspace; the layer's weights, the same "
                   f"for ragged and padded, are added to both for the peak target as the issue words it (\"peak "
                   f"memory\"), and the target is judged without them too. With them in both peaks, {over} of "
                   f"{len(with_weights)} cases are above 1.1 (worst {fmt(max(with_weights))}): where the weights "
                   f"outweigh the activations, no packing can bring the total to real_frac of the padded one.")
        report.add()
    if torch_rnn is None:
        report.judge(TORCH_2X, None, 2.0, "no torch_rnn.json")
        report.add("PyTorch comparison: no torch_rnn.json given.")
        report.add()
        return
    timings = {t["name"]: t for t in torch_rnn.get("timings", []) if "ms" in t}
    failed_ragged = [t["name"] for t in torch_rnn.get("timings", []) if "ms" not in t and split(t["name"])[1] == "ragged"]
    checks_failed = [c for c in torch_rnn.get("checks", []) if not c.get("ok")]
    report.add(f"PyTorch {torch_rnn.get('torch', '?')} (cuDNN {torch_rnn.get('cudnn', '?')}) on "
               f"{torch_rnn.get('device', '?')}: {len(torch_rnn.get('checks', []))} correctness checks, "
               f"{len(checks_failed)} failed." + cut_short(torch_rnn))
    report.add()
    rows = []
    for name, t in sorted(timings.items()):
        op, impl, case = split(name)
        if impl != "ragged":
            continue
        packed = timings.get(f"{op}/torch_packed/{case}")
        torch_padded = timings.get(f"{op}/torch_padded/{case}")
        speedup = packed["ms"] / t["ms"] if packed else None
        target, limit = torch_target(case)
        check = f">={limit:g}x " + report.judge(target, speedup, limit, name)
        rows.append([op, case, fmt(t["ms"]), fmt(packed["ms"]) if packed else "-",
                     fmt(torch_padded["ms"]) if torch_padded else "-", fmt(speedup), t.get("algo", "-"), check])
    # The driver failed on these cases, or the run ended before them (planned_timings: what torch_rnn.py meant
    # to time): no verdict, not none.
    not_timed = set(failed_ragged) | {n for n in torch_rnn.get("planned_timings", []) if n not in timings}
    for name in sorted(not_timed):
        target, limit = torch_target(split(name)[2])
        report.judge(target, None, limit, name)
    report.table(["op", "case", "ragged ms", "torch packed ms", "torch padded ms", "packed/ragged time", "algo",
                  "target"], rows)


ATTN_FLASH = "issue 5: >= 0.9 x PyTorch flash (long, bf16, d128)"
ATTN_MASKED = "issue 5: >= 1.8x padded SDPA with mask at 50%"
ATTN_PADDED = "issue 5: within 5% of padded fused kernel at 0%"


def attention_targets(case):
    """The targets an attention case feeds: long sequences only (len >= 1024); 0.9x flash at head_dim 128,
    1.8x masked SDPA at 50% padding, within 5% of the padded kernel at 0%."""
    pad = int(case.split("/")[0][len("pad"):])  # cases start with pad<percent>
    if "/long/" not in f"/{case}/":
        return []
    return (([ATTN_FLASH] if int(field(case, "dim") or 0) == 128 else []) + ([ATTN_MASKED] if pad == 50 else [])
            + ([ATTN_PADDED] if pad == 0 else []))


def attention_section(report, runs, torch_attention):
    report.add("## Issue 5: variable-length attention")
    report.add()
    if torch_attention:
        checks = torch_attention.get("correctness", [])
        failed = [c["name"] for c in checks if not c.get("passed")]
        report.add(f"PyTorch {torch_attention.get('torch_version', '?')} SDPA comparison on "
                   f"{torch_attention.get('gpu', '?')}: {len(checks)} correctness checks, {len(failed)} failed"
                   + (f" ({', '.join(failed)})" if failed else "") + "." + cut_short(torch_attention))
    else:
        report.add("PyTorch SDPA comparison: no torch_attention section in the bench file.")
    report.add()
    report.add("PyTorch's timings are medians, so ragged is held to them by its median (median_us) where the run "
               "has it; its TFLOP/s column and the ratios to its own padded and cuBLAS runs are from the means.")
    report.add()
    rows = []
    for name, run in sorted(runs.items()):
        op, impl, case = split(name)
        if op != "attention" or impl != "ragged" or field(case, "tile"):
            continue

        def other(kind):
            return runs.get(f"attention/{kind}/{case}")

        def tflops(r):  # the counter is already in TFLOP/s
            return r.get("TFLOP/s") if r else None

        # ragged's median time and TFLOP/s, for the comparisons with PyTorch's medians.
        median_seconds = run["median_us"] * 1e-6 if run.get("median_us") else run["seconds"]
        median_tflops = None if tflops(run) is None else tflops(run) * run["seconds"] / median_seconds

        padded, cublas = other("padded"), other("cublas")
        flash_runs = [other(kind) for kind in ("torch_jagged", "torch_varlen", "torch_dense")]
        masked = other("torch_padded_mask")
        tiles = {t: runs.get(f"attention/ragged/{case}/tile:{t}") for t in (64, 128)}
        long = "/long/" in f"/{case}/"
        targets = attention_targets(case)
        flash = max([x for x in map(tflops, flash_runs) if x is not None], default=None)
        checks = []
        if ATTN_FLASH in targets:
            of_flash = None if flash is None or median_tflops is None else median_tflops / flash
            checks.append(">=0.9 flash " + report.judge(ATTN_FLASH, of_flash, 0.9, name))
        if ATTN_MASKED in targets:
            speedup = None if masked is None else masked["seconds"] / median_seconds
            checks.append(">=1.8x masked SDPA " + report.judge(ATTN_MASKED, speedup, 1.8, name))
        if ATTN_PADDED in targets:
            slowdown = None if padded is None else run["seconds"] / padded["seconds"]
            checks.append("<=1.05 padded " + report.judge(ATTN_PADDED, slowdown, 1.05, name, at_least=False))
        ratio = lambda r: fmt(r["seconds"] / run["seconds"]) if r else "-"
        rows.append([case.split("/len")[0].replace("/", " "), field(case, "len"), field(case, "causal"),
                     fmt(tflops(run)), fmt(run.get("peak_frac")), fmt(flash),
                     fmt(None if flash is None or median_tflops is None else median_tflops / flash),
                     ratio(padded), ratio(cublas), fmt(None if masked is None else masked["seconds"] / median_seconds),
                     " / ".join(fmt(tflops(tiles[t])) for t in (64, 128)), fmt(run.get("query_tile")),
                     "; ".join(checks) if long else "(short: reported only)"])
    report.table(["padding, length class", "max len", "causal", "ragged TFLOP/s", "of GEMM peak", "torch flash TFLOP/s",
                  "ragged median / flash", "padded/ragged time", "cublas/ragged time", "masked SDPA/ragged median",
                  "tile 64 / 128 TFLOP/s",
                  "auto tile", "targets"], rows)
    for name in sorted(unrun()):  # errored or missing: each target the case feeds has no data
        op, impl, case = split(name)
        if op == "attention" and impl == "ragged" and not field(case, "tile") and not AB_TAG.search(name):
            for target in attention_targets(case):
                report.judge(target, None, 1.05 if target == ATTN_PADDED else (0.9 if target == ATTN_FLASH else 1.8),
                             name, at_least=target != ATTN_PADDED)


# The profile's columns beside a miss: what tells a memory-bound kernel from a latency- or issue-bound one.
PROFILE_COLUMNS = ["time us", "DRAM % peak", "L2 hit %", "occupancy %", "issue %", "load stall %", "no-inst stall %"]


def profile_section(report, profile_dir):
    """Every missed case whose benchmark gpu-profile.sh profiled in this folder, with its profiled launches, and
    how many misses have no profile."""
    csv_path = os.path.join(profile_dir, "profile.csv")
    if not os.path.exists(csv_path):
        report.add(f"## Profiles of the missed cases\n\nNo profile.csv in {profile_dir}.\n")
        return
    cases = profile_table.read_cases(profile_dir, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                               "gpu-profile.sh"))
    by_bench = {}
    for case, bench in cases.items():
        by_bench.setdefault(bench, []).append(case)
    launches = {}
    for case, row in profile_table.read_launches(csv_path):
        launches.setdefault(case, []).append(row)
    columns = [c for c in profile_table.COLUMNS if c[0] in PROFILE_COLUMNS]
    rows, unprofiled = [], []
    for target, met, name in report.verdicts:
        if met is not False:
            continue
        profiled = [case for case in by_bench.get(name, []) if launches.get(case)]
        if not profiled:
            unprofiled.append((target, name))
        for case in profiled:
            for row in launches[case]:
                rows.append([target, name, case, profile_table.kernel_name(row)] +
                            [profile_table.value(row, key, scale) for _, key, scale in columns])
    report.add("## Profiles of the missed cases")
    report.add()
    report.add(f"From {profile_dir} (scripts/gpu-profile.sh, the same benchmark under ncu, a few launches each; "
               "profile.md there has every column). DRAM % peak and issue % both low with a high load stall: "
               "latency-bound; DRAM % high: bandwidth-bound; issue % high: instruction-bound.")
    report.add()
    if rows:
        report.table(["target", "case", "profile case", "kernel"] + [c[0] for c in columns], rows)
    missed = {}
    for target, met, name in report.verdicts:
        if met is False:
            missed.setdefault(target, set()).add(name)
    without = {}
    for target, name in unprofiled:
        without.setdefault(target, set()).add(name)
    report.add("Missed cases without a profile, per target" + (":" if without else ": none."))
    for target in (t for t in ALL_TARGETS if t in without):
        names = sorted(without[target], key=natural_key)
        report.add(f"- {target}: {len(names)} of {len(missed[target])} missed case(s) without a profile: "
                   + ", ".join(names[:16]) + (" ..." if len(names) > 16 else ""))
    report.add()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", required=True)
    parser.add_argument("--torch-rnn")
    parser.add_argument("--profile-dir")
    parser.add_argument("--expected", help="ragged_bench --benchmark_list_tests output of the suites the run meant "
                        "to time (default: the bench file's context expected_benchmarks, as scripts/gpu-check.sh "
                        "leaves it)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv[1:])
    try:
        context, all_runs, torch_attention = load_runs(args.bench)
    except (OSError, ValueError) as error:
        print(f"summarize_targets.py: cannot read {args.bench}: {error}", file=sys.stderr)
        return 2
    torch_rnn = None
    if args.torch_rnn:
        try:
            with open(args.torch_rnn) as f:
                torch_rnn = json.load(f)
        except (OSError, ValueError) as error:
            print(f"summarize_targets.py: {args.torch_rnn} left out: {error}", file=sys.stderr)

    runs, ab = split_ab(all_runs)
    expected = context.get("expected_benchmarks")
    expected_from = "the bench file's expected_benchmarks"
    if args.expected:
        try:
            with open(args.expected) as f:
                expected, expected_from = f.read().splitlines(), args.expected
        except OSError as error:
            print(f"summarize_targets.py: cannot read {args.expected}: {error}", file=sys.stderr)
            return 2
    if expected is not None:
        load_expected(expected, runs)
    report = Report()
    copy = float(context.get("copy_bytes_per_second", 0) or 0)
    gemm = float(context.get("bf16_gemm_flops_per_second", 0) or 0)
    report.add("# Targets of issues 3, 4 and 5, from one run")
    report.add()
    gemm_size = context.get("bf16_gemm_size", "8192")
    report.add(f"GPU: {context.get('gpu', '?')}; device-to-device copy {copy * 1e-9:.0f} GB/s (read + write, the "
               f"copy_frac denominator); bf16 GEMM {gemm * 1e-12:.0f} TFLOP/s (cuBLAS {gemm_size}^3, the peak_frac "
               f"denominator); L2 flushed {context.get('l2_flush', 'dirty (a memset: runs up to 6a97180)')} "
               f"before each iteration; {len(runs)} benchmark runs read from {args.bench}"
               + (f" (and {sum(len(v) for v in ab.values())} A/B runs)" if ab else "")
               + (f"; suites cut short: {context['truncated_suites']}" if context.get("truncated_suites") else "")
               + ".")
    report.add()
    suites = context.get("suite_denominators") or {}
    if len(suites) > 1:  # each suite divides its own rows by what it measured
        report.add("Each suite's own denominators: " + "; ".join(
            f"{suite} " + ", ".join(
                f"{float(value) * scale:.0f} {unit}" for key, scale, unit in
                (("copy_bytes_per_second", 1e-9, "GB/s"), ("bf16_gemm_flops_per_second", 1e-12, "TFLOP/s"))
                if (value := own.get(key)) is not None)
            for suite, own in sorted(suites.items())) + ".")
        report.add()
    if float(context.get("size_scale", 1) or 1) != 1.0:
        report.add(f"**Not a result: a shrunk run** (RAGGED_BENCH_SCALE={context['size_scale']}): every case is "
                   "smaller than the targets are stated for: the verdicts below show that the report reads the run, "
                   "not whether a target is met.")
        report.add()
    if ERRORED:
        report.add(f"{len(ERRORED)} benchmark run(s) reported an error; the targets they feed count them as no data: "
                   + "; ".join(f"{name} ({message})" for name, message in sorted(ERRORED.items())[:20])
                   + (" ..." if len(ERRORED) > 20 else ""))
        report.add()
    if MISSING:
        report.add(f"{len(MISSING)} expected benchmark(s) did not run (listed in {expected_from}, missing from the "
                   "results); the targets they feed count them as no data: "
                   + "; ".join(sorted(MISSING)[:20]) + (" ..." if len(MISSING) > 20 else ""))
        report.add()
    elif expected is None:
        report.add("No list of the expected benchmarks (--expected, or the bench file's expected_benchmarks): a case "
                   "missing from the results is left out of the counts, not counted as no data.")
        report.add()
    body_start = len(report.lines)
    segment_section(report, runs)
    rnn_section(report, runs, torch_rnn)
    attention_section(report, runs, torch_attention)
    ab_section(report, runs, ab)
    if args.profile_dir:
        profile_section(report, args.profile_dir)

    # The verdicts first: per target, how many cases met it.
    summary = {t: [0, 0, 0] for t in ALL_TARGETS}
    for target, met, _ in report.verdicts:
        s = summary.setdefault(target, [0, 0, 0])
        s[0 if met else (2 if met is None else 1)] += 1
    head = ["## Verdicts", ""]
    head += ["| target | cases met | cases missed | no data | worst case: value (limit) |",
             "| --- | --- | --- | --- | --- |"]
    for t, s in summary.items():
        worst = report.worst.get(t)
        far = f"{worst[1]:.3g} ({worst[2]:g}) {worst[3]}" if worst else "-"
        head.append(f"| {t} | {s[0]} | {s[1]} | {s[2] if sum(s) else 'no case in this run'} | {far} |")
    head.append("")
    report.lines[body_start:body_start] = head
    with open(args.out, "w") as f:
        f.write("\n".join(report.lines) + "\n")
    missed = sum(s[1] for s in summary.values())
    judged = sum(1 for s in summary.values() if s[0] + s[1])
    print(f"summarize_targets.py: {judged} of {len(summary)} targets judged, {missed} case(s) missed; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

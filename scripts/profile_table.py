#!/usr/bin/env python3
"""Reads what scripts/gpu-profile.sh writes: its ncu CSV (a "case" column in front of ncu's raw page, one row per
profiled launch) and its case table (profile_cases.tsv: case, suite, benchmark). gpu-profile.sh writes profile.md
with it; scripts/summarize_targets.py --profile-dir puts the profiled launches beside the missed targets.

    profile_table.py CSV MD UNAVAILABLE NOT_RUN_COUNT [NOT_RUN...] -- [UNKNOWN_METRICS...]

writes MD from CSV: UNAVAILABLE is ncu's reason when it could not read the counters (empty otherwise), then the
cases not run or failed, then the metrics this ncu did not know.
"""
import csv
import os
import re
import sys

# (heading, ncu metric, scale to the heading's unit). ncu prints base units (--print-units base).
COLUMNS = [
    ("time us", "gpu__time_duration.sum", 1e-3),
    ("DRAM read MB", "dram__bytes_read.sum", 1e-6),
    ("DRAM write MB", "dram__bytes_write.sum", 1e-6),
    ("DRAM % peak", "dram__throughput.avg.pct_of_peak_sustained_elapsed", 1),
    ("L2 read MB", "lts__t_sectors_op_read.sum", 32e-6),
    ("L2 hit %", "lts__t_sector_hit_rate.pct", 1),
    ("occupancy %", "sm__warps_active.avg.pct_of_peak_sustained_active", 1),
    ("issue %", "smsp__issue_active.avg.pct_of_peak_sustained_active", 1),
    ("inst M", "sm__inst_executed.sum", 1e-6),
    ("tensor %", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", 1),
    ("no-inst stall %", "smsp__warp_issue_stalled_no_instruction_per_warp_active.pct", 1),
    ("load stall %", "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct", 1),
    ("regs", "launch__registers_per_thread", 1),
    ("grid", "launch__grid_size", 1),
]


def read_launches(path):
    """[(case, {metric or ncu column: text})] of the profiled launches in gpu-profile.sh's CSV."""
    rows, header = [], None
    with open(path, newline="") as f:
        for record in csv.reader(f):
            if len(record) < 2:
                continue
            if record[1] == "ID":  # ncu's header line (case column added in front); the next line holds units
                header = record
                continue
            if header is None or len(record) != len(header) or not record[1].isdigit():
                continue
            rows.append((record[0], dict(zip(header[1:], record[1:]))))
    return rows


def kernel_name(row):
    """The kernel's bare name: no namespace, template arguments or parameters."""
    return row.get("Kernel Name", "?").split("(")[0].split("<")[0].split("::")[-1].split(" ")[-1]


def value(row, key, scale):
    text = row.get(key, "").replace(",", "")
    try:
        return f"{float(text) * scale:.4g}"
    except ValueError:
        return "-"


def read_cases(profile_dir, profile_script=None):
    """{case: benchmark name without /manual_time}: from profile_dir/profile_cases.tsv (gpu-profile.sh writes it
    since 2026-12-04), else from the case table of profile_script (an earlier run's cases may differ from it)."""
    cases = {}
    tsv = os.path.join(profile_dir, "profile_cases.tsv")
    if os.path.exists(tsv):
        with open(tsv) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 3 and parts[0] != "case":
                    cases[parts[0]] = re.sub(r"/(manual_time|real_time)$", "", parts[2])
        return cases
    if profile_script and os.path.exists(profile_script):
        for m in re.finditer(r'^\s*"([^";]+);([^";]+);([^";]+);', open(profile_script).read(), re.M):
            cases[m.group(1)] = re.sub(r"/(manual_time|real_time)$", "", m.group(3))
    return cases


def write_markdown(md, rows, unavailable, not_run, unknown):
    with open(md, "w") as f:
        f.write("# ragged GPU profile (ncu)\n\n")
        f.write("Units: ncu prints base units (--print-units base): ns (shown in us), bytes (MB), L2 sectors of 32 "
                "bytes (MB).\n\n")
        f.write("| case | kernel | " + " | ".join(c[0] for c in COLUMNS) + " |\n")
        f.write("| --- | --- |" + " --- |" * len(COLUMNS) + "\n")
        for case, row in rows:
            f.write(f"| {case} | {kernel_name(row)} | " + " | ".join(value(row, c[1], c[2]) for c in COLUMNS) +
                    " |\n")
        if unavailable:
            f.write(f"\nncu cannot read the hardware counters on this machine ({unavailable}); the cases after it "
                    "were not run.\n")
        if not rows:
            f.write("\nNo kernel was profiled: see profile.log.\n")
        if not_run:
            f.write("\nNot run or failed: " + ", ".join(not_run) + " (profile.log).\n")
        if unknown:
            f.write("\nMetrics this ncu does not know (left out): " + ", ".join(unknown) + ".\n")


def main(argv):
    path, md, unavailable = argv[1], argv[2], argv[3]
    rest = argv[4:]
    count = int(rest[0])
    not_run = rest[1:1 + count]
    unknown = rest[rest.index("--") + 1:] if "--" in rest else []
    rows = read_launches(path)
    write_markdown(md, rows, unavailable, not_run, unknown)
    print(f"profile.md: {len(rows)} launches")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Holds every kernel of the library to the register spills it is known to have.

ptxas's resource report (nvcc --resource-usage) of each library source is kept by the build in
REPORT_DIR/<object>.txt (cmake/keep_ptxas_report.sh, RAGGED_KERNEL_RESOURCES). A spill moves a kernel's registers
through local memory, a cost no CPU test sees and that a GPU run shows only as a slower benchmark, often sessions
after the change that caused it. This check fails where a kernel, or a function it calls, spills more bytes than
EXPECTED lists for it on that architecture, and where a listed spill is gone or smaller (the list then says more
than the code: --update rewrites it). Kernels that spill nothing need no entry.

The list says which architectures and which nvcc it was made for ("# architectures:" and "# nvcc:" lines): only
those architectures are checked (a build for sm_90 alone checks sm_90; one for sm_86 checks nothing), and a build
with another nvcc release (--nvcc MAJOR.MINOR, from CMake) is skipped, since ptxas allocates registers differently
from one release to the next. Reports whose object file is gone (a source removed) are ignored.

  check_kernel_resources.py REPORT_DIR EXPECTED [--nvcc MAJOR.MINOR] [--update]

Names are demangled, nvcc's per-file anonymous namespaces written as "(anonymous namespace)" and CCCL's namespaces
without the architectures they were built for, so that entries depend on neither where the sources sit nor the
architecture list. Exit 77 (ctest: skipped) when nothing can be checked.
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

ENTRY = re.compile(r"^ptxas info\s*: Compiling entry function '([^']+)' for '(sm_\w+)'")
PROPERTIES = re.compile(r"^ptxas info\s*: Function properties for (\S+)")
BYTES = re.compile(r"^\s+(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
REGISTERS = re.compile(r"^ptxas info\s*: Used (\d+) registers")
# nvcc names a file's anonymous namespace after the file and hashes of its path: _GLOBAL__N__<hash>_<n>_<file>_<hash>.
ANONYMOUS = re.compile(r"_GLOBAL__N__[0-9a-f]+_\d+_\w+?_[0-9a-f]{8}")
# CCCL's versioned namespaces name the architectures built (CUB_300001_SM_800_900): kept to the version, so that
# a build for sm_90 alone finds the entries of a build for sm_80 and sm_90.
CCCL_ARCHS = re.compile(r"\b(CUB|THRUST)_(\d+)_SM_\d+(?:_\d+)*")
SKIP = 77


def demangle(names):
    """Demangled names, in order, with nvcc's anonymous namespaces made path-independent."""
    if not names:
        return []
    out = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    if len(lines) != len(names):
        raise RuntimeError("c++filt returned %d names for %d" % (len(lines), len(names)))
    return [CCCL_ARCHS.sub(r"\1_\2", ANONYMOUS.sub("(anonymous namespace)", line)) for line in lines]


def current_reports(report_dir):
    """The reports whose object file still exists (keep_ptxas_report.sh names it on the first line)."""
    reports = []
    for report in sorted(Path(report_dir).glob("*.txt")):
        first = report.read_text().split("\n", 1)[0]
        if first.startswith("# object ") and not Path(first[len("# object "):]).exists():
            continue
        reports.append(report)
    return reports


def read_reports(report_dir):
    """{(arch, kernel, function): [stores, loads]} and {(arch, kernel): registers} over every report.

    ptxas lists a kernel's own properties after its "Compiling entry function" line, then those of each function
    it calls that was not inlined; a called function's spills count against the kernel that calls it."""
    raw = []  # (arch, kernel mangled, function mangled, stores, loads)
    registers = {}
    for report in current_reports(report_dir):
        arch = kernel = function = None
        for line in report.read_text().splitlines():
            m = ENTRY.match(line)
            if m:
                kernel, arch = m.group(1), m.group(2)
                continue
            m = PROPERTIES.match(line)
            if m:
                function = m.group(1)
                continue
            m = BYTES.match(line)
            if m and kernel is not None and function is not None:
                raw.append((arch, kernel, function, int(m.group(2)), int(m.group(3))))
                function = None
                continue
            m = REGISTERS.match(line)
            if m and kernel is not None:
                registers[(arch, kernel)] = int(m.group(1))
    names = sorted({r[1] for r in raw} | {r[2] for r in raw} | {k for _, k in registers})
    readable = dict(zip(names, demangle(names)))
    spills = {}
    for arch, kernel, function, stores, loads in raw:
        callee = "" if function == kernel else readable[function]
        key = (arch, readable[kernel], callee)
        old = spills.get(key, [0, 0])
        spills[key] = [max(old[0], stores), max(old[1], loads)]  # a kernel compiled in two files: the larger
    return spills, {(arch, readable[k]): r for (arch, k), r in registers.items()}


def read_expected(path):
    """({(arch, kernel, callee): [stores, loads]}, architectures, nvcc) from EXPECTED: data lines
    'arch<TAB>stores<TAB>loads<TAB>kernel[<TAB>callee]', and '# architectures: ...' / '# nvcc: ...' lines."""
    expected, archs, nvcc = {}, set(), None
    if not Path(path).exists():
        return expected, archs, nvcc
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.startswith("# architectures:"):
            archs.update(line.split(":", 1)[1].split())
            continue
        if line.startswith("# nvcc:"):
            nvcc = line.split(":", 1)[1].strip()
            continue
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) not in (4, 5):
            raise SystemExit("%s:%d: expected arch, stores, loads, kernel[, callee] separated by tabs" % (path, number))
        callee = fields[4] if len(fields) == 5 else ""
        expected[(fields[0], fields[3], callee)] = [int(fields[1]), int(fields[2])]
        archs.add(fields[0])
    return expected, archs, nvcc


def write_expected(path, spills, kept, archs, nvcc):
    header = [
        "# Register spills each library kernel is known to have (ptxas, nvcc --resource-usage): checked by ctest",
        "# kernel_resources (scripts/check_kernel_resources.py). One line per kernel, or per function it calls that",
        "# was not inlined, that spills: arch, spill store and load bytes, kernel[, callee], separated by tabs.",
        "# A kernel missing here must spill nothing. Rewrite with: check_kernel_resources.py REPORT_DIR THIS --update",
        "# architectures: " + " ".join(sorted(archs)),
    ] + (["# nvcc: " + nvcc] if nvcc else [])
    rows = {**kept, **{k: v for k, v in spills.items() if v[0] > 0 or v[1] > 0}}
    lines = []
    for (arch, kernel, callee), (stores, loads) in sorted(rows.items()):
        lines.append("\t".join([arch, str(stores), str(loads), kernel] + ([callee] if callee else [])))
    Path(path).write_text("\n".join(header + lines) + "\n")


def major_minor(version):
    return ".".join(version.split(".")[:2]) if version else None


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report_dir")
    parser.add_argument("expected")
    parser.add_argument("--nvcc", help="the nvcc release that built the reports (MAJOR.MINOR[.PATCH])")
    parser.add_argument("--update", action="store_true", help="rewrite EXPECTED from the reports")
    args = parser.parse_args(argv[1:])
    report_dir, expected_path = args.report_dir, args.expected
    if not current_reports(report_dir):
        print("kernel resources: no ptxas report in %s (configure with -DRAGGED_KERNEL_RESOURCES=ON); skipped"
              % report_dir)
        return SKIP
    spills, registers = read_reports(report_dir)
    built = {arch for arch, _ in registers}
    expected, listed_archs, listed_nvcc = read_expected(expected_path)
    nvcc = major_minor(args.nvcc)
    if args.update:
        if nvcc and listed_nvcc and nvcc != listed_nvcc:  # another release: its other architectures are stale
            expected, listed_archs = {}, set()
        kept = {k: v for k, v in expected.items() if k[0] not in built}
        write_expected(expected_path, spills, kept, listed_archs | built, nvcc or listed_nvcc)
        print("kernel resources: wrote %s" % expected_path)
        return 0
    if nvcc and listed_nvcc and nvcc != listed_nvcc:
        print("kernel resources: built with nvcc %s, the list is nvcc %s's (ptxas allocates registers differently "
              "from one release to the next); skipped" % (nvcc, listed_nvcc))
        return SKIP
    archs = sorted(built & listed_archs)
    for arch in sorted(built - listed_archs):
        print("kernel resources: %s is not in the list (made for %s): not checked"
              % (arch, " ".join(sorted(listed_archs)) or "no architecture"))
    if not archs:
        print("kernel resources: no architecture built is in the list; skipped")
        return SKIP
    spills = {k: v for k, v in spills.items() if k[0] in archs}
    registers = {k: v for k, v in registers.items() if k[0] in archs}
    checked = {k: v for k, v in expected.items() if k[0] in archs}

    def describe(key):
        arch, kernel, callee = key
        return "%s %s%s" % (arch, kernel, " -> " + callee if callee else "")

    problems = []
    for key, (stores, loads) in sorted(spills.items()):
        allowed = checked.get(key, [0, 0])
        if stores > allowed[0] or loads > allowed[1]:
            problems.append("spills %d / %d bytes (stores / loads), %s: %s"
                            % (stores, loads, "listed %d / %d" % tuple(allowed) if key in checked else "not listed",
                               describe(key)))
    for key, allowed in sorted(checked.items()):
        found = spills.get(key, [0, 0]) if key in spills or (key[0], key[1]) in registers else None
        if found is None:
            problems.append("listed but not built: %s" % describe(key))
        elif found[0] < allowed[0] or found[1] < allowed[1]:
            problems.append("spills less than listed (%d / %d, listed %d / %d): %s"
                            % (found[0], found[1], allowed[0], allowed[1], describe(key)))
    spilling = sum(1 for v in spills.values() if v[0] > 0 or v[1] > 0)
    for arch in archs:
        counts = [r for (a, _), r in registers.items() if a == arch]
        print("kernel resources: %s: %d kernels, %d to %d registers"
              % (arch, len(counts), min(counts), max(counts)))
    if problems:
        for p in problems:
            print("kernel resources: " + p)
        print("kernel resources: %d problem(s). If the change is meant, rewrite the list: %s %s %s%s --update"
              % (len(problems), argv[0], report_dir, expected_path, " --nvcc " + nvcc if nvcc else ""))
        return 1
    print("kernel resources: %d kernels or callees spill, each as listed in %s" % (spilling, expected_path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

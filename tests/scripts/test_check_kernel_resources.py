#!/usr/bin/env python3
"""scripts/check_kernel_resources.py on hand-made ptxas reports: what it holds a kernel to, and that its entries
do not depend on where the sources sit (nvcc's anonymous-namespace hashes) or on the architectures built (CCCL's
versioned namespaces)."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'scripts', 'check_kernel_resources.py')

PLAIN = '_Z4kernIfEvPT_'  # void kern<float>(float*)


def anonymous(file_hash):
    # ragged::detail::(anonymous namespace)::attention_mma_kernel<__nv_bfloat16, 128, 2>(...), nvcc's namespace
    # name carrying hashes of the source's path.
    return ('_ZN6ragged6detail49_GLOBAL__N__%s_16_attention_mma_cu_d531892a20attention_mma_kernelI13__nv_bfloat16'
            'Li128ELi2EEEvNS0_15AttentionParamsE' % file_hash)


CUB_TWO_ARCHS = '_ZN3cub21CUB_300001_SM_800_9004scanEv'  # cub::CUB_300001_SM_800_900::scan()
CUB_ONE_ARCH = '_ZN3cub17CUB_300001_SM_9004scanEv'
CALLEE = '_ZN6ragged6detail11divmod_wideEll'


def entry(name, arch, stores, loads, registers=32, callees=()):
    lines = ["ptxas info    : Compiling entry function '%s' for '%s'" % (name, arch),
             'ptxas info    : Function properties for %s' % name,
             '    %d bytes stack frame, %d bytes spill stores, %d bytes spill loads' % (stores, stores, loads),
             'ptxas info    : Used %d registers, used 1 barriers, 384 bytes cmem[0]' % registers,
             'ptxas info    : Compile time = 1.0 ms']
    for callee, c_stores, c_loads in callees:
        lines += ['ptxas info    : Function properties for %s' % callee,
                  '    0 bytes stack frame, %d bytes spill stores, %d bytes spill loads' % (c_stores, c_loads)]
    return lines


def check(reports, expected_lines, *extra, objects=None):
    """(exit code, output, expected file's lines afterwards) for REPORT_DIR holding `reports` (name -> lines)."""
    with tempfile.TemporaryDirectory() as tmp:
        report_dir = os.path.join(tmp, 'reports')
        os.mkdir(report_dir)
        for name, lines in reports.items():
            with open(os.path.join(report_dir, name), 'w') as f:
                f.write('\n'.join(lines) + '\n')
        expected = os.path.join(tmp, 'spills.tsv')
        if expected_lines is not None:
            with open(expected, 'w') as f:
                f.write('\n'.join(expected_lines) + '\n')
        r = subprocess.run([sys.executable, SCRIPT, report_dir, expected] + list(extra), capture_output=True,
                           text=True)
        after = open(expected).read().splitlines() if os.path.exists(expected) else None
        return r.returncode, r.stdout + r.stderr, after


def listed(after):
    return [line for line in after if line and not line.startswith('#')]


def main():
    failures = []

    def expect(condition, what, output=''):
        if not condition:
            failures.append(what + ('\n' + output if output else ''))

    report = {
        'a.cu.o.txt': entry(PLAIN, 'sm_90', 8, 8) + entry(anonymous('f969ca4a'), 'sm_90', 0, 0,
                                                          callees=[(CALLEE, 0, 4)]),
        'b.cu.o.txt': entry(CUB_TWO_ARCHS, 'sm_90', 4, 4) + entry(PLAIN, 'sm_80', 0, 0),
    }
    code, out, _ = check(report, ['# architectures: sm_80 sm_90'])
    expect(code == 1, 'spills missing from the list fail', out)
    expect('not listed: sm_90 void kern<float>(float*)' in out, 'the kernel is named, demangled', out)
    expect('-> ragged::detail::divmod_wide(long, long)' in out, 'a callee spill is charged to its kernel', out)

    code, out, after = check(report, None, '--update', '--nvcc', '13.0.88')
    expect(code == 0, '--update succeeds', out)
    expect('# architectures: sm_80 sm_90' in after and '# nvcc: 13.0' in after,
           'the list names the architectures and the nvcc it was made for', '\n'.join(after))
    header = [line for line in after if line.startswith('# architectures') or line.startswith('# nvcc')]
    rows = listed(after)
    expect(len(rows) == 3, 'three spilling entries written, the sm_80 kernel (no spill) not', '\n'.join(rows))
    expect(any('(anonymous namespace)::attention_mma_kernel' in r for r in rows), 'anonymous namespace normalised',
           '\n'.join(rows))
    expect(any('cub::CUB_300001::scan()' in r for r in rows), 'CCCL namespace without its architectures',
           '\n'.join(rows))

    rows = header + rows
    code, out, _ = check(report, rows, '--nvcc', '13.0.88')
    expect(code == 0, 'the written list passes', out)

    code, out, _ = check(report, rows, '--nvcc', '12.9.1')
    expect(code == 77 and 'skipped' in out, 'another nvcc release: skipped (77)', out)

    moved = dict(report)
    moved['a.cu.o.txt'] = entry(PLAIN, 'sm_90', 8, 8) + entry(anonymous('0badcafe'), 'sm_90', 0, 0,
                                                              callees=[(CALLEE, 0, 4)])
    moved['b.cu.o.txt'] = entry(CUB_ONE_ARCH, 'sm_90', 4, 4)
    code, out, _ = check(moved, rows)
    expect(code == 0, 'another source path and a build for sm_90 alone match the same entries', out)

    worse = dict(report)
    worse['a.cu.o.txt'] = entry(PLAIN, 'sm_90', 12, 8) + entry(anonymous('f969ca4a'), 'sm_90', 0, 0,
                                                               callees=[(CALLEE, 0, 4)])
    code, out, _ = check(worse, rows)
    expect(code == 1 and 'spills 12 / 8 bytes (stores / loads), listed 8 / 8' in out, 'more spill fails', out)

    better = dict(report)
    better['a.cu.o.txt'] = entry(PLAIN, 'sm_90', 0, 0) + entry(anonymous('f969ca4a'), 'sm_90', 0, 0,
                                                               callees=[(CALLEE, 0, 4)])
    code, out, _ = check(better, rows)
    expect(code == 1 and 'spills less than listed (0 / 0, listed 8 / 8)' in out, 'a stale entry fails', out)

    other_arch = rows + ['sm_86\t4\t4\tvoid kern<float>(float*)']
    code, out, _ = check(report, other_arch)
    expect(code == 0, 'entries of an architecture not built are not checked', out)

    sm86 = dict(report)
    sm86['c.cu.o.txt'] = entry(PLAIN, 'sm_86', 64, 64)
    code, out, _ = check(sm86, rows)
    expect(code == 0 and 'sm_86 is not in the list' in out, 'an architecture the list was not made for is not '
           'checked', out)
    code, out, _ = check({'c.cu.o.txt': entry(PLAIN, 'sm_86', 64, 64)}, rows)
    expect(code == 77, 'nothing built that the list covers: skipped (77)', out)

    gone = dict(report)
    gone['d.cu.o.txt'] = ['# object /nonexistent/ragged/d.cu.o'] + entry(PLAIN, 'sm_90', 512, 512)
    code, out, _ = check(gone, rows)
    expect(code == 0, "the report of an object that is gone (a removed source) is ignored", out)

    code, out, _ = check({}, rows)
    expect(code == 77, 'no report: skipped (77)', out)

    for failure in failures:
        print('FAILED: ' + failure)
    print('%d failure(s)' % len(failures) if failures else 'all checks passed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())

#!/usr/bin/env python3
"""tests/emu/coverage_report.py on a small program laid out as an emulator build: BUILD/tree holds the sources,
BUILD/obj their objects, compiled with g++ --coverage and run once, so that one branch of the kernel source runs
and the other does not; a second build of the same source runs the other branch, and the two folders' report
together counts every line run. Skips (77) where g++ or gcov is missing."""
import os
import shutil
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'emu', 'coverage_report.py')

KERNEL = '''int scale(int x) {
  if (x > 0) {
    return 2 * x;
  }
  int y = -x;
  y = y * 3 + 1;
  return y;
}
'''
MAIN = '''int scale(int x);
int main() { return scale(ARGUMENT) == EXPECTED ? 0 : 1; }
'''


def make_build(build, argument, expected):
    """BUILD/tree/kernels/scale.cu and BUILD/obj/kernels_scale.o (with counters); returns the program, not yet run,
    that calls scale(argument)."""
    os.makedirs(os.path.join(build, 'tree', 'kernels'))
    os.makedirs(os.path.join(build, 'obj'))
    kernel = os.path.join(build, 'tree', 'kernels', 'scale.cu')
    with open(kernel, 'w') as f:
        f.write(KERNEL)
    main_src = os.path.join(build, 'main.cpp')
    with open(main_src, 'w') as f:
        f.write(MAIN.replace('ARGUMENT', str(argument)).replace('EXPECTED', str(expected)))
    obj = os.path.join(build, 'obj', 'kernels_scale.o')
    subprocess.run(['g++', '-O0', '--coverage', '-x', 'c++', '-c', kernel, '-o', obj], check=True)
    program = os.path.join(build, 'program')
    subprocess.run(['g++', '--coverage', main_src, obj, '-o', program], check=True)
    return program


def report(*builds):
    return subprocess.run([sys.executable, SCRIPT, *builds], capture_output=True, text=True)


def scale_row(stdout):
    """The table row of kernels/scale.cu as [lines with code, lines run], or None."""
    rows = [line.split() for line in stdout.split('\n') if line.startswith('kernels/scale.cu ')]
    return [int(rows[0][1]), int(rows[0][2])] if rows else None


def never_run(stdout):
    return [line.strip() for line in stdout.split('\n') if line.startswith('  ') and ':' in line]


def main():
    if shutil.which('g++') is None or shutil.which('gcov') is None:
        print('skipped: no g++ or gcov')
        return 77
    failures = []
    with tempfile.TemporaryDirectory() as root:
        build = os.path.join(root, 'positive')
        program = make_build(build, 1, 2)
        before = report(build)
        if before.returncode == 0 or 'no program ran' not in before.stderr:
            failures.append('a build no program ran: want an error saying so, got rc %d, stderr %r'
                            % (before.returncode, before.stderr))

        subprocess.run([program], check=True)
        after = report(build)
        if after.returncode != 0:
            failures.append('after a run: rc %d, stderr %r' % (after.returncode, after.stderr))
        row = scale_row(after.stdout)
        # Lines with code: the function's entry, the branch, its return, the three lines after it and the
        # closing brace give at most 7; the run took the first three.
        if row is None or row[1] < 2 or row[1] >= row[0]:
            failures.append('want a table row for kernels/scale.cu with some lines run and some not: %r' % row)
        never = never_run(after.stdout)
        # The unrun lines 5..7 are one range; line 3 ran and is not listed.
        if not any(entry.startswith('5..') and 'int y = -x;' in entry for entry in never):
            failures.append('want the range from line 5 (int y = -x;) listed as never run: %r' % never)
        if any('return 2 * x;' in entry for entry in never):
            failures.append('line 3 ran but is listed as never run: %r' % never)

        # A second reading of the same source that takes the other branch: together, every line ran.
        other = os.path.join(root, 'negative')
        subprocess.run([make_build(other, -2, 7)], check=True)
        both = report(build, other)
        if both.returncode != 0:
            failures.append('two folders: rc %d, stderr %r' % (both.returncode, both.stderr))
        row_both = scale_row(both.stdout)
        if row is None or row_both is None or row_both[0] != row[0] or row_both[1] != row_both[0]:
            failures.append('two folders: want every one of the %r lines with code run, got %r' % (row, row_both))
        if never_run(both.stdout):
            failures.append('two folders: want no line listed as never run: %r' % never_run(both.stdout))
        # Each folder must hold counters: one whose program never ran is refused, not counted as zeros.
        idle = os.path.join(root, 'idle')
        make_build(idle, 1, 2)
        with_idle = report(build, idle)
        if with_idle.returncode == 0 or 'no program ran' not in with_idle.stderr:
            failures.append('a folder no program ran, beside one that ran: want an error, got rc %d, stderr %r'
                            % (with_idle.returncode, with_idle.stderr))
    for failure in failures:
        print('FAIL:', failure)
    print('%d failures' % len(failures))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())

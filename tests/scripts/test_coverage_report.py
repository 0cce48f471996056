#!/usr/bin/env python3
"""tests/emu/coverage_report.py on a small program laid out as an emulator build: BUILD/tree holds the sources,
BUILD/obj their objects, compiled with g++ --coverage and run once, so that one branch of the kernel source runs
and the other does not. Skips (77) where g++ or gcov is missing."""
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
int main() { return scale(1) == 2 ? 0 : 1; }
'''


def main():
    if shutil.which('g++') is None or shutil.which('gcov') is None:
        print('skipped: no g++ or gcov')
        return 77
    failures = []
    with tempfile.TemporaryDirectory() as build:
        os.makedirs(os.path.join(build, 'tree', 'kernels'))
        os.makedirs(os.path.join(build, 'obj'))
        kernel = os.path.join(build, 'tree', 'kernels', 'scale.cu')
        with open(kernel, 'w') as f:
            f.write(KERNEL)
        main_src = os.path.join(build, 'main.cpp')
        with open(main_src, 'w') as f:
            f.write(MAIN)

        def report():
            return subprocess.run([sys.executable, SCRIPT, build], capture_output=True, text=True)

        obj = os.path.join(build, 'obj', 'kernels_scale.o')
        subprocess.run(['g++', '-O0', '--coverage', '-x', 'c++', '-c', kernel, '-o', obj], check=True)
        program = os.path.join(build, 'program')
        subprocess.run(['g++', '--coverage', main_src, obj, '-o', program], check=True)

        before = report()
        if before.returncode == 0 or 'no program ran' not in before.stderr:
            failures.append('a build no program ran: want an error saying so, got rc %d, stderr %r'
                            % (before.returncode, before.stderr))

        subprocess.run([program], check=True)
        after = report()
        if after.returncode != 0:
            failures.append('after a run: rc %d, stderr %r' % (after.returncode, after.stderr))
        lines = after.stdout.split('\n')
        row = [line.split() for line in lines if line.startswith('kernels/scale.cu')]
        # Lines with code: the function's entry, the branch, its return, the three lines after it and the
        # closing brace give at most 7; the run took the first three.
        if not row or int(row[0][2]) < 2 or int(row[0][2]) >= int(row[0][1]):
            failures.append('want a table row for kernels/scale.cu with some lines run and some not: %r' % row)
        never = [line.strip() for line in lines if line.startswith('  ') and ':' in line]
        # The unrun lines 5..7 are one range; line 3 ran and is not listed.
        if not any(entry.startswith('5..') and 'int y = -x;' in entry for entry in never):
            failures.append('want the range from line 5 (int y = -x;) listed as never run: %r' % never)
        if any('return 2 * x;' in entry for entry in never):
            failures.append('line 3 ran but is listed as never run: %r' % never)
    for failure in failures:
        print('FAIL:', failure)
    print('%d failures' % len(failures))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())

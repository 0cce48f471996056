"""Shared by the script tests (tests/scripts/test_*.py): stand-in executables and the expect / report pattern."""
import os
import stat
import sys

failures = []


def expect(got, want, what):
    if got != want:
        failures.append('%s: got %r, want %r' % (what, got, want))


def executable(path, text):
    """Writes an executable script (a bash one unless `text` starts with its own #! line)."""
    with open(path, 'w') as f:
        f.write(text if text.startswith('#!') else '#!/usr/bin/env bash\n' + text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def finish():
    """Prints every failure and exits 1 if there was one."""
    for failure in failures:
        print('FAIL', failure)
    print('%d failure(s)' % len(failures))
    sys.exit(1 if failures else 0)

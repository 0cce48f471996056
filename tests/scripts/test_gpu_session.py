#!/usr/bin/env python3
"""scripts/gpu-session.sh with stand-ins for gpu-check.sh and gpu-profile.sh: what comes back (at most the
device's 8 files, the logs folded into logs.tar.gz), the seconds each script is given, and the exit code."""
import os
import re
import subprocess
import tarfile
import tempfile

from stubs import expect, finish

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
SCRIPT = os.path.join(ROOT, 'scripts', 'gpu-session.sh')

# Writes gpu-check.sh's eight files and records the deadline it was given; fails with CHECK_RC.
CHECK = '''#!/usr/bin/env bash
set -eu
mkdir -p "$1"
for f in summary.md build.log ctest.log sanitizers.log device.txt bench.json bench.log torch_rnn.json; do
  echo "$f" > "$1/$f"
done
echo "$RAGGED_DEADLINE $RAGGED_SKIP_SANITIZERS" > "$1/ctest.log"
exit "${CHECK_RC:-0}"
'''

# Writes gpu-profile.sh's files (and one detail file) and records its deadline.
PROFILE = '''#!/usr/bin/env bash
set -eu
mkdir -p "$1/detail"
echo "$RAGGED_DEADLINE" > "$1/profile.md"
echo csv > "$1/profile.csv"
echo log > "$1/profile.log"
echo sass > "$1/detail/case.sass.csv"
exit "${PROFILE_RC:-0}"
'''



def session(work, **env):
    out = os.path.join(work, 'out')
    stubs = {}
    for name, text in (('check.sh', CHECK), ('profile.sh', PROFILE)):
        stubs[name] = os.path.join(work, name)
        with open(stubs[name], 'w') as f:
            f.write(text)
    # None of the caller's RAGGED_* settings (a GPU session's RAGGED_PROFILE_SECONDS, say): the defaults are tested.
    full = {k: v for k, v in os.environ.items() if not k.startswith('RAGGED_')}
    full.update(RAGGED_CHECK_SCRIPT=stubs['check.sh'], RAGGED_PROFILE_SCRIPT=stubs['profile.sh'])
    full.update(env)
    run = subprocess.run(['bash', SCRIPT, out], cwd=ROOT, env=full, capture_output=True, text=True)
    return run, out


def read(path):
    with open(path) as f:
        return f.read().strip()


with tempfile.TemporaryDirectory() as work:
    run, out = session(work, RAGGED_DEADLINE='300', RAGGED_PROFILE_SECONDS='100')
    expect(run.returncode, 0, 'exit code, both passing')
    names = sorted(os.listdir(out))
    expect(names, ['bench.json', 'bench.log', 'ctest.log', 'logs.tar.gz', 'profile.md', 'summary.md',
                   'torch_rnn.json'], 'files that come back')
    expect(len(names) <= 8, True, 'at most 8 files')
    expect(read(os.path.join(out, 'ctest.log')), '200 1', 'the check: deadline less the profile, no sanitizers')
    profile_deadline = int(read(os.path.join(out, 'profile.md')))
    expect(270 <= profile_deadline <= 290, True, 'the profile: what the check left, less 10 s (%d)' % profile_deadline)
    with tarfile.open(os.path.join(out, 'logs.tar.gz')) as archive:
        folded = sorted(m.name for m in archive.getmembers() if m.isfile())
    expect(folded, ['build.log', 'device.txt', 'profile-run/detail/case.sass.csv', 'profile-run/profile.csv',
                    'profile-run/profile.log', 'sanitizers.log'], 'files folded into logs.tar.gz')

with tempfile.TemporaryDirectory() as work:
    run, out = session(work, RAGGED_DEADLINE='300', CHECK_RC='3', RAGGED_SKIP_SANITIZERS='0')
    expect(run.returncode, 3, "exit code, the check failing")
    expect(read(os.path.join(out, 'ctest.log')), '180 0', 'default profile seconds; sanitizers asked for')
    expect(os.path.exists(os.path.join(out, 'profile.md')), True, 'the profile runs after a failed check')

with tempfile.TemporaryDirectory() as work:
    run, out = session(work, RAGGED_DEADLINE='300', PROFILE_RC='1')
    expect(run.returncode, 1, 'exit code, the profile failing')

with tempfile.TemporaryDirectory() as work:
    # 35 s with 5 kept for the profile: under the 30 s a profile needs once 10 s are kept to fold.
    run, out = session(work, RAGGED_DEADLINE='35', RAGGED_PROFILE_SECONDS='5')
    expect(run.returncode, 1, 'exit code, no time left for the profile')
    # 35 - 10 less the seconds the stand-in check took (a second boundary may fall between the two clock reads).
    said = re.search(r'Not run: the check left (\d+) s of the call\.$', read(os.path.join(out, 'profile.md')))
    expect(said is not None and int(said.group(1)) in (24, 25), True, 'profile.md says why it did not run')

with tempfile.TemporaryDirectory() as work:
    run, out = session(work, RAGGED_DEADLINE='300', RAGGED_PROFILE_SECONDS='0')
    expect(run.returncode, 0, 'exit code, no profile asked for')
    expect(os.path.exists(os.path.join(out, 'profile.md')), False, 'no profile.md without a profile')
    expect(read(os.path.join(out, 'ctest.log')), '300 1', 'the check gets the whole deadline')

with tempfile.TemporaryDirectory() as work:
    run, out = session(work, RAGGED_DEADLINE='100', RAGGED_PROFILE_SECONDS='100')
    expect(run.returncode, 2, 'a profile budget that leaves the check nothing is refused')

with tempfile.TemporaryDirectory() as work:
    run, out = session(work, RAGGED_DEADLINE='0560')
    expect(run.returncode, 2, 'a number with a leading zero (octal to bash) is refused')

finish()

#!/usr/bin/env python3
"""scripts/gpu-profile.sh with stand-ins for ncu and ragged_bench: cases the deadline leaves out are listed in
profile.md without failing the call, a case that fails does fail it, and a missing ragged_bench whose build fails
leaves a profile.md that says so. Nothing here needs a GPU."""
import os
import subprocess
import tempfile

from stubs import executable, expect, finish

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
SCRIPT = os.path.join(ROOT, 'scripts', 'gpu-profile.sh')

# ncu: knows no metric by name (the launch__ attributes are kept anyway); a profiled case exits NCU_RC.
NCU = '''#!/usr/bin/env bash
if [ "${1:-}" = --query-metrics ]; then echo "Device metrics"; exit 0; fi
exit "${NCU_RC:-0}"
'''



def profile(work, with_bench=True, **env):
    """Runs gpu-profile.sh with the stand-ins; returns (exit code, profile.md)."""
    stubs = os.path.join(work, 'stubs')
    build = os.path.join(work, 'build')
    os.makedirs(stubs)
    os.makedirs(os.path.join(build, 'bench'))
    executable(os.path.join(stubs, 'ncu'), NCU)
    executable(os.path.join(stubs, 'cmake'), '#!/usr/bin/env bash\nexit 3\n')  # a build that fails
    executable(os.path.join(stubs, 'ninja'), '#!/usr/bin/env bash\nexit 3\n')
    if with_bench:
        executable(os.path.join(build, 'bench', 'ragged_bench'), '#!/usr/bin/env bash\nexit 0\n')
    out = os.path.join(work, 'out')
    full = {k: v for k, v in os.environ.items() if not k.startswith('RAGGED_')}
    full.update(PATH=stubs + os.pathsep + os.environ['PATH'], RAGGED_BUILD_DIR=build)
    full.update(env)
    run = subprocess.run(['bash', SCRIPT, out], cwd=ROOT, env=full, capture_output=True, text=True, timeout=300)
    path = os.path.join(out, 'profile.md')
    return run.returncode, open(path).read() if os.path.exists(path) else ''


with tempfile.TemporaryDirectory() as work:
    # 30 s: 15 kept to write up, under the 20 s a case needs, so every case is left out.
    rc, md = profile(work, RAGGED_DEADLINE='30')
    expect(rc, 0, 'exit code, every case left out by the deadline')
    expect('sum_tiny_d1 (deadline)' in md, True, 'profile.md lists the cases the deadline left out')

with tempfile.TemporaryDirectory() as work:
    rc, md = profile(work, RAGGED_DEADLINE='200', RAGGED_PROFILE_CASES='sum_tiny_d1 sum_tiny_d64', NCU_RC='2')
    expect(rc, 1, 'exit code, cases that failed')
    expect('sum_tiny_d1 (rc=2)' in md, True, 'profile.md lists the failed cases')

with tempfile.TemporaryDirectory() as work:
    rc, md = profile(work, with_bench=False, RAGGED_DEADLINE='200')
    expect(rc, 1, 'exit code, no ragged_bench and a failed build')
    expect('building ragged_bench failed' in md, True, 'profile.md says the build failed')

finish()

#!/usr/bin/env python3
"""tests/emu/run.sh's time budget (EMU_DEADLINE) with stand-in programs (EMU_PREBUILT=1): a run still going at
the deadline is stopped and reported "cut short", one not started "not run", neither a failure; an assertion
that failed before the cut still fails the run; the benchmarks job is stopped with every process under it."""
import os
import platform
import subprocess
import sys
import tempfile

from stubs import executable, expect, finish

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
SCRIPT = os.path.join(ROOT, 'tests', 'emu', 'run.sh')

if platform.machine() != 'x86_64':
    print('run.sh runs nothing on a machine that is not x86-64')
    sys.exit(77)

PASSES = 'echo "All tests passed (3 assertions in 1 test case)"\n'
FAILS = 'echo "x.cu:1: FAILED:"\necho "test cases: 1 | 1 failed"\nexit 1\n'
# As Catch2 does: its signal handler reports the SIGTERM as a failed assertion. The sleep runs in the
# background so that the trap runs at once. FAILED_BEFORE=1 reports a failed assertion first.
SLOW = '''[[ "${FAILED_BEFORE:-0}" == 1 ]] && echo "x.cu:1: FAILED:"
echo $$ >> "$(dirname "$0")/pids"
trap 'echo "x.cu:2: FAILED:"; echo "  SIGTERM - Termination request signal"; exit 1' TERM
sleep 60 & wait $!
'''


def run(programs, **env):
    """Writes the stand-ins named in `programs` into a fresh build folder and runs run.sh on them."""
    build = tempfile.mkdtemp()
    for name, text in programs.items():
        executable(os.path.join(build, 'emu_' + name), text)
    full = {k: v for k, v in os.environ.items() if not k.startswith(('EMU_', 'RAGGED_'))}
    full.update(EMU_PREBUILT='1')
    full.update(env)
    done = subprocess.run(['bash', SCRIPT, build], env=full, capture_output=True, text=True, timeout=120)
    return done, build


def lines(done):
    return done.stdout.strip().splitlines()


def line_of(done, run_name):
    return next((l for l in lines(done) if l.split()[:1] == [run_name]), '')


def alive(build):
    """The stand-ins' processes still running after run.sh returned."""
    path = os.path.join(build, 'pids')
    left = []
    for pid in (open(path).read().split() if os.path.exists(path) else []):
        try:
            os.kill(int(pid), 0)
            left.append(pid)
        except ProcessLookupError:
            pass
    return left


done, build = run({'test_dynamic': PASSES, 'test_offsets': SLOW, 'test_convert': SLOW},
                  EMU_RUNS='test_dynamic test_offsets test_convert', EMU_DEADLINE='5')
expect(done.returncode, 0, 'exit code, two runs cut short')
expect(line_of(done, 'test_dynamic').split()[1:2], ['passed'], 'the quick run')
expect('cut short by the time budget' in line_of(done, 'test_offsets'), True, 'test_offsets is cut short')
# test_convert starts when test_dynamic's slot frees (the queue looks once a second): on a loaded machine that
# may be past the deadline.
expect(any(said in line_of(done, 'test_convert') for said in ('cut short by the time budget', 'not run: the time')),
       True, 'test_convert is cut short or not run')
expect(lines(done)[-1:], ['emulated kernel tests: no failure; 2 of 3 runs cut short or not run by the time budget '
                          '(EMU_DEADLINE=5 s): test_offsets test_convert'], 'the last line names them')
expect(alive(build), [], 'no stand-in left running')

done, build = run({'test_dynamic': PASSES, 'test_offsets': SLOW},
                  EMU_RUNS='test_dynamic test_offsets', EMU_DEADLINE='0')
expect(done.returncode, 0, 'exit code, nothing run')
expect(line_of(done, 'test_offsets').endswith('not run: the time budget (EMU_DEADLINE) was spent'), True,
       'a run not started')

done, build = run({'test_dynamic': PASSES, 'test_offsets': 'export FAILED_BEFORE=1\n' + SLOW},
                  EMU_RUNS='test_dynamic test_offsets', EMU_DEADLINE='2')
expect(done.returncode, 1, 'exit code, an assertion failed before the cut')
expect(line_of(done, 'test_offsets').startswith('test_offsets           FAILED before the time budget'), True,
       'the run that failed before the cut')
expect(lines(done)[-1:], ['emulated kernel tests: FAILED (logs in %s/logs); cut short or not run by the time '
                          'budget: test_offsets' % build], 'the last line')

done, build = run({'test_dynamic': PASSES, 'test_offsets': FAILS}, EMU_RUNS='test_dynamic test_offsets')
expect(done.returncode, 1, 'exit code, a failure without a budget')
expect(line_of(done, 'test_offsets').split()[1:3], ['FAILED', 'rc=1'], 'the failing run')

done, build = run({'test_dynamic': PASSES}, EMU_RUNS='test_dynamic')
expect((done.returncode, lines(done)[-1:]), (0, ['emulated kernel tests: all passed']), 'no budget, all passed')

done, build = run({'test_dynamic': PASSES}, EMU_RUNS='test_dynamic', EMU_DEADLINE='0560')
expect(done.returncode, 2, 'a number with a leading zero (octal to bash) is refused')

# The benchmarks job: run_bench.sh, bench_verify.sh and the program they start (a stand-in that sleeps) are
# all stopped at the deadline.
done, build = run({'test_dynamic': PASSES, 'ragged_bench': SLOW}, EMU_RUNS='test_dynamic', EMU_WITH_BENCH='1',
                  EMU_DEADLINE='5')
expect(done.returncode, 0, 'exit code, the benchmarks cut short')
expect('cut short by the time budget' in line_of(done, 'benchmarks'), True, 'the benchmarks are cut short')
expect(len(open(os.path.join(build, 'pids')).read().split()) >= 1, True, 'the benchmark stand-in ran')
expect(alive(build), [], 'no benchmark process left running')

finish()

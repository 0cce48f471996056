#!/usr/bin/env python3
"""scripts/gpu-check.sh with stand-ins for cmake, ninja, ctest, nvidia-smi, compute-sanitizer, the GPU test
programs and ragged_bench: what the summary and the exit code say when the deadline stops runs, which environment
ctest sees, the order the sanitizer programs run in (gpu_test_large_tensors only when named), a report in a long log of a cut run, and the A/B runs a call
asks for. Each call takes a few seconds; nothing here needs a GPU."""
import json
import os
import re
import subprocess
import tempfile

from stubs import executable, expect, failures, finish

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
SCRIPT = os.path.join(ROOT, 'scripts', 'gpu-check.sh')

STUBS = {
    'cmake': 'exit 0\n',
    'ninja': 'exit 0\n',
    'nvidia-smi': 'echo "NVIDIA Stand-in"\n',
    'nvcc': 'echo "nvcc stand-in"\n',
    # ctest: the RAGGED_* variables it was given, one per line.
    'ctest': 'env | grep "^RAGGED_" | sort > "$STUB_DIR/ctest.env" || true\necho "100% tests passed, 0 tests failed out of 3"\n',
    # compute-sanitizer: logs "TOOL PROGRAM [SPEC]"; in the "report" mode gpu_test_a prints a long sanitizer
    # report and exits as a run the deadline stopped would (124); otherwise sleeps STUB_SLEEP and passes.
    'compute-sanitizer': r'''
tool="" program="" spec=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tool) tool=$2; shift 2 ;;
    --rng-seed) shift 2 ;;
    --*) case "$1" in --report-api-errors|--error-exitcode|--print-limit) shift 2 ;; *) shift ;; esac ;;
    *) if [ -z "$program" ]; then program=$(basename "$1"); else spec=$1; fi; shift ;;
  esac
done
echo "$tool $program $spec" >> "$STUB_DIR/sanitizer.order"
echo "========= COMPUTE-SANITIZER"
if [ "${STUB_MODE:-}" = report ] && [ "$program" = gpu_test_a ]; then
  for i in $(seq 1 6000); do echo "========= Invalid __global__ read of size 16 bytes at 0x$i in kernel"; done
  echo "========= ERROR SUMMARY: 6000 errors"
  exit 124
fi
sleep "${STUB_SLEEP:-0}"
echo "========= ERROR SUMMARY: 0 errors"
''',
}

# A GPU test program: lists two cases.
GPU_TEST = '''#!/usr/bin/env bash
if [ "${1:-}" = --list-test-names-only ]; then printf 'case one\\ncase two\\n'; exit 0; fi
exit 0
'''

# ragged_bench: writes an empty suite to --benchmark_out and logs the suite and any RAGGED_SEGMENT_* / CONVERT_*
# switch it was run with; exits STUB_BENCH_RC when that is set for an A/B run. --benchmark_list_tests lists two
# made-up names of the suite and logs the listing apart.
BENCH = r'''#!/usr/bin/env bash
if [ "${1:-}" = --benchmark_list_tests ]; then
  printf '%s/ragged/a\n%s/ragged/b\n' "$RAGGED_BENCH_SUITES" "$RAGGED_BENCH_SUITES"
  echo "suite=$RAGGED_BENCH_SUITES" >> "$STUB_DIR/bench.lists"
  exit 0
fi
out=""
for a in "$@"; do case "$a" in --benchmark_out=*) out=${a#--benchmark_out=} ;; esac; done
switches=$(env | grep -E "^RAGGED_(SEGMENT|CONVERT)_" | sort | tr '\n' ' ')
echo "suite=$RAGGED_BENCH_SUITES switches=$switches" >> "$STUB_DIR/bench.runs"
printf '{"context": {"copy_bytes_per_second": 1e12}, "benchmarks": [\n  ]\n}\n' > "$out"
if [ -n "$switches" ] && [ -n "${STUB_BENCH_RC:-}" ]; then exit "$STUB_BENCH_RC"; fi
exit 0
'''



def check(work, **env):
    """Runs gpu-check.sh with the stand-ins; returns (exit code, summary.md, OUTDIR)."""
    stub_dir = os.path.join(work, 'stubs')
    build = os.path.join(work, 'build')
    os.makedirs(stub_dir)
    os.makedirs(os.path.join(build, 'tests'))
    os.makedirs(os.path.join(build, 'bench'))
    for name, text in STUBS.items():
        executable(os.path.join(stub_dir, name), text)
    for name in ('gpu_test_a', 'gpu_test_b', 'gpu_test_large_tensors'):
        executable(os.path.join(build, 'tests', name), GPU_TEST)
    executable(os.path.join(build, 'bench', 'ragged_bench'), BENCH)
    out = os.path.join(work, 'out')
    full = {k: v for k, v in os.environ.items() if not k.startswith('RAGGED_')}
    full.update(PATH=stub_dir + os.pathsep + os.environ['PATH'], STUB_DIR=stub_dir, RAGGED_BUILD_DIR=build,
                RAGGED_SKIP_TORCH='1', RAGGED_SKIP_BENCH_VERIFY='1', RAGGED_SANITIZER_JOBS='1')
    full.update(env)
    run = subprocess.run(['bash', SCRIPT, out], cwd=ROOT, env=full, capture_output=True, text=True, timeout=300)
    summary_path = os.path.join(out, 'summary.md')
    summary = open(summary_path).read() if os.path.exists(summary_path) else ''
    if not summary:
        failures.append('no summary.md; stderr: ' + run.stderr[-2000:])
    return run.returncode, summary, out


def verdict(summary):
    m = re.search(r'^- verdict: (.*)$', summary, re.M)
    return m.group(1) if m else None


def read(path):
    return open(path).read() if os.path.exists(path) else ''


# 1. The call's own settings do not reach ctest; the sanitizer programs run in the order named; all pass.
with tempfile.TemporaryDirectory() as work:
    rc, summary, out = check(work, RAGGED_SKIP_BENCH='1', RAGGED_BENCH_SUITES='convert_gpu segment_gpu',
                             RAGGED_PROFILE_SECONDS='130', RAGGED_TEST_SCALE='0.5', RAGGED_DEADLINE='200',
                             RAGGED_SANITIZER_TOOLS='memcheck synccheck',
                             RAGGED_SANITIZER_PROGRAMS='gpu_test_b gpu_test_a')
    expect(rc, 0, 'exit code, everything passing')
    expect(verdict(summary), 'all passed', 'verdict, everything passing')
    expect(read(os.path.join(work, 'stubs', 'ctest.env')), 'RAGGED_TEST_SCALE=0.5\n',
           'the RAGGED_ variables ctest sees (RAGGED_TEST_* only)')
    # Each run's program (the --version call has none); the probe (the first program) comes first, then every
    # run of b before any of a.
    order = [line.split()[1] for line in read(os.path.join(work, 'stubs', 'sanitizer.order')).splitlines()
             if len(line.split()) > 1]
    runs = order[1:]
    expect(runs[:3], ['gpu_test_b'] * 3, 'sanitizer runs of the first named program first')
    expect(runs[3:], ['gpu_test_a'] * 3, 'then the second')
    expect('finished: memcheck gpu_test_b [case one] rc=0' in read(os.path.join(out, 'sanitizers.log')), True,
           'sanitizers.log says each run as it ends')

# 2. Runs the deadline leaves no time for: counted apart, not as failures, and not "all passed".
with tempfile.TemporaryDirectory() as work:
    rc, summary, out = check(work, RAGGED_SKIP_BENCH='1', RAGGED_SKIP_TESTS='1', RAGGED_DEADLINE='40',
                             STUB_SLEEP='3', RAGGED_SANITIZER_TOOLS='memcheck')
    expect(rc, 0, 'exit code, sanitizer runs left out by the deadline')
    state = verdict(summary) or ''
    expect(state.startswith('all passed; ') and 'not run or cut short (deadline)' in state, True,
           'verdict names the runs the deadline left out (%r)' % state)
    expect('not run (deadline)' in summary, True, 'a row says "not run (deadline)"')

# 3. A run the deadline stopped whose long log holds a sanitizer report fails (86), however long the log.
with tempfile.TemporaryDirectory() as work:
    rc, summary, out = check(work, RAGGED_SKIP_BENCH='1', RAGGED_SKIP_TESTS='1', RAGGED_DEADLINE='100',
                             STUB_MODE='report', RAGGED_SANITIZER_TOOLS='synccheck',
                             RAGGED_SANITIZER_TIMEOUT='150')
    expect(rc, 1, 'exit code, a report in a cut run')
    row = [line for line in summary.splitlines() if line.startswith('| synccheck gpu_test_a')]
    expect(len(row) == 1 and '| FAIL | 86 |' in row[0], True, 'the cut run with a report fails with 86 (%r)' % row)

# 4. A/B runs only for the suites the call times; an A/B run the deadline stopped is cut short, not failed.
with tempfile.TemporaryDirectory() as work:
    rc, summary, out = check(work, RAGGED_SKIP_TESTS='1', RAGGED_SKIP_SANITIZERS='1', RAGGED_DEADLINE='100',
                             RAGGED_BENCH_SUITES='planner', RAGGED_BENCH_TIMEOUT='150')
    expect(rc, 0, 'exit code, benchmarks of one suite')
    expect(read(os.path.join(work, 'stubs', 'bench.runs')), 'suite=planner switches=\n',
           'no A/B run of a suite the call did not time')
    merged = json.load(open(os.path.join(out, 'bench.json')))
    expect(merged.get('benchmarks'), [], 'bench.json merged')
    expect(merged['context'].get('expected_benchmarks'), ['planner/ragged/a', 'planner/ragged/b'],
           'the suite listed before its run, the list kept in bench.json')
with tempfile.TemporaryDirectory() as work:
    rc, summary, out = check(work, RAGGED_SKIP_TESTS='1', RAGGED_SKIP_SANITIZERS='1', RAGGED_DEADLINE='100',
                             RAGGED_BENCH_SUITES='segment_gpu', RAGGED_BENCH_TIMEOUT='150', STUB_BENCH_RC='124',
                             RAGGED_BENCH_AB='RAGGED_SEGMENT_STREAM=0')
    runs = read(os.path.join(work, 'stubs', 'bench.runs')).splitlines()
    expect(runs, ['suite=segment_gpu switches=', 'suite=segment_gpu switches=RAGGED_SEGMENT_STREAM=0 '],
           'the default run, then the A/B run')
    expect(read(os.path.join(work, 'stubs', 'bench.lists')), 'suite=segment_gpu\n', 'only the default run listed')
    expect(rc, 0, 'exit code, an A/B run stopped by the deadline')
    row = [line for line in summary.splitlines() if 'with RAGGED_SEGMENT_STREAM=0' in line]
    expect(len(row) == 1 and '| cut short (deadline) | 124 |' in row[0], True,
           'the stopped A/B run is "cut short (deadline)" (%r)' % row)

# 5. gpu_test_large_tensors runs under the sanitizers only when named.
for named, expected in ((None, ['gpu_test_a', 'gpu_test_b']), ('gpu_test_large_tensors', ['gpu_test_large_tensors'])):
    with tempfile.TemporaryDirectory() as work:
        env = dict(RAGGED_SKIP_BENCH='1', RAGGED_SKIP_TESTS='1', RAGGED_SANITIZER_TOOLS='synccheck')
        if named:
            env['RAGGED_SANITIZER_PROGRAMS'] = named
        rc, summary, out = check(work, **env)
        expect(rc, 0, 'exit code, sanitizers with RAGGED_SANITIZER_PROGRAMS=%r' % named)
        order = [line.split()[1] for line in read(os.path.join(work, 'stubs', 'sanitizer.order')).splitlines()
                 if len(line.split()) > 1]
        expect(sorted(set(order)), expected, 'the programs sanitized with RAGGED_SANITIZER_PROGRAMS=%r' % named)

finish()

#!/usr/bin/env python3
"""scripts/sass_waits.py on hand-made SASS: the control-word decoding and what counts as a wait on a load.

Each instruction is written as cuobjdump prints it, with a second 64-bit word whose bits 41-62 hold the
controls (write scoreboard at 46, read scoreboard at 49, wait mask at 52; 7 = no scoreboard)."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'scripts', 'sass_waits.py')
NONE = 7


def control(write_sb=NONE, read_sb=NONE, wait=(), stall=1):
    mask = sum(1 << sb for sb in wait)
    return (mask << 52) | (read_sb << 49) | (write_sb << 46) | (stall << 41)


def kernel(name, instructions):
    lines = ['\t\tFunction : %s' % name]
    for k, (text, word) in enumerate(instructions):
        lines.append('        /*%04x*/                   %s ;               /* 0x000fe20000000f00 */' % (16 * k, text))
        lines.append('                                                                 /* 0x%016x */' % word)
    return '\n'.join(lines)


def run(sass, *args):
    with tempfile.NamedTemporaryFile('w', suffix='.sass', delete=False) as f:
        f.write(sass)
        path = f.name
    try:
        out = subprocess.run([sys.executable, SCRIPT, path] + list(args), capture_output=True, text=True)
    finally:
        os.unlink(path)
    return out.returncode, out.stdout.split('\n')


def expect(got, want, what):
    if got != want:
        print('FAIL %s: got %r, want %r' % (what, got, want))
        return 1
    print('ok   %s: %s' % (what, got))
    return 0


def main():
    load = 'LDG.E.128 R4, desc[UR4][R2.64]'
    use = 'FADD R8, R4, R5'
    serial = kernel('serial_kernel', [
        (load, control(write_sb=2)),
        (use, control(wait=[2])),
        (load, control(write_sb=2)),
        (use, control(wait=[2])),
    ])
    in_flight = kernel('in_flight_kernel', [
        (load, control(write_sb=2)),
        ('@P0 ' + load, control(write_sb=3)),
        (load, control(write_sb=3)),
        (use, control(wait=[2, 3])),
    ])
    # A wait for a load's address registers to be read (its read scoreboard) is not a wait on its data; a wait on
    # a scoreboard last set by another instruction (a shared-memory load) is not one either.
    not_load_waits = kernel('address_kernel', [
        (load, control(write_sb=2, read_sb=4)),
        ('IADD3 R2, R2, 0x10, RZ', control(wait=[4])),
        ('LDS R9, [R0]', control(write_sb=5)),
        (use, control(wait=[5])),
        (use, control(wait=[2])),
    ])
    sass = '\n'.join([serial, in_flight, not_load_waits])
    failures = 0
    rc, out = run(sass, 'serial')
    failures += expect((rc, out[1].strip()), (0, 'LWLW'), 'a wait after each load')
    rc, out = run(sass, 'in_flight')
    failures += expect((rc, out[1].strip()), (0, 'LLLW'), 'predicated loads, one wait on two scoreboards')
    rc, out = run(sass, 'address')
    failures += expect((rc, out[1].strip()), (0, 'LW'), 'read-scoreboard and other waits not counted')
    rc, out = run(sass, 'in_flight', '--loads', 'LDS')
    failures += expect((rc, out[1].strip()), (0, '(no matching loads)'), '--loads picks the opcodes')
    rc, out = run(sass, 'address', '--trace')
    failures += expect([line.split()[1] for line in out[1:] if line.strip()], ['L', 'W'], '--trace lists them')
    rc, _ = run(sass, 'no_such_kernel')
    failures += expect(rc, 1, 'no kernel matched')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())

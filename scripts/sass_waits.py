#!/usr/bin/env python3
"""How many of a kernel's global loads are in flight before it waits: a reading of sm_90 SASS, no GPU needed.

    cuobjdump -sass kernels.o > kernels.sass          # see docs/gpu-runbook.md for cuobjdump without a GPU
    scripts/sass_waits.py kernels.sass 'SoftmaxForward, __nv_bfloat16, int, 8, false, false>'
    scripts/sass_waits.py kernels.sass KERNEL --loads LDG.E.128,LDG.E.U16 --trace

For each kernel whose demangled name contains every KERNEL argument, prints the loads (L) and the waits on their
results (W) in code order, e.g. `LWLWLWLW` (each load waited on before the next is issued) against `LLLLW` (all
four in flight). --trace lists the instructions instead. Code order is not execution order (branches, loops), so
read a sequence next to the source it comes from.

The scheduling controls of an sm_70+ instruction sit in bits 41-62 of the second 64-bit word that cuobjdump
prints after it: stall (4 bits), yield (1), write scoreboard (3), read scoreboard (3), wait mask (6), reuse (4),
scoreboard 7 meaning none. That layout is the one documented by the reverse-engineering work on Volta and later
(maxas / turingas, "Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking"), not by NVIDIA. A wait
counts here when its mask names the write scoreboard of a load matching --loads; waits for a load's address
registers to be read (its read scoreboard) are short and not counted.
"""
import argparse
import re
import subprocess
import sys

INSTRUCTION = re.compile(r'/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\* (0x[0-9a-f]+) \*/')
CONTROL_WORD = re.compile(r'^\s*/\* (0x[0-9a-f]+) \*/')
NO_SCOREBOARD = 7


def read_kernels(path):
    """[(mangled name, [(address, text, control word)])] from cuobjdump -sass output."""
    kernels, current = [], None
    lines = open(path).read().split('\n')
    i = 0
    while i < len(lines):
        line = lines[i]
        if 'Function :' in line:
            current = (line.split('Function :')[1].strip(), [])
            kernels.append(current)
        match = INSTRUCTION.search(line)
        if match and current is not None and i + 1 < len(lines):
            control = CONTROL_WORD.match(lines[i + 1])
            if control:
                current[1].append((int(match.group(1), 16), match.group(2), int(control.group(1), 16)))
                i += 1
        i += 1
    return kernels


def demangle(names):
    try:
        out = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True, text=True, check=True).stdout
        return out.rstrip('\n').split('\n')
    except (OSError, subprocess.CalledProcessError):
        return names


def opcode(text):
    words = text.split()
    return words[1] if words[0].startswith('@') and len(words) > 1 else words[0]


def trace(instructions, loads):
    """Yields (address, text, event): event 'L' for a matching load, 'W' for a wait on one, None otherwise."""
    setter = {}  # scoreboard -> (opcode, whether a read scoreboard) of the instruction that set it last
    for address, text, control in instructions:
        write_sb = (control >> 46) & 7
        read_sb = (control >> 49) & 7
        wait_mask = (control >> 52) & 0x3f
        op = opcode(text)
        waited = [sb for sb in range(6) if wait_mask >> sb & 1 and sb in setter]
        waits_on_load = any(not setter[sb][1] and setter[sb][0] in loads for sb in waited)
        for sb in waited:
            del setter[sb]
        if write_sb != NO_SCOREBOARD:
            setter[write_sb] = (op, False)
        if read_sb != NO_SCOREBOARD:
            setter[read_sb] = (op, True)
        if waits_on_load:
            yield address, text, 'W'
        if op in loads:
            yield address, text, 'L'
        elif not waits_on_load:
            yield address, text, None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('sass', help='cuobjdump -sass output')
    parser.add_argument('kernel', nargs='*', help='substrings of the demangled kernel name (all must match)')
    parser.add_argument('--loads', default='LDG.E.128,LDG.E.U16',
                        help='comma-separated load opcodes to follow (default: %(default)s)')
    parser.add_argument('--trace', action='store_true', help='list the loads and waits instead of a sequence')
    args = parser.parse_args()
    loads = set(args.loads.split(','))
    kernels = read_kernels(args.sass)
    names = demangle([name for name, _ in kernels])
    found = 0
    for (_, instructions), name in zip(kernels, names):
        if not all(k in name for k in args.kernel):
            continue
        found += 1
        events = list(trace(instructions, loads))
        print(name)
        if args.trace:
            for address, text, event in events:
                if event:
                    print('  %05x %s  %s' % (address, event, text))
        else:
            print('  ' + (''.join(e for _, _, e in events if e) or '(no matching loads)'))
    if not found:
        print('no kernel matches %r' % args.kernel, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())

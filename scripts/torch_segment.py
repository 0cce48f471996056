#!/usr/bin/env python3
"""ragged's CPU references of the segment ops (reference_segment.h) against PyTorch on the CPU.

    python3 scripts/torch_segment.py --build build --out torch_segment_cpu.json [--device cpu] [--seed N]

ragged is reached through build/bench/ragged_segment_io (bench/segment_io.cpp): this script writes raw inputs to a
temporary folder, the tool runs every segment reference on them (reductions, softmax, log-softmax and their
backward passes) and writes the results back. Correctness only, and only on the CPU: the GPU tests hold the
kernels to these references, so this check is what ties both to PyTorch.

Cases: float32, float16, bfloat16 x int32 / int64 offsets x inner 1, 3, 64, sequences of 0 to 1000 rows (empty
ones first, last and between), normal values (never 0), plus cases whose columns hold one NaN or two NaNs per
sequence; a few rows past offsets[batch], which the ops must leave alone. Oracles, in float64 on the same
(already rounded) inputs:
  sum, mean       torch.segment_reduce(axis=0, unsafe=False)
  max, min        torch.segment_reduce values; args from torch.max / torch.min(row, dim=0) per sequence, also
                  held against torch.argmax / argmin (first occurrence; a NaN wins, at its first index)
  softmax, log    torch.softmax / log_softmax(row, dim=0) per sequence
  backward        torch.autograd.grad through the same ops (max / min through torch.max / min, which route the
                  gradient to the index: segment_reduce's own backward splits it among ties, counted apart);
                  softmax also through aten's softmax backward applied to ragged's own forward output
Tolerance: the references accumulate in double and round once, so an output lies within half an ulp (of the dtype,
at the oracle's magnitude) of the float64 oracle: the check allows 1 ulp, 0 for max / min, the args and the sum,
max and min backward, plus a bound on the double arithmetic's own error where cancellation makes it count. The
softmax backward against autograd at x also allows the first-order effect of y being rounded to the dtype (ragged
takes y, not x). Empty sequences are held to the documented empty_value and arg -1, not to torch.
Writes a JSON report (--out) with every check's worst error in ulps; exit code 1 when a check fails, 2 on a usage
or tool error.
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile

import torch

from raw_tensors import read_raw, write_raw

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# Significand bits (the implicit one included) and the smallest normal exponent.
PRECISION = {"f32": (24, -126), "f16": (11, -14), "bf16": (8, -126)}
OFFSETS = {"i32": torch.int32, "i64": torch.int64}
LENGTHS = [0, 1, 2, 7, 0, 1, 33, 130, 5, 1000, 0, 64, 1, 0]
TRAILING_ROWS = 3  # rows past offsets[batch]: no output may touch them
UNWRITTEN = 7.5  # what the [nnz, inner] outputs hold before the call (exact in every dtype)
EMPTY_VALUES = (0.0, -3.25, float("-inf"))
DOUBLE_EPS = 2.0 ** -52
REDUCTIONS = ("sum", "mean", "max", "min")


def ulp(dtype_name, magnitude):
    """Spacing of the dtype at each magnitude (float64 tensor); the subnormal spacing below the normal range."""
    bits, emin = PRECISION[dtype_name]
    _, exponent = torch.frexp(magnitude)  # magnitude = m * 2^exponent, m in [0.5, 1)
    exponent = torch.where(magnitude == 0, torch.full_like(exponent, emin), torch.clamp(exponent - 1, min=emin))
    return torch.ldexp(torch.ones_like(magnitude), exponent - (bits - 1))


def rounding_error(dtype_name, value):
    """Largest error of rounding value to the dtype (to nearest): half an ulp, relative or subnormal."""
    bits, emin = PRECISION[dtype_name]
    return torch.maximum(value.abs() * 2.0 ** -bits, torch.full_like(value, 2.0 ** (emin - bits)))


def compare(got, want, dtype_name, tol_ulps, slack=0.0):
    """Worst |got - want| in ulps of the dtype at |want|; passes when every element is within tol_ulps ulps plus
    slack (a bound on the oracle's own error, per element) and NaN meets NaN."""
    got, want = got.double(), want.double()
    slack = torch.as_tensor(slack, dtype=torch.float64).expand_as(want)
    nan_mismatch = int((torch.isnan(got) != torch.isnan(want)).sum())
    both = ~torch.isnan(got) & ~torch.isnan(want)
    diff = torch.where(got == want, torch.zeros_like(got), (got - want).abs())[both]
    units = ulp(dtype_name, want.abs())[both]
    limit = tol_ulps * units + slack[both]
    within = bool((diff <= limit).all())
    worst = (diff / units).max().item() if diff.numel() else 0.0
    # How much of the allowance the worst element used (1 = at the limit; an exact check that misses: inf).
    used = torch.where(diff == 0, torch.zeros_like(diff), diff / limit)
    return {"worst_ulps": worst, "tol_ulps": tol_ulps, "worst_of_limit": used.max().item() if diff.numel() else 0.0,
            "nan_mismatch": nan_mismatch, "passed": within and nan_mismatch == 0}


def make_inputs(gen, dtype, inner, with_nan):
    offsets = [0] + list(itertools.accumulate(LENGTHS))
    total = offsets[-1]
    nnz = total + TRAILING_ROWS

    def nonzero_normal(*shape):
        t = torch.randn(*shape, generator=gen).to(dtype)
        return torch.where(t == 0, torch.ones_like(t), t)

    x = nonzero_normal(nnz, inner)
    if with_nan:
        # Column d % 3 == 1: one NaN per sequence; d % 3 == 2: two (the first one decides the arg); 0: none.
        for b, n in enumerate(LENGTHS):
            for d in range(inner):
                count = min(d % 3, n)
                rows = torch.randperm(n, generator=gen)[:count]
                x[offsets[b] + rows, d] = float("nan")
    return offsets, x, nonzero_normal(len(LENGTHS), inner), nonzero_normal(nnz, inner)


def run_ragged(tool, dtype_name, offsets_name, offsets, x, grad_reduce, grad_softmax, empty_value):
    batch, (nnz, inner) = len(offsets) - 1, x.shape
    dtype = DTYPES[dtype_name]
    with tempfile.TemporaryDirectory(prefix="ragged_segment_") as d:
        write_raw(os.path.join(d, "x.bin"), x)
        write_raw(os.path.join(d, "offsets.bin"), torch.tensor(offsets, dtype=OFFSETS[offsets_name]))
        write_raw(os.path.join(d, "grad_reduce.bin"), grad_reduce)
        write_raw(os.path.join(d, "grad_softmax.bin"), grad_softmax)
        meta = {"dtype": dtype_name, "offsets": offsets_name, "batch": batch, "nnz": nnz, "inner": inner,
                "empty_value": repr(empty_value), "unwritten": repr(UNWRITTEN)}
        with open(os.path.join(d, "meta.txt"), "w") as f:
            f.write("".join(f"{key} {value}\n" for key, value in meta.items()))
        proc = subprocess.run([tool, "reference", d], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{tool} reference failed (rc {proc.returncode}): {proc.stderr.strip()}")
        out = {}
        for op in REDUCTIONS:
            out[op] = read_raw(os.path.join(d, op + ".bin"), dtype, (batch, inner))
            out[op + "_backward"] = read_raw(os.path.join(d, op + "_backward.bin"), dtype, (nnz, inner))
        for op in ("max", "min"):
            out["arg" + op] = read_raw(os.path.join(d, "arg" + op + ".bin"), torch.int64, (batch, inner))
        for op in ("softmax", "log_softmax"):
            out[op] = read_raw(os.path.join(d, op + ".bin"), dtype, (nnz, inner))
            out[op + "_backward"] = read_raw(os.path.join(d, op + "_backward.bin"), dtype, (nnz, inner))
    return out


def check_case(tool, gen, dtype_name, offsets_name, inner, with_nan, empty_value):
    dtype = DTYPES[dtype_name]
    offsets, x, grad_reduce, grad_softmax = make_inputs(gen, dtype, inner, with_nan)
    got = run_ragged(tool, dtype_name, offsets_name, offsets, x, grad_reduce, grad_softmax, empty_value)
    batch, total = len(LENGTHS), offsets[-1]
    spans = [(offsets[b], offsets[b + 1]) for b in range(batch)]
    lengths = torch.tensor(LENGTHS)
    filled = lengths > 0
    off = torch.tensor(offsets)
    # Per element of the sequences: its sequence's length, and a sequence sum spread back onto its rows.
    n = lengths.repeat_interleave(lengths).double()[:, None]
    row_of = torch.arange(batch).repeat_interleave(lengths)

    def seq_sum(t):
        return torch.segment_reduce(t, "sum", offsets=off, axis=0, unsafe=False)

    x64 = x[:total].double().requires_grad_(True)
    g_red, g_sm = grad_reduce.double(), grad_softmax[:total].double()
    checks, info = {}, {}

    # Forward reductions (non-empty sequences; empty ones are held to empty_value below).
    with torch.no_grad():
        abs_sum = seq_sum(x64.abs())
    for op in REDUCTIONS:
        want = torch.segment_reduce(x64.detach(), op, offsets=off, axis=0, unsafe=False)
        if op in ("sum", "mean"):
            slack = lengths[:, None] * DOUBLE_EPS * abs_sum / (lengths[:, None].clamp(min=1) if op == "mean" else 1)
            checks[op] = compare(got[op][filled], want[filled], dtype_name, 1, slack[filled])
        else:
            checks[op] = compare(got[op][filled], want[filled], dtype_name, 0)
    # Args: torch.max / min per sequence, and torch.argmax / argmin, which should agree with them.
    for op, pick, arg_pick in (("max", torch.max, torch.argmax), ("min", torch.min, torch.argmin)):
        mismatch = disagree = 0
        for b, (s, e) in enumerate(spans):
            if e > s:
                index = pick(x[s:e], 0).indices
                mismatch += int((got["arg" + op][b] != index).sum())
                disagree += int((arg_pick(x[s:e], 0) != index).sum())
        checks["arg" + op] = {"mismatch": mismatch, "passed": mismatch == 0}
        info[f"torch_{op}_vs_arg{op}_disagree"] = disagree

    # Empty sequences: out = empty_value rounded to the dtype, arg = -1.
    empty_want = torch.tensor(empty_value, dtype=torch.float32).to(dtype).double()
    bad = 0
    for op in REDUCTIONS:
        v = got[op][~filled].double()
        bad += int((~((v == empty_want) | (torch.isnan(v) & bool(torch.isnan(empty_want))))).sum())
    for op in ("max", "min"):
        bad += int((got["arg" + op][~filled] != -1).sum())
    checks["empty_sequences"] = {"mismatch": bad, "passed": bad == 0}

    # Reduction backward through autograd: the sum and mean on segment_reduce, max / min on torch.max / min per
    # sequence (the gradient goes to the index).
    for op in ("sum", "mean"):
        y = torch.segment_reduce(x64, op, offsets=off, axis=0, unsafe=False)
        (want,) = torch.autograd.grad(y, x64, g_red)
        checks[op + "_backward"] = compare(got[op + "_backward"][:total], want, dtype_name, 1 if op == "mean" else 0)
    for op, pick in (("max", torch.max), ("min", torch.min)):
        y = torch.stack([pick(x64[s:e], 0).values for s, e in spans if e > s])
        (want,) = torch.autograd.grad(y, x64, g_red[filled])
        checks[op + "_backward"] = compare(got[op + "_backward"][:total], want, dtype_name, 0)
        # segment_reduce's own backward shares the gradient among equal values (several NaNs count as equal):
        # how many elements that changes. Not a check: ragged, like torch.max, gives it all to the arg.
        y = torch.segment_reduce(x64, op, offsets=off, axis=0, unsafe=False)
        (split,) = torch.autograd.grad(y, x64, g_red)
        info[f"{op}_backward_tie_split_elements"] = int((split != want).sum())

    # Softmax and log-softmax over each sequence's rows, per column; then their backward at x, and the same
    # backward formula (aten's) on ragged's own y.
    for op, fn, aten_backward in (("softmax", torch.softmax, torch.ops.aten._softmax_backward_data),
                                  ("log_softmax", torch.log_softmax, torch.ops.aten._log_softmax_backward_data)):
        log = op == "log_softmax"
        y = torch.cat([fn(x64[s:e], 0) for s, e in spans])
        y0 = y.detach()
        slack = (n + 4) * DOUBLE_EPS * ((1 + y0.abs()) if log else y0.abs())
        checks[op] = compare(got[op][:total], y0, dtype_name, 1, slack)
        (want,) = torch.autograd.grad(y, x64, g_sm)
        # ragged's backward takes y rounded to the dtype, off by at most ey per element; what that moves dx by, at
        # most (exactly, not to first order): log: exp(y) expm1(ey) |sum dy|; softmax: ey |dy - sum(dy y)| plus
        # (|y| + ey) sum(|dy| ey).
        ey = rounding_error(dtype_name, y0)
        if log:
            input_error = y0.exp() * torch.expm1(ey) * seq_sum(g_sm).abs()[row_of]
            slack = (n + 4) * DOUBLE_EPS * (g_sm.abs() + y0.exp() * seq_sum(g_sm.abs())[row_of])
        else:
            dot = seq_sum(g_sm * y0)[row_of]
            input_error = (g_sm - dot).abs() * ey + (y0.abs() + ey) * seq_sum(g_sm.abs() * ey)[row_of]
            slack = (n + 4) * DOUBLE_EPS * y0.abs() * (g_sm.abs() + seq_sum((g_sm * y0).abs())[row_of])
        checks[op + "_backward"] = compare(got[op + "_backward"][:total], want, dtype_name, 1, input_error + slack)
        y_ragged = got[op][:total].double()
        same_y = torch.cat([aten_backward(g_sm[s:e], y_ragged[s:e], 0, torch.float64) for s, e in spans])
        if log:
            slack = (n + 4) * DOUBLE_EPS * (g_sm.abs() + y_ragged.exp() * seq_sum(g_sm.abs())[row_of])
        else:
            slack = (n + 4) * DOUBLE_EPS * y_ragged.abs() * (g_sm.abs() + seq_sum((g_sm * y_ragged).abs())[row_of])
        checks[op + "_backward_same_y"] = compare(got[op + "_backward"][:total], same_y, dtype_name, 1, slack)

    # Rows past offsets[batch]: no [nnz, inner] output writes them.
    row_outputs = [op + "_backward" for op in REDUCTIONS] + ["softmax", "log_softmax", "softmax_backward",
                                                            "log_softmax_backward"]
    bad = sum(int((got[op][total:].double() != UNWRITTEN).sum()) for op in row_outputs)
    checks["rows_past_end_untouched"] = {"mismatch": bad, "passed": bad == 0}

    name = (f"segment_check/{dtype_name}/{offsets_name}/inner:{inner}/empty:{empty_value}"
            + ("/nan" if with_nan else ""))
    passed = all(c["passed"] for c in checks.values())
    return {"name": name, "dtype": dtype_name, "passed": passed, "checks": checks, "info": info}


def check_all(tool, seed):
    gen = torch.Generator().manual_seed(seed)
    cases = [(d, o, inner, False) for d in DTYPES for o in OFFSETS for inner in (1, 3, 64)]
    cases += [(d, o, inner, True) for d in DTYPES for o, inner in (("i32", 3), ("i64", 64))]
    results = []
    for i, (dtype_name, offsets_name, inner, with_nan) in enumerate(cases):
        r = check_case(tool, gen, dtype_name, offsets_name, inner, with_nan, EMPTY_VALUES[i % len(EMPTY_VALUES)])
        failed = [f"{k}: worst {c['worst_ulps']:.3g} ulps, {c['worst_of_limit']:.3g} x the allowance, "
                  f"{c['nan_mismatch']} NaN mismatches" if "worst_ulps" in c else f"{k}: {c['mismatch']} mismatches"
                  for k, c in r["checks"].items() if not c["passed"]]
        print(f"{r['name']}: {'pass' if r['passed'] else 'FAIL'}" + ("".join(f"\n  {f}" for f in failed)))
        results.append(r)
    return results


def worst_table(results):
    """Per check and dtype over every case: the worst error in ulps and the largest share of the allowance used."""
    table = {}
    for r in results:
        for check, c in r["checks"].items():
            if "worst_ulps" in c:
                ulps, used = table.setdefault(check, {}).get(r["dtype"], (0.0, 0.0))
                table[check][r["dtype"]] = (max(ulps, c["worst_ulps"]), max(used, c["worst_of_limit"]))
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build", help="build folder holding bench/ragged_segment_io")
    parser.add_argument("--out", required=True, help="JSON output path")
    parser.add_argument("--device", choices=("cpu",), default="cpu",
                        help="cpu only: torch on the CPU against ragged's CPU references")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the inputs (printed, to reproduce a failure)")
    args = parser.parse_args()
    tool = os.path.join(args.build, "bench", "ragged_segment_io")
    if not os.access(tool, os.X_OK):
        print(f"torch_segment.py: {tool} not found; build the bench targets first", file=sys.stderr)
        return 2
    # The tensors are small: more threads only contend (10x slower on a busy 2-core machine).
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, cpu (ragged: CPU reference), seed {args.seed}")
    try:
        results = check_all(tool, args.seed)
    except RuntimeError as error:
        print(f"torch_segment.py: {error}", file=sys.stderr)
        return 2
    table = worst_table(results)
    # Against autograd at x, the softmax backward passes show large ulps where dx cancels to about 0: there the
    # allowance is what rounding y to the dtype can do, and the share of it used is the number to read.
    print("worst error in ulps of the dtype at the oracle (share of the allowed error used):")
    for check, row in table.items():
        print(f"  {check:28s}" + "".join(f"  {d} {row[d][0]:8.3g} ({row[d][1]:.2f})" for d in DTYPES if d in row))
    split = sum(r["info"][f"{op}_backward_tie_split_elements"] for r in results for op in ("max", "min"))
    disagree = sum(r["info"][f"torch_{op}_vs_arg{op}_disagree"] for r in results for op in ("max", "min"))
    print(f"not checks: torch.max / min and torch.argmax / argmin disagree at {disagree} elements; "
          f"segment_reduce's own max / min backward, which splits the gradient among ties, differs from the "
          f"index-routed one at {split} elements")
    ok = all(r["passed"] for r in results)
    report = {"torch_version": torch.__version__, "device": "cpu (ragged: CPU reference)", "seed": args.seed,
              "executable": "scripts/torch_segment.py", "passed": ok, "worst_ulps": table, "cases": results}
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"{len(results)} cases: {'all passed' if ok else 'FAILED'}; wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

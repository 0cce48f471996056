#!/usr/bin/env python3
"""Attention against PyTorch on the GPU machine (issue 5): correctness of ragged's output against
torch.nn.functional.scaled_dot_product_attention on the same data, and SDPA timings on the benchmark shapes.

    python3 scripts/torch_attention.py --build build --out torch.json [--full] [--skip-timing]
    python3 scripts/torch_attention.py --build build --out OUTDIR/bench.json --merge   (what gpu-check.sh does)
    python3 scripts/torch_attention.py --build build --out torch_attention_cpu.json --device cpu

ragged is reached through build/bench/ragged_attention_io (bench/attention_io.cpp): this script writes raw
inputs to a temporary folder, the tool runs varlen_attention_forward and writes O and LSE back. The same tool
prints the benchmark cases (`cases`), so the timed shapes are exactly ragged_bench's attention/* cases.

Correctness (bf16, f16, f32; head_dim 64 and 128; causal and not; GQA 8/2; query lengths != key lengths):
  ref    float64 attention per sequence (bottom-right causal mask, as ragged and FlashAttention)
  naive  the same in the low precision as a naive kernel computes it: S and softmax in float32, P rounded to
         the dtype, P V accumulated in float32 and rounded
  sdpa   torch's scaled_dot_product_attention per sequence (explicit bottom-right mask when L_q != L_k)
  pass:  max|ragged - ref| <= 2 * max(max|naive - ref|, max|sdpa - ref|) + half an ulp of the dtype at max|ref|,
         LSE within 1e-4 * (1 + |ref|), and rows that see no key give O = 0, LSE = -inf.
Timing (bf16, heads 16, head_dim 128), names attention/<impl>/<case> as in ragged_bench, of the matrix the
environment picks there too (RAGGED_BENCH_ATTENTION=targets, as scripts/gpu-check.sh sets it, or
RAGGED_BENCH_FULL=1 / --full; bench/attention_cases.h):
  torch_jagged      SDPA on nested jagged tensors (flash backend), no padding
  torch_varlen      FlashAttention-2's varlen forward as PyTorch ships it (aten::_flash_attention_forward with
                    cu_seqlens, the op under torch.nn.attention.varlen), no padding, no nested-tensor wrapping;
                    the longest length is given from the host, as that kernel needs
  torch_dense       SDPA on equal-length dense input (flash backend), only for the 0%-padding cases
  torch_padded_mask SDPA on the padded batch with a boolean key-padding mask (torch picks the backend;
                    flash takes no mask)
With --device cpu (no GPU needed): torch on the CPU, ragged's CPU reference in place of the GPU op
(`ragged_attention_io reference`), correctness only. That holds the reference, which every GPU test is judged
against, to PyTorch's SDPA and runs this script's correctness path before a GPU run does.
Each iteration starts with a cold L2 (a write of twice its size), like ragged_bench; the median is reported.
Writes a Google-Benchmark-like JSON: "benchmarks" entries (real_time in us, TFLOP/s on real work, peak_bytes)
and a "torch_attention" section (torch version, correctness results). With --merge, an existing --out file
(ragged_bench's --benchmark_out JSON) gets the entries appended and the section added, so both sets of timings
sit in one file. The file is rewritten after the checks and after each case ("complete": false in the section
until the end), so a run cut short by a timeout keeps what it finished. Exit code 1 when a correctness check
fails, 2 on a usage or tool error.
"""
import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

from raw_tensors import read_raw, write_raw

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
MANTISSA_BITS = {"bf16": 8, "f16": 11, "f32": 24}


def ulp(x, dtype_name):
    """Spacing of the dtype at magnitude x (normal range)."""
    if x <= 0:
        return 0.0
    return 2.0 ** (math.floor(math.log2(x)) - (MANTISSA_BITS[dtype_name] - 1))


def run_ragged(tool, command, q, k, v, q_off, k_off, heads_q, heads_kv, dim, causal, scale, dtype_name):
    with tempfile.TemporaryDirectory() as d:
        for name, t in (("q", q), ("k", k), ("v", v)):
            write_raw(os.path.join(d, name + ".bin"), t)
        write_raw(os.path.join(d, "q_offsets.bin"), q_off.to(torch.int32))
        write_raw(os.path.join(d, "k_offsets.bin"), k_off.to(torch.int32))
        meta = {"dtype": dtype_name, "heads_q": heads_q, "heads_kv": heads_kv, "head_dim": dim,
                "batch": len(q_off) - 1, "causal": int(causal), "scale": repr(scale),
                "total_q": q.shape[0], "total_k": k.shape[0]}
        open(os.path.join(d, "meta.txt"), "w").write("".join(f"{key} {val}\n" for key, val in meta.items()))
        subprocess.run([tool, command, d], check=True)
        o = read_raw(os.path.join(d, "o.bin"), DTYPES[dtype_name], (q.shape[0], heads_q, dim))
        lse = read_raw(os.path.join(d, "lse.bin"), torch.float32, (q.shape[0], heads_q))
    return o, lse


def visible_mask(lq, lk, causal, device):
    """[lq, lk] bool: key j visible to query i (bottom-right aligned causal mask)."""
    if not causal:
        return torch.ones(lq, lk, dtype=torch.bool, device=device)
    i = torch.arange(lq, device=device)[:, None]
    j = torch.arange(lk, device=device)[None, :]
    return j <= i + (lk - lq)


def check_correctness(tool, device, command="run"):
    gen = torch.Generator(device="cpu").manual_seed(1234)
    q_lengths = [1, 17, 64, 65, 200, 0, 3, 129, 40]
    k_lengths = [1, 30, 64, 64, 180, 5, 0, 300, 13]
    results, ok = [], True
    for dtype_name in ("bf16", "f16", "f32"):
        dtype = DTYPES[dtype_name]
        for dim in (64, 128):
            for causal in (False, True):
                heads_q, heads_kv = 8, 2
                scale = 1.0 / math.sqrt(dim)
                tq, tk = sum(q_lengths), sum(k_lengths)
                q = torch.randn(tq, heads_q, dim, generator=gen).to(dtype)
                k = torch.randn(tk, heads_kv, dim, generator=gen).to(dtype)
                v = torch.randn(tk, heads_kv, dim, generator=gen).to(dtype)
                q_off = torch.tensor([0] + list(itertools.accumulate(q_lengths)), dtype=torch.int32)
                k_off = torch.tensor([0] + list(itertools.accumulate(k_lengths)), dtype=torch.int32)
                o, lse = run_ragged(tool, command, q, k, v, q_off, k_off, heads_q, heads_kv, dim, causal, scale,
                                    dtype_name)
                o, lse = o.to(device), lse.to(device)
                q, k, v = q.to(device), k.to(device), v.to(device)
                err = {"ragged": 0.0, "naive": 0.0, "sdpa": 0.0, "lse": 0.0}
                max_ref, empty_rows_ok = 0.0, True
                group = heads_q // heads_kv
                for b, (lq, lk) in enumerate(zip(q_lengths, k_lengths)):
                    if lq == 0:
                        continue
                    qs, ks = int(q_off[b]), int(k_off[b])
                    qb = q[qs:qs + lq].transpose(0, 1)                                       # [H, lq, D]
                    kb = k[ks:ks + lk].transpose(0, 1).repeat_interleave(group, dim=0)       # [H, lk, D]
                    vb = v[ks:ks + lk].transpose(0, 1).repeat_interleave(group, dim=0)
                    mask = visible_mask(lq, lk, causal, device)
                    seen = mask.any(dim=1)                                                   # [lq]
                    ob = o[qs:qs + lq].transpose(0, 1).double()
                    lb = lse[qs:qs + lq].transpose(0, 1).double()
                    # Rows that see no key: O = 0, LSE = -inf.
                    if (~seen).any():
                        empty_rows_ok &= bool((ob[:, ~seen] == 0).all()) and bool(torch.isneginf(lb[:, ~seen]).all())
                    if lk == 0 or not seen.any():
                        continue
                    s = (qb.double() @ kb.double().transpose(1, 2)) * scale
                    s = s.masked_fill(~mask, float("-inf"))
                    ref_lse = torch.logsumexp(s, dim=-1)
                    ref = torch.exp(s - ref_lse[..., None]).nan_to_num(0.0) @ vb.double()
                    s32 = (qb.float() @ kb.float().transpose(1, 2)) * scale
                    p = torch.softmax(s32.masked_fill(~mask, float("-inf")), dim=-1).nan_to_num(0.0).to(dtype)
                    naive = (p.float() @ vb.float()).to(dtype).double()
                    if causal and lq != lk:
                        sdpa = F.scaled_dot_product_attention(qb[None], kb[None], vb[None], attn_mask=mask, scale=scale)
                    else:
                        sdpa = F.scaled_dot_product_attention(qb[None], kb[None], vb[None], is_causal=causal, scale=scale)
                    sdpa = sdpa[0].double()
                    rows = seen
                    err["ragged"] = max(err["ragged"], (ob[:, rows] - ref[:, rows]).abs().max().item())
                    err["naive"] = max(err["naive"], (naive[:, rows] - ref[:, rows]).abs().max().item())
                    err["sdpa"] = max(err["sdpa"], (sdpa[:, rows] - ref[:, rows]).abs().max().item())
                    lse_err = ((lb[:, rows] - ref_lse[:, rows]).abs() / (1 + ref_lse[:, rows].abs())).max().item()
                    err["lse"] = max(err["lse"], lse_err)
                    max_ref = max(max_ref, ref[:, rows].abs().max().item())
                slack = 0.5 * ulp(max_ref, dtype_name) if dtype_name != "f32" else 8 * ulp(max_ref, "f32")
                limit = 2 * max(err["naive"], err["sdpa"]) + slack
                passed = err["ragged"] <= limit and err["lse"] <= 1e-4 and empty_rows_ok
                ok &= passed
                name = f"attention_check/{dtype_name}/dim:{dim}/causal:{int(causal)}/heads:{heads_q}:{heads_kv}"
                print(f"{name}: {'pass' if passed else 'FAIL'}  err ragged {err['ragged']:.3g}, naive {err['naive']:.3g},"
                      f" sdpa {err['sdpa']:.3g}, limit {limit:.3g}, lse rel {err['lse']:.3g}, empty rows ok {empty_rows_ok}")
                results.append({"name": name, "passed": passed, "err_ragged": err["ragged"], "err_naive": err["naive"],
                                "err_sdpa": err["sdpa"], "limit": limit, "lse_rel_err": err["lse"],
                                "empty_rows_ok": empty_rows_ok})
    return results, ok


class Timer:
    """Median kernel time with a cold L2 before every iteration, flushed as ragged_bench flushes it
    (bench/common/l2_flush.h; RAGGED_BENCH_FLUSH): by reading twice the L2 (clean, the default) or writing it."""

    def __init__(self, device):
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        self.flush = torch.zeros(2 * l2 // 4, dtype=torch.int32, device=device)
        self.dirty = os.environ.get("RAGGED_BENCH_FLUSH", "clean") == "dirty"

    def flush_l2(self):
        if self.dirty:
            self.flush.zero_()
        else:
            self.sink = self.flush.sum()

    def median_us(self, fn, min_seconds=0.3, min_iters=3, max_iters=50):
        fn()
        torch.cuda.synchronize()
        times, total = [], 0.0
        while len(times) < min_iters or (total < min_seconds and len(times) < max_iters):
            self.flush_l2()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            ms = start.elapsed_time(stop)
            times.append(ms)
            total += ms / 1e3
        times.sort()
        return 1e3 * times[len(times) // 2]


def time_cases(tool, device, full, save):
    """Times every case; save(entries) receives each case's entries as soon as they exist."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    env = dict(os.environ)
    if full:
        env["RAGGED_BENCH_FULL"] = "1"
    cases = json.loads(subprocess.run([tool, "cases"], check=True, capture_output=True, text=True, env=env).stdout)["cases"]
    timer = Timer(device)
    for c in cases:
        out = []
        lengths, H, D, L, B = c["lengths"], c["heads"], c["head_dim"], c["max_len"], c["batch"]
        causal, scale = c["causal"], 1.0 / math.sqrt(c["head_dim"])
        tokens = sum(lengths)
        padding = 1.0 - tokens / (B * L)

        def record(impl, fn):
            name = f"attention/{impl}/{c['name']}"
            try:
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated(device)
                torch.cuda.reset_peak_memory_stats(device)
                us = timer.median_us(fn)
                peak = torch.cuda.max_memory_allocated(device) - base + held_bytes
                entry = {"name": name, "run_type": "iteration", "real_time": us, "time_unit": "us",
                         "TFLOP/s": c["flops"] / (us * 1e-6) / 1e12, "padding_frac": padding, "tokens": tokens,
                         "batch": B, "peak_bytes": peak}
                print(f"{name}: {us:.1f} us, {entry['TFLOP/s']:.1f} TFLOP/s")
            except Exception as error:  # a backend that refuses the shape: report, keep going
                # The first line only: an operator missing for a backend appends its whole dispatch table.
                message = (str(error).strip().splitlines() or [type(error).__name__])[0]
                entry = {"name": name, "error_occurred": True, "error_message": message}
                print(f"{name}: error: {message}")
            out.append(entry)

        offsets = torch.tensor([0] + lengths, device=device).cumsum(0)
        values = [torch.rand(tokens, H, D, device=device, dtype=torch.bfloat16) * 2 - 1 for _ in range(3)]
        held_bytes = 3 * values[0].numel() * values[0].element_size()
        nested = [torch.nested.nested_tensor_from_jagged(t, offsets).transpose(1, 2) for t in values]
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            record("torch_jagged", lambda: F.scaled_dot_product_attention(*nested, is_causal=causal, scale=scale))
        # aten::_flash_attention_forward(q, k, v, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
        # return_debug_mask, *, scale) in PyTorch 2.11; [tokens, heads, dim] inputs, int32 cu_seqlens.
        cu_seqlens, longest = offsets.to(torch.int32), max(lengths)
        record("torch_varlen", lambda: torch.ops.aten._flash_attention_forward(
            *values, cu_seqlens, cu_seqlens, longest, longest, 0.0, causal, False, scale=scale))
        del nested, values, cu_seqlens
        padded = [torch.rand(B, L, H, D, device=device, dtype=torch.bfloat16) * 2 - 1 for _ in range(3)]
        held_bytes = 3 * padded[0].numel() * padded[0].element_size()
        dense = [t.transpose(1, 2) for t in padded]  # [B, H, L, D] views
        if c["padding_percent"] == 0:
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                record("torch_dense", lambda: F.scaled_dot_product_attention(*dense, is_causal=causal, scale=scale))
        keys = torch.arange(L, device=device)[None, :] < torch.tensor(lengths, device=device)[:, None]  # [B, L]
        mask = keys[:, None, None, :]
        if causal:
            mask = mask & torch.ones(L, L, dtype=torch.bool, device=device).tril()[None, None]
        held_bytes += mask.numel()
        record("torch_padded_mask", lambda: F.scaled_dot_product_attention(*dense, attn_mask=mask, scale=scale))
        del padded, dense, mask
        torch.cuda.empty_cache()
        save(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build", help="build folder holding bench/ragged_attention_io")
    parser.add_argument("--out", required=True, help="JSON output path")
    parser.add_argument("--full", action="store_true", help="the long benchmark matrix (RAGGED_BENCH_FULL)")
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--merge", action="store_true", help="append to an existing --out JSON instead of replacing it")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: torch on the CPU against ragged's CPU reference, correctness only")
    args = parser.parse_args()
    on_gpu = args.device == "cuda"
    tool = os.path.join(args.build, "bench", "ragged_attention_io")
    if not os.access(tool, os.X_OK):
        print(f"torch_attention.py: {tool} not found; build the bench targets first", file=sys.stderr)
        return 2
    if on_gpu and not torch.cuda.is_available():
        print("torch_attention.py: torch sees no CUDA device", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    device_name = torch.cuda.get_device_properties(device).name if on_gpu else "cpu (ragged: CPU reference)"
    print(f"torch {torch.__version__}, {device_name}")
    report = {"context": {}, "benchmarks": []}
    if args.merge and os.path.exists(args.out):
        try:
            with open(args.out) as f:
                report = json.load(f)
        except ValueError as error:  # a truncated benchmark file: leave it as it is, results go to the log
            print(f"torch_attention.py: {args.out} is not valid JSON ({error}); not merging, results go here")
            report = None
    section = {"torch_version": torch.__version__, "gpu": device_name, "cuda": torch.version.cuda,
               "executable": "scripts/torch_attention.py", "correctness": [], "complete": False}

    unsaved = []  # where --out cannot be merged into: printed at the end instead

    def save(entries=()):
        """Adds the entries and rewrites --out, so a run stopped by a timeout keeps what it finished."""
        if report is None:
            unsaved.extend(entries)
            if section["complete"]:
                print(json.dumps({"benchmarks": unsaved, "torch_attention": section}, indent=1))
            return
        report.setdefault("benchmarks", []).extend(entries)
        report["torch_attention"] = section
        with open(args.out + ".part", "w") as f:
            json.dump(report, f, indent=1)
        os.replace(args.out + ".part", args.out)

    section["correctness"], ok = check_correctness(tool, device, "run" if on_gpu else "reference")
    save()
    if on_gpu and not args.skip_timing:
        time_cases(tool, device, args.full, save)
    section["complete"] = True
    save()
    if report is None:
        return 1
    print(f"correctness: {'all passed' if ok else 'FAILED'}; wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

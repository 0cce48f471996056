#!/usr/bin/env python3
"""ragged's packed LSTM / GRU against torch.nn.LSTM / torch.nn.GRU on a PackedSequence (cuDNN), on the GPU.

  python3 scripts/torch_rnn.py --driver build/bench/ragged_rnn_driver --out OUT/torch_rnn.json [--quick]
  python3 scripts/torch_rnn.py --driver build/bench/ragged_rnn_driver --out torch_rnn_cpu.json --device cpu

1. Checks: for LSTM and GRU, 1 to 3 layers, one or two directions, proj_size, float32 / float16 / bfloat16,
   unsorted lengths: torch's outputs (pad_packed_sequence, caller's order) and final states against ragged's
   (ragged_rnn_driver, fed the same weights and inputs through raw files). TF32 is disabled for both.
   PyTorch refuses zero-length sequences in a PackedSequence, so the checks use lengths >= 1 (ragged's own
   tests cover zero lengths).
2. Timings, the cases of bench/bench_rnn.cu under the same names (one LSTM or GRU layer, input = hidden, batch
   16 / 64, hidden 256 / 1024, bfloat16, mean length 128 from uniform / lognormal / bimodal lengths), on the
   same lengths: the driver prints them (`ragged_rnn_driver --lengths`, bench/common/rnn_lengths.h). Plus
   lognormal lengths at MIDDLE_SHAPES (hidden 512, inside the issue's 2x region: bench_rnn.cu's full run has
   it) and at ELSEWHERE_SHAPES (outside the region, where ragged must not be slower).
   torch_packed (the layer on a prepared PackedSequence), torch_padded (the same layer on the padded batch) and
   ragged (rnn_forward through the driver, which times its own runs with CUDA events). PyTorch cannot pack a
   zero-length sequence, so torch runs without the case's empty ones (no tokens, no work); ragged runs them all.
   Median of --repeats, after WARMUP runs; each run is synchronised (cuDNN's packed path is host-bound at these
   sizes, so the host's launch time is part of what it costs).

With --device cpu (no GPU needed): torch runs on the CPU and the driver runs ragged's CPU reference (algo
reference), checks only. That holds the reference, which every GPU test is judged against, to PyTorch's own
LSTM / GRU, and runs this script's whole path (weight export, layouts, comparisons) before a GPU run does.

Writes one JSON file (--out) with the torch version, the device, every check with its max errors and verdict,
and every timing, rewritten after each entry ("complete": false until the end, so a run cut short by a timeout
keeps what it finished); exits 1 when a check fails or the driver fails.
"""
import argparse
import gc
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

from raw_tensors import read_raw, write_raw

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Max abs error allowed between ragged and cuDNN (both fp32-accumulated, h stored in the dtype): the outputs are
# bounded by 1 in magnitude (cell states by a few, judged relative to their size), so these are about 8 ulps at
# 1 for the low precisions, where a rounding that differs once propagates through the later steps.
TOLERANCE = {"float32": 2e-5, "float16": 8e-3, "bfloat16": 6e-2}
# (batch, hidden) of the timings outside the 2x region.
ELSEWHERE_SHAPES = ((256, 256), (256, 1024), (64, 128), (16, 2048))
# (batch, hidden) inside it between its ends (hidden 256 and 1024, every distribution): lognormal lengths only.
MIDDLE_SHAPES = ((16, 512), (64, 512))
# Untimed runs before each timed series: the first calls of a shape pick cuDNN's plan and warm its caches.
WARMUP = 3


def run_driver(driver, workdir, config):
    with open(os.path.join(workdir, "config.txt"), "w") as f:
        for key, value in config.items():
            f.write(f"{key} {value}\n")
    proc = subprocess.run([driver, workdir], capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"ok": False, "error": f"driver rc={proc.returncode}: {proc.stdout[-500:]} {proc.stderr[-500:]}"}
    return json.loads(lines[-1])


def make_module(mode, input_size, hidden, proj, layers, bidirectional, dtype, device):
    if mode == "lstm":
        module = torch.nn.LSTM(input_size, hidden, num_layers=layers, bidirectional=bidirectional, proj_size=proj)
    else:
        module = torch.nn.GRU(input_size, hidden, num_layers=layers, bidirectional=bidirectional)
    return module.to(device=device, dtype=DTYPES[dtype]).eval()


def export(module, workdir, mode, dtype, lengths, x_list, h0, c0, algo, repeats, projection="cublas"):
    """Writes the module's parameters, the inputs and the config for the driver."""
    for name, param in module.named_parameters():
        write_raw(os.path.join(workdir, name + ".bin"), param)
    write_raw(os.path.join(workdir, "lengths.bin"), torch.tensor(lengths, dtype=torch.int64))
    write_raw(os.path.join(workdir, "input.bin"), torch.cat(x_list, 0))
    for name in ("h0", "c0"):
        path = os.path.join(workdir, name + ".bin")
        if os.path.exists(path):
            os.remove(path)
    if h0 is not None:
        write_raw(os.path.join(workdir, "h0.bin"), h0)
    if c0 is not None:
        write_raw(os.path.join(workdir, "c0.bin"), c0)
    return {
        "mode": mode,
        "dtype": dtype,
        "input_size": module.input_size,
        "hidden_size": module.hidden_size,
        "proj_size": getattr(module, "proj_size", 0),
        "num_layers": module.num_layers,
        "bidirectional": int(module.bidirectional),
        "bias": int(module.bias),
        "algo": algo,
        "repeats": repeats,
        "projection": projection,
    }


def check_case(driver, workdir, mode, dtype, layers, bidirectional, proj, algo, rng, device, projection="cublas"):
    input_size, hidden = 24, 48
    lengths = [int(v) for v in rng.integers(1, 40, size=int(rng.integers(1, 24)))]
    module = make_module(mode, input_size, hidden, proj, layers, bidirectional, dtype, device)
    dirs = 2 if bidirectional else 1
    state = proj if proj > 0 else hidden
    x_list = [torch.randn(n, input_size, device=device, dtype=DTYPES[dtype]) for n in lengths]
    h0 = 0.5 * torch.randn(layers * dirs, len(lengths), state, device=device, dtype=DTYPES[dtype])
    c0 = 0.5 * torch.randn(layers * dirs, len(lengths), hidden, device=device, dtype=DTYPES[dtype])
    with torch.no_grad():
        packed = torch.nn.utils.rnn.pack_sequence(x_list, enforce_sorted=False)
        if mode == "lstm":
            out, (hn, cn) = module(packed, (h0, c0))
        else:
            out, hn = module(packed, h0)
            cn = None
        padded, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        want_out = torch.cat([padded[b, :n] for b, n in enumerate(lengths)], 0).float().cpu()

    config = export(module, workdir, mode, dtype, lengths, x_list, h0, c0 if mode == "lstm" else None, algo, 0,
                    projection)
    result = run_driver(driver, workdir, config)
    case = {"mode": mode, "dtype": dtype, "layers": layers, "bidirectional": bidirectional, "proj_size": proj,
            "algo": algo, "projection": projection, "batch": len(lengths), "tokens": sum(lengths)}
    if not result.get("ok"):
        case.update(ok=False, error=result.get("error"))
        return case
    got_out = read_raw(os.path.join(workdir, "output.bin"), DTYPES[dtype], tuple(want_out.shape)).float()
    errors = {"output": (got_out - want_out).abs().max().item()}
    got_hn = read_raw(os.path.join(workdir, "hn.bin"), DTYPES[dtype], tuple(hn.shape)).float()
    errors["hn"] = (got_hn - hn.float().cpu()).abs().max().item()
    if cn is not None:
        got_cn = read_raw(os.path.join(workdir, "cn.bin"), DTYPES[dtype], tuple(cn.shape)).float()
        # The cell state grows past 1: judge it relative to its size.
        errors["cn"] = ((got_cn - cn.float().cpu()).abs() / (1 + cn.float().cpu().abs())).max().item()
    ok = all(math.isfinite(e) and e <= TOLERANCE[dtype] for e in errors.values())
    case.update(ok=ok, algo_used=result.get("algo"), max_errors=errors, tolerance=TOLERANCE[dtype])
    return case


def case_lengths(driver, distribution, batch, mean):
    """The lengths bench_rnn.cu times for this case, from the driver (the same seeded generator)."""
    proc = subprocess.run([driver, "--lengths", distribution, str(batch), str(mean)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{driver} --lengths {distribution} {batch} {mean}: {proc.stderr.strip()}")
    return [int(v) for v in proc.stdout.split()]


def cuda_time_ms(fn, repeats):
    """Median of `repeats` synchronised runs after WARMUP ones, with the events made beforehand and the garbage
    collector held off, so that neither lands inside a timed run."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    collecting = gc.isenabled()
    gc.disable()
    try:
        for start, stop in events:
            start.record()
            fn()
            stop.record()
            stop.synchronize()
    finally:
        if collecting:
            gc.enable()
    times = sorted(start.elapsed_time(stop) for start, stop in events)
    return times[len(times) // 2]


# The mean length of every timing case (bench_rnn.cu's).
TIMING_MEAN = 128


def timing_tag(distribution, dtype, batch, hidden):
    """A timing case's name after <op>/<impl>/, as bench_rnn.cu names the same case."""
    return (f"{distribution}/dtype:{'bf16' if dtype == 'bfloat16' else 'f32'}/batch:{batch}/hidden:{hidden}"
            f"/mean:{TIMING_MEAN}")


def timing_cases():
    """(mode, distribution, batch, hidden) of every timing, in the order they run: the issue's 2x region
    (batch <= 64, hidden 256..1024) at its ends over three distributions and at hidden 512 over one, then the
    shapes outside it, where ragged must only never be slower: a large batch, a small and a large hidden size."""
    cases = []
    for mode in ("lstm", "gru"):
        cases += [(mode, distribution, batch, hidden) for distribution in ("uniform", "lognormal", "bimodal")
                  for batch in (16, 64) for hidden in (256, 1024)]
        cases += [(mode, "lognormal", batch, hidden) for batch, hidden in MIDDLE_SHAPES]
        cases += [(mode, "lognormal", batch, hidden) for batch, hidden in ELSEWHERE_SHAPES]
    return cases


def timing_case(driver, workdir, mode, distribution, batch, hidden, dtype, repeats):
    mean = TIMING_MEAN
    lengths = case_lengths(driver, distribution, batch, mean)
    module = make_module(mode, hidden, hidden, 0, 1, False, dtype, "cuda")
    x_list = [torch.rand(n, hidden, device="cuda", dtype=DTYPES[dtype]) * 2 - 1 for n in lengths]
    torch_list = [x for x in x_list if x.shape[0] > 0]
    tag = timing_tag(distribution, dtype, batch, hidden)
    entries = []
    with torch.no_grad():
        packed = torch.nn.utils.rnn.pack_sequence(torch_list, enforce_sorted=False)
        padded = torch.nn.utils.rnn.pad_sequence(torch_list, batch_first=False)
        entries.append({"name": f"rnn_{mode}/torch_packed/" + tag, "ms": cuda_time_ms(lambda: module(packed), repeats)})
        entries.append({"name": f"rnn_{mode}/torch_padded/" + tag, "ms": cuda_time_ms(lambda: module(padded), repeats)})
        entries.append({"name": f"rnn_{mode}/torch_pack_sequence/" + tag,
                        "ms": cuda_time_ms(lambda: torch.nn.utils.rnn.pack_sequence(torch_list, enforce_sorted=False),
                                           repeats)})
    config = export(module, workdir, mode, dtype, lengths, x_list, None, None, "auto", repeats)
    result = run_driver(driver, workdir, config)
    entry = {"name": f"rnn_{mode}/ragged/" + tag, "ok": bool(result.get("ok"))}
    if result.get("ok"):
        entry.update(ms=result["median_ms"], algo=result["algo"], workspace_bytes=result["workspace_bytes"])
    else:
        entry["error"] = result.get("error")
    entries.append(entry)
    tokens, steps = sum(lengths), max(lengths)
    for e in entries:
        e.update(tokens=tokens, padded_tokens=batch * steps, steps=steps)
    return entries


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--driver", required=True, help="path of the ragged_rnn_driver program")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--repeats", type=int, default=20, help="timed runs per implementation (median)")
    parser.add_argument("--quick", action="store_true", help="fewer checks, no timings")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: torch on the CPU against ragged's CPU reference, checks only")
    args = parser.parse_args()
    on_gpu = args.device == "cuda"
    algos = ("per_step", "persistent", "persistent_streamed") if on_gpu else ("reference",)

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    report = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version() if on_gpu else None,
              "device": torch.cuda.get_device_name() if on_gpu else "cpu (ragged: CPU reference)",
              "checks": [], "timings": []}
    def failures():
        return [c for c in report["checks"] if not c.get("ok")] + [t for t in report["timings"] if t.get("ok") is False]

    def add(section, entries, complete=False):
        """Appends the entries and rewrites --out, so a run stopped by a timeout keeps what it finished."""
        report[section] += entries
        for e in entries:
            if section == "checks":
                print(("ok  " if e.get("ok") else "FAIL"), e["mode"], e["dtype"], "layers", e["layers"],
                      "bidir" if e["bidirectional"] else "uni", "proj", e["proj_size"], e["algo"], e["projection"],
                      e.get("max_errors", e.get("error")))
            else:
                print(f"{e['name']:70s} {e.get('ms', float('nan')):10.3f} ms  {e.get('algo', '')}")
        report["ok"] = not failures()
        report["complete"] = complete
        with open(args.out + ".part", "w") as f:
            json.dump(report, f, indent=1)
        os.replace(args.out + ".part", args.out)

    # What the run means to time, on disk before the first check: summarize_targets.py counts a planned timing
    # that a timeout left out as "no data".
    if on_gpu and not args.quick:
        report["planned_timings"] = [f"rnn_{mode}/ragged/" + timing_tag(distribution, "bfloat16", batch, hidden)
                                     for mode, distribution, batch, hidden in timing_cases()]
    add("checks", [])
    with tempfile.TemporaryDirectory(prefix="ragged_rnn_") as workdir:
        for dtype in ("float32", "float16", "bfloat16"):
            for mode in ("lstm", "gru"):
                for layers, bidirectional in ((1, False), (2, True), (3, False)) if not args.quick else ((2, True),):
                    for algo in algos:
                        add("checks", [check_case(args.driver, workdir, mode, dtype, layers, bidirectional, 0, algo,
                                                  rng, args.device)])
            add("checks", [check_case(args.driver, workdir, "lstm", dtype, 2, True, 16,
                                      "auto" if on_gpu else "reference", rng, args.device)])
            if on_gpu:  # ragged's batch-invariant projection GEMM instead of cuBLAS
                for mode in ("lstm", "gru"):
                    add("checks", [check_case(args.driver, workdir, mode, dtype, 2, True, 0, "auto", rng, args.device,
                                              projection="invariant")])
        if on_gpu and not args.quick:
            for mode, distribution, batch, hidden in timing_cases():
                add("timings", timing_case(args.driver, workdir, mode, distribution, batch, hidden, "bfloat16",
                                           args.repeats))
    add("checks", [], complete=True)
    failed = failures()
    print(f"torch_rnn: {len(failed)} failure(s); wrote {args.out}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# ragged's CPU references, the oracles every GPU test is judged by, held against PyTorch on the CPU: LSTM / GRU
# (scripts/torch_rnn.py --device cpu: torch.nn.LSTM / GRU on a PackedSequence against ragged_rnn_driver's
# reference mode), attention (scripts/torch_attention.py --device cpu: SDPA and a float64 attention against
# ragged_attention_io's reference mode) and the segment reductions / softmax with their backward passes
# (scripts/torch_segment.py: torch.segment_reduce, max / argmax, softmax and autograd against ragged_segment_io's
# reference mode). The same runs check the scripts' export and comparison code before a GPU run depends on them.
# Needs a python3 that imports torch (and numpy); exits 77 (skipped) without one.
#   check_torch_reference.sh BUILD_DIR WORKDIR     (run from the repository root; RAGGED_PYTHON picks python)
set -euo pipefail
build=$1
work=$2
python=${RAGGED_PYTHON:-python3}
if ! "$python" -c "import numpy, torch" >/dev/null 2>&1; then
  echo "SKIP: $python cannot import torch and numpy"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
rc=0
"$python" scripts/torch_rnn.py --driver "$build/bench/ragged_rnn_driver" --out "$work/torch_rnn_cpu.json" \
  --device cpu || rc=1
"$python" scripts/torch_attention.py --build "$build" --out "$work/torch_attention_cpu.json" --device cpu || rc=1
"$python" scripts/torch_segment.py --build "$build" --out "$work/torch_segment_cpu.json" --device cpu || rc=1
exit "$rc"

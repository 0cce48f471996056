"""The file exchange with ragged's I/O tools (bench/common/raw_files.h): tensors as raw little-endian arrays,
dense and row-major, with no header; the reader is told the dtype and shape and checks the size."""
import ctypes
import math

import torch


def write_raw(path, tensor):
    t = tensor.detach().contiguous().cpu()
    with open(path, "wb") as f:
        f.write(ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b"")


def read_raw(path, dtype, shape):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    expected = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    if len(data) != expected:
        raise RuntimeError(f"{path} holds {len(data)} bytes, expected {expected} for {tuple(shape)} {dtype}")
    if not data:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(data, dtype=dtype).reshape(shape).clone()

"""Shared by the PyTorch peers that load what a C++ benchmark dumped (torch_long_short.py,
torch_lm.py, torch_vision.py): the safetensors reader, the format's few lines, so that no peer
depends on lsformer's code or on a safetensors package.

Imports torch: a peer imports this only after setting OPENBLAS_NUM_THREADS (bench_common's
peer flags), which OpenBLAS reads when it loads.
"""
import json
import struct

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
          "U8": torch.uint8, "BOOL": torch.bool}


def read_safetensors(path):
    """(tensors by name, metadata): 8-byte little-endian header length, JSON header, raw data."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        buf = bytearray(raw[8 + n + b:8 + n + end])
        dtype = DTYPES[e["dtype"]]
        out[name] = torch.frombuffer(buf, dtype=dtype).reshape(e["shape"]) if buf else torch.zeros(e["shape"], dtype=dtype)
    return out, meta

#!/usr/bin/env python3
"""Writes golden.safetensors and golden.json: tiny bitsandbytes 4-bit
checkpoints as transformers saves them, with the standard library only.

Layout (bitsandbytes functional.py and backends/default/ops.py): codes over
the flattened (rows, cols) weight, two a byte, the even index in the high
nibble, an odd count padded; one absmax per blocksize consecutive weights of
that order (the last block short); w = table[q] * absmax. Double quant:
absmax = nested_quant_map[q] * nested_absmax[block // nested_blocksize]
+ nested_offset, in float32. The non-tensor settings are json.dumps of
QuantState.as_dict's dict, stored as a U8 tensor. Tables: NF4's float32
constants; FP4 = [0, .0625, 8, 12, 4, 6, 2, 3, -0, ...] / 12 in float32.
Absmax are powers of two and maps simple, so float64 products here are the
float32 ones.

Run: python3 golden.py (from this directory).
"""
import json
import struct


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


NF4 = [f32(x) for x in [
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0]]
FP4 = [f32(x / 12) for x in [0, 0.0625, 8, 12, 4, 6, 2, 3, -0.0, -0.0625, -8, -12, -4, -6, -2, -3]]
TABLE = {"nf4": NF4, "fp4": FP4}

tensors = {}
want = {}


def floats(xs):
    return b"".join(struct.pack("<f", x) for x in xs)


def module(name, quant, rows, cols, blocksize, nested=None, seed=0):
    n = rows * cols
    codes = [(seed + 5 * i + i * i // 3) % 16 for i in range(n)]
    padded = codes + [0] * (n % 2)
    weight = bytes(padded[i] << 4 | padded[i + 1] for i in range(0, len(padded), 2))
    blocks = (n + blocksize - 1) // blocksize
    key = name + ".weight"
    state = {"quant_type": quant, "blocksize": blocksize, "dtype": "bfloat16", "shape": [rows, cols]}
    if nested is None:
        absmax = [2.0 ** ((b + seed) % 5 - 2) for b in range(blocks)]
        tensors[key + ".absmax"] = ("F32", [blocks], floats(absmax))
    else:
        nb, offset = nested
        qmap = [(k - 128) / 64 for k in range(256)]  # any map: the file carries it
        qabs = [(40 + 37 * b) % 256 for b in range(blocks)]
        nabs = [2.0 ** -(c % 3) for c in range((blocks + nb - 1) // nb)]
        absmax = [f32(qmap[q] * nabs[b // nb]) + offset for b, q in enumerate(qabs)]
        tensors[key + ".absmax"] = ("U8", [blocks], bytes(qabs))
        tensors[key + ".nested_absmax"] = ("F32", [len(nabs)], floats(nabs))
        tensors[key + ".nested_quant_map"] = ("F32", [256], floats(qmap))
        state.update({"nested_blocksize": nb, "nested_dtype": "float32", "nested_offset": offset})
    tensors[key] = ("U8", [len(weight), 1], weight)
    tensors[key + ".quant_map"] = ("F32", [16], floats(TABLE[quant]))
    js = json.dumps(state).encode()
    tensors[key + ".quant_state.bitsandbytes__" + quant] = ("U8", [len(js)], js)
    want[name] = {"rows": rows, "cols": cols, "state": js.decode(),
                  "w": [f32(TABLE[quant][q] * absmax[i // blocksize]) for i, q in enumerate(codes)]}


module("model.layers.0.self_attn.q_proj", "nf4", 2, 64, 64)
module("model.layers.0.self_attn.k_proj", "fp4", 3, 32, 64, seed=1)  # blocks straddle rows
module("model.layers.0.mlp.up_proj", "nf4", 3, 5, 64, seed=2)  # odd count, one short block
module("model.layers.0.mlp.down_proj", "nf4", 4, 96, 64, nested=(2, 0.25), seed=3)  # 6 blocks, 3 nested
module("model.layers.1.mlp.gate_proj", "fp4", 2, 128, 128, nested=(256, -0.125), seed=4)

header, data = {}, b""
for name in sorted(tensors):
    dtype, shape, raw = tensors[name]
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open("golden.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + data)
with open("golden.json", "w") as f:
    json.dump(want, f, indent=1, sort_keys=True)
    f.write("\n")

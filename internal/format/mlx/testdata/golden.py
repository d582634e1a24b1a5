#!/usr/bin/env python3
"""Writes golden.safetensors and golden.json: tiny MLX affine checkpoints
built from MLX's documented layout with the standard library only.

Layout (mlx/backend/cpu/quantized.cpp, quantize): for each group, codes are
OR-ed into an integer at shift k*bits for the k-th code of a pack; packs are
32/bits codes in one uint32 for bits 2, 4, 8, and 8 codes in 3 bytes (3-bit),
8 in 5 bytes (5-bit), 4 in 3 bytes (6-bit), written byte by byte, low byte
first. The weight tensor is that byte stream viewed as U32. A module's
dequantized weight is scales[r, g] * q + biases[r, g]. Scales are powers of
two and biases quarters, so the float64 values below are exact in float32.

Run: python3 golden.py (from this directory).
"""
import json
import struct

PACK = {2: (16, 4), 3: (8, 3), 4: (8, 4), 5: (8, 5), 6: (4, 3), 8: (4, 4)}  # codes, bytes a pack


def pack_row(codes, bits):
    n, nbytes = PACK[bits]
    out = b""
    for i in range(0, len(codes), n):
        v = 0
        for k, q in enumerate(codes[i:i + n]):
            v |= q << (k * bits)
        out += v.to_bytes(nbytes, "little")
    return out


def f16(xs):
    return b"".join(struct.pack("<e", x) for x in xs)


def bf16(xs):
    return b"".join(struct.pack("<f", x)[2:] for x in xs)


ENC = {"F16": f16, "BF16": bf16}

tensors = {}  # name -> (dtype, shape, bytes)
want = {}  # module -> flat dequantized rows


def module(name, bits, group, rows, cols, dtype, experts=None, seed=0):
    """Adds one module (or a stack of experts) and its expected values."""
    stack = experts or 1
    w, s, b = b"", [], []
    for e in range(stack):
        vals = []
        for r in range(rows):
            codes = [(seed + 7 * e + 5 * r + 3 * c + c * c) % (1 << bits) for c in range(cols)]
            w += pack_row(codes, bits)
            for g in range(cols // group):
                sc = 2.0 ** -((r + g + e) % 4)
                bi = -0.25 * ((3 * r + g + e + seed) % 9)
                s.append(sc)
                b.append(bi)
                vals += [sc * q + bi for q in codes[g * group:(g + 1) * group]]
        key = name if experts is None else name.replace("switch_mlp", "experts.%d" % e)
        want[key] = {"rows": rows, "cols": cols, "w": vals}
    lead = [] if experts is None else [experts]
    tensors[name + ".weight"] = ("U32", lead + [rows, cols * bits // 32], w)
    tensors[name + ".scales"] = (dtype, lead + [rows, cols // group], ENC[dtype](s))
    tensors[name + ".biases"] = (dtype, lead + [rows, cols // group], ENC[dtype](b))


config = {"group_size": 32, "bits": 4, "mode": "affine", "lm_head": False}
module("model.layers.0.self_attn.q_proj", 4, 32, 2, 64, "F16")
module("model.embed_tokens", 4, 32, 3, 32, "BF16", seed=1)
for bits in (2, 3, 5, 6, 8):
    path = "model.layers.%d.mlp.down_proj" % bits
    config[path] = {"bits": bits, "group_size": 32}
    module(path, bits, 32, 2, 64, "F16", seed=bits)
config["model.layers.1.mlp.switch_mlp.up_proj"] = {"bits": 3, "group_size": 64}
module("model.layers.1.mlp.switch_mlp.gate_proj", 4, 32, 2, 64, "BF16", experts=3)
module("model.layers.1.mlp.switch_mlp.up_proj", 3, 64, 2, 64, "BF16", experts=3, seed=2)

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
    json.dump({"quantization": config, "matrices": want}, f, indent=1, sort_keys=True)
    f.write("\n")

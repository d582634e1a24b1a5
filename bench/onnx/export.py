"""Export a logitscope checkpoint (Qwen2 or Llama) to ONNX for onnxruntime-web.

    python3 bench/onnx/export.py MODEL_DIR OUT_DIR

MODEL_DIR is a Hugging Face checkpoint directory as logitscope writes and
reads it (config.json, model.safetensors or shards with an index; bf16,
f16 or f32). OUT_DIR receives prefill.onnx (input_ids -> logits and every
layer's keys and values) and decode.onnx (input_ids and the cache so far
-> logits and the grown cache): two graphs, because a cache of length 0
is a zero-sized tensor that WebGPU providers handle badly. Both are the
model as transformers' modeling_qwen2.py / modeling_llama.py define it
(RMSNorm in float32, NeoX rotate_half RoPE, GQA, SiLU-gated MLP, q/k/v
biases when the checkpoint has them), written in plain PyTorch with the
checkpoint's own weights in float32, exported by torch.onnx.export
(Debian's python3-torch and python3-onnx). Other architectures, rope
scaling and sliding windows are refused. Weights above 2 GB (a protobuf
limit) are refused too: the benchmark's small and mid presets fit.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = data[lo:hi]
        dtype, shape = info["dtype"], info["shape"]
        if dtype == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif dtype == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dtype == "F32":
            a = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        else:
            sys.exit(f"{path}: tensor {name}: dtype {dtype} is not bf16, f16 or f32")
        out[name] = torch.from_numpy(a.reshape(shape).copy())
    return out


def read_weights(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for name in files:
        w.update(read_safetensors(os.path.join(model_dir, name)))
    return w


class Model(torch.nn.Module):
    def __init__(self, cfg, w):
        super().__init__()
        arch = cfg["architectures"][0]
        if arch not in ("Qwen2ForCausalLM", "LlamaForCausalLM"):
            sys.exit(f"config.json: architectures {arch}: only Qwen2ForCausalLM and LlamaForCausalLM export")
        for key in ("rope_scaling", "rope_parameters"):
            if cfg.get(key) and (cfg[key] or {}).get("rope_type", cfg[key].get("type", "default")) != "default":
                sys.exit(f"config.json: {key} {cfg[key]}: scaled RoPE does not export")
        if cfg.get("use_sliding_window"):
            sys.exit("config.json: use_sliding_window: sliding windows do not export")
        if cfg.get("hidden_act", "silu") != "silu":
            sys.exit(f"config.json: hidden_act {cfg['hidden_act']}: only silu")
        self.layers = cfg["num_hidden_layers"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads", self.heads)
        self.head_dim = cfg.get("head_dim") or cfg["hidden_size"] // self.heads
        self.eps = cfg["rms_norm_eps"]
        self.theta = cfg.get("rope_theta", 10000.0)
        self.w = {k: torch.nn.Parameter(v, requires_grad=False) for k, v in w.items()}
        for i, (k, v) in enumerate(self.w.items()):
            self.register_parameter(f"w{i}", v)
        self.head = self.w.get("lm_head.weight", self.w["model.embed_tokens.weight"])
        if cfg.get("tie_word_embeddings") is False and "lm_head.weight" not in self.w:
            sys.exit("config.json: tie_word_embeddings false but no lm_head.weight")

    def norm(self, x, name):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w[name]

    def linear(self, x, name):
        y = x @ self.w[name + ".weight"].t()
        b = self.w.get(name + ".bias")
        return y if b is None else y + b

    def forward(self, input_ids, *past):
        t = input_ids.shape[1]
        p = past[0].shape[2] if past else 0
        x = self.w["model.embed_tokens.weight"][input_ids[0]].unsqueeze(0)  # (1,T,D)
        pos = (torch.arange(t) + p).float()
        inv = 1.0 / (self.theta ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        freqs = pos[:, None] * inv[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos(), emb.sin()  # (T, hd)
        key_pos = torch.arange(t + p)[None, :]
        # (T, P+T): -1e9 on the future. Not torch.where with Python floats,
        # which exports double constants that make the softmax double.
        mask = (key_pos > (torch.arange(t)[:, None] + p)).float() * -1e9
        half = self.head_dim // 2

        def rope(v):
            rot = torch.cat([-v[..., half:], v[..., :half]], dim=-1)
            return v * cos + rot * sin

        presents = []
        for l in range(self.layers):
            pre = f"model.layers.{l}."
            h = self.norm(x, pre + "input_layernorm.weight")
            q = self.linear(h, pre + "self_attn.q_proj").view(1, t, self.heads, self.head_dim).transpose(1, 2)
            k = self.linear(h, pre + "self_attn.k_proj").view(1, t, self.kv_heads, self.head_dim).transpose(1, 2)
            v = self.linear(h, pre + "self_attn.v_proj").view(1, t, self.kv_heads, self.head_dim).transpose(1, 2)
            q, k = rope(q), rope(k)
            if past:
                k = torch.cat([past[2 * l], k], dim=2)
                v = torch.cat([past[2 * l + 1], v], dim=2)
            presents += [k, v]
            # GQA: each KV head serves heads/kv_heads query heads in a row.
            # expand and reshape, not repeat_interleave, whose export bakes
            # the traced length into the graph.
            rep = self.heads // self.kv_heads
            kk = k.unsqueeze(2).expand(-1, -1, rep, -1, -1).reshape(1, self.heads, -1, self.head_dim)
            vv = v.unsqueeze(2).expand(-1, -1, rep, -1, -1).reshape(1, self.heads, -1, self.head_dim)
            att = (q @ kk.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim)) + mask
            o = (att.softmax(-1) @ vv).transpose(1, 2).reshape(1, t, self.heads * self.head_dim)
            x = x + self.linear(o, pre + "self_attn.o_proj")
            h = self.norm(x, pre + "post_attention_layernorm.weight")
            g = self.linear(h, pre + "mlp.gate_proj")
            x = x + self.linear(torch.nn.functional.silu(g) * self.linear(h, pre + "mlp.up_proj"), pre + "mlp.down_proj")
        x = self.norm(x, "model.norm.weight")
        return (x @ self.head.t(), *presents)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: export.py MODEL_DIR OUT_DIR")
    model_dir, out = sys.argv[1:]
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    w = read_weights(model_dir)
    size = sum(v.numel() * 4 for v in w.values())
    if size >= 2 << 30:
        print(f"{model_dir}: {size / 1e9:.1f} GB of float32 weights: over protobuf's 2 GB, not exported", file=sys.stderr)
        sys.exit(3)  # the benchmark skips on 3: too large, not broken
    m = Model(cfg, w).eval()
    os.makedirs(out, exist_ok=True)
    n = m.layers
    cache = [f"{kind}{l}" for l in range(n) for kind in ("key", "value")]
    seq = {1: "tokens"}
    with torch.no_grad():
        ids = torch.zeros((1, 3), dtype=torch.int64)
        torch.onnx.export(m, (ids,), os.path.join(out, "prefill.onnx"), opset_version=17,
                          input_names=["input_ids"], output_names=["logits"] + ["present_" + c for c in cache],
                          dynamic_axes={"input_ids": seq, "logits": seq, **{"present_" + c: {2: "tokens"} for c in cache}})
        one = torch.zeros((1, 1), dtype=torch.int64)
        past = tuple(torch.zeros((1, m.kv_heads, 3, m.head_dim)) for _ in cache)
        torch.onnx.export(m, (one, *past), os.path.join(out, "decode.onnx"), opset_version=17,
                          input_names=["input_ids"] + ["past_" + c for c in cache],
                          output_names=["logits"] + ["present_" + c for c in cache],
                          dynamic_axes={"input_ids": seq, "logits": seq, **{"past_" + c: {2: "past"} for c in cache},
                                        **{"present_" + c: {2: "total"} for c in cache}})
    print(json.dumps({"layers": n, "kv_heads": m.kv_heads, "head_dim": m.head_dim, "cache": cache}))


if __name__ == "__main__":
    main()

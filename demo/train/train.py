#!/usr/bin/python3
"""Train logitscope's demo model: a small Llama on the King James Bible.

The corpus comes from Debian's bible-kjv-text package (read with the
bible-kjv package's `bible` program); the byte-level BPE tokenizer is
learned here; the corpus is encoded with logitscope's own tokenizer (the
`logitscope tokenize` CLI), so the ids the model trains on are the ids the
Go engine feeds it. The model follows transformers' LlamaForCausalLM
exactly (RMSNorm in float32, NeoX rotate_half RoPE, GQA, SiLU-gated MLP,
tied embeddings) so that the engine computes the same logits; the script
saves a reference (logits of the bf16 weights as the engine loads them) that
demo/demo_test.go compares against.

    apt-get install -y python3-torch bible-kjv libopenblas0-openmp
    /usr/bin/python3 demo/train/train.py            # from the repository root

(Without OpenBLAS, Debian's torch multiplies through the reference BLAS,
five times slower.) Everything is seeded: the same packages, steps and
threads give the same model. See README.md, "The demo model".
"""

import argparse
import json
import math
import os
import re
import struct
import subprocess
import sys
import time
from collections import Counter, defaultdict

# Idle OpenMP threads sleep instead of spinning: on a shared machine a
# spinning thread only takes time from the one doing the work. Read when
# torch loads, so set before the import.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS_PACKAGES = {"bible-kjv-text": "4.38", "bible-kjv": "4.38"}
SPECIAL = "<|endoftext|>"

CONFIG = dict(
    vocab_size=4096,
    hidden_size=192,
    intermediate_size=576,
    num_hidden_layers=4,
    num_attention_heads=6,
    num_key_value_heads=2,
    max_position_embeddings=256,
    rms_norm_eps=1e-5,
    rope_theta=10000.0,
    tie_word_embeddings=True,
)

# Qwen2's split (as tokenizer.json carries it, for the Go tokenizer) and a
# Python spelling of it for counting words while learning merges: Python's
# re has no \p{L}, so letters are [^\W\d_]. The two only need to agree
# roughly: the ids the model trains on come from the Go tokenizer.
SPLIT_ONIG = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
SPLIT_PY = re.compile(
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|(?:[^\r\n\w]|_)?[^\W\d_]+|\d| ?(?:[^\s\w]|_)+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


# ---------------------------------------------------------------- corpus


def check_packages():
    """The corpus is whatever these exact Debian packages hold."""
    for pkg, want in CORPUS_PACKAGES.items():
        got = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg], capture_output=True, text=True).stdout
        if got != want:
            sys.exit(f"{pkg} {got or 'not installed'}: this script reads version {want} (apt-get install {pkg}={want})")


def read_chapters():
    """[(book, chapter, [verse, ...])] of the whole KJV, in canon order.

    `bible` prints "Genesis 1", a blank line, then "  1 In the beginning..."
    with verses wrapped at 80 columns."""
    text = subprocess.run(["bible", "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True).stdout
    chapters = []
    for line in text.split("\n"):
        head = re.fullmatch(r"((?:\d )?[A-Z][A-Za-z ]*) (\d+)", line)
        verse = re.match(r"  (\d+) (.*)", line)
        if head:
            chapters.append((head.group(1), int(head.group(2)), []))
        elif verse:
            chapters[-1][2].append(verse.group(2).strip())
        elif line.strip():
            chapters[-1][2][-1] += " " + line.strip()
    if len(chapters) != 1189:
        sys.exit(f"bible printed {len(chapters)} chapters, want 1189")
    return chapters


def chapter_text(book, number, verses):
    """A chapter as the model reads it: a heading, one verse per line."""
    return f"{book} {number}\n" + "\n".join(verses) + "\n\n"


def split_chapters(chapters, every=40):
    """Every 40th chapter (from the 20th) is held out: 30 chapters spread
    over both testaments, never trained on."""
    train, held = [], []
    for i, c in enumerate(chapters):
        (held if i % every == every // 2 else train).append(chapter_text(*c))
    return train, held


# ---------------------------------------------------------------- tokenizer


def byte_alphabet():
    """GPT-2's reversible byte -> printable character map, in the order
    byte-level vocabularies number the 256 byte tokens."""
    printable = [b for b in range(256) if ord("!") <= b <= ord("~") or 0xA1 <= b <= 0xAC or b >= 0xAE]
    rest = [b for b in range(256) if b not in printable]
    chars = {b: chr(b) for b in printable}
    chars.update({b: chr(256 + i) for i, b in enumerate(rest)})
    return [chars[b] for b in printable + rest], chars


def learn_merges(texts, n):
    """Classic BPE: repeatedly merge the most frequent adjacent pair (ties:
    the smallest pair), counting over distinct words and updating only the
    words that hold the merged pair."""
    _, chars = byte_alphabet()
    counts = Counter()
    for t in texts:
        counts.update(SPLIT_PY.findall(t))
    words = [list("".join(chars[b] for b in w.encode())) for w in counts]
    freq = list(counts.values())
    pairs, where = Counter(), defaultdict(set)
    for i, w in enumerate(words):
        for p in zip(w, w[1:]):
            pairs[p] += freq[i]
            where[p].add(i)
    merges = []
    while len(merges) < n:
        top = max(pairs.values(), default=0)
        if top < 2:
            break
        a, b = min(p for p, c in pairs.items() if c == top)
        merges.append((a, b))
        for i in list(where[(a, b)]):
            w = words[i]
            for p in zip(w, w[1:]):
                pairs[p] -= freq[i]
                if pairs[p] <= 0:
                    del pairs[p]
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for p in zip(out, out[1:]):
                pairs[p] += freq[i]
                where[p].add(i)
        del where[(a, b)]
    return merges


def tokenizer_json(merges):
    """Hugging Face tokenizer.json: Qwen2's split + ByteLevel, 256 byte
    tokens, the merges, and <|endoftext|> as the last id."""
    order, _ = byte_alphabet()
    vocab = {c: i for i, c in enumerate(order)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    special = len(vocab)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": special, "content": SPECIAL, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
        ],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": SPLIT_ONIG}, "behavior": "Isolated", "invert": False},
                byte_level,
            ],
        },
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "", "end_of_word_suffix": "",
            "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": vocab, "merges": [[a, b] for a, b in merges],
        },
    }, special


def tokenizer_config():
    """A base model: documents start with <|endoftext|> (add_bos_token), and
    the chat template passes the messages' text through as one document, so
    a prompt is continued as plain text."""
    return {
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": SPECIAL,
        "eos_token": SPECIAL,
        "pad_token": SPECIAL,
        "model_max_length": CONFIG["max_position_embeddings"],
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": "{{ bos_token }}{% for message in messages %}{{ message['content'] }}{% endfor %}",
    }


def go_tokenize(tokenizer_path, texts):
    """Each text's ids from logitscope's own tokenizer."""
    lines = "".join(json.dumps(t) + "\n" for t in texts)
    out = subprocess.run(["go", "run", "./cmd/logitscope", "tokenize", "--tokenizer", tokenizer_path],
                         input=lines, capture_output=True, text=True, cwd=REPO)
    if out.returncode != 0:
        sys.exit("logitscope tokenize: " + out.stderr)
    return [json.loads(l)["ids"] for l in out.stdout.splitlines()]


# ---------------------------------------------------------------- model


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        return self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def rope(T, head_dim, theta):
    """cos, sin (T, head_dim) as transformers' LlamaRotaryEmbedding: the
    frequencies repeated for the two halves that rotate_half pairs."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
    freqs = torch.outer(torch.arange(T).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.nh, self.nkv = c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c["hidden_size"] // self.nh
        h = c["hidden_size"]
        self.q_proj = nn.Linear(h, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.nh, self.hd).transpose(1, 2)  # (B, nh, T, hd)
        k = self.k_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)  # (B, nkv, T, hd)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = self.nh // self.nkv  # GQA: each KV head serves rep query heads, adjacent
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) * self.hd ** -0.5 + mask  # (B, nh, T, T)
        y = F.softmax(att.float(), dim=-1).to(q.dtype) @ v  # (B, nh, T, hd)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, i = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    """transformers' LlamaModel: the `model.` prefix of the tensor names."""

    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class Llama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.model = Body(c)
        for p in self.parameters():  # transformers' initializer_range 0.02; norms stay 1
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids):  # ids (B, T) -> logits (B, T, vocab)
        T = ids.shape[1]
        cos, sin = rope(T, self.c["hidden_size"] // self.c["num_attention_heads"], self.c["rope_theta"])
        mask = torch.full((T, T), float("-inf")).triu(1)
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        return self.model.norm(x) @ self.model.embed_tokens.weight.T  # tied head


# ---------------------------------------------------------------- training


def batches(stream, bos, T, B, gen):
    """Random windows, each <|endoftext|> + T-1 tokens of the text, as
    logitscope's panels cut them."""
    starts = torch.randint(0, len(stream) - T, (B,), generator=gen)
    rows = [torch.cat((torch.tensor([bos]), stream[s:s + T])) for s in starts.tolist()]
    x = torch.stack(rows)  # (B, T+1)
    return x[:, :-1], x[:, 1:]


def val_windows(stream, bos, T):
    """The held-out text cut into consecutive windows, each predicting its
    tokens from the BOS on, as `capture --panel --window T+1` does."""
    n = (len(stream) // T) * T
    x = stream[:n].view(-1, T)
    return torch.cat((torch.full((x.shape[0], 1), bos), x), dim=1)


@torch.no_grad()
def val_loss(model, windows, max_windows=32):
    w = windows[:max_windows]
    logits = model(w[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1)).item()


def lr_at(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def train(model, stream, val, bos, args, log_path, ckpt_path, done=0, history=()):
    """args.steps AdamW steps from done steps run before (--resume): the
    batches go on where those stopped, the log keeps their rows (history)
    and counts on from them; the optimizer and its schedule start afresh."""
    gen = torch.Generator().manual_seed(args.seed)
    for _ in range(done):
        batches(stream, bos, args.seq, args.batch, gen)
    decay = [p for p in model.parameters() if p.dim() == 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    tokens = args.batch * args.seq
    t0 = time.time()
    with open(log_path, "w") as log:
        log.write("step\tloss\tval_loss\ttokens_per_s\telapsed_s\n")
        log.writelines(history)
        for step in range(args.steps):
            for g in opt.param_groups:
                g["lr"] = lr_at(step, args.steps, args.lr, args.warmup)
            x, y = batches(stream, bos, args.seq, args.batch, gen)
            loss = F.cross_entropy(model(x).reshape(-1, CONFIG["vocab_size"]), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            # The wall-clock budget guards a shared machine: past it the
            # run ends early (summary.json says at which step).
            last = step + 1 == args.steps or time.time() - t0 > args.max_minutes * 60
            if step % args.log_every == 0 or last:
                vl = val_loss(model, val) if step % args.eval_every == 0 or last else float("nan")
                el = time.time() - t0
                log.write(f"{done + step}\t{loss.item():.4f}\t{vl:.4f}\t{tokens * (step + 1) / el:.0f}\t{el:.0f}\n")
                log.flush()
                print(f"step {done + step} loss {loss.item():.4f} val {vl:.4f} {tokens * (step + 1) / el:.0f} tok/s {el:.0f}s", flush=True)
            if step % args.ckpt_every == 0 or last:
                torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict()}, ckpt_path)
            if last:
                break
    return step + 1, time.time() - t0


# ---------------------------------------------------------------- export


def bf16_bytes(t):
    """bf16 as transformers' .to(torch.bfloat16) rounds (to nearest even)."""
    return t.detach().to(torch.bfloat16).view(torch.int16).numpy().tobytes()


def read_safetensors(path):
    """The bf16 tensors write_safetensors wrote, as float32."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = torch.frombuffer(bytearray(data[a:b]), dtype=torch.int16)
        out[name] = raw.view(torch.bfloat16).float().reshape(t["shape"])
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        b = bf16_bytes(t)
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def config_json():
    c = dict(CONFIG)
    c.update(architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu", attention_bias=False,
             attention_dropout=0.0, mlp_bias=False, head_dim=c["hidden_size"] // c["num_attention_heads"],
             bos_token_id=c["vocab_size"] - 1, eos_token_id=c["vocab_size"] - 1, initializer_range=0.02,
             rope_scaling=None, torch_dtype="bfloat16", use_cache=True)
    return c


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def write_dump(path, rows):
    """logitscope's logit dump: uint64 rows, uint64 vocab, float32 rows."""
    with open(path, "wb") as f:
        f.write(struct.pack("<QQ", *rows.shape))
        f.write(rows.float().contiguous().numpy().tobytes())


def loss_svg(log_path, svg_path):
    """The loss curve as a plain SVG (no plotting library needed)."""
    rows = [l.split("\t") for l in open(log_path).read().splitlines()[1:]]
    train_pts = [(int(r[0]), float(r[1])) for r in rows]
    val_pts = [(int(r[0]), float(r[2])) for r in rows if r[2] != "nan"]
    W, H, L, R, Tp, Bm = 640, 360, 50, 20, 20, 40
    xmax = max(s for s, _ in train_pts) or 1
    ymax = math.ceil(max(v for _, v in train_pts))
    ymin = math.floor(min(v for _, v in train_pts + val_pts))
    X = lambda s: L + (W - L - R) * s / xmax
    Y = lambda v: Tp + (H - Tp - Bm) * (ymax - v) / (ymax - ymin)
    line = lambda pts, color: '<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' % (
        color, " ".join(f"{X(s):.1f},{Y(v):.1f}" for s, v in pts))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>']
    for v in range(ymin, ymax + 1):
        out.append(f'<line x1="{L}" x2="{W - R}" y1="{Y(v):.1f}" y2="{Y(v):.1f}" stroke="#ddd"/>'
                   f'<text x="{L - 8}" y="{Y(v) + 4:.1f}" text-anchor="end">{v}</text>')
    tick = max(1, int(round(xmax / 5, 1 - len(str(xmax // 5)))))  # about five ticks, one significant digit
    for s in range(0, xmax + 1, tick):
        out.append(f'<text x="{X(s):.1f}" y="{H - Bm + 16}" text-anchor="middle">{s}</text>')
    out += [line(train_pts, "#1f77b4"), line(val_pts, "#d62728"),
            f'<text x="{W // 2}" y="{H - 6}" text-anchor="middle">step</text>',
            f'<text x="{W - R}" y="{Tp + 4}" text-anchor="end"><tspan fill="#1f77b4">train loss</tspan>'
            f' · <tspan fill="#d62728">held-out loss</tspan> (nats/token)</text>', "</svg>"]
    with open(svg_path, "w") as f:
        f.write("\n".join(out) + "\n")


def first_sentence_start(text, words=6):
    """The first few words of a held-out verse: a prompt to continue."""
    verse = text.split("\n")[1]
    return " ".join(verse.split()[:words])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "demo", "model"))
    ap.add_argument("--logs", default=os.path.join(REPO, "demo", "train"))
    ap.add_argument("--work", default="/tmp/logitscope-demo-train", help="corpus, token ids and checkpoints")
    ap.add_argument("--steps", type=int, default=230)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128, help="tokens per window after the BOS")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    # One thread: on this shared 2-core machine two OpenMP threads ran
    # 2-3x slower than one (each waits for the other at every op), and one
    # thread's sums do not depend on scheduling.
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=30)
    ap.add_argument("--ckpt-every", type=int, default=30)
    ap.add_argument("--max-minutes", type=float, default=35)
    ap.add_argument("--resume", action="store_true",
                    help="go on training --out's model (its bf16 weights) for --steps more, from where its summary.json and log.tsv say it stopped")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.logs, exist_ok=True)

    check_packages()
    train_texts, held_texts = split_chapters(read_chapters())
    held = "".join(held_texts)
    with open(os.path.join(args.work, "heldout.txt"), "w") as f:
        f.write(held)

    t = time.time()
    merges = learn_merges(train_texts, CONFIG["vocab_size"] - 256 - 1)
    tok, bos = tokenizer_json(merges)
    if bos != CONFIG["vocab_size"] - 1:
        sys.exit(f"learned {len(merges)} merges: vocabulary {bos + 1}, want {CONFIG['vocab_size']}")
    tok_path = os.path.join(args.out, "tokenizer.json")
    write_json(tok_path, tok)
    write_json(os.path.join(args.out, "tokenizer_config.json"), tokenizer_config())
    print(f"tokenizer: {len(merges)} merges in {time.time() - t:.0f}s", flush=True)

    ids = go_tokenize(tok_path, ["".join(train_texts), held])
    stream, held_stream = torch.tensor(ids[0]), torch.tensor(ids[1])
    print(f"corpus: {len(stream)} training tokens, {len(held_stream)} held out", flush=True)

    model = Llama(CONFIG)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters", flush=True)
    val = val_windows(held_stream, bos, args.seq)
    done, history, runs, wall0 = 0, [], [], 0
    if args.resume:
        before = json.load(open(os.path.join(args.logs, "summary.json")))
        done, wall0 = before["steps_run"], before["training_wall_s"]
        runs = before.get("runs", [{"steps": done, "lr": ap.get_default("lr")}])
        history = open(os.path.join(args.logs, "log.tsv")).readlines()[1:]
        model.load_state_dict(read_safetensors(os.path.join(args.out, "model.safetensors")))
        print(f"resuming after step {done}", flush=True)
    steps_run, wall = train(model, stream, val, bos, args, os.path.join(args.logs, "log.tsv"), os.path.join(args.work, "ckpt.pt"), done, history)
    runs = runs + [{"steps": steps_run, "lr": args.lr}]
    steps_run, wall = done + steps_run, wall0 + wall
    loss_svg(os.path.join(args.logs, "log.tsv"), os.path.join(args.logs, "loss.svg"))

    # Export, then reload the weights as bf16 -> f32, as the engine reads them.
    sd = dict(model.state_dict())
    write_safetensors(os.path.join(args.out, "model.safetensors"), sd)
    write_json(os.path.join(args.out, "config.json"), config_json())
    write_json(os.path.join(args.out, "generation_config.json"),
               {"bos_token_id": bos, "eos_token_id": bos, "do_sample": False})
    model.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in sd.items()})
    model.eval()
    held_loss = val_loss(model, val, max_windows=len(val))

    prompt = first_sentence_start(held_texts[1])
    panel = "\n".join(held_texts[0].split("\n")[1:7]) + "\n"  # the first six verses, no heading
    write_json(os.path.join(args.out, "logitscope.json"), {
        "nature": "trained-demo",
        "about": f"{n_params / 1e6:.1f}M-parameter Llama trained on the King James Bible (public domain) by demo/train/train.py",
        "prompt": prompt,
        "panel": panel,
    })

    # The reference demo/demo_test.go checks the Go engine against:
    # the logits of the bf16 weights at every position of the prompt.
    ref_ids = [bos] + go_tokenize(tok_path, [prompt])[0]
    with torch.no_grad():
        ref = model(torch.tensor([ref_ids]))[0]
    test_dir = os.path.join(REPO, "demo", "testdata")
    os.makedirs(test_dir, exist_ok=True)
    write_json(os.path.join(test_dir, "reference.json"), {"ids": ref_ids, "dump": "reference.logits"})
    write_dump(os.path.join(test_dir, "reference.logits"), ref)  # *.dump is ignored by git

    summary = {"parameters": n_params, "train_tokens": len(stream), "heldout_tokens": len(held_stream),
               "steps": args.steps, "steps_run": steps_run, "batch": args.batch, "seq": args.seq, "seed": args.seed, "threads": args.threads,
               "training_wall_s": round(wall), "heldout_loss_bf16": round(held_loss, 4),
               "heldout_ppl_bf16": round(math.exp(held_loss), 2), "torch": torch.__version__,
               "runs": runs}
    write_json(os.path.join(args.logs, "summary.json"), summary)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()

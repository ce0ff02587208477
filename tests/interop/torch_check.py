#!/usr/bin/python3
"""Loads a dgalua checkpoint into a PyTorch GPT-2 written with Hugging Face's parameter names
and Conv1D layout, and checks that it reproduces dgalua's loss and logits.

    /usr/bin/python3 torch_check.py CKPT.safetensors RESULTS.json

The safetensors file is parsed by hand (struct + json + torch.frombuffer): no dgalua code and
no `safetensors` package are involved, so this checks the file format too. Exit status 0 and
"PASS" when everything matches."""
import json
import math
import struct
import sys
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "I32": torch.int32, "U8": torch.uint8, "I64": torch.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = bytearray(raw[8 + n:])
    meta["_computed_crc32"] = "%08x" % zlib.crc32(data)
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        t = torch.frombuffer(data, dtype=dtype, count=(end - begin) // torch.tensor(
            [], dtype=dtype).element_size(), offset=begin) if end > begin else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(info["shape"]).clone()
    return tensors, meta


class Conv1D(nn.Module):
    """HF's Conv1D: y = x @ W + b with W stored [in, out]."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


class Attention(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.c_attn = Conv1D(c, 3 * c)
        self.c_proj = Conv1D(c, c)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(B, T, self.h, C // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.h)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = Conv1D(c, 4 * c)
        self.c_proj = Conv1D(4 * c, c)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c, eps=1e-5)
        self.attn = Attention(c, h)
        self.ln_2 = nn.LayerNorm(c, eps=1e-5)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, n_positions, vocab_size):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(n_positions, n_embd)
        self.h = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd, eps=1e-5)


class GPT2LMHeadModel(nn.Module):
    """lm_head is tied to transformer.wte, as in HF (so it is not a separate parameter)."""

    def __init__(self, **cfg):
        super().__init__()
        self.transformer = Transformer(**cfg)

    def forward(self, idx):
        tr = self.transformer
        pos = torch.arange(idx.shape[1])
        x = tr.wte(idx) + tr.wpe(pos)
        for block in tr.h:
            x = block(x)
        return tr.ln_f(x) @ tr.wte.weight.T


def main():
    ckpt, results = sys.argv[1], sys.argv[2]
    tensors, meta = read_safetensors(ckpt)
    ok = True

    def check(cond, what):
        nonlocal ok
        print(("  ok   " if cond else "  FAIL ") + what)
        ok = ok and cond

    # Hugging Face's from_pretrained refuses a safetensors file whose "format" is not "pt"
    check(meta.get("format") == "pt", "metadata format = pt (as transformers requires)")
    check(meta.get("dgalua.format") == "dgalua-checkpoint-2", "metadata dgalua.format")
    check(meta.get("dgalua.crc32") == meta["_computed_crc32"],
          "data CRC-32 %s matches the metadata" % meta["_computed_crc32"])
    check(meta.get("model_type") == "gpt2", "model_type = gpt2")
    cfg = {k: int(meta[k]) for k in ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size")}
    model = GPT2LMHeadModel(**cfg)
    state = {k: v for k, v in tensors.items() if k.startswith("transformer.")}
    others = [k for k in tensors if not k.startswith(("transformer.", "optimizer.", "extra.", "blob."))]
    check(not others, "no unexpected tensors %s" % others)
    check("lm_head.weight" not in tensors, "lm_head not stored (tied to wte)")
    model.load_state_dict(state, strict=True)
    check(True, "strict load_state_dict of %d tensors, config %s" % (len(state), cfg))
    moments = [k for k in tensors if k.startswith("optimizer.m.")]
    check(len(moments) == len(state) and all(tensors["optimizer.m." + k].shape == v.shape
                                             for k, v in state.items()), "AdamW moments per tensor")

    with open(results) as f:
        res = json.load(f)
    inputs = torch.tensor(res["inputs"], dtype=torch.long)
    targets = torch.tensor(res["targets"], dtype=torch.long)
    with torch.no_grad():
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                               ignore_index=-1).item()
        last = model(inputs[:1])[0, -1]
    ref = res["loss"]
    check(abs(loss - ref) <= 1e-4 * max(1.0, abs(ref)),
          "loss: torch %.7f vs dgalua %.7f (diff %.2e)" % (loss, ref, abs(loss - ref)))
    ours = torch.tensor(res["logits_last_seq1"])
    diff = (last - ours).abs().max().item()
    check(diff <= 1e-3, "last-position logits: max abs diff %.2e" % diff)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""PyTorch's training step under bf16 autocast, beside ../shared/bench/torch_gpt.py's fp32 one.

  /usr/bin/python3 bench/torch_autocast.py [torch_gpt.py's options]

Loads the shared reference (its path in $DGA_TORCH_BENCH, default ../shared/bench/torch_gpt.py)
unchanged and runs its train benchmark with the forward (and so the loss) under
torch.autocast("cpu", dtype=torch.bfloat16): PyTorch's mixed precision on the CPU, the
counterpart of dgalua's precision = "bf16". Parameters, gradients and AdamW stay fp32. Its
RESULT lines say "precision": "bf16-autocast". On a CPU without native bf16 PyTorch still
runs it (more slowly than fp32): the row then measures that, not a bf16 speed-up.
"""
import importlib.util
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
path = os.environ.get("DGA_TORCH_BENCH") or os.path.join(here, "..", "..", "shared", "bench",
                                                        "torch_gpt.py")
spec = importlib.util.spec_from_file_location("torch_gpt", path)
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)


def autocast_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


plain_emit = ref.emit


def tagged_emit(rec):
    rec["precision"] = "bf16-autocast"
    plain_emit(rec)


# the reference looks these up when it calls them, so its benchmark runs ours
ref.train_step = autocast_step
ref.emit = tagged_emit
print("# bf16 autocast around " + path, flush=True)
sys.argv[0] = path
ref.main()

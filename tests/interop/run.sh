#!/usr/bin/env bash
# PyTorch interop check (manual; needs Debian's python3-torch, which CI does not install):
# dgalua trains a small GPT-2 for a few steps and saves a checkpoint, then torch_check.py
# loads that file into a PyTorch GPT-2 with Hugging Face's names and layout and compares the
# loss and logits. Prints PASS or FAIL (exit status 0 / 1).
#   tests/interop/run.sh            (uses $DGALUA, else build/dgalua, building it if needed)
set -euo pipefail
cd "$(dirname "$0")/../.."
DGALUA=${DGALUA:-build/dgalua}
if [ ! -x "$DGALUA" ]; then make -j1 >/dev/null; fi
PY=/usr/bin/python3
if ! "$PY" -c "import torch" 2>/dev/null; then
    echo "SKIP: $PY has no torch (apt-get install python3-torch)"; exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$DGALUA" tests/interop/make_checkpoint.lua "$work/ckpt.safetensors" "$work/results.json"
if "$PY" tests/interop/torch_check.py "$work/ckpt.safetensors" "$work/results.json"; then
    exit 0
else
    exit 1
fi

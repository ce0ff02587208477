#!/bin/bash
# 3 seeds x {fp32, bf16 (emulated rounding: DGA_BF16_EMULATE=1)} at quickstart --quick's model size
# (L2, d64, h4, T64, B16, 320 steps, lr 3e-3), byte-level shards of corpus/arxiv_abstracts.
# From the repository top:
#   OUT=/tmp/curves DGA_SHARED_DATA=../shared/data ./dgalua results/bench/2026-11-25/precision_curves/make_shards.lua
#   OUT=/tmp/curves bash results/bench/2026-11-25/precision_curves/run.sh
# Run on 2026-11-25 23:02-23:08 UTC (AVX2 EPYC, no avx512_bf16: bf16 through the emulation).
OUT=${OUT:-/tmp/curves}; mkdir -p "$OUT"
for seed in 1 2 3; do
  for prec in fp32 bf16; do
    DGA_BF16_EMULATE=1 ./dgalua scripts/train.lua --data $OUT/train.bin --val $OUT/val.bin \
      --layers 2 --width 64 --heads 4 --context 64 --batch 16 --steps 320 --lr 3e-3 --warmup 20 \
      --val-every 40 --val-windows 64 --seed $seed --threads 1 --precision $prec --every 80 \
      --log $OUT/${prec}_seed$seed.csv > $OUT/${prec}_seed$seed.out 2>&1
  done
done

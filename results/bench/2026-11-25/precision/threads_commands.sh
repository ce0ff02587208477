#!/bin/bash
# oneDNN's threads in a training step (fp32-onednn; tiny and small at 1 and 2 threads), three ways:
#   pool         the default: row blocks over dgalua's pool, one OpenMP thread per block
#   omp-default  DGA_DNNL_THREADS=omp, OMP_WAIT_POLICY unset (libgomp spins after a region)
#   omp-passive  DGA_DNNL_THREADS=omp, OMP_WAIT_POLICY=passive (set before libgomp loads)
# Run 2026-11-25 22:59-23:16 UTC from the repository top, while other engineers' test suites
# ran (load average 8-18 on 2 cores): wall times are the queue, the "CPU time/step" is the
# comparable number.
for mode in pool omp-default omp-passive; do
  case $mode in
    pool) env -u DGA_DNNL_THREADS -u OMP_WAIT_POLICY DGA_BENCH_PRECISIONS=fp32-onednn ./build/bench/bench_train build 1 2 ;;
    omp-default) env -u OMP_WAIT_POLICY DGA_DNNL_THREADS=omp DGA_BENCH_PRECISIONS=fp32-onednn ./build/bench/bench_train build 1 2 ;;
    omp-passive) env OMP_WAIT_POLICY=passive DGA_DNNL_THREADS=omp DGA_BENCH_PRECISIONS=fp32-onednn ./build/bench/bench_train build 1 2 ;;
  esac > results/bench/2026-11-25/precision/threads_$mode.out 2>&1
done

/* A small process-wide pool of worker threads for the non-GEMM kernels.
 *
 * OpenBLAS threads the matrix products; everything between them (layernorm, softmax, GELU,
 * cross-entropy, AdamW, the gradient norm) would otherwise run on one core while the others
 * wait. dga_pool_run splits such a kernel into exactly dga_pool_threads() tasks and runs them
 * at once, the calling thread doing task 0.
 *
 * - Workers block on a condition variable between runs and never spin, so they take no CPU
 *   from OpenBLAS while it works. The other way round, OpenBLAS's idle workers spin (calling
 *   sched_yield) for about 0.1 s after each product unless told otherwise, so the first
 *   dga_pool_set_threads with more than one thread shortens that spin to a few microseconds,
 *   unless the user set OPENBLAS_THREAD_TIMEOUT: it sets that variable in the environment and
 *   stops OpenBLAS's workers (pool.c says why). Make that first call before other threads
 *   read the environment or call BLAS (dgalua makes it at startup).
 * - One thread (the default) means no worker threads at all: dga_pool_run calls fn(ctx, 0, 1)
 *   directly, and kernels take their sequential path.
 * - Determinism: a task's share of the work must depend only on the sizes, the task index and
 *   the task count (dga_pool_range), never on which thread runs it or when.
 * - Re-entrant and concurrent calls (a kernel run from another thread while the pool is busy,
 *   or from inside a task) run every task in the calling thread, in order: the same results.
 * - Tasks that call BLAS go through dga_pool_run_blas: OpenBLAS 0.3.21 has no per-thread
 *   setting, and two threads calling a threaded sgemm at once would fight over its own
 *   workers, so for the length of such a run OpenBLAS is held to one thread (each task's
 *   sgemm then runs in the thread that calls it) and set back afterwards. */
#ifndef DGA_POOL_H
#define DGA_POOL_H

#include <stddef.h>

#include "status.h"

#define DGA_POOL_MAX_THREADS 1024

typedef void (*dga_pool_fn)(void *ctx, int task, int ntasks);

/* Sets the number of threads (the caller plus n - 1 workers), 1..DGA_POOL_MAX_THREADS.
 * Workers are started here; if that fails the pool keeps what it could start and says so. */
dga_status dga_pool_set_threads(int n);
int        dga_pool_threads(void);

/* Kernels with less work than this (in elements touched) run on the calling thread: waking a
 * worker costs microseconds. 32768 by default; tests set 0 to thread every size. It is part of
 * the partition, like the thread count, so results depend on it only where a kernel's
 * reduction order does (the gradient norm). */
void       dga_pool_set_min_work(size_t n);
size_t     dga_pool_min_work(void);

/* Runs fn(ctx, t, n) for t = 0..n-1, n = dga_pool_threads(), and returns when all are done. */
void       dga_pool_run(dga_pool_fn fn, void *ctx);

/* dga_pool_run for tasks that call cblas_* themselves (per-head attention products):
 * OpenBLAS runs single-threaded while the tasks run, its thread count restored after. At one
 * thread, or when run in order (not the owner, nested), OpenBLAS is left as it is. */
void       dga_pool_run_blas(dga_pool_fn fn, void *ctx);

/* [*lo, *hi): task t's share of n items cut into ntasks contiguous pieces, each a multiple of
 * `align` items except the last. Depends only on its arguments. */
void       dga_pool_range(size_t n, size_t align, int task, int ntasks, size_t *lo, size_t *hi);

/* A buffer of at least `bytes` owned by the pool, kept between calls (grown, never shrunk), so
 * a kernel that needs per-task scratch allocates only the first time. NULL if it cannot be
 * allocated: the caller then takes its sequential path. Only for the thread that calls
 * dga_pool_run, and valid until the next call. */
void      *dga_pool_scratch(size_t bytes);

#endif

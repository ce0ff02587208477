/* The worker pool (see pool.h). One generation counter under one mutex: a run bumps it and
 * broadcasts; each worker runs its task for that generation and the last to finish signals
 * the caller. Waits are condition-variable waits, so idle workers sleep in the kernel. */
#include "pool.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    pthread_t *workers;
    int nworkers;        /* started workers: threads - 1 */
    unsigned long gen;   /* bumped for every run */
    int pending;         /* workers still running the current generation */
    int stop;
    dga_pool_fn fn;
    void *ctx;
    int ntasks;
    int running;         /* the owner is inside dga_pool_run */
    pthread_t owner;     /* the thread that set the thread count: the pool serves only it */
    int have_owner;
    unsigned long start_gen; /* the generation new workers start from */
    void *scratch;
    size_t scratch_size;
} pool_state;

static pool_state g = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};

static void *worker_main(void *p)
{
    int task = (int)(size_t)p;
    pthread_mutex_lock(&g.mu);
    unsigned long seen = g.start_gen;   /* not g.gen: a run may already have begun */
    for (;;) {
        while (g.gen == seen && !g.stop) pthread_cond_wait(&g.wake, &g.mu);
        if (g.stop) break;
        seen = g.gen;
        dga_pool_fn fn = g.fn;
        void *ctx = g.ctx;
        int n = g.ntasks;
        pthread_mutex_unlock(&g.mu);
        fn(ctx, task, n);
        pthread_mutex_lock(&g.mu);
        if (--g.pending == 0) pthread_cond_signal(&g.done);
    }
    pthread_mutex_unlock(&g.mu);
    return NULL;
}

static void stop_workers(void)
{
    if (g.nworkers > 0) {
        pthread_mutex_lock(&g.mu);
        g.stop = 1;
        pthread_cond_broadcast(&g.wake);
        pthread_mutex_unlock(&g.mu);
        for (int i = 0; i < g.nworkers; i++) pthread_join(g.workers[i], NULL);
    }
    free(g.workers);
    g.workers = NULL;
    g.nworkers = 0;
    g.stop = 0;
}

/* A forked child has only the forking thread: forget the parent's workers (their memory is
 * the child's copy; the threads are gone), so the child runs single-threaded until it sets
 * a thread count of its own. */
static void after_fork_child(void)
{
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.wake, NULL);
    pthread_cond_init(&g.done, NULL);
    free(g.workers);
    g.workers = NULL;
    g.nworkers = 0;
    g.stop = 0;
    g.running = 0;
    g.owner = pthread_self();
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void) { pthread_atfork(NULL, NULL, after_fork_child); }

/* After each product an idle OpenBLAS worker calls sched_yield in a loop for 2^28 cycles
 * (about 0.1 s) before it sleeps. The kernels between two products run on this pool, on the
 * same cores, and the yielding worker keeps taking them back: on `small` at 2 threads that
 * cost about a tenth of a step (README, Performance). OPENBLAS_THREAD_TIMEOUT=n makes the
 * spin 2^n cycles, but OpenBLAS reads it when the library loads, before any code of ours
 * runs; so, unless the user set it, set it here, have OpenBLAS read its environment again
 * and stop its workers (it starts them again, with the new spin, at the next product).
 * 2^14 cycles is a few microseconds, about what a sleeping worker's wake-up costs, so
 * back-to-back products still find their worker awake. The variable stays set, so child
 * processes start with the short spin and nothing to restart.
 * Only OpenBLAS's pthread build has this server (its OpenMP build's idle threads are
 * OpenMP's). openblas_read_env and blas_thread_shutdown_ are exported by it but not declared
 * in cblas.h, so they are looked up; without them nothing changes. */
#define BLAS_SPIN_LOG2_CYCLES "14"

static void shorten_blas_spin(void)
{
    if (openblas_get_parallel() != 1 || getenv("OPENBLAS_THREAD_TIMEOUT")) return;
    void (*read_env)(void);
    int (*stop_blas_workers)(void);
    *(void **)&read_env = dlsym(RTLD_DEFAULT, "openblas_read_env");
    *(void **)&stop_blas_workers = dlsym(RTLD_DEFAULT, "blas_thread_shutdown_");
    if (!read_env || !stop_blas_workers) return;
    if (setenv("OPENBLAS_THREAD_TIMEOUT", BLAS_SPIN_LOG2_CYCLES, 0) != 0) return;
    read_env();
    stop_blas_workers();
}
static pthread_once_t blas_spin_once = PTHREAD_ONCE_INIT;

dga_status dga_pool_set_threads(int n)
{
    if (n < 1 || n > DGA_POOL_MAX_THREADS)
        return dga_fail(DGA_ERR_INVALID, "threads = %d, expected 1..%d", n,
                        DGA_POOL_MAX_THREADS);
    if (g.have_owner && g.nworkers > 0 && !pthread_equal(g.owner, pthread_self()))
        return dga_fail(DGA_ERR_INVALID, "the thread pool belongs to another thread");
    pthread_once(&atfork_once, register_atfork);
    g.owner = pthread_self();
    g.have_owner = 1;
    if (n > 1) pthread_once(&blas_spin_once, shorten_blas_spin);
    if (n - 1 == g.nworkers) return DGA_OK;
    stop_workers();
    if (n == 1) return DGA_OK;
    g.workers = malloc((size_t)(n - 1) * sizeof *g.workers);
    if (!g.workers) return dga_fail(DGA_ERR_NOMEM, "cannot allocate %d worker threads", n - 1);
    g.start_gen = g.gen;
    /* workers inherit a full signal mask, so signals (Ctrl-C) go to the calling thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int failed_at = 0;
    for (int i = 0; i < n - 1 && !failed_at; i++) {
        if (pthread_create(&g.workers[i], NULL, worker_main, (void *)(size_t)(i + 1)) != 0)
            failed_at = i + 1;
        else
            g.nworkers = i + 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (failed_at) {
        stop_workers();
        return dga_fail(DGA_ERR_IO, "cannot start worker thread %d of %d; running on one "
                        "thread", failed_at, n - 1);
    }
    return DGA_OK;
}

int dga_pool_threads(void) { return g.nworkers + 1; }

static size_t min_work = 32768;
void   dga_pool_set_min_work(size_t n) { min_work = n; }
size_t dga_pool_min_work(void) { return min_work; }

void dga_pool_run(dga_pool_fn fn, void *ctx)
{
    int n = g.nworkers + 1;
    if (n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    /* Not the owner, or called from inside a task: the same tasks, one after the other. */
    if (g.running || !pthread_equal(g.owner, pthread_self())) {
        for (int t = 0; t < n; t++) fn(ctx, t, n);
        return;
    }
    g.running = 1;
    pthread_mutex_lock(&g.mu);
    g.fn = fn;
    g.ctx = ctx;
    g.ntasks = n;
    g.pending = n - 1;
    g.gen++;
    pthread_cond_broadcast(&g.wake);
    pthread_mutex_unlock(&g.mu);
    fn(ctx, 0, n);
    pthread_mutex_lock(&g.mu);
    while (g.pending > 0) pthread_cond_wait(&g.done, &g.mu);
    pthread_mutex_unlock(&g.mu);
    g.running = 0;
}

void dga_pool_run_blas(dga_pool_fn fn, void *ctx)
{
    int n = g.nworkers + 1;
    if (n == 1 || g.running || !pthread_equal(g.owner, pthread_self())) {
        dga_pool_run(fn, ctx);
        return;
    }
    int blas_threads = openblas_get_num_threads();
    if (blas_threads > 1) openblas_set_num_threads(1);
    dga_pool_run(fn, ctx);
    if (blas_threads > 1) openblas_set_num_threads(blas_threads);
}

void dga_pool_range(size_t n, size_t align, int task, int ntasks, size_t *lo, size_t *hi)
{
    if (align == 0) align = 1;
    size_t units = (n + align - 1) / align;    /* whole pieces of `align` items */
    size_t per = units / (size_t)ntasks, extra = units % (size_t)ntasks;
    size_t t = (size_t)task;
    size_t a = t * per + (t < extra ? t : extra);
    size_t b = a + per + (t < extra ? 1 : 0);
    a *= align;
    b *= align;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

void *dga_pool_scratch(size_t bytes)
{
    if (g.running || (g.have_owner && !pthread_equal(g.owner, pthread_self()))) return NULL;
    if (bytes <= g.scratch_size) return g.scratch;
    void *p = realloc(g.scratch, bytes);
    if (!p) return NULL;
    g.scratch = p;
    g.scratch_size = bytes;
    return p;
}

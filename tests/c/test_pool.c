/* The worker pool: the partition, that every task runs exactly once, nested and forked use,
 * bad thread counts; and a whole training run at two threads, twice, compared bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adamw.h"
#include "gpt.h"
#include "pool.h"
#include "rng.h"

static void set_threads(int n)
{
    assert_int_equal(dga_pool_set_threads(n), DGA_OK);
    assert_int_equal(dga_pool_threads(), n);
}

static void test_range(void **state)
{
    (void)state;
    const size_t ns[] = {0, 1, 7, 16, 17, 100, 1000, 65537};
    const size_t aligns[] = {1, 4, 16};
    for (size_t a = 0; a < 3; a++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            for (int nt = 1; nt <= 5; nt++) {
                size_t n = ns[k], al = aligns[a], prev = 0;
                for (int t = 0; t < nt; t++) {
                    size_t lo, hi, lo2, hi2;
                    dga_pool_range(n, al, t, nt, &lo, &hi);
                    /* contiguous, in order, aligned, and a pure function of its arguments */
                    assert_int_equal(lo, prev);
                    assert_true(hi >= lo && hi <= n);
                    assert_true(lo == n || lo % al == 0);
                    assert_true(hi == n || hi % al == 0);
                    dga_pool_range(n, al, t, nt, &lo2, &hi2);
                    assert_true(lo2 == lo && hi2 == hi);
                    prev = hi;
                }
                assert_int_equal(prev, n);
            }
    /* balanced: pieces differ by at most one unit */
    size_t lo, hi;
    dga_pool_range(10, 1, 0, 3, &lo, &hi);
    assert_true(lo == 0 && hi == 4);
    dga_pool_range(10, 1, 2, 3, &lo, &hi);
    assert_true(lo == 7 && hi == 10);
}

typedef struct {
    int count[8];
    int ntasks[8];
} tally;

static void count_task(void *p, int t, int nt)
{
    tally *c = p;
    c->count[t]++;   /* each task its own slot: no race */
    c->ntasks[t] = nt;
}

static void test_every_task_once(void **state)
{
    (void)state;
    for (int th = 1; th <= 4; th++) {
        set_threads(th);
        for (int rep = 0; rep < 200; rep++) {
            tally c = {{0}, {0}};
            dga_pool_run(count_task, &c);
            for (int t = 0; t < 8; t++) {
                assert_int_equal(c.count[t], t < th ? 1 : 0);
                if (t < th) assert_int_equal(c.ntasks[t], th);
            }
        }
    }
    set_threads(1);
}

/* A kernel called from inside a task runs its tasks in the calling thread, one after the
 * other, and gets no scratch (the outer kernel may be using it). */
typedef struct {
    tally inner[4];
    int scratch_null[4];
} nest;

static void nested_task(void *p, int t, int nt)
{
    nest *n = p;
    dga_pool_run(count_task, &n->inner[t]);
    n->scratch_null[t] = dga_pool_scratch(64) == NULL;
}

static void test_nested(void **state)
{
    (void)state;
    set_threads(3);
    nest n;
    memset(&n, 0, sizeof n);
    dga_pool_run(nested_task, &n);
    for (int t = 0; t < 3; t++) {
        for (int u = 0; u < 3; u++) assert_int_equal(n.inner[t].count[u], 1);
        assert_int_equal(n.inner[t].count[3], 0);
        assert_true(n.scratch_null[t]);
    }
    set_threads(1);
}

/* Tasks of a BLAS run see OpenBLAS held to one thread, and every task runs once; OpenBLAS's
 * own setting is back afterwards. A product computed in each task equals the product computed
 * outside the run. */
typedef struct {
    int blas_threads[4];
    tally c;
    float a[6 * 5], b[5 * 4], prod[4][6 * 4];
} blas_run;

static void blas_task(void *p, int t, int nt)
{
    blas_run *r = p;
    r->blas_threads[t] = openblas_get_num_threads();
    count_task(&r->c, t, nt);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 6, 4, 5, 1.0f, r->a, 5, r->b, 4, 0.0f,
                r->prod[t], 4);
}

static void test_run_blas(void **state)
{
    (void)state;
    int before = openblas_get_num_threads();
    openblas_set_num_threads(2);
    blas_run *r = calloc(1, sizeof *r);
    for (int i = 0; i < 30; i++) r->a[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < 20; i++) r->b[i] = (float)(i % 5) * 0.5f;
    float want[6 * 4];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 6, 4, 5, 1.0f, r->a, 5, r->b, 4, 0.0f,
                want, 4);
    for (int th = 1; th <= 3; th++) {
        set_threads(th);
        memset(&r->c, 0, sizeof r->c);
        dga_pool_run_blas(blas_task, r);
        for (int t = 0; t < th; t++) {
            assert_int_equal(r->c.count[t], 1);
            if (th > 1) assert_int_equal(r->blas_threads[t], 1);
            assert_memory_equal(r->prod[t], want, sizeof want);
        }
        assert_int_equal(r->c.count[th], 0);
        assert_int_equal(openblas_get_num_threads(), 2);
    }
    set_threads(1);
    openblas_set_num_threads(before);
    free(r);
}

static void test_scratch(void **state)
{
    (void)state;
    char *a = dga_pool_scratch(100);
    assert_non_null(a);
    memset(a, 7, 100);
    char *b = dga_pool_scratch(50);   /* smaller: the same buffer, contents kept */
    assert_ptr_equal(a, b);
    assert_int_equal(b[99], 7);
    char *c = dga_pool_scratch(1 << 20);
    assert_non_null(c);
    c[(1 << 20) - 1] = 1;
}

static void test_bad_counts(void **state)
{
    (void)state;
    assert_int_equal(dga_pool_set_threads(0), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "threads = 0"));
    assert_int_equal(dga_pool_set_threads(DGA_POOL_MAX_THREADS + 1), DGA_ERR_INVALID);
    assert_int_equal(dga_pool_threads(), 1);
}

/* A forked child has no workers: it must run its kernels (on one thread) rather than wait
 * for the parent's threads, which it does not have. */
static void test_fork(void **state)
{
    (void)state;
    set_threads(2);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        tally c = {{0}, {0}};
        dga_pool_run(count_task, &c);
        int ok = dga_pool_threads() == 1 && c.count[0] == 1;
        ok = ok && dga_pool_set_threads(2) == DGA_OK;   /* and may start its own */
        tally d = {{0}, {0}};
        dga_pool_run(count_task, &d);
        ok = ok && d.count[0] == 1 && d.count[1] == 1;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    set_threads(1);
}

/* Nanoseconds all of this process's threads have spent on a CPU (the first field of each
 * thread's /proc schedstat), or -1 if the kernel does not expose it. */
static double process_cpu_ns(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    double total = 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        unsigned long long ns;
        if (fscanf(f, "%llu", &ns) == 1) total += (double)ns, found = 1;
        fclose(f);
    }
    closedir(d);
    return found ? total : -1;
}

static int user_set_blas_spin;   /* read in main, before any test starts the pool */

/* Once the pool runs on two threads, OpenBLAS's idle workers must sleep soon after a
 * product instead of calling sched_yield for OpenBLAS's default 2^28 cycles (about 0.1 s),
 * which takes the cores from the pool's kernels between products (pool.c). Measured as the
 * CPU time the whole process uses while its main thread sleeps for 60 ms right after a
 * threaded product: a worker still yielding uses nearly all of those 60 ms; a sleeping one
 * none. The bound is loose on purpose; what it separates is 0 from about 60.
 * It runs first: a fork (test_fork) makes OpenBLAS restart its workers by itself, which
 * would hide a pool.c that set the variable but did not restart them. */
static void test_blas_workers_sleep(void **state)
{
    (void)state;
    /* the user's own setting wins; only OpenBLAS's pthread build has the spin; schedstat */
    if (user_set_blas_spin || openblas_get_parallel() != 1 || process_cpu_ns() < 0) skip();
    int before = openblas_get_num_threads();
    openblas_set_num_threads(2);
    set_threads(2);
    const char *spin = getenv("OPENBLAS_THREAD_TIMEOUT");
    assert_non_null(spin);
    assert_string_equal(spin, "14");
    enum { N = 384 };
    float *a = malloc(N * N * sizeof *a), *b = malloc(N * N * sizeof *b);
    float *c = malloc(N * N * sizeof *c), *want = malloc(N * N * sizeof *want);
    assert_non_null(a), assert_non_null(b), assert_non_null(c), assert_non_null(want);
    for (int i = 0; i < N * N; i++) a[i] = (float)(i % 13) - 6.0f, b[i] = (float)(i % 7) * 0.25f;
    /* OpenBLAS restarted its workers to read the new setting: products are still right.
     * Small integers times quarters: every partial sum is exact, so any split of the product
     * between threads gives the same bits. */
    openblas_set_num_threads(1);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f,
                want, N);
    openblas_set_num_threads(2);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c,
                N);
    assert_memory_equal(c, want, N * N * sizeof *c);
    usleep(5000);   /* past the short spin */
    double c0 = process_cpu_ns();
    usleep(60000);
    double used_ms = (process_cpu_ns() - c0) / 1e6;
    if (used_ms >= 20.0) fail_msg("idle for 60 ms after a product, the process used %.1f ms of "
                                  "CPU: OpenBLAS's workers are still spinning", used_ms);
    set_threads(1);
    openblas_set_num_threads(before);
    free(a), free(b), free(c), free(want);
}

/* ------------------------------------------------------------- a training run */

enum { B = 4, T = 32, V = 97, STEPS = 4 };

/* STEPS training steps (forward, backward, clip, AdamW) from a fixed seed; returns the
 * parameters and the losses. */
static float *train(int threads, size_t min_work, float *losses, size_t *np)
{
    set_threads(threads);
    dga_pool_set_min_work(min_work);
    dga_gpt_config cfg = {.n_layer = 2, .n_head = 2, .n_embd = 64, .n_ctx = T,
                          .vocab_size = V};
    dga_model *m = NULL;
    assert_int_equal(dga_gpt_create(&cfg, B, &m), DGA_OK);
    dga_rng rng;
    dga_rng_seed(&rng, 11);
    dga_model_init_weights(m, &rng);
    size_t n = dga_model_num_params(m);
    const size_t all[1][2] = {{0, n}};
    dga_adamw *opt = NULL;
    assert_int_equal(dga_adamw_create(n, NULL, all, 1, &opt), DGA_OK);
    int32_t in[B * T], tg[B * T];
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < B * T; i++) {
            in[i] = (int32_t)dga_rng_below(&rng, V);
            tg[i] = i % 9 == 4 ? -1 : (int32_t)dga_rng_below(&rng, V);
        }
        dga_model_zero_grad(m);
        assert_int_equal(dga_model_forward(m, in, tg, B, T, &losses[s]), DGA_OK);
        assert_int_equal(dga_model_backward(m), DGA_OK);
        dga_grad_clip(dga_model_grads(m), n, 0.5);
        assert_int_equal(dga_adamw_step(opt, dga_model_params(m), dga_model_grads(m), 1e-2f),
                         DGA_OK);
    }
    float *p = malloc(n * sizeof *p);
    memcpy(p, dga_model_params(m), n * sizeof *p);
    *np = n;
    dga_adamw_free(opt);
    dga_model_free(m);
    set_threads(1);
    dga_pool_set_min_work(32768);
    return p;
}

static void test_training_reproducible(void **state)
{
    (void)state;
    float l1[STEPS], la[STEPS], lb[STEPS], lc[STEPS];
    size_t n1, na, nb, nc;
    float *p1 = train(1, 32768, l1, &n1);
    /* two threads, every kernel split (minimum work 0), twice: the same bits */
    float *pa = train(2, 0, la, &na), *pb = train(2, 0, lb, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(pa, pb, na * sizeof *pa);
    assert_memory_equal(la, lb, sizeof la);
    /* and the default minimum work, at which these sizes mostly stay on one thread */
    float *pc = train(2, 32768, lc, &nc);
    float *pd = train(2, 32768, lb, &nb);
    assert_memory_equal(pc, pd, nc * sizeof *pc);
    /* against one thread: the kernels give the same bits, and only the gradient norm (a sum
     * over chunks of 65,536; this model has ~110,000 parameters) may differ in its last bits,
     * so the first forward is identical and the rest within float rounding */
    assert_int_equal(n1, na);
    assert_true(l1[0] == la[0]);
    for (int s = 1; s < STEPS; s++) assert_true(fabsf(l1[s] - la[s]) <= 1e-5f * fabsf(l1[s]));
    for (size_t i = 0; i < n1; i++) assert_true(fabsf(p1[i] - pa[i]) <= 1e-4f);
    free(p1), free(pa), free(pb), free(pc), free(pd);
}

int main(void)
{
    user_set_blas_spin = getenv("OPENBLAS_THREAD_TIMEOUT") != NULL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blas_workers_sleep),
        cmocka_unit_test(test_range),       cmocka_unit_test(test_every_task_once),
        cmocka_unit_test(test_nested),      cmocka_unit_test(test_scratch),
        cmocka_unit_test(test_run_blas),
        cmocka_unit_test(test_bad_counts),  cmocka_unit_test(test_fork),
        cmocka_unit_test(test_training_reproducible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Time of one alignment round by method: exact, fd and jvp.
 *
 *   bench_align [build_dir] [threads ...]      (default threads: $OPENBLAS_NUM_THREADS, or 1 2)
 *
 * Config "small" of bench_train (L=4, C=256, h=4, T=256, V=8192), model batch 8, one target
 * batch and k = 16 domain batches of 8 x 256 random tokens, GPT-2 init. A round is one
 * dga_align call: the target gradient (one forward + backward) plus, per domain batch,
 *   exact: forward + backward + two dot products,  fd: two forwards,  jvp: one forward
 *   carrying tangents.
 * Reports the median wall time of DGA_BENCH_ALIGN_ROUNDS rounds (default 3) after one
 * warm-up round, and the agreement of fd and jvp with exact (max |a - a_exact| / max |a_exact|).
 * Measures; asserts nothing. Each measurement is printed as "RESULT {json}" for bench/run. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"
#include "align.h"
#include "gpt.h"
#include "pool.h"

enum { K = 16, BATCH = 8 };

static int bench_threads(int threads, int rounds)
{
    const dga_gpt_config cfg = {.n_layer = 4, .n_head = 4, .n_embd = 256, .n_ctx = 256,
                                .vocab_size = 8192};
    const int T = cfg.n_ctx, V = cfg.vocab_size;
    const size_t per = (size_t)BATCH * T;
    int rc = 1;
    dga_model *m = NULL;
    dga_align_ws *ws = NULL;
    int32_t *tok = malloc((K + 1) * per * 2 * sizeof *tok);
    double *times = malloc((size_t)rounds * sizeof *times), *cpus = malloc((size_t)rounds * sizeof *cpus);
    if (!tok || !times || !cpus) goto out;
    if (dga_gpt_create(&cfg, BATCH, &m) != DGA_OK ||
        dga_align_ws_create(dga_model_num_params(m), &ws) != DGA_OK) {
        fprintf(stderr, "bench_align: %s\n", dga_last_error());
        goto out;
    }
    dga_rng rng;
    dga_rng_seed(&rng, 0);
    dga_model_init_weights(m, &rng);
    for (size_t i = 0; i < (K + 1) * per * 2; i++) tok[i] = (int32_t)dga_rng_below(&rng, (uint64_t)V);
    dga_batch target = {tok, tok + per, BATCH, T}, dom[K];
    for (int i = 0; i < K; i++) dom[i] = (dga_batch){tok + (2 * i + 2) * per, tok + (2 * i + 3) * per, BATCH, T};

    static const dga_align_method methods[] = {DGA_ALIGN_EXACT, DGA_ALIGN_FD, DGA_ALIGN_JVP};
    double a_exact[K] = {0}, amax = 0;
    for (size_t mi = 0; mi < sizeof methods / sizeof methods[0]; mi++) {
        double a[K], l[K], gn[K];
        dga_align_result res = {.dot = a, .loss = l, .grad_norm = gn};
        dga_align_opts o = {.method = methods[mi]};
        for (int r = 0; r <= rounds; r++) {
            double t0 = bench_now(), c0 = bench_cpu_now();
            if (dga_align(m, ws, &target, dom, K, &o, &res) != DGA_OK) {
                fprintf(stderr, "bench_align: %s\n", dga_last_error());
                goto out;
            }
            if (r > 0) {   /* r == 0 warms up (and allocates jvp's tangent arena) */
                times[r - 1] = bench_now() - t0;
                cpus[r - 1] = bench_cpu_now() - c0;
            }
        }
        double err = 0;
        if (methods[mi] == DGA_ALIGN_EXACT)
            for (int i = 0; i < K; i++) {
                a_exact[i] = a[i];
                amax = fmax(amax, fabs(a[i]));
            }
        for (int i = 0; i < K; i++) err = fmax(err, fabs(a[i] - a_exact[i]));
        err = amax > 0 ? err / amax : 0;
        qsort(times, (size_t)rounds, sizeof *times, bench_cmp_double);
        qsort(cpus, (size_t)rounds, sizeof *cpus, bench_cmp_double);
        double med = rounds % 2 ? times[rounds / 2] : 0.5 * (times[rounds / 2 - 1] + times[rounds / 2]);
        double tokens = (double)(K + 1) * per;
        const char *name = dga_align_method_name(methods[mi]);
        printf("  [align] small k=%d batches of %dx%d, %d thread(s), %-5s: round median %.3f s "
               "(min %.3f, max %.3f), CPU %.3f s, %.0f tok/s, max |a - a_exact| / max |a_exact| "
               "= %.1e\n", K, BATCH, T, threads, name, med, times[0], times[rounds - 1],
               cpus[rounds / 2], tokens / med, err);
        printf("RESULT {\"kind\":\"align\",\"config\":\"small\",\"threads\":%d,\"method\":\"%s\","
               "\"k\":%d,\"batch\":%d,\"T\":%d,\"rounds\":%d,\"round_s_median\":%.4f,"
               "\"round_s_min\":%.4f,\"cpu_s_median\":%.4f,\"tokens_per_s\":%.1f,"
               "\"rel_err_vs_exact\":%.2e}\n", threads, name, K, BATCH, T, rounds, med, times[0],
               cpus[rounds / 2], tokens / med, err);
        fflush(stdout);
    }
    rc = 0;
out:
    dga_align_ws_free(ws);
    dga_model_free(m);
    free(tok), free(times), free(cpus);
    return rc;
}

int main(int argc, char **argv)
{
    int threads[16], nthreads = bench_thread_list(argc, argv, threads, 16);
    const char *renv = getenv("DGA_BENCH_ALIGN_ROUNDS");
    int rounds = renv && atoi(renv) > 0 ? atoi(renv) : 3;
    int rc = 0;
    for (int i = 0; i < nthreads; i++) {
        if (threads[i] < 1) continue;
        openblas_set_num_threads(threads[i]);
        /* as dgalua does: the non-GEMM kernels run on the pool at the same thread count */
        if (dga_pool_set_threads(threads[i]) != DGA_OK) {
            fprintf(stderr, "bench_align: %s\n", dga_last_error());
            return 1;
        }
        const char *env = getenv("OPENBLAS_CORETYPE");
        printf("bench_align: %d thread(s) (OpenBLAS reports %d), OpenBLAS core %s%s%s\n",
               threads[i], openblas_get_num_threads(), openblas_get_corename(),
               env ? ", OPENBLAS_CORETYPE=" : "", env ? env : "");
        rc |= bench_threads(threads[i], rounds);
    }
    return rc;
}

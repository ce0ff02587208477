/* Training throughput of the C GPT, comparable with ../shared/bench/torch_gpt.py.
 *
 *   bench_train [build_dir] [threads ...]      (default threads: $OPENBLAS_NUM_THREADS, or 1 2)
 *
 * For each thread count: the best cblas_sgemm GFLOP/s over a few square and model-shaped
 * products (the "peak"), then for configs tiny and small the median step time of a full
 * training step (zero_grad + forward + backward + clip + AdamW) on random tokens after
 * warm-up, tokens/s, model FLOPs/token (dga_gpt_flops_per_token), achieved GFLOP/s, the
 * fraction of the sgemm peak and the process's peak RSS. Measures; asserts nothing.
 * Each measurement is also printed as "RESULT {json}" for bench/run's table.
 *
 * Each config runs in every precision (gemm_dnnl.h) of $DGA_BENCH_PRECISIONS (default
 * "fp32 fp32-onednn bf16"): fp32's rows are the ones above; the others say their precision in
 * their RESULT lines, and bf16's fraction is of the bf16 matmul peak (oneDNN, same shapes).
 * bf16 runs only where oneDNN has a native bf16 matmul; elsewhere a line says it was skipped.
 *
 * It also gives the share of a step spent inside sgemm (see gemm_share below) and so the
 * ceiling of the fraction of the sgemm peak: what a step would reach if every other kernel
 * took no time at all. A target above that ceiling cannot be met by faster elementwise code. */
#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include "bench_util.h"
#include "adamw.h"
#include "gemm_dnnl.h"
#include "gpt.h"
#include "pool.h"

static double peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

/* Best GFLOP/s of C[m,n] = A[m,k] B[k,n] over `reps` calls. */
static double time_sgemm(int m, int n, int k, int transb, int reps)
{
    float *a = malloc((size_t)m * k * sizeof *a), *b = malloc((size_t)k * n * sizeof *b);
    float *c = malloc((size_t)m * n * sizeof *c);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return 0;
    }
    for (size_t i = 0; i < (size_t)m * k; i++) a[i] = (float)(i % 7) * 0.01f;
    for (size_t i = 0; i < (size_t)k * n; i++) b[i] = (float)(i % 5) * 0.01f;
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {
        double t0 = bench_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, transb ? CblasTrans : CblasNoTrans, m, n, k,
                    1.0f, a, k, b, transb ? k : n, 0.0f, c, n);
        double dt = bench_now() - t0;
        if (r > 0 && dt < best) best = dt;   /* r == 0 warms up */
    }
    free(a), free(b), free(c);
    return 2.0 * m * n * k / best / 1e9;
}

/* The sgemm share of a step. This program defines cblas_sgemm, so the library's calls
 * (libdga.a is linked in statically) land here and go on to OpenBLAS through RTLD_NEXT. While
 * `gemm_timing` is set, the wall time of the main thread's calls is summed: the main thread
 * makes every OpenBLAS-threaded product and takes part in every pool run (the per-head
 * attention products), so its time inside sgemm is the step's time with a product running. */
typedef void (*sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE,
                         const enum CBLAS_TRANSPOSE, const blasint, const blasint, const blasint,
                         const float, const float *, const blasint, const float *, const blasint,
                         const float, float *, const blasint);
static sgemm_fn openblas_sgemm;
static int gemm_timing;
static pthread_t main_thread;
static double gemm_seconds;

void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta,
                 const enum CBLAS_TRANSPOSE tb, const blasint m, const blasint n, const blasint k,
                 const float alpha, const float *a, const blasint lda, const float *b,
                 const blasint ldb, const float beta, float *c, const blasint ldc)
{
    if (!openblas_sgemm) {
        openblas_sgemm = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
        if (!openblas_sgemm) {
            fprintf(stderr, "bench_train: cblas_sgemm not found in OpenBLAS: %s\n", dlerror());
            abort();
        }
    }
    if (!gemm_timing || !pthread_equal(pthread_self(), main_thread)) {
        openblas_sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    double t0 = bench_now();
    openblas_sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    gemm_seconds += bench_now() - t0;
}

/* CPU seconds of the calling thread. On a machine shared with other jobs a process's wall
 * time measures the queue more than the code; the main thread's CPU time is the critical path
 * a quiet machine would show (the main thread takes part in every sgemm and every pool run,
 * and waits for the others in a sleep or a sched_yield), so the ratios below are also
 * computed from it. */
static double thread_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The sgemm peak again, timed by the calling thread's CPU time (best of reps). */
static double main_cpu_peak;

static double time_sgemm_main_cpu(int m, int n, int k, int transb, int reps)
{
    float *a = calloc((size_t)m * k, sizeof *a), *b = calloc((size_t)k * n, sizeof *b);
    float *c = malloc((size_t)m * n * sizeof *c);
    double best = 1e30;
    if (a && b && c)
        for (int r = 0; r <= reps; r++) {
            double t0 = thread_cpu_now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, transb ? CblasTrans : CblasNoTrans, m, n,
                        k, 1.0f, a, k, b, transb ? k : n, 0.0f, c, n);
            double dt = thread_cpu_now() - t0;
            if (r > 0 && dt < best) best = dt;
        }
    free(a), free(b), free(c);
    return best < 1e30 ? 2.0 * m * n * k / best / 1e9 : 0;
}

static double sgemm_peak(int threads)
{
    static const struct { int m, n, k, tb; const char *what; } shapes[] = {
        {1024, 1024, 1024, 0, "square 1024"},
        {2048, 2048, 2048, 0, "square 2048"},
        {2048, 8192, 256, 1, "lm head 2048x256 @ (8192x256)^T"},
        {2048, 1024, 256, 0, "c_fc 2048x256 @ 256x1024"},
        {256, 1024, 2048, 0, "weight grad 256x2048 @ 2048x1024"},
    };
    double peak = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        double g = time_sgemm(shapes[i].m, shapes[i].n, shapes[i].k, shapes[i].tb, 3);
        printf("  sgemm %-34s %7.1f GFLOP/s\n", shapes[i].what, g);
        if (g > peak) peak = g;
    }
    main_cpu_peak = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        double g = time_sgemm_main_cpu(shapes[i].m, shapes[i].n, shapes[i].k, shapes[i].tb, 3);
        if (g > main_cpu_peak) main_cpu_peak = g;
    }
    printf("  sgemm peak by the main thread's CPU time: %.1f GFLOP/s\n", main_cpu_peak);
    printf("RESULT {\"kind\":\"sgemm_peak\",\"bench\":\"bench_train\",\"threads\":%d,"
           "\"gflops\":%.1f}\n", threads, peak);
    return peak;
}

/* The best GFLOP/s of a oneDNN context of precision p over sgemm_peak's shapes (operand
 * conversion included: a step converts its activations too). 0 if it cannot run here. */
static double dnnl_peak(dga_precision p, int threads)
{
    static const struct { int m, n, k, tb; } shapes[] = {
        {1024, 1024, 1024, 0}, {2048, 2048, 2048, 0}, {2048, 8192, 256, 1},
        {2048, 1024, 256, 0}, {256, 1024, 2048, 0},
    };
    dga_dnnl *g = NULL;
    if (dga_dnnl_create(p, &g) != DGA_OK) return 0;
    double peak = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && peak >= 0; i++) {
        int m = shapes[i].m, n = shapes[i].n, k = shapes[i].k, tb = shapes[i].tb;
        float *a = calloc((size_t)m * k, sizeof *a), *b = calloc((size_t)k * n, sizeof *b);
        float *c = calloc((size_t)m * n, sizeof *c);
        double best = 1e30;
        for (int r = 0; a && b && c && r <= 3; r++) {
            double t0 = bench_now();
            if (dga_dnnl_gemm(g, 0, tb, m, n, k, a, k, b, tb ? k : n, c, n, 0) != DGA_OK) {
                best = 1e30;
                peak = -1;
                break;
            }
            double dt = bench_now() - t0;
            if (r > 0 && dt < best) best = dt;
        }
        if (best < 1e30 && 2.0 * m * n * k / best / 1e9 > peak) peak = 2.0 * m * n * k / best / 1e9;
        free(a), free(b), free(c);
    }
    dga_dnnl_free(g);
    if (peak < 0) return 0;
    printf("  %s matmul peak (oneDNN, same shapes): %.1f GFLOP/s\n", dga_precision_name(p), peak);
    printf("RESULT {\"kind\":\"matmul_peak\",\"bench\":\"bench_train\",\"threads\":%d,"
           "\"precision\":\"%s\",\"gflops\":%.1f}\n", threads, dga_precision_name(p), peak);
    return peak;
}

typedef struct {
    const char *name;
    dga_gpt_config cfg;
    int B, warmup, steps;
} bench_cfg;

static int bench_config(const bench_cfg *bc, int threads, double peak, dga_precision prec)
{
    const int B = bc->B, T = bc->cfg.n_ctx, V = bc->cfg.vocab_size;
    dga_model *m = NULL;
    dga_adamw *opt = NULL;
    int32_t *in = malloc((size_t)B * T * sizeof *in), *tg = malloc((size_t)B * T * sizeof *tg);
    double *times = malloc((size_t)bc->steps * sizeof *times);
    double *cpus = malloc((size_t)bc->steps * sizeof *cpus);
    double *mains = malloc((size_t)bc->steps * sizeof *mains);
    double *gemms = malloc((size_t)bc->steps * sizeof *gemms);
    size_t(*ranges)[2] = NULL;
    int rc = 1;
    if (!in || !tg || !times || !cpus || !mains || !gemms) goto out;
    /* a forked child starts without the parent's pool workers: start its own */
    if (dga_pool_set_threads(threads) != DGA_OK) {
        fprintf(stderr, "bench_train: %s\n", dga_last_error());
        goto out;
    }
    if (dga_gpt_create(&bc->cfg, B, &m) != DGA_OK) {
        fprintf(stderr, "bench_train: %s\n", dga_last_error());
        goto out;
    }
    /* Measured here, in the child: with DGA_DNNL_THREADS=omp a parent that had run an OpenMP
     * team would leave its forked children hanging in libgomp (not fork-safe). */
    if (prec != DGA_PREC_FP32 && (peak = dnnl_peak(prec, threads)) <= 0) {
        fprintf(stderr, "bench_train: no %s matmul peak\n", dga_precision_name(prec));
        goto out;
    }
    const char *note = NULL;
    if (dga_gpt_set_precision(m, prec, &note) != DGA_OK || note) {
        fprintf(stderr, "bench_train: %s\n", note ? note : dga_last_error());
        goto out;
    }
    dga_rng rng;
    dga_rng_seed(&rng, 0);
    dga_model_init_weights(m, &rng);
    size_t n = dga_model_num_params(m);
    int nt = dga_model_num_tensors(m), nr = 0;
    ranges = malloc((size_t)nt * sizeof *ranges);
    if (!ranges) goto out;
    for (int i = 0; i < nt; i++) {
        const dga_tensor_info *t = dga_model_tensor(m, i);
        if (!t->is_matrix) continue;
        ranges[nr][0] = t->offset;
        ranges[nr][1] = t->offset + t->numel;
        nr++;
    }
    dga_adamw_config oc = dga_adamw_defaults();
    if (dga_adamw_create(n, &oc, (const size_t(*)[2])ranges, nr, &opt) != DGA_OK) {
        fprintf(stderr, "bench_train: %s\n", dga_last_error());
        goto out;
    }
    float loss_first = 0, loss = 0;
    for (int s = 0; s < bc->warmup + bc->steps; s++) {
        for (int i = 0; i < B * T; i++) {
            in[i] = (int32_t)dga_rng_below(&rng, (uint64_t)V);
            tg[i] = (int32_t)dga_rng_below(&rng, (uint64_t)V);
        }
        gemm_seconds = 0;
        gemm_timing = 1;
        double t0 = bench_now(), c0 = bench_cpu_now(), m0 = thread_cpu_now();
        dga_model_zero_grad(m);
        if (dga_model_forward(m, in, tg, B, T, &loss) != DGA_OK ||
            dga_model_backward(m) != DGA_OK) {
            fprintf(stderr, "bench_train: %s\n", dga_last_error());
            goto out;
        }
        dga_grad_clip(dga_model_grads(m), n, 1.0);
        if (dga_adamw_step(opt, dga_model_params(m), dga_model_grads(m), 1e-3f) != DGA_OK) {
            fprintf(stderr, "bench_train: %s\n", dga_last_error());
            goto out;
        }
        double dt = bench_now() - t0, dc = bench_cpu_now() - c0;
        gemm_timing = 0;
        if (s == 0) loss_first = loss;
        if (s >= bc->warmup) {
            times[s - bc->warmup] = dt;
            cpus[s - bc->warmup] = dc;
            mains[s - bc->warmup] = thread_cpu_now() - m0;
            gemms[s - bc->warmup] = gemm_seconds / dt;
        }
    }
    qsort(times, (size_t)bc->steps, sizeof *times, bench_cmp_double);
    qsort(cpus, (size_t)bc->steps, sizeof *cpus, bench_cmp_double);
    double cpu_med = cpus[bc->steps / 2];
    double med = bc->steps % 2 ? times[bc->steps / 2]
                               : 0.5 * (times[bc->steps / 2 - 1] + times[bc->steps / 2]);
    double fpt = dga_gpt_flops_per_token(&bc->cfg, T);
    double tps = B * T / med, gf = fpt * tps / 1e9, rss = peak_rss_mib();
    if (prec != DGA_PREC_FP32) {
        const char *pn = dga_precision_name(prec);
        printf("  [train] %-5s %s: step median %.1f ms (min %.1f, max %.1f) -> %.0f tok/s, "
               "%.1f GFLOP/s, %.0f%% of the %s matmul peak %.1f, peak RSS %.0f MiB, loss "
               "%.3f -> %.3f, CPU time/step %.1f ms\n", bc->name, pn, med * 1e3,
               times[0] * 1e3, times[bc->steps - 1] * 1e3, tps, gf, 100 * gf / peak,
               prec == DGA_PREC_BF16 ? "bf16" : "oneDNN f32", peak, rss, loss_first, loss,
               cpu_med * 1e3);
        printf("RESULT {\"kind\":\"train\",\"bench\":\"bench_train\",\"config\":\"%s\","
               "\"precision\":\"%s\",\"threads\":%d,\"params\":%zu,"
               "\"flops_per_token\":%.0f,\"step_s_median\":%.5f,\"tokens_per_s\":%.1f,"
               "\"achieved_gflops\":%.2f,\"mfu_vs_peak\":%.3f,\"peak_gflops\":%.1f,"
               "\"peak_rss_mib\":%.0f,\"cpu_s_median\":%.5f}\n", bc->name, pn, threads, n,
               fpt, med, tps, gf, gf / peak, peak, rss, cpu_med);
        fflush(stdout);
        rc = 0;
        goto out;
    }
    printf("  [train] %-5s L=%d C=%d h=%d T=%d V=%d B=%d: %.2fM params, %.1f MFLOP/token, step "
           "median %.1f ms (min %.1f, max %.1f) -> %.0f tok/s, %.1f GFLOP/s, %.0f%% of sgemm "
           "peak, peak RSS %.0f MiB, loss %.3f -> %.3f, CPU time/step %.1f ms\n",
           bc->name, bc->cfg.n_layer, bc->cfg.n_embd, bc->cfg.n_head, T, V, B, n / 1e6,
           fpt / 1e6, med * 1e3, times[0] * 1e3, times[bc->steps - 1] * 1e3, tps, gf,
           100 * gf / peak, rss, loss_first, loss, cpu_med * 1e3);
    printf("RESULT {\"kind\":\"train\",\"bench\":\"bench_train\",\"config\":\"%s\","
           "\"threads\":%d,\"params\":%zu,\"flops_per_token\":%.0f,\"step_s_median\":%.5f,"
           "\"tokens_per_s\":%.1f,\"achieved_gflops\":%.2f,\"mfu_vs_peak\":%.3f,"
           "\"peak_gflops\":%.1f,\"peak_rss_mib\":%.0f,\"cpu_s_median\":%.5f}\n",
           bc->name, threads, n, fpt, med, tps, gf, gf / peak, peak, rss, cpu_med);
    qsort(gemms, (size_t)bc->steps, sizeof *gemms, bench_cmp_double);
    double share = gemms[bc->steps / 2];
    printf("  [train] %-5s sgemm share of a step (median) %.0f%%: with every other kernel free "
           "the step would reach %.0f%% of the sgemm peak\n", bc->name, 100 * share,
           100 * gf / peak / share);
    printf("RESULT {\"kind\":\"train_gemm_share\",\"bench\":\"bench_train\",\"config\":\"%s\","
           "\"threads\":%d,\"gemm_share\":%.3f,\"mfu_ceiling\":%.3f}\n", bc->name, threads,
           share, gf / peak / share);
    qsort(mains, (size_t)bc->steps, sizeof *mains, bench_cmp_double);
    double main_med = mains[bc->steps / 2], main_gf = fpt * B * T / main_med / 1e9;
    printf("  [train] %-5s main-thread CPU/step median %.1f ms -> %.1f GFLOP/s, %.0f%% of the "
           "main-thread sgemm peak %.1f\n", bc->name, main_med * 1e3, main_gf,
           100 * main_gf / main_cpu_peak, main_cpu_peak);
    printf("RESULT {\"kind\":\"train_main_cpu\",\"bench\":\"bench_train\",\"config\":\"%s\","
           "\"threads\":%d,\"main_cpu_s_median\":%.5f,\"gflops\":%.2f,\"peak_gflops\":%.1f,"
           "\"mfu_vs_peak\":%.3f}\n", bc->name, threads, main_med, main_gf, main_cpu_peak,
           main_gf / main_cpu_peak);
    fflush(stdout);
    rc = 0;
out:
    dga_adamw_free(opt);
    dga_model_free(m);
    free(ranges), free(in), free(tg), free(times), free(cpus), free(mains), free(gemms);
    return rc;
}

/* Peak RSS is a per-process high-water mark: each config runs in its own child so the number
 * it reports is its own, not that of the largest config measured before it. */
static int bench_config_in_child(const bench_cfg *bc, int threads, double peak,
                                 dga_precision prec)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return bench_config(bc, threads, peak, prec);
    if (pid == 0) {
        int rc = bench_config(bc, threads, peak, prec);
        fflush(stdout);
        _exit(rc ? 1 : 0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) return 1;
    return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
    static const bench_cfg configs[] = {
        {"tiny", {.n_layer = 2, .n_head = 4, .n_embd = 128, .n_ctx = 128, .vocab_size = 4096},
         16, 3, 15},
        {"small", {.n_layer = 4, .n_head = 4, .n_embd = 256, .n_ctx = 256, .vocab_size = 8192},
         8, 3, 10},
    };
    main_thread = pthread_self();
    const char *precisions = getenv("DGA_BENCH_PRECISIONS");
    if (!precisions || !*precisions) precisions = "fp32 fp32-onednn bf16";
    char padded[256];
    snprintf(padded, sizeof padded, " %s ", precisions);
    printf("bench_train: oneDNN ISA %s; precisions %s\n", dga_dnnl_isa_name(), precisions);
    int threads[16], nthreads = bench_thread_list(argc, argv, threads, 16);
    int rc = 0;
    for (int i = 0; i < nthreads; i++) {
        openblas_set_num_threads(threads[i]);
        if (dga_pool_set_threads(threads[i]) != DGA_OK) {
            fprintf(stderr, "bench_train: %s\n", dga_last_error());
            return 1;
        }
        /* the kernel matters: OPENBLAS_CORETYPE=Haswell (AVX2) vs SkylakeX (AVX-512) is a
         * ~1.8x difference in sgemm speed on an AVX-512 CPU */
        const char *env = getenv("OPENBLAS_CORETYPE");
        printf("bench_train: %d thread(s) (OpenBLAS reports %d), OpenBLAS core %s%s%s\n",
               threads[i], openblas_get_num_threads(), openblas_get_corename(),
               env ? ", OPENBLAS_CORETYPE=" : "", env ? env : "");
        double peak = sgemm_peak(threads[i]);
        if (strstr(padded, " bf16 ") && !dga_dnnl_bf16_native())
            printf("  bf16 skipped: oneDNN has no native bf16 matmul on this CPU (ISA %s)\n",
                   dga_dnnl_isa_name());
        for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++)
            for (int p = 0; p < 3; p++) {
                /* "fp32" is also inside "fp32-onednn": match whole words */
                char word[32];
                snprintf(word, sizeof word, " %s ", dga_precision_name((dga_precision)p));
                if (!strstr(padded, word)) continue;
                if (p == DGA_PREC_BF16 && !dga_dnnl_bf16_native()) continue;
                rc |= bench_config_in_child(&configs[c], threads[i], peak, (dga_precision)p);
            }
    }
    return rc;
}

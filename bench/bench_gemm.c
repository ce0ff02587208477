/* The model's matrix products, OpenBLAS against oneDNN, at the shapes of a training step.
 *
 *   bench_gemm [build_dir] [threads ...]      (default threads: $OPENBLAS_NUM_THREADS, or 1 2)
 *
 * For configs tiny and small (bench_train's), every distinct product of a step's linear
 * layers and LM head (forward, input gradient, weight gradient), timed (median of 9 calls
 * after one warm-up) as dgalua makes it: cblas_sgemm (precision fp32), a oneDNN f32 context
 * and a oneDNN bf16 context (fp32-onednn, bf16: core/gemm_dnnl.c, including the bf16
 * conversion of the operands, the weights' copy excepted, as in a step). oneDNN runs both
 * ways: row blocks over the pool, one OpenMP thread each (the default), and its own OpenMP
 * threads (DGA_DNNL_THREADS=omp). Each step total weighs a product by how often a step makes
 * it. bf16 is measured only where oneDNN has a native bf16 matmul; elsewhere the program
 * says it skipped it. Measures; asserts nothing. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "gemm_dnnl.h"
#include "pool.h"

typedef struct {
    const char *what;
    int M, N, K, ta, tb, acc, count;
} product;

enum { REPS = 9, MAXP = 16 };

/* The products of one step of a model (N = B*T rows) and how many times each runs. */
static int step_products(int L, int C, int V, int N, product *p)
{
    static const char *names[4] = {"qkv", "attn.proj", "fc", "fc.proj"};
    const int io[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};
    int n = 0;
    for (int i = 0; i < 4; i++) {
        int IC = io[i][0], OC = io[i][1];
        p[n++] = (product){names[i], N, OC, IC, 0, 0, 0, L};
        p[n++] = (product){names[i], N, IC, OC, 0, 1, 0, L};
        p[n++] = (product){names[i], IC, OC, N, 1, 0, 1, L};
    }
    p[n++] = (product){"lm head", N, V, C, 0, 1, 0, 1};
    p[n++] = (product){"lm head", N, C, V, 0, 0, 0, 1};
    p[n++] = (product){"lm head", V, C, N, 1, 0, 1, 1};
    return n;
}

/* Median seconds of one product; g NULL is cblas_sgemm. */
static double time_product(dga_dnnl *g, const product *p, const float *A, const float *B,
                           float *Cm)
{
    int lda = p->ta ? p->M : p->K, ldb = p->tb ? p->K : p->N, ldc = p->N;
    double t[REPS];
    for (int r = -1; r < REPS; r++) {
        double t0 = bench_now();
        if (g) {
            if (dga_dnnl_gemm(g, p->ta, p->tb, p->M, p->N, p->K, A, lda, B, ldb, Cm, ldc,
                              p->acc) != DGA_OK) {
                fprintf(stderr, "bench_gemm: %s\n", dga_last_error());
                dga_dnnl_take_status(g);
                return 0;
            }
        } else {
            cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans,
                        p->tb ? CblasTrans : CblasNoTrans, p->M, p->N, p->K, 1.0f, A, lda, B,
                        ldb, p->acc ? 1.0f : 0.0f, Cm, ldc);
        }
        if (r >= 0) t[r] = bench_now() - t0;
    }
    qsort(t, REPS, sizeof t[0], bench_cmp_double);
    return t[REPS / 2];
}

enum { K_BLAS, K_F32, K_F32_OMP, K_BF16, K_BF16_OMP, NK };
static const char *const kind_names[NK] = {"openblas", "onednn_f32", "onednn_f32_omp",
                                           "onednn_bf16", "onednn_bf16_omp"};

static dga_dnnl *context(dga_precision p, int omp)
{
    if (omp) setenv("DGA_DNNL_THREADS", "omp", 1);
    else unsetenv("DGA_DNNL_THREADS");
    dga_dnnl *g = NULL;
    if (dga_dnnl_create(p, &g) != DGA_OK) return NULL;
    unsetenv("DGA_DNNL_THREADS");
    return g;
}

static void bench_config(const char *name, int L, int C, int V, int N, int threads,
                         int with_bf16)
{
    product p[MAXP];
    int np = step_products(L, C, V, N, p);
    size_t maxa = 0, maxb = 0, maxc = 0;
    for (int i = 0; i < np; i++) {
        size_t a = (size_t)p[i].M * p[i].K, b = (size_t)p[i].K * p[i].N,
               c = (size_t)p[i].M * p[i].N;
        maxa = a > maxa ? a : maxa;
        maxb = b > maxb ? b : maxb;
        maxc = c > maxc ? c : maxc;
    }
    float *A = malloc(maxa * sizeof *A), *B = malloc(maxb * sizeof *B),
          *Cm = calloc(maxc, sizeof *Cm);
    dga_dnnl *g[NK] = {NULL};
    g[K_F32] = context(DGA_PREC_FP32_ONEDNN, 0);
    g[K_F32_OMP] = context(DGA_PREC_FP32_ONEDNN, 1);
    if (with_bf16) {
        g[K_BF16] = context(DGA_PREC_BF16, 0);
        g[K_BF16_OMP] = context(DGA_PREC_BF16, 1);
    }
    if (!A || !B || !Cm || !g[K_F32] || !g[K_F32_OMP]) {
        fprintf(stderr, "bench_gemm: cannot set up %s: %s\n", name, dga_last_error());
        goto out;
    }
    for (size_t i = 0; i < maxa; i++) A[i] = (float)(i % 7) * 0.01f - 0.03f;
    for (size_t i = 0; i < maxb; i++) B[i] = (float)(i % 5) * 0.01f - 0.02f;
    double total[NK] = {0};
    double flops_step = 0;
    for (int i = 0; i < np; i++) {
        double fl = 2.0 * p[i].M * p[i].N * p[i].K;
        flops_step += fl * p[i].count;
        printf("  %-5s %-9s %5d x %5d x %5d%s%s x%d:", name, p[i].what, p[i].M, p[i].N,
               p[i].K, p[i].ta ? " A^T" : "", p[i].tb ? " B^T" : "", p[i].count);
        for (int k = 0; k < NK; k++) {
            if (k != K_BLAS && !g[k]) continue;
            double s = time_product(k == K_BLAS ? NULL : g[k], &p[i], A, B, Cm);
            total[k] += s * p[i].count;
            printf(" %s %.1f", kind_names[k], s > 0 ? fl / s / 1e9 : 0.0);
        }
        printf(" GFLOP/s\n");
    }
    printf("  %-5s a step's products (%.2f GFLOP), %d thread(s):", name, flops_step / 1e9,
           threads);
    for (int k = 0; k < NK; k++) {
        if (k != K_BLAS && !g[k]) continue;
        printf(" %s %.1f ms (%.1f GFLOP/s, x%.2f)", kind_names[k], total[k] * 1e3,
               flops_step / total[k] / 1e9, total[K_BLAS] / total[k]);
        printf("%s", k + 1 < NK ? ";" : "\n");
    }
    printf("\n");
    for (int k = 0; k < NK; k++) {
        if (k != K_BLAS && !g[k]) continue;
        printf("RESULT {\"kind\":\"step_products\",\"config\":\"%s\",\"threads\":%d,"
               "\"backend\":\"%s\",\"ms\":%.3f,\"gflops\":%.1f,\"vs_openblas\":%.3f}\n", name,
               threads, kind_names[k], total[k] * 1e3, flops_step / total[k] / 1e9,
               total[K_BLAS] / total[k]);
    }
out:
    for (int k = 0; k < NK; k++) dga_dnnl_free(g[k]);
    free(A), free(B), free(Cm);
}

int main(int argc, char **argv)
{
    int threads[16], nthreads = bench_thread_list(argc, argv, threads, 16);
    int bf16 = dga_dnnl_bf16_native();
    const char *env = getenv("OPENBLAS_CORETYPE");
    printf("bench_gemm: oneDNN ISA %s; OpenBLAS core %s%s%s\n", dga_dnnl_isa_name(),
           openblas_get_corename(), env ? ", OPENBLAS_CORETYPE=" : "", env ? env : "");
    if (!bf16)
        printf("bench_gemm: bf16 skipped: oneDNN has no native bf16 matmul on this CPU "
               "(ISA %s)\n", dga_dnnl_isa_name());
    for (int i = 0; i < nthreads; i++) {
        openblas_set_num_threads(threads[i]);
        if (dga_pool_set_threads(threads[i]) != DGA_OK) {
            fprintf(stderr, "bench_gemm: %s\n", dga_last_error());
            return 1;
        }
        printf("bench_gemm: %d thread(s)\n", threads[i]);
        bench_config("tiny", 2, 128, 4096, 16 * 128, threads[i], bf16);
        bench_config("small", 4, 256, 8192, 8 * 256, threads[i], bf16);
    }
    return 0;
}

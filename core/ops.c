/* Fused GPT-2 kernels (see ops.h). Loops are written so GCC vectorises them at -O3
 * -march=native: contiguous inner loops, no calls to libm inside (dga_fast_expf inlines). */
#include "ops.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "gemm_dnnl.h"
#include "pool.h"

#define LN_EPS 1e-5f
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

/* glibc's expf is not vectorised without -ffast-math, and the softmaxes over V and T*T
 * plus the GELUs call it ~40M times a step, so we use a branch-free version:
 * x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for an exact product), e^r by its
 * Taylor series to degree 7 (truncation < 6e-9), 2^n through the exponent bits. */
static inline float fexp(float x)
{
    x = x < -87.0f ? -87.0f : x;   /* keeps 2^n normal; NaN passes through */
    x = x > 88.0f ? 88.0f : x;
    /* round to nearest by adding 1.5 * 2^23 (floorf would block vectorisation) */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    n = n == n ? n : 0.0f;          /* NaN: p is NaN already; keep the cast defined */
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    return p * s;
}

float dga_fast_expf(float x) { return fexp(x); }

/* tanh(u) = 1 - 2 / (1 + e^{2u}); saturates cleanly at +-1 through fexp's clamping. */
static inline float ftanh(float u) { return 1.0f - 2.0f / (1.0f + fexp(2.0f * u)); }

/* Reductions over 16 interleaved partial results: GCC vectorises these without
 * -ffast-math, and the order is fixed by the code, so results stay deterministic. */
#define LANES 16

static inline float vsum(const float *x, int n)
{
    float acc[LANES] = {0};
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) acc[k] += x[j + k];
    float s = 0.0f;
    for (; j < n; j++) s += x[j];
    for (int k = 0; k < LANES; k++) s += acc[k];
    return s;
}

/* A float max does not vectorise in plain C (NaN and -0 rules), hence GCC's vector
 * extension: a compare and a masked move per 16 floats. */
typedef float vf16 __attribute__((vector_size(LANES * sizeof(float))));
typedef int32_t vi16 __attribute__((vector_size(LANES * sizeof(int32_t))));

static inline float vmax(const float *x, int n)
{
    float m = x[0];
    int j = 0;
    if (n >= LANES) {
        vf16 acc;
        memcpy(&acc, x, sizeof acc);
        for (j = LANES; j + LANES <= n; j += LANES) {
            vf16 v;
            memcpy(&v, x + j, sizeof v);
            vi16 gt = v > acc;
            acc = (vf16)((gt & (vi16)v) | (~gt & (vi16)acc));
        }
        for (int k = 0; k < LANES; k++) m = acc[k] > m ? acc[k] : m;
    }
    for (; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}

static inline float vdot(const float *a, const float *b, int n)
{
    float acc[LANES] = {0};
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) acc[k] += a[j + k] * b[j + k];
    float s = 0.0f;
    for (; j < n; j++) s += a[j] * b[j];
    for (int k = 0; k < LANES; k++) s += acc[k];
    return s;
}

/* x[j] = exp(x[j] - mx) in place; returns their sum */
static inline float vexp_sum(float *x, float mx, int n)
{
    float acc[LANES] = {0};
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) {
            float e = fexp(x[j + k] - mx);
            x[j + k] = e;
            acc[k] += e;
        }
    float s = 0.0f;
    for (; j < n; j++) {
        float e = fexp(x[j] - mx);
        x[j] = e;
        s += e;
    }
    for (int k = 0; k < LANES; k++) s += acc[k];
    return s;
}

/* ---------------------------------------------------------------- threading */

/* Threaded kernels split rows, columns or flat chunks with dga_pool_range, so each output
 * element is computed by exactly the operations of the sequential loop: the results are the
 * same bits at every thread count. At one thread (or below the pool's minimum work) they call
 * the sequential code directly. */
static inline int threaded(size_t work)
{
    return dga_pool_threads() > 1 && work >= dga_pool_min_work();
}

/* ---------------------------------------------------------------- embedding */

typedef struct {
    float *out, *dwte, *dwpe;
    const float *wte, *wpe, *dout;
    const int32_t *tok;
    int B, T, C;
} embed_args;

static void embed_fwd_rows(const embed_args *a, size_t r0, size_t r1)
{
    const int C = a->C;
    for (size_t r = r0; r < r1; r++) {
        float *o = a->out + r * C;
        const float *e = a->wte + (size_t)a->tok[r] * C;
        const float *p = a->wpe + (r % (size_t)a->T) * C;
        for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
}

static void embed_fwd_task(void *p, int t, int nt)
{
    const embed_args *a = p;
    size_t lo, hi;
    dga_pool_range((size_t)a->B * a->T, 1, t, nt, &lo, &hi);
    embed_fwd_rows(a, lo, hi);
}

void dga_op_embed_fwd(float *out, const int32_t *tok, const float *wte, const float *wpe,
                      int B, int T, int C)
{
    embed_args a = {.out = out, .wte = wte, .wpe = wpe, .tok = tok, .B = B, .T = T, .C = C};
    if (!threaded((size_t)B * T * C)) {
        embed_fwd_rows(&a, 0, (size_t)B * T);
        return;
    }
    dga_pool_run(embed_fwd_task, &a);
}

/* Columns c0..c1 of every row's gradient, rows in order: two rows with the same token add to
 * the same dwte row, so the backward is split by columns, never by rows, and every element
 * sums its rows in the sequential order. */
static void embed_bwd_cols(const embed_args *a, size_t c0, size_t c1)
{
    const size_t C = (size_t)a->C;
    for (size_t r = 0; r < (size_t)a->B * a->T; r++) {
        const float *d = a->dout + r * C;
        float *e = a->dwte + (size_t)a->tok[r] * C;
        float *p = a->dwpe + (r % (size_t)a->T) * C;
        for (size_t c = c0; c < c1; c++) {
            e[c] += d[c];
            p[c] += d[c];
        }
    }
}

static void embed_bwd_task(void *p, int t, int nt)
{
    const embed_args *a = p;
    size_t lo, hi;
    dga_pool_range((size_t)a->C, LANES, t, nt, &lo, &hi);
    embed_bwd_cols(a, lo, hi);
}

void dga_op_embed_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tok,
                      int B, int T, int C)
{
    embed_args a = {.dwte = dwte, .dwpe = dwpe, .dout = dout, .tok = tok, .B = B, .T = T,
                    .C = C};
    if (!threaded((size_t)B * T * C)) {
        embed_bwd_cols(&a, 0, (size_t)C);
        return;
    }
    dga_pool_run(embed_bwd_task, &a);
}

void dga_op_embed_jvp(float *tout, const int32_t *tok, const float *twte, const float *twpe,
                      int B, int T, int C)
{
    dga_op_embed_fwd(tout, tok, twte, twpe, B, T, C);
}

/* ---------------------------------------------------------------- layernorm */

static void layernorm_fwd_rows(float *out, float *mean, float *rstd, const float *inp,
                               const float *w, const float *b, size_t i0, size_t i1, int C)
{
    for (size_t i = i0; i < i1; i++) {
        const float *x = inp + i * C;
        float *o = out + i * C;
        float m = vsum(x, C) / C;
        float acc[LANES] = {0}, v = 0.0f;
        int c = 0;
        for (; c + LANES <= C; c += LANES)
            for (int k = 0; k < LANES; k++) {
                float d = x[c + k] - m;
                acc[k] += d * d;
            }
        for (; c < C; c++) v += (x[c] - m) * (x[c] - m);
        for (int k = 0; k < LANES; k++) v += acc[k];
        float r = 1.0f / sqrtf(v / C + LN_EPS);
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * r * w[c] + b[c];
        if (mean) mean[i] = m;
        if (rstd) rstd[i] = r;
    }
}

typedef struct {
    float *out, *mean, *rstd, *dinp, *dw, *db;
    const float *inp, *w, *b, *dout, *smean, *srstd;
    size_t N;
    int C;
} ln_args;

static void layernorm_fwd_task(void *p, int t, int nt)
{
    const ln_args *a = p;
    size_t lo, hi;
    dga_pool_range(a->N, 1, t, nt, &lo, &hi);
    layernorm_fwd_rows(a->out, a->mean, a->rstd, a->inp, a->w, a->b, lo, hi, a->C);
}

void dga_op_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                          const float *w, const float *b, size_t N, int C)
{
    if (!threaded(N * (size_t)C)) {
        layernorm_fwd_rows(out, mean, rstd, inp, w, b, 0, N, C);
        return;
    }
    ln_args a = {.out = out, .mean = mean, .rstd = rstd, .inp = inp, .w = w, .b = b, .N = N,
                 .C = C};
    dga_pool_run(layernorm_fwd_task, &a);
}

/* One row of the layernorm backward: mean(g) and mean(g * xhat) with g = dy * w, in the
 * lane order both the sequential and the threaded backward use (so they agree bit for bit). */
static inline void layernorm_bwd_row_means(const float *x, const float *dy, const float *w,
                                           float m, float r, int C, float *sg_out,
                                           float *sgx_out)
{
    float ag[LANES] = {0}, agx[LANES] = {0}, sg = 0.0f, sgx = 0.0f;
    int c = 0;
    for (; c + LANES <= C; c += LANES)
        for (int k = 0; k < LANES; k++) {
            float g = dy[c + k] * w[c + k];
            ag[k] += g;
            agx[k] += g * ((x[c + k] - m) * r);
        }
    for (; c < C; c++) {
        float g = dy[c] * w[c];
        sg += g;
        sgx += g * ((x[c] - m) * r);
    }
    for (int k = 0; k < LANES; k++) {
        sg += ag[k];
        sgx += agx[k];
    }
    *sg_out = sg / C;
    *sgx_out = sgx / C;
}

static void layernorm_bwd_seq(float *dinp, float *dw, float *db, const float *dout,
                              const float *inp, const float *w, const float *mean,
                              const float *rstd, size_t N, int C)
{
    for (size_t i = 0; i < N; i++) {
        const float *x = inp + i * C;
        const float *dy = dout + i * C;
        float *dx = dinp + i * C;
        float m = mean[i], r = rstd[i];
        /* dx = r * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w */
        float sg, sgx;
        layernorm_bwd_row_means(x, dy, w, m, r, C, &sg, &sgx);
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * r;
            db[c] += dy[c];
            dw[c] += dy[c] * xhat;
            dx[c] += r * (dy[c] * w[c] - sg - xhat * sgx);
        }
    }
}

/* The threaded backward in two passes: rows for dinp, then columns for dw and db, where each
 * column still adds its rows in order 0..N-1, as the sequential loop does. */
static void layernorm_bwd_task(void *p, int t, int nt)
{
    const ln_args *a = p;
    const int C = a->C;
    size_t lo, hi;
    dga_pool_range(a->N, 1, t, nt, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        const float *x = a->inp + i * C, *dy = a->dout + i * C, *w = a->w;
        float *dx = a->dinp + i * C;
        float m = a->smean[i], r = a->srstd[i];
        float sg, sgx;
        layernorm_bwd_row_means(x, dy, w, m, r, C, &sg, &sgx);
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * r;
            dx[c] += r * (dy[c] * w[c] - sg - xhat * sgx);
        }
    }
}

static void layernorm_bwd_params_task(void *p, int t, int nt)
{
    const ln_args *a = p;
    const int C = a->C;
    size_t lo, hi;
    dga_pool_range((size_t)C, LANES, t, nt, &lo, &hi);
    for (size_t i = 0; i < a->N; i++) {
        const float *x = a->inp + i * C, *dy = a->dout + i * C;
        float m = a->smean[i], r = a->srstd[i];
        for (size_t c = lo; c < hi; c++) {
            float xhat = (x[c] - m) * r;
            a->db[c] += dy[c];
            a->dw[c] += dy[c] * xhat;
        }
    }
}

void dga_op_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout,
                          const float *inp, const float *w, const float *mean,
                          const float *rstd, size_t N, int C)
{
    if (!threaded(N * (size_t)C)) {
        layernorm_bwd_seq(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
        return;
    }
    ln_args a = {.dinp = dinp, .dw = dw, .db = db, .dout = dout, .inp = inp, .w = w,
                 .smean = mean, .srstd = rstd, .N = N, .C = C};
    dga_pool_run(layernorm_bwd_task, &a);
    dga_pool_run(layernorm_bwd_params_task, &a);
}

void dga_op_layernorm_jvp(float *tout, const float *inp, const float *tinp, const float *w,
                          const float *tw, const float *tb, const float *mean,
                          const float *rstd, size_t N, int C)
{
    for (size_t i = 0; i < N; i++) {
        const float *x = inp + i * C, *tx = tinp + i * C;
        float *o = tout + i * C;
        float m = mean[i], r = rstd[i];
        /* t(x - m) = tx - mean(tx); t rstd = -r^3 mean((x - m) t(x - m)), and since
         * mean(xhat) = 0 that is -r^2 mean(xhat tx): txhat = r (tx - mean(tx) - xhat mean(xhat tx)) */
        float as[LANES] = {0}, asx[LANES] = {0}, s = 0.0f, sx = 0.0f;
        int c = 0;
        for (; c + LANES <= C; c += LANES)
            for (int k = 0; k < LANES; k++) {
                as[k] += tx[c + k];
                asx[k] += tx[c + k] * ((x[c + k] - m) * r);
            }
        for (; c < C; c++) {
            s += tx[c];
            sx += tx[c] * ((x[c] - m) * r);
        }
        for (int k = 0; k < LANES; k++) {
            s += as[k];
            sx += asx[k];
        }
        s /= C;
        sx /= C;
        for (c = 0; c < C; c++) {
            float xhat = (x[c] - m) * r;
            float txhat = r * (tx[c] - s - xhat * sx);
            o[c] = txhat * w[c] + xhat * tw[c] + tb[c];
        }
    }
}

/* ---------------------------------------------------------------- linear */

typedef struct {
    float *out;
    const float *vec;
    size_t N;
    int OC;
} bias_args;

/* out[i,:] += bias over rows [i0, i1) */
static void add_bias_rows(float *out, const float *bias, size_t i0, size_t i1, int OC)
{
    for (size_t i = i0; i < i1; i++) {
        float *o = out + i * OC;
        for (int j = 0; j < OC; j++) o[j] += bias[j];
    }
}

static void add_bias_task(void *p, int t, int nt)
{
    const bias_args *a = p;
    size_t lo, hi;
    dga_pool_range(a->N, 1, t, nt, &lo, &hi);
    add_bias_rows(a->out, a->vec, lo, hi, a->OC);
}

/* db[j0, j1) += column sums of dout, rows in order */
static void col_sums(float *db, const float *dout, size_t N, int OC, size_t j0, size_t j1)
{
    for (size_t i = 0; i < N; i++) {
        const float *d = dout + i * OC;
        for (size_t j = j0; j < j1; j++) db[j] += d[j];
    }
}

static void col_sums_task(void *p, int t, int nt)
{
    const bias_args *a = p;
    size_t lo, hi;
    dga_pool_range((size_t)a->OC, LANES, t, nt, &lo, &hi);
    col_sums(a->out, a->vec, a->N, a->OC, lo, hi);
}

/* C = op(A) op(B) (+ C if acc), through OpenBLAS without a oneDNN context (the fp32
 * precision: exactly the cblas_sgemm calls of before), through oneDNN with one. */
static void product(dga_dnnl *mm, int ta, int tb, int M, int N, int K, const float *A,
                    int lda, const float *B, int ldb, int acc, float *C, int ldc)
{
    if (mm) {
        dga_dnnl_gemm(mm, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, acc);   /* status kept */
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                M, N, K, 1.0f, A, lda, B, ldb, acc ? 1.0f : 0.0f, C, ldc);
}

void dga_op_linear_fwd_mm(dga_dnnl *mm, float *out, const float *inp, const float *w,
                          const float *bias, size_t N, int IC, int OC)
{
    product(mm, 0, 0, (int)N, OC, IC, inp, IC, w, OC, 0, out, OC);
    if (!bias) return;
    if (!threaded(N * (size_t)OC)) {
        add_bias_rows(out, bias, 0, N, OC);
        return;
    }
    bias_args a = {.out = out, .vec = bias, .N = N, .OC = OC};
    dga_pool_run(add_bias_task, &a);
}

void dga_op_linear_fwd(float *out, const float *inp, const float *w, const float *bias,
                       size_t N, int IC, int OC)
{
    dga_op_linear_fwd_mm(NULL, out, inp, w, bias, N, IC, OC);
}

void dga_op_linear_bwd_mm(dga_dnnl *mm, float *dinp, float *dw, float *db, const float *dout,
                          const float *inp, const float *w, size_t N, int IC, int OC)
{
    if (dinp) product(mm, 0, 1, (int)N, IC, OC, dout, OC, w, OC, 0, dinp, IC);
    product(mm, 1, 0, IC, OC, (int)N, inp, IC, dout, OC, 1, dw, OC);
    if (!db) return;
    if (!threaded(N * (size_t)OC)) {
        col_sums(db, dout, N, OC, 0, (size_t)OC);
        return;
    }
    bias_args a = {.out = db, .vec = dout, .N = N, .OC = OC};
    dga_pool_run(col_sums_task, &a);
}

void dga_op_linear_bwd(float *dinp, float *dw, float *db, const float *dout,
                       const float *inp, const float *w, size_t N, int IC, int OC)
{
    dga_op_linear_bwd_mm(NULL, dinp, dw, db, dout, inp, w, N, IC, OC);
}

void dga_op_linear_jvp(float *tout, const float *inp, const float *tinp, const float *w,
                       const float *tw, const float *tbias, size_t N, int IC, int OC)
{
    if (tinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, OC, IC, 1.0f, tinp, IC,
                    w, OC, 0.0f, tout, OC);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, OC, IC, 1.0f, inp, IC, tw,
                OC, tinp ? 1.0f : 0.0f, tout, OC);
    if (!tbias) return;
    for (size_t i = 0; i < N; i++) {
        float *o = tout + i * OC;
        for (int j = 0; j < OC; j++) o[j] += tbias[j];
    }
}

void dga_op_lmhead_fwd_mm(dga_dnnl *mm, float *logits, const float *inp, const float *wte,
                          size_t N, int C, int V)
{
    product(mm, 0, 1, (int)N, V, C, inp, C, wte, C, 0, logits, V);
}

void dga_op_lmhead_fwd(float *logits, const float *inp, const float *wte, size_t N, int C,
                       int V)
{
    dga_op_lmhead_fwd_mm(NULL, logits, inp, wte, N, C, V);
}

void dga_op_lmhead_bwd_mm(dga_dnnl *mm, float *dinp, float *dwte, const float *dlogits,
                          const float *inp, const float *wte, size_t N, int C, int V)
{
    product(mm, 0, 0, (int)N, C, V, dlogits, V, wte, C, 0, dinp, C);
    product(mm, 1, 0, V, C, (int)N, dlogits, V, inp, C, 1, dwte, C);
}

void dga_op_lmhead_bwd(float *dinp, float *dwte, const float *dlogits, const float *inp,
                       const float *wte, size_t N, int C, int V)
{
    dga_op_lmhead_bwd_mm(NULL, dinp, dwte, dlogits, inp, wte, N, C, V);
}

void dga_op_lmhead_jvp(float *tlogits, const float *inp, const float *tinp, const float *wte,
                       const float *twte, size_t N, int C, int V)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, V, C, 1.0f, tinp, C, wte, C,
                0.0f, tlogits, V);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, V, C, 1.0f, inp, C, twte, C,
                1.0f, tlogits, V);
}

/* ---------------------------------------------------------------- attention */

/* Row-wise causal softmax of S [T,T] in place: row i over columns 0..i, zeros after. */
static inline void causal_softmax_row(float *row, int i, int T)
{
    float mx = vmax(row, i + 1);
    float inv = 1.0f / vexp_sum(row, mx, i + 1);
    for (int j = 0; j <= i; j++) row[j] *= inv;
    for (int j = i + 1; j < T; j++) row[j] = 0.0f;
}

static void causal_softmax(float *S, int T)
{
    for (int i = 0; i < T; i++) causal_softmax_row(S + (size_t)i * T, i, T);
}

/* Causality: query row i only sees keys 0..i, so the products run over blocks of QB query
 * rows against the keys up to the block's end (and, for the key gradients, over blocks of
 * QB keys against the queries from the block's start): ~(1 + T/QB) / 2 of the full T x T
 * work, in sgemm calls still large enough to run at full speed. */
#define QB 64

/* d <- P * (d - rowsum(P * d)) on the causal rows of T x T blocks: the product of the
 * softmax Jacobian (symmetric) with d, so both the backward (d = dP) and the tangent
 * (d = dS) of a causal softmax. Entries above the diagonal are zeroed up to the end of the
 * row's query block, which the blocked products that follow read. */
static inline void causal_softmax_product_row(const float *p, float *d, int i, int T)
{
    float dot = vdot(p, d, i + 1);
    for (int j = 0; j <= i; j++) d[j] = p[j] * (d[j] - dot);
    int end = (i / QB + 1) * QB < T ? (i / QB + 1) * QB : T;
    for (int j = i + 1; j < end; j++) d[j] = 0.0f;
}

static void causal_softmax_product(const float *P, float *D, int T)
{
    for (int i = 0; i < T; i++)
        causal_softmax_product_row(P + (size_t)i * T, D + (size_t)i * T, i, T);
}

/* One head's forward: S = scale Q K^T (causal query blocks), P = softmax(S) in S, Y = P V. */
static void attention_fwd_head(float *y, float *S, const float *q, const float *k,
                               const float *v, int T, int C, int hs, float scale)
{
    const int C3 = 3 * C;
    for (int i0 = 0; i0 < T; i0 += QB) {
        int qn = T - i0 < QB ? T - i0 : QB, kn = i0 + qn;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qn, kn, hs, scale,
                    q + (size_t)i0 * C3, C3, k, C3, 0.0f, S + (size_t)i0 * T, T);
    }
    causal_softmax(S, T);
    for (int i0 = 0; i0 < T; i0 += QB) {
        int qn = T - i0 < QB ? T - i0 : QB, kn = i0 + qn;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, qn, hs, kn, 1.0f,
                    S + (size_t)i0 * T, T, v, C3, 0.0f, y + (size_t)i0 * C, C);
    }
}

/* One head's backward from dY and the saved P: dP = dY V^T into datt (a [T,T] scratch),
 * dS = P * (dP - rowsum(P * dP)) in place, then dQ, dK, dV (overwritten). */
static void attention_bwd_head(float *dq, float *dk, float *dv, float *datt, const float *q,
                               const float *k, const float *v, const float *P, const float *dy,
                               int T, int C, int hs, float scale)
{
    const int C3 = 3 * C;
    for (int i0 = 0; i0 < T; i0 += QB) {
        int qn = T - i0 < QB ? T - i0 : QB, kn = i0 + qn;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qn, kn, hs, 1.0f,
                    dy + (size_t)i0 * C, C, v, C3, 0.0f, datt + (size_t)i0 * T, T);
    }
    causal_softmax_product(P, datt, T);
    /* S = scale Q K^T:  dQ = scale dS K  (query blocks) */
    for (int i0 = 0; i0 < T; i0 += QB) {
        int qn = T - i0 < QB ? T - i0 : QB, kn = i0 + qn;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, qn, hs, kn, scale,
                    datt + (size_t)i0 * T, T, k, C3, 0.0f, dq + (size_t)i0 * C3, C3);
    }
    /* dV = P^T dY,  dK = scale dS^T Q  (key blocks: only queries j0.. see them) */
    for (int j0 = 0; j0 < T; j0 += QB) {
        int kn = T - j0 < QB ? T - j0 : QB, rows = T - j0;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kn, hs, rows, 1.0f,
                    P + (size_t)j0 * T + j0, T, dy + (size_t)j0 * C, C, 0.0f,
                    dv + (size_t)j0 * C3, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kn, hs, rows, scale,
                    datt + (size_t)j0 * T + j0, T, q + (size_t)j0 * C3, C3, 0.0f,
                    dk + (size_t)j0 * C3, C3);
    }
}

/* One head's forward and tangent; scratch [2,T,T] holds P and then dS / dP. */
static void attention_jvp_head(float *y, float *ty, float *scratch, const float *q,
                               const float *k, const float *v, const float *tq, const float *tk,
                               const float *tv, int T, int C, int hs, float scale)
{
    const int C3 = 3 * C;
    float *P = scratch, *D = scratch + (size_t)T * T;
    /* S = scale Q K^T and dS = scale (dQ K^T + Q dK^T), same causal blocks */
    for (int i0 = 0; i0 < T; i0 += QB) {
        int qn = T - i0 < QB ? T - i0 : QB, kn = i0 + qn;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qn, kn, hs, scale,
                    q + (size_t)i0 * C3, C3, k, C3, 0.0f, P + (size_t)i0 * T, T);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qn, kn, hs, scale,
                    tq + (size_t)i0 * C3, C3, k, C3, 0.0f, D + (size_t)i0 * T, T);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qn, kn, hs, scale,
                    q + (size_t)i0 * C3, C3, tk, C3, 1.0f, D + (size_t)i0 * T, T);
    }
    causal_softmax(P, T);
    /* softmax tangent: dP = P * (dS - sum_j P dS) */
    causal_softmax_product(P, D, T);
    /* Y = P V,  dY = dP V + P dV */
    for (int i0 = 0; i0 < T; i0 += QB) {
        int qn = T - i0 < QB ? T - i0 : QB, kn = i0 + qn;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, qn, hs, kn, 1.0f,
                    P + (size_t)i0 * T, T, v, C3, 0.0f, y + (size_t)i0 * C, C);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, qn, hs, kn, 1.0f,
                    D + (size_t)i0 * T, T, v, C3, 0.0f, ty + (size_t)i0 * C, C);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, qn, hs, kn, 1.0f,
                    P + (size_t)i0 * T, T, tv, C3, 1.0f, ty + (size_t)i0 * C, C);
    }
}

/* The B*NH heads are independent: threaded, each task takes a contiguous range of heads and
 * runs the per-head code above with OpenBLAS held to one thread (dga_pool_run_blas), so every
 * head is computed by the same calls in the same order as the sequential loop. A head's
 * [T,T] scratch (the probabilities at att_stride 0, the backward's dP, the tangent's pair) is
 * the task's own slice of the pool scratch. */
typedef struct {
    float *out, *tout, *att, *scratch, *dqkv;
    const float *qkv, *tqkv, *dout;
    size_t att_stride, scratch_per_task;
    int B, T, C, NH;
} attention_args;

static void attention_fwd_task(void *p, int t, int nt)
{
    const attention_args *a = p;
    const int hs = a->C / a->NH, C3 = 3 * a->C, T = a->T;
    const float scale = 1.0f / sqrtf((float)hs);
    size_t lo, hi;
    dga_pool_range((size_t)a->B * a->NH, 1, t, nt, &lo, &hi);
    for (size_t bh = lo; bh < hi; bh++) {
        size_t b = bh / (size_t)a->NH, h = bh % (size_t)a->NH;
        const float *q = a->qkv + b * T * C3 + h * hs;
        float *S = a->att_stride ? a->att + bh * a->att_stride
                                 : a->scratch + (size_t)t * a->scratch_per_task;
        attention_fwd_head(a->out + b * T * a->C + h * hs, S, q, q + a->C, q + 2 * a->C, T,
                           a->C, hs, scale);
    }
}

void dga_op_attention_fwd(float *out, float *att, size_t att_stride, const float *qkv,
                          int B, int T, int C, int NH)
{
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t TT = (size_t)T * T;
    attention_args a = {.out = out, .att = att, .qkv = qkv, .att_stride = att_stride,
                        .scratch_per_task = TT, .B = B, .T = T, .C = C, .NH = NH};
    /* at att_stride 0 every task needs its own [T,T] for the probabilities */
    if (threaded((size_t)B * NH * TT / 2) &&
        (att_stride ||
         (a.scratch = dga_pool_scratch(dga_pool_threads() * TT * sizeof(float))) != NULL)) {
        dga_pool_run_blas(attention_fwd_task, &a);
        return;
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs;
            attention_fwd_head(out + (size_t)b * T * C + (size_t)h * hs,
                               att + ((size_t)b * NH + h) * att_stride, q, q + C, q + 2 * C, T,
                               C, hs, scale);
        }
}

static void attention_bwd_task(void *p, int t, int nt)
{
    const attention_args *a = p;
    const int hs = a->C / a->NH, C3 = 3 * a->C, T = a->T;
    const float scale = 1.0f / sqrtf((float)hs);
    size_t lo, hi;
    dga_pool_range((size_t)a->B * a->NH, 1, t, nt, &lo, &hi);
    for (size_t bh = lo; bh < hi; bh++) {
        size_t b = bh / (size_t)a->NH, h = bh % (size_t)a->NH, qo = b * T * C3 + h * hs;
        const float *q = a->qkv + qo;
        float *dq = a->dqkv + qo;
        attention_bwd_head(dq, dq + a->C, dq + 2 * a->C,
                           a->scratch + (size_t)t * a->scratch_per_task, q, q + a->C,
                           q + 2 * a->C, a->att + bh * (size_t)T * T,
                           a->dout + b * T * a->C + h * hs, T, a->C, hs, scale);
    }
}

void dga_op_attention_bwd(float *dqkv, float *datt, const float *dout, const float *qkv,
                          const float *att, int B, int T, int C, int NH)
{
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t TT = (size_t)T * T;
    attention_args a = {.dqkv = dqkv, .att = (float *)att, .qkv = qkv, .dout = dout,
                        .scratch_per_task = TT, .B = B, .T = T, .C = C, .NH = NH};
    if (threaded((size_t)B * NH * TT / 2) &&
        (a.scratch = dga_pool_scratch(dga_pool_threads() * TT * sizeof(float))) != NULL) {
        dga_pool_run_blas(attention_bwd_task, &a);
        return;
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t qo = (size_t)b * T * C3 + (size_t)h * hs;
            const float *q = qkv + qo;
            float *dq = dqkv + qo;
            attention_bwd_head(dq, dq + C, dq + 2 * C, datt, q, q + C, q + 2 * C,
                               att + ((size_t)b * NH + h) * TT,
                               dout + (size_t)b * T * C + (size_t)h * hs, T, C, hs, scale);
        }
}

static void attention_jvp_task(void *p, int t, int nt)
{
    const attention_args *a = p;
    const int hs = a->C / a->NH, C3 = 3 * a->C, T = a->T;
    const float scale = 1.0f / sqrtf((float)hs);
    size_t lo, hi;
    dga_pool_range((size_t)a->B * a->NH, 1, t, nt, &lo, &hi);
    for (size_t bh = lo; bh < hi; bh++) {
        size_t b = bh / (size_t)a->NH, h = bh % (size_t)a->NH;
        size_t qo = b * T * C3 + h * hs, yo = b * T * a->C + h * hs;
        const float *q = a->qkv + qo, *tq = a->tqkv + qo;
        float *scratch = a->scratch + (size_t)t * a->scratch_per_task;
        attention_jvp_head(a->out + yo, a->tout + yo, scratch, q, q + a->C, q + 2 * a->C, tq,
                           tq + a->C, tq + 2 * a->C, T, a->C, hs, scale);
    }
}

void dga_op_attention_jvp(float *out, float *tout, float *scratch, const float *qkv,
                          const float *tqkv, int B, int T, int C, int NH)
{
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t TT = (size_t)T * T;
    attention_args a = {.out = out, .tout = tout, .qkv = qkv, .tqkv = tqkv,
                        .scratch_per_task = 2 * TT, .B = B, .T = T, .C = C, .NH = NH};
    if (threaded((size_t)B * NH * TT) &&
        (a.scratch = dga_pool_scratch(dga_pool_threads() * 2 * TT * sizeof(float))) != NULL) {
        dga_pool_run_blas(attention_jvp_task, &a);
        return;
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t qo = (size_t)b * T * C3 + (size_t)h * hs;
            size_t yo = (size_t)b * T * C + (size_t)h * hs;
            const float *q = qkv + qo, *tq = tqkv + qo;
            attention_jvp_head(out + yo, tout + yo, scratch, q, q + C, q + 2 * C, tq, tq + C,
                               tq + 2 * C, T, C, hs, scale);
        }
}

/* ---------------------------------------------------------------- gelu, residual */

/* Elementwise kernels on chunks of a flat vector: out, a, b as each kernel names them. */
typedef struct {
    float *out, *out2;
    const float *a, *b;
    size_t n;
} flat_args;

static void gelu_fwd_range(float *out, const float *inp, size_t i0, size_t i1)
{
    for (size_t i = i0; i < i1; i++) {
        float x = inp[i];
        float t = ftanh(GELU_K * (x + GELU_A * x * x * x));
        out[i] = 0.5f * x * (1.0f + t);
    }
}

static void gelu_fwd_task(void *p, int t, int nt)
{
    const flat_args *a = p;
    size_t lo, hi;
    dga_pool_range(a->n, LANES, t, nt, &lo, &hi);
    gelu_fwd_range(a->out, a->a, lo, hi);
}

void dga_op_gelu_fwd(float *out, const float *inp, size_t n)
{
    if (!threaded(n)) {
        gelu_fwd_range(out, inp, 0, n);
        return;
    }
    flat_args a = {.out = out, .a = inp, .n = n};
    dga_pool_run(gelu_fwd_task, &a);
}

/* gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2),  t = tanh(k (x + a x^3)) */
static inline float gelu_grad(float x)
{
    float t = ftanh(GELU_K * (x + GELU_A * x * x * x));
    float du = GELU_K * (1.0f + 3.0f * GELU_A * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

static void gelu_bwd_task(void *p, int t, int nt)
{
    const flat_args *a = p;
    size_t lo, hi;
    dga_pool_range(a->n, LANES, t, nt, &lo, &hi);
    for (size_t i = lo; i < hi; i++) a->out[i] = gelu_grad(a->a[i]) * a->b[i];
}

void dga_op_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n)
{
    if (!threaded(n)) {
        for (size_t i = 0; i < n; i++) dinp[i] = gelu_grad(inp[i]) * dout[i];
        return;
    }
    flat_args a = {.out = dinp, .a = inp, .b = dout, .n = n};
    dga_pool_run(gelu_bwd_task, &a);
}

void dga_op_gelu_jvp(float *tout, const float *inp, const float *tinp, size_t n)
{
    for (size_t i = 0; i < n; i++) tout[i] = gelu_grad(inp[i]) * tinp[i];
}

static void residual_fwd_task(void *p, int t, int nt)
{
    const flat_args *a = p;
    size_t lo, hi;
    dga_pool_range(a->n, LANES, t, nt, &lo, &hi);
    for (size_t i = lo; i < hi; i++) a->out[i] = a->a[i] + a->b[i];
}

void dga_op_residual_fwd(float *out, const float *a, const float *b, size_t n)
{
    if (!threaded(n)) {
        for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
        return;
    }
    flat_args fa = {.out = out, .a = a, .b = b, .n = n};
    dga_pool_run(residual_fwd_task, &fa);
}

static void residual_bwd_task(void *p, int t, int nt)
{
    const flat_args *a = p;
    size_t lo, hi;
    dga_pool_range(a->n, LANES, t, nt, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        a->out[i] += a->a[i];
        a->out2[i] += a->a[i];
    }
}

void dga_op_residual_bwd(float *da, float *db, const float *dout, size_t n)
{
    if (!threaded(n)) {
        for (size_t i = 0; i < n; i++) {
            da[i] += dout[i];
            db[i] += dout[i];
        }
        return;
    }
    flat_args fa = {.out = da, .out2 = db, .a = dout, .n = n};
    dga_pool_run(residual_bwd_task, &fa);
}

void dga_op_residual_jvp(float *tout, const float *ta, const float *tb, size_t n)
{
    for (size_t i = 0; i < n; i++) tout[i] = ta[i] + tb[i];
}

/* ---------------------------------------------------------------- cross-entropy */

double dga_op_xent_row(const float *logits, int V, int target)
{
    float mx = vmax(logits, V);
    float acc[LANES] = {0}, sum = 0.0f;
    int j = 0;
    for (; j + LANES <= V; j += LANES)
        for (int k = 0; k < LANES; k++) acc[k] += fexp(logits[j + k] - mx);
    for (; j < V; j++) sum += fexp(logits[j] - mx);
    for (int k = 0; k < LANES; k++) sum += acc[k];
    return (double)logf(sum) + (double)mx - (double)logits[target];
}

/* One row of the fused cross-entropy; returns its loss (0 for an ignored row). */
static inline double xent_row_fwd_bwd(float *row, int tg, int V, float dscale)
{
    if (tg < 0) {
        memset(row, 0, (size_t)V * sizeof *row);
        return 0.0;
    }
    float mx = vmax(row, V);
    float xt = row[tg];
    float sum = vexp_sum(row, mx, V);
    double nll = (double)logf(sum) + (double)mx - (double)xt;
    float s = dscale / sum;
    for (int j = 0; j < V; j++) row[j] *= s;
    row[tg] -= dscale;
    return nll;
}

typedef struct {
    float *logits;
    const int32_t *targets;
    double *nll;
    size_t N;
    int V;
    float dscale;
} xent_args;

static void xent_task(void *p, int t, int nt)
{
    const xent_args *a = p;
    size_t lo, hi;
    dga_pool_range(a->N, 1, t, nt, &lo, &hi);
    for (size_t i = lo; i < hi; i++)
        a->nll[i] = xent_row_fwd_bwd(a->logits + i * (size_t)a->V, a->targets[i], a->V,
                                     a->dscale);
}

double dga_op_xent_fwd_bwd(float *logits, float *row_loss, const int32_t *targets, size_t N,
                           int V, float dscale)
{
    double total = 0.0, *nll;
    if (threaded(N * (size_t)V) && (nll = dga_pool_scratch(N * sizeof *nll)) != NULL) {
        /* per-row losses, then summed in row order: the sequential sum, bit for bit */
        xent_args a = {.logits = logits, .targets = targets, .nll = nll, .N = N, .V = V,
                       .dscale = dscale};
        dga_pool_run(xent_task, &a);
        for (size_t i = 0; i < N; i++) {
            if (row_loss) row_loss[i] = targets[i] >= 0 ? (float)nll[i] : 0.0f;
            if (targets[i] >= 0) total += nll[i];
        }
        return total;
    }
    for (size_t i = 0; i < N; i++) {
        int tg = targets[i];
        if (tg < 0) {
            xent_row_fwd_bwd(logits + i * (size_t)V, tg, V, dscale);
            if (row_loss) row_loss[i] = 0.0f;
            continue;
        }
        double loss = xent_row_fwd_bwd(logits + i * (size_t)V, tg, V, dscale);
        if (row_loss) row_loss[i] = (float)loss;
        total += loss;
    }
    return total;
}

double dga_op_xent_jvp(const float *logits, const float *tlogits, const int32_t *targets,
                       size_t N, int V, float dscale, double *tloss)
{
    double total = 0.0, ttotal = 0.0;
    for (size_t i = 0; i < N; i++) {
        int tg = targets[i];
        if (tg < 0) continue;   /* the same rows dga_op_xent_fwd_bwd skips */
        const float *row = logits + i * (size_t)V, *trow = tlogits + i * (size_t)V;
        float mx = vmax(row, V);
        /* softmax . trow = sum_j e^(x_j - mx) trow_j / sum_j e^(x_j - mx), one pass */
        float acc[LANES] = {0}, acct[LANES] = {0}, sum = 0.0f, sumt = 0.0f;
        int j = 0;
        for (; j + LANES <= V; j += LANES)
            for (int k = 0; k < LANES; k++) {
                float e = fexp(row[j + k] - mx);
                acc[k] += e;
                acct[k] += e * trow[j + k];
            }
        for (; j < V; j++) {
            float e = fexp(row[j] - mx);
            sum += e;
            sumt += e * trow[j];
        }
        for (int k = 0; k < LANES; k++) {
            sum += acc[k];
            sumt += acct[k];
        }
        total += (double)logf(sum) + (double)mx - (double)row[tg];
        ttotal += (double)sumt / (double)sum - (double)trow[tg];
    }
    *tloss = (double)dscale * ttotal;
    return total;
}

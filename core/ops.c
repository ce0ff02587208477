/* Fused GPT-2 kernels (see ops.h). Loops are written so GCC vectorises them at -O3
 * -march=native: contiguous inner loops, no calls to libm inside (dga_fast_expf inlines). */
#include "ops.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

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

/* ---------------------------------------------------------------- embedding */

void dga_op_embed_fwd(float *out, const int32_t *tok, const float *wte, const float *wpe,
                      int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *e = wte + (size_t)tok[(size_t)b * T + t] * C;
            const float *p = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
        }
}

void dga_op_embed_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tok,
                      int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            float *e = dwte + (size_t)tok[(size_t)b * T + t] * C;
            float *p = dwpe + (size_t)t * C;
            for (int c = 0; c < C; c++) {
                e[c] += d[c];
                p[c] += d[c];
            }
        }
}

void dga_op_embed_jvp(float *tout, const int32_t *tok, const float *twte, const float *twpe,
                      int B, int T, int C)
{
    dga_op_embed_fwd(tout, tok, twte, twpe, B, T, C);
}

/* ---------------------------------------------------------------- layernorm */

void dga_op_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                          const float *w, const float *b, size_t N, int C)
{
    for (size_t i = 0; i < N; i++) {
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

void dga_op_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout,
                          const float *inp, const float *w, const float *mean,
                          const float *rstd, size_t N, int C)
{
    for (size_t i = 0; i < N; i++) {
        const float *x = inp + i * C;
        const float *dy = dout + i * C;
        float *dx = dinp + i * C;
        float m = mean[i], r = rstd[i];
        /* dx = r * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w */
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
        sg /= C;
        sgx /= C;
        for (c = 0; c < C; c++) {
            float xhat = (x[c] - m) * r;
            db[c] += dy[c];
            dw[c] += dy[c] * xhat;
            dx[c] += r * (dy[c] * w[c] - sg - xhat * sgx);
        }
    }
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

void dga_op_linear_fwd(float *out, const float *inp, const float *w, const float *bias,
                       size_t N, int IC, int OC)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, OC, IC, 1.0f, inp, IC, w,
                OC, 0.0f, out, OC);
    if (!bias) return;
    for (size_t i = 0; i < N; i++) {
        float *o = out + i * OC;
        for (int j = 0; j < OC; j++) o[j] += bias[j];
    }
}

void dga_op_linear_bwd(float *dinp, float *dw, float *db, const float *dout,
                       const float *inp, const float *w, size_t N, int IC, int OC)
{
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, IC, OC, 1.0f, dout, OC,
                    w, OC, 0.0f, dinp, IC);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, IC, OC, (int)N, 1.0f, inp, IC, dout,
                OC, 1.0f, dw, OC);
    if (!db) return;
    for (size_t i = 0; i < N; i++) {
        const float *d = dout + i * OC;
        for (int j = 0; j < OC; j++) db[j] += d[j];
    }
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

void dga_op_lmhead_fwd(float *logits, const float *inp, const float *wte, size_t N, int C,
                       int V)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, V, C, 1.0f, inp, C, wte, C,
                0.0f, logits, V);
}

void dga_op_lmhead_bwd(float *dinp, float *dwte, const float *dlogits, const float *inp,
                       const float *wte, size_t N, int C, int V)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, C, V, 1.0f, dlogits, V,
                wte, C, 0.0f, dinp, C);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, (int)N, 1.0f, dlogits, V, inp,
                C, 1.0f, dwte, C);
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
static void causal_softmax(float *S, int T)
{
    for (int i = 0; i < T; i++) {
        float *row = S + (size_t)i * T;
        float mx = vmax(row, i + 1);
        float inv = 1.0f / vexp_sum(row, mx, i + 1);
        for (int j = 0; j <= i; j++) row[j] *= inv;
        for (int j = i + 1; j < T; j++) row[j] = 0.0f;
    }
}

/* Causality: query row i only sees keys 0..i, so the products run over blocks of QB query
 * rows against the keys up to the block's end (and, for the key gradients, over blocks of
 * QB keys against the queries from the block's start): ~(1 + T/QB) / 2 of the full T x T
 * work, in sgemm calls still large enough to run at full speed. */
#define QB 64

void dga_op_attention_fwd(float *out, float *att, size_t att_stride, const float *qkv,
                          int B, int T, int C, int NH)
{
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs;
            const float *k = q + C, *v = q + 2 * C;
            float *S = att + ((size_t)b * NH + h) * att_stride;
            float *y = out + (size_t)b * T * C + (size_t)h * hs;
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
}

/* d <- P * (d - rowsum(P * d)) on the causal rows of T x T blocks: the product of the
 * softmax Jacobian (symmetric) with d, so both the backward (d = dP) and the tangent
 * (d = dS) of a causal softmax. Entries above the diagonal are zeroed up to the end of the
 * row's query block, which the blocked products that follow read. */
static void causal_softmax_product(const float *P, float *D, int T)
{
    for (int i = 0; i < T; i++) {
        const float *p = P + (size_t)i * T;
        float *d = D + (size_t)i * T;
        float dot = vdot(p, d, i + 1);
        for (int j = 0; j <= i; j++) d[j] = p[j] * (d[j] - dot);
        int end = (i / QB + 1) * QB < T ? (i / QB + 1) * QB : T;
        for (int j = i + 1; j < end; j++) d[j] = 0.0f;
    }
}

void dga_op_attention_bwd(float *dqkv, float *datt, const float *dout, const float *qkv,
                          const float *att, int B, int T, int C, int NH)
{
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t qo = (size_t)b * T * C3 + (size_t)h * hs;
            const float *q = qkv + qo, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + qo, *dk = dq + C, *dv = dq + 2 * C;
            const float *P = att + ((size_t)b * NH + h) * (size_t)T * T;
            const float *dy = dout + (size_t)b * T * C + (size_t)h * hs;
            /* dP = dY V^T (causal blocks) */
            for (int i0 = 0; i0 < T; i0 += QB) {
                int qn = T - i0 < QB ? T - i0 : QB, kn = i0 + qn;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qn, kn, hs, 1.0f,
                            dy + (size_t)i0 * C, C, v, C3, 0.0f, datt + (size_t)i0 * T, T);
            }
            /* softmax backward: dS = P * (dP - sum_j P dP) */
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
}

void dga_op_attention_jvp(float *out, float *tout, float *scratch, const float *qkv,
                          const float *tqkv, int B, int T, int C, int NH)
{
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    float *P = scratch, *D = scratch + (size_t)T * T;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t qo = (size_t)b * T * C3 + (size_t)h * hs, yo = (size_t)b * T * C + (size_t)h * hs;
            const float *q = qkv + qo, *k = q + C, *v = q + 2 * C;
            const float *tq = tqkv + qo, *tk = tq + C, *tv = tq + 2 * C;
            float *y = out + yo, *ty = tout + yo;
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
}

/* ---------------------------------------------------------------- gelu, residual */

void dga_op_gelu_fwd(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float t = ftanh(GELU_K * (x + GELU_A * x * x * x));
        out[i] = 0.5f * x * (1.0f + t);
    }
}

/* gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2),  t = tanh(k (x + a x^3)) */
static inline float gelu_grad(float x)
{
    float t = ftanh(GELU_K * (x + GELU_A * x * x * x));
    float du = GELU_K * (1.0f + 3.0f * GELU_A * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

void dga_op_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) dinp[i] = gelu_grad(inp[i]) * dout[i];
}

void dga_op_gelu_jvp(float *tout, const float *inp, const float *tinp, size_t n)
{
    for (size_t i = 0; i < n; i++) tout[i] = gelu_grad(inp[i]) * tinp[i];
}

void dga_op_residual_fwd(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void dga_op_residual_bwd(float *da, float *db, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
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

double dga_op_xent_fwd_bwd(float *logits, float *row_loss, const int32_t *targets, size_t N,
                           int V, float dscale)
{
    double total = 0.0;
    for (size_t i = 0; i < N; i++) {
        float *row = logits + i * (size_t)V;
        int tg = targets[i];
        if (tg < 0) {
            memset(row, 0, (size_t)V * sizeof *row);
            if (row_loss) row_loss[i] = 0.0f;
            continue;
        }
        float mx = vmax(row, V);
        float xt = row[tg];
        float sum = vexp_sum(row, mx, V);
        double nll = (double)logf(sum) + (double)mx - (double)xt;
        if (row_loss) row_loss[i] = (float)nll;
        total += nll;
        float s = dscale / sum;
        for (int j = 0; j < V; j++) row[j] *= s;
        row[tg] -= dscale;
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

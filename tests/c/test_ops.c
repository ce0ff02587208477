/* Every kernel's forward against a double-precision reference and its backward against
 * central finite differences of that reference.
 *
 * Method: for an op y = f(x), the scalar objective is J = sum(y * R) with R a fixed random
 * tensor, so dJ/dy = R is what the float backward receives. dJ/dx is estimated in double
 * with h = 1e-6 (truncation ~1e-12, rounding ~1e-10), so the comparison measures the float
 * kernel only. Tolerance: |analytic - fd| <= 1e-4 * (1 + |fd|) (float rounding accumulated
 * over sums of at most a few hundred terms stays below 1e-5 here). Backward kernels that
 * accumulate are started from a non-zero buffer to check that they add.
 *
 * Forward-mode kernels (dga_op_<op>_jvp) against the backward, by the adjoint identity: for
 * random primal inputs, random tangents u of every input and parameter and a random output
 * cotangent v, <v, JVP(u)> = sum over inputs and parameters of <VJP(v), u>. Both sides are
 * summed in double; tolerance |lhs - rhs| <= ADJ_TOL * S with S = sum of |v_i JVP(u)_i| (the
 * size of the terms of the sum, so cancellation cannot hide an error), ADJ_TOL = 1e-5: float
 * rounding measured here stays below 1e-7 of S (each check prints its ratio), and a wrong term (a missing parameter
 * tangent, a wrong sign, a dropped softmax correction) moves the identity by O(S). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adamw.h"
#include "gpt.h"
#include "ops.h"
#include "pool.h"
#include "rng.h"

#define FD_H 1e-6
#define TOL 1e-4
#define PRE 0.25f /* initial content of accumulating gradient buffers */

static dga_rng rng;

static void fill(float *f, double *d, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(scale * dga_rng_normal(&rng));
        if (d) d[i] = f[i];
    }
}

static double *dup_d(const float *f, size_t n)
{
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = f[i];
    return d;
}

/* Central difference of J over every element of x, against analytic (minus `pre`). */
typedef double (*objective)(void *ctx);

static void fd_check(const char *what, double *x, size_t n, const float *analytic, float pre,
                     objective J, void *ctx)
{
    for (size_t i = 0; i < n; i++) {
        double s = x[i];
        x[i] = s + FD_H;
        double jp = J(ctx);
        x[i] = s - FD_H;
        double jm = J(ctx);
        x[i] = s;
        double fd = (jp - jm) / (2 * FD_H), an = (double)analytic[i] - pre;
        if (fabs(an - fd) > TOL * (1 + fabs(fd)))
            fail_msg("%s[%zu]: backward %.8g, finite difference %.8g", what, i, an, fd);
    }
}

static void close_to(const char *what, const float *got, const double *want, size_t n,
                     double tol)
{
    for (size_t i = 0; i < n; i++)
        if (fabs(got[i] - want[i]) > tol * (1 + fabs(want[i])))
            fail_msg("%s[%zu]: forward %.8g, reference %.8g", what, i, got[i], want[i]);
}

static double dot_d(const double *y, const float *r, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += y[i] * r[i];
    return s;
}

/* ---------------------------------------------------------------- fast exp */

static void test_fast_exp(void **state)
{
    (void)state;
    double worst = 0;
    for (float x = -87.0f; x <= 88.0f; x += 0.01234f) {
        double want = exp((double)x), got = dga_fast_expf(x);
        double rel = fabs(got - want) / want;
        if (rel > worst) worst = rel;
    }
    assert_true(worst < 5e-7);
    assert_true(dga_fast_expf(0.0f) == 1.0f);
    assert_true(dga_fast_expf(-1000.0f) < 1e-37f);
    assert_true(dga_fast_expf(1000.0f) > 1e38f && isfinite(dga_fast_expf(1000.0f)));
    assert_true(isnan(dga_fast_expf(NAN)));
}

/* ---------------------------------------------------------------- embedding */

struct emb { int B, T, C; const int32_t *tok; double *wte, *wpe; const float *R; };

static double emb_J(void *p)
{
    struct emb *e = p;
    double s = 0;
    for (int b = 0; b < e->B; b++)
        for (int t = 0; t < e->T; t++)
            for (int c = 0; c < e->C; c++) {
                size_t i = ((size_t)b * e->T + t) * e->C + c;
                s += (e->wte[e->tok[b * e->T + t] * e->C + c] + e->wpe[t * e->C + c]) * e->R[i];
            }
    return s;
}

static void test_embedding(void **state)
{
    (void)state;
    enum { B = 2, T = 5, C = 6, V = 7, TMAX = 6 };
    const int32_t tok[B * T] = {1, 3, 3, 0, 6, 2, 1, 6, 6, 4}; /* repeats accumulate */
    float wte[V * C], wpe[TMAX * C], out[B * T * C], R[B * T * C];
    fill(wte, NULL, V * C, 1);
    fill(wpe, NULL, TMAX * C, 1);
    fill(R, NULL, B * T * C, 1);
    dga_op_embed_fwd(out, tok, wte, wpe, B, T, C);
    float dwte[V * C], dwpe[TMAX * C];
    for (int i = 0; i < V * C; i++) dwte[i] = PRE;
    for (int i = 0; i < TMAX * C; i++) dwpe[i] = PRE;
    dga_op_embed_bwd(dwte, dwpe, R, tok, B, T, C);
    struct emb e = {B, T, C, tok, dup_d(wte, V * C), dup_d(wpe, TMAX * C), R};
    for (int i = 0; i < B * T * C; i++) {
        int bt = i / C, c = i % C;
        assert_true(out[i] == wte[tok[bt] * C + c] + wpe[(bt % T) * C + c]);
    }
    fd_check("embed dwte", e.wte, V * C, dwte, PRE, emb_J, &e);
    fd_check("embed dwpe", e.wpe, TMAX * C, dwpe, PRE, emb_J, &e);
    free(e.wte);
    free(e.wpe);
}

/* ---------------------------------------------------------------- layernorm */

struct ln { int N, C; double *x, *w, *b, *y; const float *R; };

static void ln_ref(struct ln *l)
{
    for (int i = 0; i < l->N; i++) {
        const double *x = l->x + (size_t)i * l->C;
        double m = 0, v = 0;
        for (int c = 0; c < l->C; c++) m += x[c];
        m /= l->C;
        for (int c = 0; c < l->C; c++) v += (x[c] - m) * (x[c] - m);
        v /= l->C;
        for (int c = 0; c < l->C; c++)
            l->y[i * l->C + c] = (x[c] - m) / sqrt(v + 1e-5) * l->w[c] + l->b[c];
    }
}

static double ln_J(void *p)
{
    struct ln *l = p;
    ln_ref(l);
    return dot_d(l->y, l->R, (size_t)l->N * l->C);
}

static void test_layernorm(void **state)
{
    (void)state;
    enum { N = 5, C = 13 };
    float x[N * C], w[C], b[C], y[N * C], R[N * C], mean[N], rstd[N];
    fill(x, NULL, N * C, 2);
    for (int i = 0; i < C; i++) x[i] += 3.0f; /* a row with a large mean */
    fill(w, NULL, C, 1);
    fill(b, NULL, C, 1);
    fill(R, NULL, N * C, 1);
    dga_op_layernorm_fwd(y, mean, rstd, x, w, b, N, C);
    float dx[N * C], dw[C], db[C];
    for (int i = 0; i < N * C; i++) dx[i] = PRE;
    for (int i = 0; i < C; i++) dw[i] = db[i] = PRE;
    dga_op_layernorm_bwd(dx, dw, db, R, x, w, mean, rstd, N, C);
    double yd[N * C];
    struct ln l = {N, C, dup_d(x, N * C), dup_d(w, C), dup_d(b, C), yd, R};
    ln_ref(&l);
    close_to("layernorm", y, yd, N * C, 1e-5);
    fd_check("layernorm dx", l.x, N * C, dx, PRE, ln_J, &l);
    fd_check("layernorm dw", l.w, C, dw, PRE, ln_J, &l);
    fd_check("layernorm db", l.b, C, db, PRE, ln_J, &l);
    /* NULL mean/rstd (inference) gives the same output */
    float y2[N * C];
    dga_op_layernorm_fwd(y2, NULL, NULL, x, w, b, N, C);
    assert_memory_equal(y, y2, sizeof y);
    free(l.x), free(l.w), free(l.b);
}

/* ---------------------------------------------------------------- linear, lm head */

struct lin { int N, IC, OC, transposed; double *x, *w, *b, *y; const float *R; };

static double lin_J(void *p)
{
    struct lin *l = p;
    for (int i = 0; i < l->N; i++)
        for (int o = 0; o < l->OC; o++) {
            double s = l->b ? l->b[o] : 0;
            for (int k = 0; k < l->IC; k++)
                s += l->x[i * l->IC + k] *
                     (l->transposed ? l->w[o * l->IC + k] : l->w[k * l->OC + o]);
            l->y[i * l->OC + o] = s;
        }
    return dot_d(l->y, l->R, (size_t)l->N * l->OC);
}

static void test_linear(void **state)
{
    (void)state;
    enum { N = 7, IC = 9, OC = 11 };
    float x[N * IC], w[IC * OC], b[OC], y[N * OC], R[N * OC];
    fill(x, NULL, N * IC, 1);
    fill(w, NULL, IC * OC, 1);
    fill(b, NULL, OC, 1);
    fill(R, NULL, N * OC, 1);
    dga_op_linear_fwd(y, x, w, b, N, IC, OC);
    float dx[N * IC], dw[IC * OC], db[OC];
    for (int i = 0; i < N * IC; i++) dx[i] = 99.0f; /* overwritten */
    for (int i = 0; i < IC * OC; i++) dw[i] = PRE;
    for (int i = 0; i < OC; i++) db[i] = PRE;
    dga_op_linear_bwd(dx, dw, db, R, x, w, N, IC, OC);
    double yd[N * OC];
    struct lin l = {N, IC, OC, 0, dup_d(x, N * IC), dup_d(w, IC * OC), dup_d(b, OC), yd, R};
    lin_J(&l);
    close_to("linear", y, yd, N * OC, 1e-5);
    fd_check("linear dx", l.x, N * IC, dx, 0, lin_J, &l);
    fd_check("linear dw", l.w, IC * OC, dw, PRE, lin_J, &l);
    fd_check("linear db", l.b, OC, db, PRE, lin_J, &l);
    /* no bias, no input gradient */
    dga_op_linear_fwd(y, x, w, NULL, N, IC, OC);
    free(l.b);
    l.b = NULL;
    lin_J(&l);
    close_to("linear (no bias)", y, yd, N * OC, 1e-5);
    for (int i = 0; i < IC * OC; i++) dw[i] = PRE;
    dga_op_linear_bwd(NULL, dw, NULL, R, x, w, N, IC, OC);
    fd_check("linear dw (no bias)", l.w, IC * OC, dw, PRE, lin_J, &l);
    free(l.x), free(l.w);
}

static void test_lmhead(void **state)
{
    (void)state;
    enum { N = 6, C = 5, V = 17 };
    float x[N * C], wte[V * C], y[N * V], R[N * V];
    fill(x, NULL, N * C, 1);
    fill(wte, NULL, V * C, 1);
    fill(R, NULL, N * V, 1);
    dga_op_lmhead_fwd(y, x, wte, N, C, V);
    float dx[N * C], dw[V * C];
    for (int i = 0; i < V * C; i++) dw[i] = PRE;
    dga_op_lmhead_bwd(dx, dw, R, x, wte, N, C, V);
    double yd[N * V];
    struct lin l = {N, C, V, 1, dup_d(x, N * C), dup_d(wte, V * C), NULL, yd, R};
    lin_J(&l);
    close_to("lmhead", y, yd, N * V, 1e-5);
    fd_check("lmhead dx", l.x, N * C, dx, 0, lin_J, &l);
    fd_check("lmhead dwte", l.w, V * C, dw, PRE, lin_J, &l);
    free(l.x), free(l.w);
}

/* ---------------------------------------------------------------- attention */

struct att { int B, T, C, NH; double *qkv, *y; const float *R; };

static double att_J(void *p)
{
    struct att *a = p;
    const int C = a->C, T = a->T, hs = C / a->NH;
    double s[128];
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->NH; h++)
            for (int i = 0; i < T; i++) {
                const double *q = a->qkv + (size_t)(b * T + i) * 3 * C + h * hs;
                double mx = -1e300, sum = 0;
                for (int j = 0; j <= i; j++) {
                    const double *k = a->qkv + (size_t)(b * T + j) * 3 * C + C + h * hs;
                    s[j] = 0;
                    for (int d = 0; d < hs; d++) s[j] += q[d] * k[d] / sqrt((double)hs);
                    mx = fmax(mx, s[j]);
                }
                for (int j = 0; j <= i; j++) sum += (s[j] = exp(s[j] - mx));
                for (int d = 0; d < hs; d++) {
                    double acc = 0;
                    for (int j = 0; j <= i; j++)
                        acc += s[j] / sum * a->qkv[(size_t)(b * T + j) * 3 * C + 2 * C + h * hs + d];
                    a->y[(size_t)(b * T + i) * C + h * hs + d] = acc;
                }
            }
    return dot_d(a->y, a->R, (size_t)a->B * T * C);
}

static void check_attention(int B, int T, int C, int NH)
{
    const size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *qkv = malloc(nq * sizeof *qkv), *y = malloc(ny * sizeof *y), *R = malloc(ny * sizeof *R);
    float *att = malloc(na * sizeof *att), *dqkv = malloc(nq * sizeof *dqkv);
    float *datt = malloc((size_t)T * T * sizeof *datt), *y2 = malloc(ny * sizeof *y2);
    float *scratch = malloc((size_t)T * T * sizeof *scratch);
    double *yd = malloc(ny * sizeof *yd);
    fill(qkv, NULL, nq, 1.5);
    fill(R, NULL, ny, 1);
    dga_op_attention_fwd(y, att, (size_t)T * T, qkv, B, T, C, NH);
    /* probabilities: causal rows summing to 1 */
    for (size_t r = 0; r < (size_t)B * NH * T; r++) {
        int i = (int)(r % T);
        double s = 0;
        for (int j = 0; j < T; j++) {
            float p = att[r * T + j];
            if (j > i) assert_true(p == 0.0f);
            s += p;
        }
        assert_true(fabs(s - 1) < 1e-5);
    }
    for (size_t i = 0; i < nq; i++) dqkv[i] = 99.0f; /* overwritten */
    for (int i = 0; i < T * T; i++) datt[i] = 99.0f;  /* scratch: garbage must not leak */
    dga_op_attention_bwd(dqkv, datt, R, qkv, att, B, T, C, NH);
    struct att a = {B, T, C, NH, dup_d(qkv, nq), yd, R};
    att_J(&a);
    close_to("attention", y, yd, ny, 1e-5);
    fd_check("attention dqkv", a.qkv, nq, dqkv, 0, att_J, &a);
    /* inference mode: one reused [T,T] scratch gives the same output */
    dga_op_attention_fwd(y2, scratch, 0, qkv, B, T, C, NH);
    assert_memory_equal(y, y2, ny * sizeof *y);
    free(a.qkv), free(qkv), free(y), free(R), free(att), free(dqkv), free(datt), free(y2);
    free(scratch), free(yd);
}

static void test_attention(void **state)
{
    (void)state;
    check_attention(2, 7, 15, 3);  /* T and head size 5: multiples of nothing */
    check_attention(1, 67, 6, 2);  /* T across the causal blocking (blocks of 64 rows) */
}

/* ---------------------------------------------------------------- gelu, residual */

struct ew { size_t n; double *x, *y; const float *R; };

static double gelu_J(void *p)
{
    struct ew *e = p;
    for (size_t i = 0; i < e->n; i++) {
        double u = e->x[i];
        e->y[i] = 0.5 * u * (1 + tanh(sqrt(2 / M_PI) * (u + 0.044715 * u * u * u)));
    }
    return dot_d(e->y, e->R, e->n);
}

static void test_gelu(void **state)
{
    (void)state;
    enum { N = 203 };
    float x[N], y[N], R[N], dx[N];
    fill(x, NULL, N, 2.5);
    x[0] = 0, x[1] = -12, x[2] = 12, x[3] = 1e-4f; /* saturated tails and the origin */
    fill(R, NULL, N, 1);
    dga_op_gelu_fwd(y, x, N);
    dga_op_gelu_bwd(dx, x, R, N);
    double yd[N];
    struct ew e = {N, dup_d(x, N), yd, R};
    gelu_J(&e);
    for (int i = 0; i < N; i++) assert_true(fabs(y[i] - yd[i]) < 1e-6 * (1 + fabs(yd[i])));
    fd_check("gelu dx", e.x, N, dx, 0, gelu_J, &e);
    /* in place (dinp aliasing dout) */
    memcpy(dx, R, sizeof dx);
    float dx2[N];
    dga_op_gelu_bwd(dx2, x, R, N);
    dga_op_gelu_bwd(dx, x, dx, N);
    assert_memory_equal(dx, dx2, sizeof dx);
    free(e.x);
}

static void test_residual(void **state)
{
    (void)state;
    enum { N = 37 };
    float a[N], b[N], y[N], R[N], da[N], db[N];
    fill(a, NULL, N, 1);
    fill(b, NULL, N, 1);
    fill(R, NULL, N, 1);
    dga_op_residual_fwd(y, a, b, N);
    for (int i = 0; i < N; i++) {
        assert_true(y[i] == a[i] + b[i]);
        da[i] = db[i] = PRE;
    }
    dga_op_residual_bwd(da, db, R, N);
    /* J = sum((a + b) R): dJ/da = dJ/db = R exactly */
    for (int i = 0; i < N; i++) assert_true(da[i] == PRE + R[i] && db[i] == PRE + R[i]);
}

/* ---------------------------------------------------------------- cross-entropy */

struct xe { int N, V; const int32_t *tg; double *x; double scale; };

static double xe_J(void *p)
{
    struct xe *e = p;
    double tot = 0;
    for (int i = 0; i < e->N; i++) {
        if (e->tg[i] == DGA_IGNORE) continue;
        const double *r = e->x + (size_t)i * e->V;
        double mx = -1e300, s = 0;
        for (int v = 0; v < e->V; v++) mx = fmax(mx, r[v]);
        for (int v = 0; v < e->V; v++) s += exp(r[v] - mx);
        tot += log(s) + mx - r[e->tg[i]];
    }
    return tot * e->scale;
}

static void test_xent(void **state)
{
    (void)state;
    enum { N = 6, V = 23 };
    const int32_t tg[N] = {4, DGA_IGNORE, 0, 22, DGA_IGNORE, 4};
    float lg[N * V];
    fill(lg, NULL, N * V, 3);
    lg[5 * V + 7] = 60.0f; /* a confident wrong prediction: large loss, stable */
    double *xd = dup_d(lg, N * V);
    struct xe e = {N, V, tg, xd, 1.0};
    double want = xe_J(&e);
    double rows = 0, row_want[N] = {0};
    for (int i = 0; i < N; i++)
        if (tg[i] != DGA_IGNORE) rows += row_want[i] = dga_op_xent_row(lg + i * V, V, tg[i]);
    assert_true(fabs(rows - want) < 1e-5 * want);
    const float scale = 1.0f / 4; /* mean over the 4 valid rows */
    float row_loss[N];
    memset(row_loss, 0xff, sizeof row_loss);   /* NaN: every row must be written */
    double got = dga_op_xent_fwd_bwd(lg, row_loss, tg, N, V, scale);
    assert_true(fabs(got - want) < 1e-5 * want);
    for (int i = 0; i < N; i++)   /* the per-row losses behind the sum; 0 where ignored */
        assert_true(fabs(row_loss[i] - row_want[i]) <= 1e-5 * (1 + row_want[i]));
    e.scale = scale;
    fd_check("xent dlogits", xd, N * V, lg, 0, xe_J, &e);
    for (int v = 0; v < V; v++) assert_true(lg[1 * V + v] == 0.0f && lg[4 * V + v] == 0.0f);
    free(xd);
}

/* ---------------------------------------------------------------- forward mode */

#define ADJ_TOL 1e-5

static double dotf(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static double absdotf(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += fabs((double)a[i] * b[i]);
    return s;
}

static void adjoint_check(const char *what, double lhs, double rhs, double S)
{
    if (!(S > 0) || !(fabs(lhs - rhs) <= ADJ_TOL * S))
        fail_msg("%s: <v, jvp(u)> = %.10g, <vjp(v), u> = %.10g, scale %.4g", what, lhs, rhs, S);
    print_message("# adjoint %s: |lhs - rhs| / S = %.1e\n", what, fabs(lhs - rhs) / S);
}

static float *frand(size_t n, double scale)
{
    float *f = malloc(n * sizeof *f);
    fill(f, NULL, n, scale);
    return f;
}

static void test_embedding_jvp(void **state)
{
    (void)state;
    enum { B = 2, T = 5, C = 6, V = 7, TMAX = 6 };
    const int32_t tok[B * T] = {1, 3, 3, 0, 6, 2, 1, 6, 6, 4};
    float uwte[V * C], uwpe[TMAX * C], v[B * T * C], jv[B * T * C];
    float gwte[V * C] = {0}, gwpe[TMAX * C] = {0};
    fill(uwte, NULL, V * C, 1);
    fill(uwpe, NULL, TMAX * C, 1);
    fill(v, NULL, B * T * C, 1);
    dga_op_embed_jvp(jv, tok, uwte, uwpe, B, T, C);
    dga_op_embed_bwd(gwte, gwpe, v, tok, B, T, C);
    adjoint_check("embed", dotf(v, jv, B * T * C),
                  dotf(gwte, uwte, V * C) + dotf(gwpe, uwpe, TMAX * C), absdotf(v, jv, B * T * C));
}

static void test_layernorm_jvp(void **state)
{
    (void)state;
    enum { N = 5, C = 37 };   /* C: one full 16-lane block, one partial, a scalar tail */
    float x[N * C], w[C], y[N * C], mean[N], rstd[N];
    float ux[N * C], uw[C], ub[C], v[N * C], jv[N * C];
    float gx[N * C] = {0}, gw[C] = {0}, gb[C] = {0};
    fill(x, NULL, N * C, 2);
    for (int i = 0; i < C; i++) x[i] += 3.0f;
    fill(w, NULL, C, 1);
    fill(ux, NULL, N * C, 1);
    fill(uw, NULL, C, 1);
    fill(ub, NULL, C, 1);
    fill(v, NULL, N * C, 1);
    float b[C];
    fill(b, NULL, C, 1);
    dga_op_layernorm_fwd(y, mean, rstd, x, w, b, N, C);
    for (int i = 0; i < N * C; i++) jv[i] = 99.0f;   /* overwritten */
    dga_op_layernorm_jvp(jv, x, ux, w, uw, ub, mean, rstd, N, C);
    dga_op_layernorm_bwd(gx, gw, gb, v, x, w, mean, rstd, N, C);
    adjoint_check("layernorm", dotf(v, jv, N * C),
                  dotf(gx, ux, N * C) + dotf(gw, uw, C) + dotf(gb, ub, C), absdotf(v, jv, N * C));
    /* the input tangent alone (the mean/variance correction terms) */
    float z[C] = {0};
    dga_op_layernorm_jvp(jv, x, ux, w, z, z, mean, rstd, N, C);
    adjoint_check("layernorm dx only", dotf(v, jv, N * C), dotf(gx, ux, N * C),
                  absdotf(v, jv, N * C));
}

static void test_linear_jvp(void **state)
{
    (void)state;
    enum { N = 7, IC = 9, OC = 11 };
    float x[N * IC], w[IC * OC], ux[N * IC], uw[IC * OC], ub[OC], v[N * OC], jv[N * OC];
    float gx[N * IC], gw[IC * OC] = {0}, gb[OC] = {0};
    fill(x, NULL, N * IC, 1);
    fill(w, NULL, IC * OC, 1);
    fill(ux, NULL, N * IC, 1);
    fill(uw, NULL, IC * OC, 1);
    fill(ub, NULL, OC, 1);
    fill(v, NULL, N * OC, 1);
    for (int i = 0; i < N * OC; i++) jv[i] = 99.0f;
    dga_op_linear_jvp(jv, x, ux, w, uw, ub, N, IC, OC);
    dga_op_linear_bwd(gx, gw, gb, v, x, w, N, IC, OC);
    adjoint_check("linear", dotf(v, jv, N * OC),
                  dotf(gx, ux, N * IC) + dotf(gw, uw, IC * OC) + dotf(gb, ub, OC),
                  absdotf(v, jv, N * OC));
    /* constant input, no bias: only x @ dw */
    for (int i = 0; i < N * OC; i++) jv[i] = 99.0f;
    dga_op_linear_jvp(jv, x, NULL, w, uw, NULL, N, IC, OC);
    adjoint_check("linear (dw only)", dotf(v, jv, N * OC), dotf(gw, uw, IC * OC),
                  absdotf(v, jv, N * OC));
}

static void test_lmhead_jvp(void **state)
{
    (void)state;
    enum { N = 6, C = 5, V = 17 };
    float x[N * C], wte[V * C], ux[N * C], uw[V * C], v[N * V], jv[N * V];
    float gx[N * C], gw[V * C] = {0};
    fill(x, NULL, N * C, 1);
    fill(wte, NULL, V * C, 1);
    fill(ux, NULL, N * C, 1);
    fill(uw, NULL, V * C, 1);
    fill(v, NULL, N * V, 1);
    dga_op_lmhead_jvp(jv, x, ux, wte, uw, N, C, V);
    dga_op_lmhead_bwd(gx, gw, v, x, wte, N, C, V);
    adjoint_check("lmhead", dotf(v, jv, N * V), dotf(gx, ux, N * C) + dotf(gw, uw, V * C),
                  absdotf(v, jv, N * V));
}

static void check_attention_jvp(int B, int T, int C, int NH)
{
    const size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *qkv = frand(nq, 1.5), *u = frand(nq, 1), *v = frand(ny, 1);
    float *y = malloc(ny * sizeof *y), *y2 = malloc(ny * sizeof *y2), *jv = malloc(ny * sizeof *jv);
    float *att = malloc(na * sizeof *att), *g = malloc(nq * sizeof *g);
    float *datt = malloc((size_t)T * T * sizeof *datt);
    float *scratch = malloc(2 * (size_t)T * T * sizeof *scratch);
    for (size_t i = 0; i < 2 * (size_t)T * T; i++) scratch[i] = 99.0f;   /* must not leak */
    for (size_t i = 0; i < ny; i++) jv[i] = y2[i] = 99.0f;
    dga_op_attention_fwd(y, att, (size_t)T * T, qkv, B, T, C, NH);
    dga_op_attention_jvp(y2, jv, scratch, qkv, u, B, T, C, NH);
    for (size_t i = 0; i < ny; i++)   /* the primal output it returns is the forward's */
        if (fabs(y2[i] - y[i]) > 1e-6 * (1 + fabs(y[i])))
            fail_msg("attention jvp primal[%zu]: %.8g, forward %.8g", i, y2[i], y[i]);
    dga_op_attention_bwd(g, datt, v, qkv, att, B, T, C, NH);
    adjoint_check("attention", dotf(v, jv, ny), dotf(g, u, nq), absdotf(v, jv, ny));
    /* a tangent on the queries only: the softmax path alone */
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int c = C; c < 3 * C; c++) u[r * 3 * C + c] = 0.0f;
    dga_op_attention_jvp(y2, jv, scratch, qkv, u, B, T, C, NH);
    adjoint_check("attention (dq only)", dotf(v, jv, ny), dotf(g, u, nq), absdotf(v, jv, ny));
    free(qkv), free(u), free(v), free(y), free(y2), free(jv), free(att), free(g), free(datt);
    free(scratch);
}

static void test_attention_jvp(void **state)
{
    (void)state;
    check_attention_jvp(2, 7, 15, 3);
    check_attention_jvp(1, 67, 6, 2);   /* across the causal blocks of 64 rows */
}

static void test_gelu_jvp(void **state)
{
    (void)state;
    enum { N = 203 };
    float x[N], u[N], v[N], jv[N], g[N];
    fill(x, NULL, N, 2.5);
    x[0] = 0, x[1] = -12, x[2] = 12, x[3] = 1e-4f;
    fill(u, NULL, N, 1);
    fill(v, NULL, N, 1);
    dga_op_gelu_jvp(jv, x, u, N);
    dga_op_gelu_bwd(g, x, v, N);
    adjoint_check("gelu", dotf(v, jv, N), dotf(g, u, N), absdotf(v, jv, N));
    float in_place[N];
    memcpy(in_place, u, sizeof u);
    dga_op_gelu_jvp(in_place, x, in_place, N);
    assert_memory_equal(in_place, jv, sizeof jv);
}

static void test_residual_jvp(void **state)
{
    (void)state;
    enum { N = 37 };
    float ua[N], ub[N], v[N], jv[N], ga[N] = {0}, gb[N] = {0};
    fill(ua, NULL, N, 1);
    fill(ub, NULL, N, 1);
    fill(v, NULL, N, 1);
    dga_op_residual_jvp(jv, ua, ub, N);
    dga_op_residual_bwd(ga, gb, v, N);
    adjoint_check("residual", dotf(v, jv, N), dotf(ga, ua, N) + dotf(gb, ub, N),
                  absdotf(v, jv, N));
}

/* The loss is a scalar: its cotangent v is a number, VJP(v) = fwd_bwd's dlogits with
 * dscale = v / count. Ignored rows: no loss and no derivative, whatever their tangent. */
static void test_xent_jvp(void **state)
{
    (void)state;
    enum { N = 6, V = 23 };
    const int32_t tg[N] = {4, DGA_IGNORE, 0, 22, DGA_IGNORE, 4};
    const int count = 4;
    float lg[N * V], lg0[N * V], u[N * V];
    fill(lg, NULL, N * V, 3);
    lg[5 * V + 7] = 60.0f;
    fill(u, NULL, N * V, 1);
    memcpy(lg0, lg, sizeof lg);
    double d = 0;
    double loss = dga_op_xent_jvp(lg, u, tg, N, V, 1.0f / count, &d);
    assert_memory_equal(lg, lg0, sizeof lg);   /* logits left intact */
    const double v = 0.7;
    double want = dga_op_xent_fwd_bwd(lg, NULL, tg, N, V, (float)(v / count));   /* lg: dlogits */
    assert_true(fabs(loss - want) < 1e-6 * want);
    double S = 0;
    for (int i = 0; i < N * V; i++) S += fabs((double)lg[i] * u[i]);
    adjoint_check("xent", v * d, dotf(lg, u, N * V), S);
    /* the tangent of ignored rows does not matter, exactly */
    for (int j = 0; j < V; j++) u[1 * V + j] = 1e6f, u[4 * V + j] = -3.0f;
    double d2 = 0;
    dga_op_xent_jvp(lg0, u, tg, N, V, 1.0f / count, &d2);
    assert_true(d2 == d);
    /* all ignored: nothing */
    const int32_t none[N] = {DGA_IGNORE, DGA_IGNORE, DGA_IGNORE, DGA_IGNORE, DGA_IGNORE, DGA_IGNORE};
    assert_true(dga_op_xent_jvp(lg0, u, none, N, V, 1.0f, &d2) == 0.0 && d2 == 0.0);
    /* a shift of every logit of a row by the same amount changes no softmax: derivative 0 */
    for (int i = 0; i < N * V; i++) u[i] = 1.0f;
    dga_op_xent_jvp(lg0, u, tg, N, V, 1.0f / count, &d2);
    assert_true(fabs(d2) < 1e-6);
}

/* ---------------------------------------------------------------- threaded kernels */

/* Every threaded kernel split over 2 and 3 tasks (uneven pieces; the pool's minimum work set
 * to 0 so that even these small sizes are split) against its one-thread result. They split
 * rows, columns or flat chunks and keep each element's own order of operations, so the
 * results must be the same bits; only the gradient norm, a reduction over chunks, is held to
 * a tolerance instead. */
static float *randf(size_t n, double scale)
{
    float *f = malloc(n * sizeof *f);
    fill(f, NULL, n, scale);
    return f;
}

static float *copyf(const float *f, size_t n)
{
    float *d = malloc(n * sizeof *d);
    memcpy(d, f, n * sizeof *d);
    return d;
}

static void set_threads(int n)
{
    assert_int_equal(dga_pool_set_threads(n), DGA_OK);
    assert_int_equal(dga_pool_threads(), n);
}

enum { TN = 37, TC = 40, TV = 50 };

/* the outputs of every row/column/flat kernel at the current thread count, concatenated */
static float lin_w[TC * TC];

static float *run_kernels(const float *x, const float *x2, const float *w, const float *b,
                          const float *dy, const float *logits, const int32_t *tg,
                          size_t *len, double *xent)
{
    const size_t NC = (size_t)TN * TC;
    size_t n = 0, cap = 12 * NC + (size_t)TC * TC + 4 * TC + 2 * TN + (size_t)TN * TV
                       + NC + (size_t)TV * TC + (size_t)TN * TC;
    float *out = calloc(cap, sizeof *out);
    float *ln = out + n; n += NC;
    float *mean = out + n; n += TN;
    float *rstd = out + n; n += TN;
    dga_op_layernorm_fwd(ln, mean, rstd, x, w, b, TN, TC);
    float *dx = out + n; n += NC;
    float *dw = out + n; n += TC;
    float *db = out + n; n += TC;
    for (size_t i = 0; i < NC; i++) dx[i] = PRE;
    for (int i = 0; i < TC; i++) dw[i] = db[i] = PRE;
    dga_op_layernorm_bwd(dx, dw, db, dy, x, w, mean, rstd, TN, TC);
    float *g = out + n; n += NC;
    dga_op_gelu_fwd(g, x, NC);
    float *dg = out + n; n += NC;
    dga_op_gelu_bwd(dg, x, dy, NC);
    float *r = out + n; n += NC;
    dga_op_residual_fwd(r, x, x2, NC);
    float *ra = out + n; n += NC;
    float *rb = out + n; n += NC;
    for (size_t i = 0; i < NC; i++) ra[i] = rb[i] = PRE;
    dga_op_residual_bwd(ra, rb, dy, NC);
    /* linear: bias added over rows, bias gradient summed over columns */
    float *lin = out + n; n += NC;
    dga_op_linear_fwd(lin, x, lin_w, b, TN, TC, TC);
    float *lw = out + n; n += (size_t)TC * TC;
    float *lb = out + n; n += TC;
    float *ldx = out + n; n += NC;
    for (int i = 0; i < TC; i++) lb[i] = PRE;
    dga_op_linear_bwd(ldx, lw, lb, dy, x, lin_w, TN, TC, TC);
    float *lg = out + n; n += (size_t)TN * TV;
    memcpy(lg, logits, (size_t)TN * TV * sizeof *lg);
    *xent = dga_op_xent_fwd_bwd(lg, NULL, tg, TN, TV, 1.0f / TN);
    /* embedding: rows forward; backward by columns, rows with the same token adding up */
    int32_t tok[TN];
    for (int i = 0; i < TN; i++) tok[i] = (int32_t)((i * 7) % 11);   /* repeated ids */
    float *emb = out + n; n += NC;
    dga_op_embed_fwd(emb, tok, lin_w, x2, 1, TN, TC);
    float *dwte = out + n; n += (size_t)TV * TC;
    float *dwpe = out + n; n += (size_t)TN * TC;
    for (size_t i = 0; i < (size_t)TV * TC; i++) dwte[i] = PRE;
    for (size_t i = 0; i < (size_t)TN * TC; i++) dwpe[i] = PRE;
    dga_op_embed_bwd(dwte, dwpe, dy, tok, 1, TN, TC);
    assert_true(n <= cap);
    *len = n;
    return out;
}

static void test_threaded_kernels(void **state)
{
    (void)state;
    const size_t NC = (size_t)TN * TC;
    float *x = randf(NC, 1.5), *x2 = randf(NC, 1.0), *w = randf(TC, 1.0), *b = randf(TC, 0.5);
    float *dy = randf(NC, 1.0), *logits = randf((size_t)TN * TV, 2.0);
    fill(lin_w, NULL, (size_t)TC * TC, 0.2);
    int32_t tg[TN];
    for (int i = 0; i < TN; i++) tg[i] = i % 5 == 3 ? -1 : (int32_t)dga_rng_below(&rng, TV);
    size_t min_work = dga_pool_min_work();
    dga_pool_set_min_work(0);
    set_threads(1);
    size_t n1, n;
    double xent1, xent;
    float *ref = run_kernels(x, x2, w, b, dy, logits, tg, &n1, &xent1);
    for (int th = 2; th <= 3; th++) {
        set_threads(th);
        float *got = run_kernels(x, x2, w, b, dy, logits, tg, &n, &xent);
        assert_int_equal(n, n1);
        assert_memory_equal(got, ref, n * sizeof *got);
        assert_true(xent == xent1);
        free(got);
    }
    set_threads(1);
    dga_pool_set_min_work(min_work);
    free(ref), free(x), free(x2), free(w), free(b), free(dy), free(logits);
}

/* attention, both directions, B * NH heads split over the tasks */
static void attention_at(int threads, int B, int T, int C, int NH, const float *qkv,
                         const float *dy, float *y, float *att, float *dqkv)
{
    set_threads(threads);
    float *datt = malloc((size_t)T * T * sizeof *datt);
    dga_op_attention_fwd(y, att, (size_t)T * T, qkv, B, T, C, NH);
    dga_op_attention_bwd(dqkv, datt, dy, qkv, att, B, T, C, NH);
    free(datt);
}

/* the inference forward (one shared [T,T] scratch) and the tangent: y, then ty */
static void attention_infer_at(int threads, int B, int T, int C, int NH, const float *qkv,
                               const float *tqkv, float *y)
{
    set_threads(threads);
    size_t ny = (size_t)B * T * C;
    float *scratch = malloc(2 * (size_t)T * T * sizeof *scratch);
    float *y2 = malloc(ny * sizeof *y2);
    dga_op_attention_fwd(y, scratch, 0, qkv, B, T, C, NH);
    dga_op_attention_jvp(y2, y + ny, scratch, qkv, tqkv, B, T, C, NH);
    assert_memory_equal(y2, y, ny * sizeof *y);   /* the jvp's forward is the forward */
    free(scratch), free(y2);
}

static void test_threaded_attention(void **state)
{
    (void)state;
    enum { B = 3, T = 67, C = 12, NH = 3 };
    size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *qkv = randf(nq, 1.0), *dy = randf(ny, 1.0);
    float *y1 = calloc(ny, sizeof(float)), *a1 = calloc(na, sizeof(float));
    float *d1 = calloc(nq, sizeof(float));
    float *y2 = calloc(ny, sizeof(float)), *a2 = calloc(na, sizeof(float));
    float *d2 = calloc(nq, sizeof(float));
    size_t min_work = dga_pool_min_work();
    dga_pool_set_min_work(0);
    attention_at(1, B, T, C, NH, qkv, dy, y1, a1, d1);
    for (int th = 2; th <= 3; th++) {
        memset(y2, 0, ny * sizeof *y2), memset(a2, 0, na * sizeof *a2);
        memset(d2, 0, nq * sizeof *d2);
        attention_at(th, B, T, C, NH, qkv, dy, y2, a2, d2);
        assert_memory_equal(y2, y1, ny * sizeof *y1);
        assert_memory_equal(a2, a1, na * sizeof *a1);
        assert_memory_equal(d2, d1, nq * sizeof *d1);
    }
    float *tq = randf(nq, 1.0), *i1 = calloc(2 * ny, sizeof(float));
    float *i2 = calloc(2 * ny, sizeof(float));
    attention_infer_at(1, B, T, C, NH, qkv, tq, i1);
    for (int th = 2; th <= 3; th++) {
        memset(i2, 0, 2 * ny * sizeof *i2);
        attention_infer_at(th, B, T, C, NH, qkv, tq, i2);
        assert_memory_equal(i2, i1, 2 * ny * sizeof *i1);
    }
    free(tq), free(i1), free(i2);
    set_threads(1);
    dga_pool_set_min_work(min_work);
    free(qkv), free(dy), free(y1), free(a1), free(d1), free(y2), free(a2), free(d2);
}

/* AdamW (elementwise: the same bits) and the clipped gradient norm (a sum over fixed chunks:
 * the same at 2 and 3 threads, and within 1e-12 of the single sum at one thread). */
static void test_threaded_adamw_clip(void **state)
{
    (void)state;
    const size_t n = 200003;   /* four norm chunks, the last one partial */
    const size_t ranges[2][2] = {{5, 70001}, {130000, 199999}};
    float *g = randf(n, 1.0), *p0 = randf(n, 1.0);
    float *p[3], *gc[3];
    double norm[3];
    size_t min_work = dga_pool_min_work();
    dga_pool_set_min_work(0);
    for (int th = 1; th <= 3; th++) {
        set_threads(th);
        dga_adamw *o = NULL;
        assert_int_equal(dga_adamw_create(n, NULL, ranges, 2, &o), DGA_OK);
        p[th - 1] = copyf(p0, n);
        gc[th - 1] = copyf(g, n);
        norm[th - 1] = dga_grad_clip(gc[th - 1], n, 1.0);
        for (int s = 0; s < 3; s++)
            assert_int_equal(dga_adamw_step(o, p[th - 1], g, 1e-2f), DGA_OK);
        /* a non-finite gradient anywhere is still refused, and leaves the parameters alone */
        float *bad = copyf(g, n);
        bad[n - 2] = NAN;
        float *keep = copyf(p[th - 1], n);
        assert_int_equal(dga_adamw_step(o, p[th - 1], bad, 1e-2f), DGA_ERR_INVALID);
        assert_memory_equal(keep, p[th - 1], n * sizeof *keep);
        free(bad), free(keep);
        dga_adamw_free(o);
    }
    assert_memory_equal(p[1], p[0], n * sizeof *p[0]);
    assert_memory_equal(p[2], p[0], n * sizeof *p[0]);
    assert_true(norm[1] == norm[2]);
    assert_true(fabs(norm[1] - norm[0]) <= 1e-12 * norm[0]);
    /* the clip scale is computed from each norm; the same norm gives the same bits */
    assert_memory_equal(gc[1], gc[2], n * sizeof *gc[1]);
    for (size_t i = 0; i < n; i++) assert_true(fabsf(gc[1][i] - gc[0][i]) <= 1e-6f * fabsf(gc[0][i]));
    set_threads(1);
    dga_pool_set_min_work(min_work);
    for (int i = 0; i < 3; i++) free(p[i]), free(gc[i]);
    free(g), free(p0);
}

/* The gradient checks again with every kernel split over two threads. */
static int two_threads(void **state)
{
    (void)state;
    dga_pool_set_min_work(0);
    return dga_pool_set_threads(2) == DGA_OK ? 0 : -1;
}

static int one_thread(void **state)
{
    (void)state;
    dga_pool_set_min_work(32768);
    return dga_pool_set_threads(1) == DGA_OK ? 0 : -1;
}

int main(void)
{
    dga_rng_seed(&rng, 2024);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_exp), cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_layernorm), cmocka_unit_test(test_linear),
        cmocka_unit_test(test_lmhead),   cmocka_unit_test(test_attention),
        cmocka_unit_test(test_gelu),     cmocka_unit_test(test_residual),
        cmocka_unit_test(test_xent),
        cmocka_unit_test(test_embedding_jvp), cmocka_unit_test(test_layernorm_jvp),
        cmocka_unit_test(test_linear_jvp),    cmocka_unit_test(test_lmhead_jvp),
        cmocka_unit_test(test_attention_jvp), cmocka_unit_test(test_gelu_jvp),
        cmocka_unit_test(test_residual_jvp),  cmocka_unit_test(test_xent_jvp),
    };
    const struct CMUnitTest threaded[] = {
        cmocka_unit_test(test_threaded_kernels), cmocka_unit_test(test_threaded_attention),
        cmocka_unit_test(test_threaded_adamw_clip),
    };
    const struct CMUnitTest gradients_2_threads[] = {
        cmocka_unit_test(test_layernorm), cmocka_unit_test(test_linear),
        cmocka_unit_test(test_attention), cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_residual),  cmocka_unit_test(test_xent),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    failed += cmocka_run_group_tests(threaded, NULL, NULL);
    failed += cmocka_run_group_tests(gradients_2_threads, two_threads, one_thread);
    return failed;
}

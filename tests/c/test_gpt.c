/* GPT model: layout and init, whole-model gradient check against a double-precision
 * reference forward, memorisation with AdamW, determinism, input validation, eval and
 * next_logits consistency, forward mode (dga_model_jvp) against backward and the reference,
 * and the ranges backward announces final (grads_ready). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adamw.h"
#include "gpt.h"

static const dga_gpt_config TINY = {.n_layer = 2, .n_head = 2, .n_embd = 16, .n_ctx = 8,
                                    .vocab_size = 32};

static dga_model *make(const dga_gpt_config *cfg, int max_batch, uint64_t seed)
{
    dga_model *m = NULL;
    assert_int_equal(dga_gpt_create(cfg, max_batch, &m), DGA_OK);
    dga_rng r;
    dga_rng_seed(&r, seed);
    dga_model_init_weights(m, &r);
    return m;
}

static void random_tokens(int32_t *t, size_t n, int V, dga_rng *r)
{
    for (size_t i = 0; i < n; i++) t[i] = (int32_t)dga_rng_below(r, (uint64_t)V);
}

/* ------------------------------------------------------- double-precision reference */

typedef struct {
    const dga_model *m;
    const double *p;
} ref_model;

static const double *P(const ref_model *r, const char *name)
{
    const dga_tensor_info *t = dga_model_find_tensor(r->m, name);
    assert_non_null(t);
    return r->p + t->offset;
}

static const double *PL(const ref_model *r, int l, const char *suffix)
{
    char name[64];
    snprintf(name, sizeof name, "transformer.h.%d.%s", l, suffix);
    return P(r, name);
}

static void ref_ln(double *out, const double *x, const double *w, const double *b, int N,
                   int C)
{
    for (int i = 0; i < N; i++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += x[i * C + c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[i * C + c] - m) * (x[i * C + c] - m);
        v /= C;
        double rs = 1.0 / sqrt(v + 1e-5);
        for (int c = 0; c < C; c++) out[i * C + c] = (x[i * C + c] - m) * rs * w[c] + b[c];
    }
}

static void ref_linear(double *out, const double *x, const double *w, const double *b, int N,
                       int IC, int OC)
{
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double s = b ? b[o] : 0.0;
            for (int k = 0; k < IC; k++) s += x[i * IC + k] * w[k * OC + o];
            out[i * OC + o] = s;
        }
}

/* Mean NLL over non-ignored targets, in double, straight from the definition. */
static double ref_loss(const ref_model *r, const int32_t *in, const int32_t *tg, int B, int T)
{
    const dga_gpt_config *cfg = dga_gpt_get_config(r->m);
    const int C = cfg->n_embd, V = cfg->vocab_size, NH = cfg->n_head, hs = C / NH,
              N = B * T;
    double *x = calloc((size_t)N * C, sizeof *x), *h = calloc((size_t)N * C, sizeof *h);
    double *qkv = calloc((size_t)N * 3 * C, sizeof *qkv), *y = calloc((size_t)N * C, sizeof *y);
    double *f = calloc((size_t)N * 4 * C, sizeof *f), *att = calloc((size_t)T, sizeof *att);
    double *lg = calloc((size_t)V, sizeof *lg);
    const double *wte = P(r, "transformer.wte.weight"), *wpe = P(r, "transformer.wpe.weight");
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) x[i * C + c] = wte[in[i] * C + c] + wpe[(i % T) * C + c];
    for (int l = 0; l < cfg->n_layer; l++) {
        ref_ln(h, x, PL(r, l, "ln_1.weight"), PL(r, l, "ln_1.bias"), N, C);
        ref_linear(qkv, h, PL(r, l, "attn.c_attn.weight"), PL(r, l, "attn.c_attn.bias"), N, C,
                   3 * C);
        for (int b = 0; b < B; b++)
            for (int hh = 0; hh < NH; hh++)
                for (int i = 0; i < T; i++) {
                    const double *q = qkv + (size_t)(b * T + i) * 3 * C + hh * hs;
                    double mx = -1e300, sum = 0;
                    for (int j = 0; j <= i; j++) {
                        const double *k = qkv + (size_t)(b * T + j) * 3 * C + C + hh * hs;
                        double s = 0;
                        for (int d = 0; d < hs; d++) s += q[d] * k[d];
                        att[j] = s / sqrt((double)hs);
                        if (att[j] > mx) mx = att[j];
                    }
                    for (int j = 0; j <= i; j++) sum += (att[j] = exp(att[j] - mx));
                    for (int d = 0; d < hs; d++) {
                        double s = 0;
                        for (int j = 0; j <= i; j++)
                            s += att[j] / sum * qkv[(size_t)(b * T + j) * 3 * C + 2 * C + hh * hs + d];
                        y[(size_t)(b * T + i) * C + hh * hs + d] = s;
                    }
                }
        ref_linear(h, y, PL(r, l, "attn.c_proj.weight"), PL(r, l, "attn.c_proj.bias"), N, C, C);
        for (int i = 0; i < N * C; i++) x[i] += h[i];
        ref_ln(h, x, PL(r, l, "ln_2.weight"), PL(r, l, "ln_2.bias"), N, C);
        ref_linear(f, h, PL(r, l, "mlp.c_fc.weight"), PL(r, l, "mlp.c_fc.bias"), N, C, 4 * C);
        for (int i = 0; i < N * 4 * C; i++) {
            double u = f[i];
            f[i] = 0.5 * u * (1 + tanh(sqrt(2 / M_PI) * (u + 0.044715 * u * u * u)));
        }
        ref_linear(h, f, PL(r, l, "mlp.c_proj.weight"), PL(r, l, "mlp.c_proj.bias"), N, 4 * C,
                   C);
        for (int i = 0; i < N * C; i++) x[i] += h[i];
    }
    ref_ln(h, x, P(r, "transformer.ln_f.weight"), P(r, "transformer.ln_f.bias"), N, C);
    double total = 0;
    int count = 0;
    for (int i = 0; i < N; i++) {
        if (tg[i] == DGA_IGNORE) continue;
        double mx = -1e300, sum = 0;
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int c = 0; c < C; c++) s += h[i * C + c] * wte[v * C + c];
            lg[v] = s;
            if (s > mx) mx = s;
        }
        for (int v = 0; v < V; v++) sum += exp(lg[v] - mx);
        total += log(sum) + mx - lg[tg[i]];
        count++;
    }
    free(x), free(h), free(qkv), free(y), free(f), free(att), free(lg);
    return count ? total / count : 0.0;
}

/* ------------------------------------------------------------------------- tests */

static void test_layout(void **state)
{
    (void)state;
    dga_model *m = make(&TINY, 2, 1);
    const int C = 16, L = 2;
    size_t expect = 32 * C + 8 * C + (size_t)L * (12 * C * C + 13 * C) + 2 * C;
    assert_int_equal(dga_model_num_params(m), expect);
    assert_int_equal(dga_model_num_tensors(m), 2 + 12 * L + 2);
    size_t off = 0;
    for (int i = 0; i < dga_model_num_tensors(m); i++) {
        const dga_tensor_info *t = dga_model_tensor(m, i);
        assert_int_equal(t->offset, off);
        off += t->numel;
    }
    assert_int_equal(off, expect);
    assert_null(dga_model_tensor(m, dga_model_num_tensors(m)));
    const dga_tensor_info *t = dga_model_find_tensor(m, "transformer.h.1.attn.c_attn.weight");
    assert_non_null(t);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], C);
    assert_int_equal(t->shape[1], 3 * C);
    assert_true(t->is_matrix);
    t = dga_model_find_tensor(m, "transformer.h.0.mlp.c_proj.weight");
    assert_int_equal(t->shape[0], 4 * C);
    assert_int_equal(t->shape[1], C);
    t = dga_model_find_tensor(m, "transformer.wte.weight");
    assert_true(t->is_matrix && t->shape[0] == 32 && t->shape[1] == C && t->offset == 0);
    t = dga_model_find_tensor(m, "transformer.wpe.weight");
    assert_true(t->is_matrix && t->shape[0] == 8);
    t = dga_model_find_tensor(m, "transformer.h.0.mlp.c_fc.bias");
    assert_true(!t->is_matrix && t->ndim == 1 && t->shape[0] == 4 * C);
    assert_null(dga_model_find_tensor(m, "transformer.h.2.ln_1.weight"));
    /* init: LN weights 1, biases 0, residual projections narrower than c_fc */
    const float *p = dga_model_params(m);
    t = dga_model_find_tensor(m, "transformer.ln_f.weight");
    for (size_t i = 0; i < t->numel; i++) assert_true(p[t->offset + i] == 1.0f);
    t = dga_model_find_tensor(m, "transformer.h.1.attn.c_attn.bias");
    for (size_t i = 0; i < t->numel; i++) assert_true(p[t->offset + i] == 0.0f);
    double s_fc = 0, s_proj = 0;
    t = dga_model_find_tensor(m, "transformer.h.0.mlp.c_fc.weight");
    for (size_t i = 0; i < t->numel; i++) s_fc += (double)p[t->offset + i] * p[t->offset + i];
    s_fc = sqrt(s_fc / t->numel);
    t = dga_model_find_tensor(m, "transformer.h.0.mlp.c_proj.weight");
    for (size_t i = 0; i < t->numel; i++) s_proj += (double)p[t->offset + i] * p[t->offset + i];
    s_proj = sqrt(s_proj / t->numel);
    assert_true(fabs(s_fc - 0.02) < 0.002);
    assert_true(fabs(s_proj - 0.01) < 0.001); /* 0.02 / sqrt(2 L), L = 2 */
    double f = dga_gpt_flops_per_token(&TINY, 8);
    assert_true(fabs(f - (6.0 * (expect - 8 * C) + 12.0 * L * 8 * C)) < 0.5);
    dga_model_free(m);
}

static void test_config_errors(void **state)
{
    (void)state;
    dga_model *m = (dga_model *)1;
    dga_gpt_config c = TINY;
    c.n_head = 3;
    assert_int_equal(dga_gpt_create(&c, 1, &m), DGA_ERR_INVALID);
    assert_null(m);
    assert_non_null(strstr(dga_last_error(), "heads"));
    c = TINY;
    c.vocab_size = 0;
    assert_int_equal(dga_gpt_config_check(&c), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "vocab"));
    assert_int_equal(dga_gpt_create(&TINY, 0, &m), DGA_ERR_INVALID);
    dga_model_free(NULL);
}

/* Whole-model gradient: every tensor, a sample of elements (plus the extremes), against
 * central differences of the double reference (h = 1e-5, truncation ~1e-10). Tolerance
 * 1e-4 absolute + 1e-3 relative: the float backward carries ~1e-6 relative rounding. */
static void test_gradcheck(void **state)
{
    (void)state;
    const int B = 2, T = 7, V = TINY.vocab_size;
    dga_model *m = make(&TINY, 3, 7);
    dga_rng r;
    dga_rng_seed(&r, 99);
    float *p = dga_model_params(m);
    size_t n = dga_model_num_params(m);
    /* larger weights than GPT-2's init so that every path carries a visible gradient */
    for (size_t i = 0; i < n; i++) p[i] = (float)(0.3 * dga_rng_normal(&r));
    for (int i = 0; i < dga_model_num_tensors(m); i++) {
        const dga_tensor_info *t = dga_model_tensor(m, i);
        if (strstr(t->name, "ln_") && strstr(t->name, ".weight"))
            for (size_t j = 0; j < t->numel; j++) p[t->offset + j] += 1.0f;
    }
    int32_t in[14], tg[14];
    random_tokens(in, 14, V, &r);
    random_tokens(tg, 14, V, &r);
    tg[3] = DGA_IGNORE;
    tg[12] = DGA_IGNORE;
    float loss;
    dga_model_zero_grad(m);
    assert_int_equal(dga_model_forward(m, in, tg, B, T, &loss), DGA_OK);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    const float *g = dga_model_grads(m);
    double *pd = malloc(n * sizeof *pd);
    for (size_t i = 0; i < n; i++) pd[i] = p[i];
    ref_model ref = {m, pd};
    double l0 = ref_loss(&ref, in, tg, B, T);
    assert_true(fabs(l0 - loss) < 1e-5 * fabs(l0) + 1e-6);
    const double h = 1e-5;
    int checked = 0;
    double worst = 0;
    for (int i = 0; i < dga_model_num_tensors(m); i++) {
        const dga_tensor_info *t = dga_model_tensor(m, i);
        for (int s = 0; s < 8; s++) {
            size_t j = s == 0 ? 0 : s == 1 ? t->numel - 1 : dga_rng_below(&r, t->numel);
            if (s == 2 && i == 0) j = (size_t)in[5] * TINY.n_embd + 3; /* a used token row */
            size_t k = t->offset + j;
            double save = pd[k];
            pd[k] = save + h;
            double lp = ref_loss(&ref, in, tg, B, T);
            pd[k] = save - h;
            double lm = ref_loss(&ref, in, tg, B, T);
            pd[k] = save;
            double fd = (lp - lm) / (2 * h);
            double err = fabs(fd - g[k]);
            if (err > worst) worst = err;
            if (err > 1e-4 + 1e-3 * fabs(fd))
                fail_msg("%s[%zu]: backward %.8g, finite difference %.8g", t->name, j, g[k], fd);
            checked++;
        }
    }
    /* wpe rows past T receive no gradient */
    const dga_tensor_info *wpe = dga_model_find_tensor(m, "transformer.wpe.weight");
    for (int c = 0; c < TINY.n_embd; c++) assert_true(g[wpe->offset + 7 * TINY.n_embd + c] == 0);
    print_message("# gradcheck: %d elements, worst abs error %.2e\n", checked, worst);
    /* a second backward accumulates the same gradient again (up to summation order) */
    float *g1 = malloc(n * sizeof *g1);
    memcpy(g1, g, n * sizeof *g1);
    double gmax = 0;
    for (size_t i = 0; i < n; i++) gmax = fmax(gmax, fabs(g1[i]));
    assert_int_equal(dga_model_backward(m), DGA_OK);
    for (size_t i = 0; i < n; i++)
        assert_true(fabs(g[i] - 2.0 * g1[i]) <= 1e-5 * fabs(g1[i]) + 1e-6 * gmax);
    free(g1);
    free(pd);
    dga_model_free(m);
}

/* Runs `steps` AdamW steps on fixed batches; returns the losses. */
static void train(dga_model *m, const int32_t *in, const int32_t *tg, int B, int T, int steps,
                  float lr, float *losses)
{
    size_t n = dga_model_num_params(m);
    dga_adamw_config c = dga_adamw_defaults();
    c.weight_decay = 0.0f;
    dga_adamw *opt = NULL;
    assert_int_equal(dga_adamw_create(n, &c, NULL, 0, &opt), DGA_OK);
    for (int s = 0; s < steps; s++) {
        dga_model_zero_grad(m);
        assert_int_equal(dga_model_forward(m, in, tg, B, T, &losses[s]), DGA_OK);
        assert_int_equal(dga_model_backward(m), DGA_OK);
        dga_grad_clip(dga_model_grads(m), n, 1.0);
        assert_int_equal(dga_adamw_step(opt, dga_model_params(m), dga_model_grads(m), lr), DGA_OK);
    }
    dga_adamw_free(opt);
}

static void test_memorise(void **state)
{
    (void)state;
    dga_gpt_config c = {.n_layer = 2, .n_head = 2, .n_embd = 32, .n_ctx = 16, .vocab_size = 32};
    dga_model *m = make(&c, 1, 3);
    dga_rng r;
    dga_rng_seed(&r, 5);
    int32_t seq[17];
    random_tokens(seq, 17, c.vocab_size, &r);
    float losses[300];
    train(m, seq, seq + 1, 1, 16, 300, 1e-2f, losses);
    print_message("# memorise: loss %.4f -> %.4f\n", losses[0], losses[299]);
    assert_true(losses[0] > 3.0f);
    assert_true(losses[299] < 0.05f);
    dga_model_free(m);
}

static void test_determinism(void **state)
{
    (void)state;
    dga_gpt_config c = {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_ctx = 24, .vocab_size = 64};
    float l1[20], l2[20];
    int32_t in[3 * 23], tg[3 * 23];
    dga_rng r;
    dga_rng_seed(&r, 11);
    random_tokens(in, 69, 64, &r);
    random_tokens(tg, 69, 64, &r);
    for (int run = 0; run < 2; run++) {
        dga_model *m = make(&c, 4, 42);
        train(m, in, tg, 3, 23, 20, 3e-3f, run ? l2 : l1);
        dga_model_free(m);
    }
    assert_memory_equal(l1, l2, sizeof l1);
    assert_true(l1[19] < l1[0]);
}

static void test_bad_input(void **state)
{
    (void)state;
    dga_model *m = make(&TINY, 2, 1);
    int32_t in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, tg[8] = {2, 3, 4, 5, 6, 7, 8, -1};
    float loss = -1;
    assert_int_equal(dga_model_backward(m), DGA_ERR_INVALID);
    in[5] = 32;
    assert_int_equal(dga_model_forward(m, in, tg, 2, 4, &loss), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "token id 32 at [2,2]"));
    assert_non_null(strstr(dga_last_error(), "[0, 32)"));
    in[5] = -1;
    assert_int_equal(dga_model_eval(m, in, tg, 1, 8, NULL, NULL), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "eval: token id -1 at [1,6]"));
    in[5] = 6;
    tg[0] = -2;
    assert_int_equal(dga_model_forward(m, in, tg, 2, 4, &loss), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "forward: target id -2 at [1,1]"));
    tg[0] = 2;
    assert_int_equal(dga_model_forward(m, in, tg, 3, 2, &loss), DGA_ERR_INVALID); /* B > max */
    assert_non_null(strstr(dga_last_error(), "batch"));
    assert_int_equal(dga_model_forward(m, in, tg, 1, 9, &loss), DGA_ERR_INVALID); /* T > ctx */
    assert_int_equal(dga_model_forward(m, in, NULL, 1, 8, &loss), DGA_ERR_INVALID);
    assert_int_equal(dga_model_backward(m), DGA_ERR_INVALID); /* failed forward: nothing */
    assert_int_equal(dga_model_next_logits(m, in, 9, (float[32]){0}), DGA_ERR_INVALID);
    in[0] = 99;
    assert_int_equal(dga_model_next_logits(m, in, 3, (float[32]){0}), DGA_ERR_INVALID);
    in[0] = 1;
    assert_int_equal(dga_model_forward(m, in, tg, 2, 4, &loss), DGA_OK);
    assert_true(loss > 0);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    /* all targets ignored: loss 0, zero gradient */
    int32_t none[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    dga_model_zero_grad(m);
    assert_int_equal(dga_model_forward(m, in, none, 2, 4, &loss), DGA_OK);
    assert_true(loss == 0.0f);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    assert_true(dga_vec_norm(dga_model_grads(m), dga_model_num_params(m)) == 0.0);
    dga_model_free(m);
}

static void test_eval_and_logits(void **state)
{
    (void)state;
    dga_gpt_config c = {.n_layer = 2, .n_head = 2, .n_embd = 32, .n_ctx = 20, .vocab_size = 50};
    const int B = 3, T = 19;
    dga_model *m = make(&c, 4, 8);
    dga_rng r;
    dga_rng_seed(&r, 21);
    int32_t in[B * T], tg[B * T];
    random_tokens(in, B * T, c.vocab_size, &r);
    random_tokens(tg, B * T, c.vocab_size, &r);
    for (int i = 0; i < B * T; i += 4) tg[i] = DGA_IGNORE;
    /* train a little so that the predictions are not uniform */
    float losses[10];
    train(m, in, tg, B, T, 10, 1e-2f, losses);
    float loss;
    assert_int_equal(dga_model_forward(m, in, tg, B, T, &loss), DGA_OK);
    double nll[3];
    int cnt[3];
    assert_int_equal(dga_model_eval(m, in, tg, B, T, nll, cnt), DGA_OK);
    double sum = 0;
    int total = 0;
    for (int b = 0; b < B; b++) {
        int expect = 0;
        for (int t = 0; t < T; t++) expect += tg[b * T + t] != DGA_IGNORE;
        assert_int_equal(cnt[b], expect);
        sum += nll[b];
        total += cnt[b];
    }
    assert_true(fabs(sum / total - loss) < 1e-5 * loss);
    /* a sequence with every target ignored scores nothing; the others are unchanged */
    int32_t tg2[B * T];
    memcpy(tg2, tg, sizeof tg2);
    for (int t = 0; t < T; t++) tg2[T + t] = DGA_IGNORE;
    double nll2[3];
    int cnt2[3];
    assert_int_equal(dga_model_eval(m, in, tg2, B, T, nll2, cnt2), DGA_OK);
    assert_true(nll2[1] == 0.0 && cnt2[1] == 0);
    assert_true(fabs(nll2[0] - nll[0]) < 1e-9 * nll[0] && cnt2[2] == cnt[2]);
    /* next_logits on a prefix of sequence 1 predicts what eval scores at that position */
    const int n = 11, V = c.vocab_size;
    float lg[50];
    assert_int_equal(dga_model_next_logits(m, in + T, n, lg), DGA_OK);
    int32_t tg1[19];
    for (int t = 0; t < T; t++) tg1[t] = DGA_IGNORE;
    tg1[n - 1] = 17;
    assert_int_equal(dga_model_eval(m, in + T, tg1, 1, n, nll, cnt), DGA_OK);
    assert_int_equal(cnt[0], 1);
    double mx = -1e30, se = 0;
    for (int v = 0; v < V; v++) mx = lg[v] > mx ? lg[v] : mx;
    for (int v = 0; v < V; v++) se += exp(lg[v] - mx);
    double want = log(se) + mx - lg[17];
    assert_true(fabs(nll[0] - want) < 1e-5 * want);
    /* causality: the same prefix inside a longer sequence scores the same */
    assert_int_equal(dga_model_eval(m, in + T, tg1, 1, T, nll, cnt), DGA_OK);
    assert_true(fabs(nll[0] - want) < 1e-5 * want);
    /* eval between forward and backward leaves the pending backward intact */
    float *g = dga_model_grads(m);
    size_t np = dga_model_num_params(m);
    float *ga = malloc(np * sizeof *ga);
    dga_model_zero_grad(m);
    assert_int_equal(dga_model_forward(m, in, tg, B, T, &loss), DGA_OK);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    memcpy(ga, g, np * sizeof *ga);
    dga_model_zero_grad(m);
    assert_int_equal(dga_model_forward(m, in, tg, B, T, &loss), DGA_OK);
    assert_int_equal(dga_model_eval(m, in + T, tg1, 1, n, NULL, NULL), DGA_OK);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    assert_memory_equal(ga, g, np * sizeof *ga);
    free(ga);
    dga_model_free(m);
}

/* Larger weights than GPT-2's init (as in test_gradcheck) so every path carries signal. */
static void big_weights(dga_model *m, dga_rng *r)
{
    float *p = dga_model_params(m);
    size_t n = dga_model_num_params(m);
    for (size_t i = 0; i < n; i++) p[i] = (float)(0.3 * dga_rng_normal(r));
    for (int i = 0; i < dga_model_num_tensors(m); i++) {
        const dga_tensor_info *t = dga_model_tensor(m, i);
        if (strstr(t->name, "ln_") && strstr(t->name, ".weight"))
            for (size_t j = 0; j < t->numel; j++) p[t->offset + j] += 1.0f;
    }
}

/* Forward mode against reverse mode and the double reference.
 * (1) For a random direction u: dloss = <g, u> with g from backward, |diff| <= 1e-5 S where
 *     S = sum |g_i u_i|, and dloss = a central difference of the double reference loss,
 *     (ref(p + h u) - ref(p - h u)) / 2h with h = 1e-6 (error ~1e-9), |diff| <= 1e-5 S.
 * (2) Per tensor (u random on one tensor, zero elsewhere) the same identity, so a tensor
 *     whose tangent is dropped or mis-wired fails on its own (ln biases are tiny next to wte).
 * (3) 320 rows through a model of max batch 40: the lm head runs in two row chunks.
 * Measured: |diff| / S <= 2e-7 (S = 146 for |dloss| = 1.1 in (1)); 1e-5 leaves 50x room
 * for float rounding while a dropped tensor tangent moves the sum by O(S_tensor). */
static void test_jvp(void **state)
{
    (void)state;
    const int B = 2, T = 7, V = TINY.vocab_size;
    dga_model *m = make(&TINY, 3, 7);
    dga_rng r;
    dga_rng_seed(&r, 123);
    big_weights(m, &r);
    size_t n = dga_model_num_params(m);
    float *p = dga_model_params(m);
    int32_t in[14], tg[14];
    random_tokens(in, 14, V, &r);
    random_tokens(tg, 14, V, &r);
    tg[3] = DGA_IGNORE;
    tg[12] = DGA_IGNORE;
    float loss;
    dga_model_zero_grad(m);
    assert_int_equal(dga_model_forward(m, in, tg, B, T, &loss), DGA_OK);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    float *g = malloc(n * sizeof *g), *u = malloc(n * sizeof *u), *p0 = malloc(n * sizeof *p0);
    memcpy(g, dga_model_grads(m), n * sizeof *g);
    memcpy(p0, p, n * sizeof *p0);
    for (size_t i = 0; i < n; i++) u[i] = (float)dga_rng_normal(&r);

    double l = 0, d = 0, dot = 0, S = 0;
    assert_int_equal(dga_model_jvp(m, in, tg, B, T, u, &l, &d), DGA_OK);
    for (size_t i = 0; i < n; i++) {
        dot += (double)g[i] * u[i];
        S += fabs((double)g[i] * u[i]);
    }
    assert_true(fabs(l - loss) < 1e-5 * fabs(loss));
    if (!(fabs(d - dot) <= 1e-5 * S))
        fail_msg("jvp %.10g, <grad, u> %.10g (S %.4g)", d, dot, S);
    /* parameters and gradients untouched, the forward's activations still there */
    assert_memory_equal(p, p0, n * sizeof *p);
    assert_memory_equal(dga_model_grads(m), g, n * sizeof *g);
    dga_model_zero_grad(m);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    assert_memory_equal(dga_model_grads(m), g, n * sizeof *g);

    double *pd = malloc(n * sizeof *pd);
    const double h = 1e-6;
    ref_model ref = {m, pd};
    for (size_t i = 0; i < n; i++) pd[i] = p[i] + h * u[i];
    double lp = ref_loss(&ref, in, tg, B, T);
    for (size_t i = 0; i < n; i++) pd[i] = p[i] - h * u[i];
    double lm = ref_loss(&ref, in, tg, B, T);
    double fd = (lp - lm) / (2 * h);
    if (!(fabs(d - fd) <= 1e-5 * S))
        fail_msg("jvp %.10g, central difference of the double reference %.10g (S %.4g)", d, fd,
                 S);
    print_message("# jvp: %.8g, <grad, u> %.8g, double central difference %.8g, S %.3g\n", d,
                  dot, fd, S);

    double worst = 0;
    for (int t = 0; t < dga_model_num_tensors(m); t++) {
        const dga_tensor_info *ti = dga_model_tensor(m, t);
        memset(u, 0, n * sizeof *u);
        double dt = 0, St = 0, dj = 0;
        for (size_t j = ti->offset; j < ti->offset + ti->numel; j++) {
            u[j] = (float)dga_rng_normal(&r);
            dt += (double)g[j] * u[j];
            St += fabs((double)g[j] * u[j]);
        }
        assert_int_equal(dga_model_jvp(m, in, tg, B, T, u, NULL, &dj), DGA_OK);
        if (!(St > 0)) fail_msg("%s: no gradient to compare with", ti->name);
        if (!(fabs(dj - dt) <= 1e-5 * St))
            fail_msg("%s: jvp %.10g, <grad, u> %.10g (S %.4g)", ti->name, dj, dt, St);
        worst = fmax(worst, fabs(dj - dt) / St);
    }
    print_message("# jvp per tensor: worst |jvp - <grad, u>| / S = %.2e\n", worst);

    /* all targets ignored: 0 and 0; bad arguments */
    int32_t none[14];
    for (int i = 0; i < 14; i++) none[i] = DGA_IGNORE;
    l = d = 1;
    assert_int_equal(dga_model_jvp(m, in, none, B, T, u, &l, &d), DGA_OK);
    assert_true(l == 0.0 && d == 0.0);
    assert_int_equal(dga_model_jvp(m, in, tg, B, T, NULL, &l, &d), DGA_ERR_INVALID);
    in[4] = V;
    assert_int_equal(dga_model_jvp(m, in, tg, B, T, u, &l, &d), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "jvp"));
    assert_int_equal(dga_model_jvp(m, in, tg, 4, T, u, &l, &d), DGA_ERR_INVALID);   /* > max */
    free(g), free(u), free(p0), free(pd);
    dga_model_free(m);

    /* lm head in row chunks (256 rows at a time) */
    enum { BB = 40, TT = 8 };
    m = make(&TINY, BB, 8);
    big_weights(m, &r);
    n = dga_model_num_params(m);
    int32_t *bi = malloc(BB * TT * sizeof *bi), *bt = malloc(BB * TT * sizeof *bt);
    random_tokens(bi, BB * TT, V, &r);
    random_tokens(bt, BB * TT, V, &r);
    for (int i = 0; i < BB * TT; i += 7) bt[i] = DGA_IGNORE;
    u = malloc(n * sizeof *u);
    for (size_t i = 0; i < n; i++) u[i] = (float)dga_rng_normal(&r);
    dga_model_zero_grad(m);
    assert_int_equal(dga_model_forward(m, bi, bt, BB, TT, &loss), DGA_OK);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    const float *gg = dga_model_grads(m);
    dot = S = 0;
    for (size_t i = 0; i < n; i++) {
        dot += (double)gg[i] * u[i];
        S += fabs((double)gg[i] * u[i]);
    }
    assert_int_equal(dga_model_jvp(m, bi, bt, BB, TT, u, &l, &d), DGA_OK);
    assert_true(fabs(l - loss) < 1e-5 * fabs(loss));
    if (!(fabs(d - dot) <= 1e-5 * S)) fail_msg("chunked jvp %.10g, <grad, u> %.10g", d, dot);
    free(u), free(bi), free(bt);
    dga_model_free(m);
}

/* Generation: greedy = argmax of dga_model_next_logits step by step (the window sliding once
 * the sequence outgrows the context); sampling reproducible from the rng state, following
 * the distribution (a peaked one at low temperature); bad arguments refused. */
static void test_generate(void **state)
{
    (void)state;
    dga_model *m = make(&TINY, 2, 23);   /* n_ctx 8 */
    const int V = TINY.vocab_size, NEW = 12;
    dga_rng r;
    dga_rng_seed(&r, 24);
    int32_t prompt[3] = {1, 5, 2}, out[NEW], seq[3 + NEW];
    for (size_t i = 0; i < dga_model_num_params(m); i++)   /* larger weights: a non-flat model */
        dga_model_params(m)[i] *= 6.0f;
    assert_int_equal(dga_model_generate(m, prompt, 3, NEW, 0.0, NULL, out), DGA_OK);
    memcpy(seq, prompt, sizeof prompt);
    float *lg = malloc((size_t)V * sizeof *lg);
    for (int i = 0; i < NEW; i++) {
        int len = 3 + i, win = len > TINY.n_ctx ? TINY.n_ctx : len;
        assert_int_equal(dga_model_next_logits(m, seq + len - win, win, lg), DGA_OK);
        int best = 0;
        for (int v = 1; v < V; v++)
            if (lg[v] > lg[best]) best = v;
        assert_int_equal(out[i], best);
        seq[len] = best;
    }
    int32_t a[NEW], b[NEW];
    dga_rng ra, rb;
    dga_rng_seed(&ra, 99);
    dga_rng_seed(&rb, 99);
    assert_int_equal(dga_model_generate(m, prompt, 3, NEW, 1.0, &ra, a), DGA_OK);
    assert_int_equal(dga_model_generate(m, prompt, 3, NEW, 1.0, &rb, b), DGA_OK);
    assert_memory_equal(a, b, sizeof a);
    /* temperature 1: the first token's empirical frequencies follow softmax(logits) */
    assert_int_equal(dga_model_next_logits(m, prompt, 3, lg), DGA_OK);
    double p[64] = {0}, z = 0, mx = lg[0];
    for (int v = 0; v < V; v++) mx = fmax(mx, lg[v]);
    for (int v = 0; v < V; v++) z += p[v] = exp(lg[v] - mx);
    int counts[64] = {0}, N = 4000;
    for (int s = 0; s < N; s++) {
        int32_t one;
        assert_int_equal(dga_model_generate(m, prompt, 3, 1, 1.0, &ra, &one), DGA_OK);
        counts[one]++;
    }
    for (int v = 0; v < V; v++) {   /* within 5 binomial standard deviations */
        double q = p[v] / z, sd = sqrt(N * q * (1 - q)) + 1;
        if (fabs(counts[v] - N * q) > 5 * sd) fail_msg("token %d: %d draws, expected %.1f", v, counts[v], N * q);
    }
    /* bad input */
    int32_t bad[2] = {1, V};
    assert_int_equal(dga_model_generate(m, bad, 2, 3, 0.0, NULL, out), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "generate: token id 32 at [1,2] outside vocabulary"));
    assert_int_equal(dga_model_generate(m, prompt, 0, 3, 0.0, NULL, out), DGA_ERR_INVALID);
    assert_int_equal(dga_model_generate(m, prompt, 3, 3, 1.0, NULL, out), DGA_ERR_INVALID);
    assert_int_equal(dga_model_generate(m, prompt, 3, 3, NAN, &ra, out), DGA_ERR_INVALID);
    free(lg);
    dga_model_free(m);
}

/* The interrupt flag (set by dgalua's Ctrl-C handler) stops every kind of forward with
 * DGA_ERR_INTERRUPTED, and nothing else changes; clearing it lets the same call succeed. */
static void test_interrupt(void **state)
{
    (void)state;
    dga_model *m = make(&TINY, 2, 25);
    dga_rng r;
    dga_rng_seed(&r, 26);
    int32_t in[2 * 7], tg[2 * 7];
    random_tokens(in, 14, TINY.vocab_size, &r);
    random_tokens(tg, 14, TINY.vocab_size, &r);
    float loss, lg[32];
    double nll[2];
    int cnt[2];
    int32_t out[3];
    dga_interrupt_request();
    assert_int_equal(dga_model_forward(m, in, tg, 2, 7, &loss), DGA_ERR_INTERRUPTED);
    assert_non_null(strstr(dga_last_error(), "interrupted (in forward)"));
    assert_int_equal(dga_model_eval(m, in, tg, 2, 7, nll, cnt), DGA_ERR_INTERRUPTED);
    assert_int_equal(dga_model_next_logits(m, in, 7, lg), DGA_ERR_INTERRUPTED);
    assert_int_equal(dga_model_generate(m, in, 3, 3, 0.0, NULL, out), DGA_ERR_INTERRUPTED);
    dga_interrupt_clear();
    assert_int_equal(dga_model_forward(m, in, tg, 2, 7, &loss), DGA_OK);
    assert_true(isfinite(loss));
    dga_model_free(m);
}

/* What a grads_ready callback saw: the ranges in order, how often each float was announced,
 * and each float's value when announced (to compare with its value after the backward). */
typedef struct {
    dga_model *m;
    int n;
    size_t off[64], len[64];
    int *times;
    float *snap;
} announced;

static void record(void *ctx, size_t offset, size_t count)
{
    announced *a = ctx;
    assert_true(a->n < 64);
    a->off[a->n] = offset, a->len[a->n++] = count;
    assert_true(offset + count <= dga_model_num_params(a->m));
    for (size_t i = offset; i < offset + count; i++) a->times[i]++;
    memcpy(a->snap + offset, dga_model_grads(a->m) + offset, count * sizeof(float));
}

static void test_grads_ready(void **state)
{
    (void)state;
    dga_gpt_config c = {.n_layer = 3, .n_head = 2, .n_embd = 16, .n_ctx = 8, .vocab_size = 32};
    dga_model *m = make(&c, 2, 9);
    const size_t n = dga_model_num_params(m);
    int32_t in[2 * 8], tg[2 * 8];
    dga_rng r;
    dga_rng_seed(&r, 4);
    random_tokens(in, 16, 32, &r);
    random_tokens(tg, 16, 32, &r);
    tg[5] = DGA_IGNORE;
    float loss, *plain = malloc(n * sizeof *plain);
    announced a = {.m = m, .times = calloc(n, sizeof(int)), .snap = malloc(n * sizeof(float))};
    assert_true(plain && a.times && a.snap);

    /* without a callback, then with one: the same gradient bits (nothing changes the sums) */
    dga_model_zero_grad(m);
    assert_int_equal(dga_model_forward(m, in, tg, 2, 8, &loss), DGA_OK);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    memcpy(plain, dga_model_grads(m), n * sizeof *plain);
    dga_model_zero_grad(m);
    dga_model_set_grads_ready(m, record, &a);
    assert_int_equal(dga_model_forward(m, in, tg, 2, 8, &loss), DGA_OK);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    dga_model_set_grads_ready(m, NULL, NULL);
    assert_memory_equal(plain, dga_model_grads(m), n * sizeof *plain);

    /* every float exactly once, and final when announced: its value did not change after */
    for (size_t i = 0; i < n; i++) assert_int_equal(a.times[i], 1);
    assert_memory_equal(a.snap, dga_model_grads(m), n * sizeof(float));

    /* the order: ln_f, the blocks from the last, then wte and wpe (the tied head) together */
    assert_int_equal(a.n, 2 + c.n_layer);
    assert_int_equal(a.off[0], dga_model_find_tensor(m, "transformer.ln_f.weight")->offset);
    for (int l = c.n_layer - 1, k = 1; l >= 0; l--, k++) {
        char name[64];
        snprintf(name, sizeof name, "transformer.h.%d.ln_1.weight", l);
        assert_int_equal(a.off[k], dga_model_find_tensor(m, name)->offset);
    }
    const dga_tensor_info *wpe = dga_model_find_tensor(m, "transformer.wpe.weight");
    assert_int_equal(a.off[a.n - 1], 0);
    assert_int_equal(a.len[a.n - 1], wpe->offset + wpe->numel);

    /* removed: the next backward tells nobody */
    a.n = 0;
    assert_int_equal(dga_model_backward(m), DGA_OK);
    assert_int_equal(a.n, 0);
    free(plain), free(a.times), free(a.snap);
    dga_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),       cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_gradcheck),    cmocka_unit_test(test_memorise),
        cmocka_unit_test(test_determinism),  cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_eval_and_logits), cmocka_unit_test(test_jvp),
        cmocka_unit_test(test_generate),    cmocka_unit_test(test_interrupt),
        cmocka_unit_test(test_grads_ready),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

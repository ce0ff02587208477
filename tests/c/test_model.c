/* The dga_model interface with a second architecture: a bigram model (logits of the next
 * token = row W[token] of one V x V table), written here in a page against core/model.h
 * only. Alignment (exact, fd, jvp), held-out losses, per-sequence losses, generation and
 * the shared token checks then work on it unchanged; checkpoints refuse it by name. Its
 * backward announces no range final (grads_ready): the wrapper announces the whole buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "align.h"
#include "checkpoint.h"
#include "eval.h"
#include "model.h"

enum { V = 12, T = 6, MAXB = 4 };

typedef struct {
    dga_model base;
    dga_tensor_info info;
    float *probs;      /* [MAXB*T, V] softmax of the last forward */
    int32_t *in, *tg;  /* the last forward's batch */
    int n, n_valid;
} bigram;

/* softmax of row r of W into p; returns -log p[target] (target may be DGA_IGNORE) */
static double row_softmax(const float *w, float *p, int target)
{
    double mx = w[0], s = 0;
    for (int v = 1; v < V; v++) mx = fmax(mx, w[v]);
    for (int v = 0; v < V; v++) s += exp(w[v] - mx);
    for (int v = 0; v < V; v++) p[v] = (float)(exp(w[v] - mx) / s);
    return target == DGA_IGNORE ? 0.0 : log(s) + mx - w[target];
}

static dga_status bg_forward(dga_model *m, const int32_t *in, const int32_t *tg, int B, int T_,
                             int n_valid, float *loss)
{
    bigram *g = (bigram *)m;
    double total = 0;
    g->n = B * T_, g->n_valid = n_valid;
    memcpy(g->in, in, (size_t)g->n * sizeof *in);
    memcpy(g->tg, tg, (size_t)g->n * sizeof *tg);
    for (int b = 0; b < B; b++) {
        double s = 0;
        int c = 0;
        for (int t = 0; t < T_; t++) {
            int i = b * T_ + t;
            double l = row_softmax(m->params + in[i] * V, g->probs + i * V, tg[i]);
            s += l, c += tg[i] != DGA_IGNORE;
        }
        m->seq_loss[b] = c ? (float)(s / c) : 0.0f;
        total += s;
    }
    *loss = n_valid ? (float)(total / n_valid) : 0.0f;
    return DGA_OK;
}

/* > 0: backward wrongly announces only its first row (the wrapper's check must catch it) */
static int bg_announce_row;

static dga_status bg_backward(dga_model *m)
{
    bigram *g = (bigram *)m;
    for (int i = 0; i < g->n; i++) {
        if (g->tg[i] == DGA_IGNORE) continue;
        float *d = m->grads + g->in[i] * V;
        for (int v = 0; v < V; v++)
            d[v] += (g->probs[i * V + v] - (v == g->tg[i])) / (float)g->n_valid;
    }
    if (bg_announce_row) dga_model_grads_ready(m, 0, V);
    return DGA_OK;
}

static dga_status bg_eval(dga_model *m, const int32_t *in, const int32_t *tg, int B, int T_,
                          double *nll, int *cnt)
{
    float p[V];
    for (int b = 0; b < B; b++) {
        double s = 0;
        int c = 0;
        for (int t = 0; t < T_; t++) {
            int i = b * T_ + t;
            s += row_softmax(m->params + in[i] * V, p, tg[i]);
            c += tg[i] != DGA_IGNORE;
        }
        if (nll) nll[b] = s;
        if (cnt) cnt[b] = c;
    }
    return DGA_OK;
}

static dga_status bg_jvp(dga_model *m, const int32_t *in, const int32_t *tg, int B, int T_,
                         int n_valid, const float *u, double *loss, double *dloss)
{
    float p[V];
    double total = 0, d = 0;
    for (int i = 0; i < B * T_; i++) {
        if (tg[i] == DGA_IGNORE) continue;
        total += row_softmax(m->params + in[i] * V, p, tg[i]);
        const float *ur = u + in[i] * V;
        for (int v = 0; v < V; v++) d += (p[v] - (v == tg[i])) * (double)ur[v];
    }
    if (loss) *loss = n_valid ? total / n_valid : 0;
    if (dloss) *dloss = n_valid ? d / n_valid : 0;
    return DGA_OK;
}

static dga_status bg_next_logits(dga_model *m, const int32_t *tok, int n, float *logits)
{
    memcpy(logits, m->params + tok[n - 1] * V, V * sizeof *logits);
    return DGA_OK;
}

static dga_status bg_hidden_sum(dga_model *m, const int32_t *tok, int n, float *out)
{
    for (int t = 0; t < n; t++)
        for (int v = 0; v < V; v++) out[v] += m->params[tok[t] * V + v];
    return DGA_OK;
}

static void bg_init(dga_model *m, dga_rng *r)
{
    for (size_t i = 0; i < m->num_params; i++) m->params[i] = (float)(0.5 * dga_rng_normal(r));
}

static double bg_flops(const dga_model *m, int T_) { return 6.0 * V; }

static void bg_destroy(dga_model *m)
{
    bigram *g = (bigram *)m;
    free(m->params), free(m->grads), free(m->seq_loss), free(g->probs), free(g->in), free(g->tg);
    free(g);
}

static const dga_model_vtable bigram_vt = {
    .arch = "bigram", .forward = bg_forward, .backward = bg_backward, .eval = bg_eval,
    .jvp = bg_jvp, .next_logits = bg_next_logits, .hidden_sum = bg_hidden_sum,
    .init_weights = bg_init, .flops_per_token = bg_flops, .destroy = bg_destroy,
};

static dga_model *bigram_new(uint64_t seed)
{
    bigram *g = calloc(1, sizeof *g);
    assert_non_null(g);
    dga_model *m = &g->base;
    *m = (dga_model){.vt = &bigram_vt, .max_batch = MAXB, .n_ctx = T, .vocab_size = V,
                     .width = V, .num_params = V * V, .n_tensors = 1, .tensors = &g->info};
    g->info = (dga_tensor_info){.name = "bigram.weight", .numel = V * V, .ndim = 2,
                                .shape = {V, V}, .is_matrix = 1};
    m->params = calloc(V * V, sizeof(float));
    m->grads = calloc(V * V, sizeof(float));
    m->seq_loss = calloc(MAXB, sizeof(float));
    g->probs = calloc(MAXB * T * V, sizeof(float));
    g->in = calloc(MAXB * T, sizeof(int32_t));
    g->tg = calloc(MAXB * T, sizeof(int32_t));
    assert_true(m->params && m->grads && m->seq_loss && g->probs && g->in && g->tg);
    dga_rng r;
    dga_rng_seed(&r, seed);
    dga_model_init_weights(m, &r);
    return m;
}

static void batch(dga_rng *r, int B, int stride, int32_t *in, int32_t *tg)
{
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)dga_rng_below(r, V);
        tg[i] = (in[i] + stride) % V;
    }
}

static void test_second_architecture(void **state)
{
    (void)state;
    dga_model *m = bigram_new(1);
    dga_rng r;
    dga_rng_seed(&r, 2);
    assert_null(dga_gpt_get_config(m));
    assert_string_equal(dga_model_arch(m), "bigram");

    /* the shared checks: shapes and ids, before the implementation runs */
    int32_t in[6 * T], tg[6 * T];
    batch(&r, 3, 1, in, tg);
    float loss;
    in[T + 2] = V;
    assert_int_equal(dga_model_forward(m, in, tg, 3, T, &loss), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "forward: token id 12 at [2,3] outside vocabulary"));
    in[T + 2] = 0;
    assert_int_equal(dga_model_forward(m, in, tg, MAXB + 1, T, &loss), DGA_ERR_INVALID);
    assert_int_equal(dga_model_backward(m), DGA_ERR_INVALID);

    /* held-out loss and per-sequence losses agree with the training forward */
    tg[4] = DGA_IGNORE;
    assert_int_equal(dga_model_forward(m, in, tg, 3, T, &loss), DGA_OK);
    double mean = 0;
    assert_int_equal(dga_eval_mean_loss(m, in, tg, T, 3, T, 2, &mean), DGA_OK);
    assert_true(fabs(mean - loss) < 1e-5 * loss);
    int nb = 0;
    const float *sl = dga_model_seq_losses(m, &nb);
    assert_int_equal(nb, 3);
    double nll[3];
    int cnt[3];
    assert_int_equal(dga_model_eval(m, in, tg, 3, T, nll, cnt), DGA_OK);
    for (int b = 0; b < 3; b++) assert_true(fabs(sl[b] - nll[b] / cnt[b]) < 1e-5);

    /* alignment: exact, fd and jvp agree on it (a batch of 6 > max batch 4: chunked) */
    int32_t din[3][6 * T], dtg[3][6 * T];
    for (int k = 0; k < 3; k++) batch(&r, 6, k == 2 ? 1 : 3 + k, din[k], dtg[k]);
    dga_batch target = {in, tg, 3, T}, doms[3];
    for (int k = 0; k < 3; k++) doms[k] = (dga_batch){din[k], dtg[k], 6, T};
    dga_align_ws *ws = NULL;
    assert_int_equal(dga_align_ws_create(dga_model_num_params(m), &ws), DGA_OK);
    double a[3][3], l[3][3], gn[3][3];
    const dga_align_method methods[3] = {DGA_ALIGN_EXACT, DGA_ALIGN_FD, DGA_ALIGN_JVP};
    for (int j = 0; j < 3; j++) {
        dga_align_result res = {.dot = a[j], .loss = l[j], .grad_norm = gn[j]};
        dga_align_opts o = {.method = methods[j]};
        assert_int_equal(dga_align(m, ws, &target, doms, 3, &o, &res), DGA_OK);
    }
    for (int k = 0; k < 3; k++) {
        assert_true(fabs(a[2][k] - a[0][k]) <= 1e-4 * fabs(a[0][k]) + 1e-7);
        assert_true(fabs(a[1][k] - a[0][k]) <= 2e-2 * fabs(a[0][k]) + 1e-5);
        assert_true(gn[0][k] > 0 && isnan(gn[2][k]));
    }
    assert_true(a[0][2] > a[0][0] && a[0][2] > a[0][1]);   /* the target's own domain */
    dga_align_ws_free(ws);

    /* generation follows next_logits; checkpoints name what they cannot store */
    int32_t prompt[1] = {3}, out[2];
    assert_int_equal(dga_model_generate(m, prompt, 1, 2, 0.0, NULL, out), DGA_OK);
    int best = 0;
    for (int v = 1; v < V; v++)
        if (m->params[3 * V + v] > m->params[3 * V + best]) best = v;
    assert_int_equal(out[0], best);
    assert_int_equal(dga_checkpoint_save("/tmp/dga_test_bigram.safetensors", m, NULL, NULL, 0,
                                         NULL, 0),
                     DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "this one is 'bigram'"));
    dga_model_free(m);
}

static void count_ranges(void *ctx, size_t offset, size_t count)
{
    size_t *seen = ctx;
    seen[0]++, seen[1] = offset, seen[2] = count;
}

static void test_default_announcement(void **state)
{
    (void)state;
    dga_model *m = bigram_new(3);
    dga_rng r;
    dga_rng_seed(&r, 4);
    int32_t in[2 * T], tg[2 * T];
    batch(&r, 2, 1, in, tg);
    float loss;
    size_t seen[3] = {0};
    dga_model_set_grads_ready(m, count_ranges, seen);
    assert_int_equal(dga_model_forward(m, in, tg, 2, T, &loss), DGA_OK);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    assert_int_equal(seen[0], 1);   /* one range: the whole buffer, after the backward */
    assert_int_equal(seen[1], 0);
    assert_int_equal(seen[2], V * V);
    /* an architecture that announces part of its buffer is caught */
    bg_announce_row = 1;
    assert_int_equal(dga_model_backward(m), DGA_ERR_INVALID);
    bg_announce_row = 0;
    assert_non_null(strstr(dga_last_error(), "the bigram architecture announced 12 gradient "
                                             "floats as final, but the model has 144"));
    dga_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_architecture),
        cmocka_unit_test(test_default_announcement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Held-out losses and MMLU log-likelihood scoring against direct computations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "eval.h"
#include "gpt.h"
#include "mmlu.h"
#include "rng.h"

/* A small random model with weights scaled up so its predictions are far from uniform and
 * the comparisons below test something. */
static dga_model *small_model(int vocab, int n_ctx, int max_batch)
{
    dga_gpt_config cfg = {.n_layer = 2, .n_head = 2, .n_embd = 32, .n_ctx = n_ctx,
                          .vocab_size = vocab};
    dga_model *m = NULL;
    assert_int_equal(dga_gpt_create(&cfg, max_batch, &m), DGA_OK);
    dga_rng rng;
    dga_rng_seed(&rng, 1234);
    dga_model_init_weights(m, &rng);
    float *p = dga_model_params(m);
    for (size_t i = 0; i < dga_model_num_params(m); i++) p[i] *= 4.0f;
    return m;
}

static double log_softmax_at(const float *logits, int V, int k)
{
    double mx = logits[0];
    for (int i = 1; i < V; i++)
        if (logits[i] > mx) mx = logits[i];
    double s = 0;
    for (int i = 0; i < V; i++) s += exp((double)logits[i] - mx);
    return (double)logits[k] - mx - log(s);
}

/* The harness's rule computed token by token: keep the last n_ctx + 1 tokens, then each
 * continuation token is predicted from everything before it in that window. */
static double direct_loglik(dga_model *m, const int32_t *tok, int n, int n_cont)
{
    const dga_gpt_config *cfg = dga_gpt_get_config(m);
    int start = n > cfg->n_ctx + 1 ? n - (cfg->n_ctx + 1) : 0;
    float *logits = malloc((size_t)cfg->vocab_size * sizeof *logits);
    assert_non_null(logits);
    double ll = 0;
    for (int p = n - n_cont; p < n; p++) {
        assert_int_equal(dga_model_next_logits(m, tok + start, p - start, logits), DGA_OK);
        ll += log_softmax_at(logits, cfg->vocab_size, tok[p]);
    }
    free(logits);
    return ll;
}

/* ------------------------------------------------------------------ mean loss */

static void test_mean_loss_matches_forward(void **state)
{
    (void)state;
    const int V = 64, L = 13, N = 7;
    dga_model *m = small_model(V, 12, 8);
    dga_rng rng;
    dga_rng_seed(&rng, 5);
    int32_t seqs[7 * 13], in[7 * 12], tg[7 * 12];
    for (int i = 0; i < N * L; i++) seqs[i] = (int32_t)dga_rng_below(&rng, V);
    for (int r = 0; r < N; r++)
        for (int j = 0; j < L - 1; j++) {
            in[r * (L - 1) + j] = seqs[r * L + j];
            tg[r * (L - 1) + j] = seqs[r * L + j + 1];
        }
    float loss;
    assert_int_equal(dga_model_forward(m, in, tg, N, L - 1, &loss), DGA_OK);
    assert_true(fabsf(loss - logf((float)V)) > 0.05f);   /* not a uniform predictor */
    double mean = 0;
    for (int batch = 1; batch <= 8; batch += 2) {   /* 1, 3 (7 = 3+3+1), 5, 7 */
        assert_int_equal(dga_eval_mean_loss_seqs(m, seqs, N, L, batch, &mean), DGA_OK);
        assert_float_equal(mean, loss, 1e-4 * loss);
    }
    assert_int_equal(dga_eval_mean_loss_seqs(m, seqs, N, L, 0, &mean), DGA_OK);
    assert_float_equal(mean, loss, 1e-4 * loss);

    /* token-weighted with ignored targets: forward's batch mean is the reference */
    for (int i = 0; i < N * (L - 1); i++)
        if (i % 3 == 0 || i < 20) tg[i] = DGA_IGNORE;
    assert_int_equal(dga_model_forward(m, in, tg, N, L - 1, &loss), DGA_OK);
    assert_int_equal(dga_eval_mean_loss(m, in, tg, L - 1, N, L - 1, 2, &mean), DGA_OK);
    assert_float_equal(mean, loss, 1e-4 * loss);
    /* rows further apart than their length (stride L): the seqs layout, shifted by hand */
    assert_int_equal(dga_eval_mean_loss(m, seqs, seqs + 1, L, N, L - 1, 3, &mean), DGA_OK);
    double want = 0;
    assert_int_equal(dga_eval_mean_loss_seqs(m, seqs, N, L, 3, &want), DGA_OK);
    assert_true(mean == want);
    assert_int_equal(dga_eval_mean_loss(m, seqs, seqs + 1, L - 2, N, L - 1, 3, &mean),
                     DGA_ERR_INVALID);   /* stride below the row length */

    /* bad arguments are errors, not crashes */
    assert_int_equal(dga_eval_mean_loss_seqs(m, seqs, N, L, 9, &mean), DGA_ERR_INVALID);
    assert_int_equal(dga_eval_mean_loss_seqs(m, seqs, N, 14, 2, &mean), DGA_ERR_INVALID);
    assert_int_equal(dga_eval_mean_loss_seqs(m, seqs, N, 1, 2, &mean), DGA_ERR_INVALID);
    seqs[40] = V;
    assert_int_not_equal(dga_eval_mean_loss_seqs(m, seqs, N, L, 2, &mean), DGA_OK);
    dga_model_free(m);
}

/* The per-sequence training losses of a forward equal the per-sequence means of an
 * inference pass (same numbers up to the rounding of differently shaped matmuls), ignored
 * targets excluded, and a sequence with no target gets 0. */
static void test_seq_losses_match_eval(void **state)
{
    (void)state;
    const int V = 64, T = 12, B = 5;
    dga_model *m = small_model(V, T, 8);
    dga_rng rng;
    dga_rng_seed(&rng, 9);
    int32_t in[5 * 12], tg[5 * 12];
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)dga_rng_below(&rng, V);
        tg[i] = i % 5 == 2 ? DGA_IGNORE : (int32_t)dga_rng_below(&rng, V);
    }
    for (int t = 0; t < T; t++) tg[3 * T + t] = DGA_IGNORE;   /* row 4: nothing to predict */
    int nb = -1;
    assert_null(dga_model_seq_losses(m, &nb));   /* no forward yet */
    assert_int_equal(nb, 0);
    float loss;
    assert_int_equal(dga_model_forward(m, in, tg, B, T, &loss), DGA_OK);
    const float *sl = dga_model_seq_losses(m, &nb);
    assert_non_null(sl);
    assert_int_equal(nb, B);
    double nll[5];
    int cnt[5];
    assert_int_equal(dga_model_eval(m, in, tg, B, T, nll, cnt), DGA_OK);
    double total = 0;
    int count = 0;
    for (int b = 0; b < B; b++) {
        double want = cnt[b] ? nll[b] / cnt[b] : 0.0;
        if (!(fabs(sl[b] - want) <= 1e-5 * fabs(want) + 1e-7))
            fail_msg("sequence %d: forward %.9g, eval %.9g", b, sl[b], want);
        total += sl[b] * cnt[b];
        count += cnt[b];
    }
    assert_true(sl[3] == 0.0f);
    assert_float_equal(total / count, loss, 1e-5 * loss);   /* they add up to the batch loss */
    /* a failed forward clears them */
    in[0] = V;
    assert_int_equal(dga_model_forward(m, in, tg, B, T, &loss), DGA_ERR_INVALID);
    assert_null(dga_model_seq_losses(m, &nb));
    dga_model_free(m);
}

/* ------------------------------------------------------------------ log-likelihoods */

static void test_loglik_matches_direct(void **state)
{
    (void)state;
    const int V = 50, n_ctx = 10;
    dga_model *m = small_model(V, n_ctx, 4);
    dga_rng rng;
    dga_rng_seed(&rng, 9);
    /* lengths around the context: short, exact fit (n_ctx + 1), truncated from the left */
    const int lens[6] = {2, 5, 11, 12, 20, 7}, conts[6] = {1, 3, 2, 1, 4, 6};
    int32_t toks[6][20];
    dga_loglik_request reqs[6];
    for (int i = 0; i < 6; i++) {
        for (int j = 0; j < lens[i]; j++) toks[i][j] = (int32_t)dga_rng_below(&rng, V);
        reqs[i] = (dga_loglik_request){toks[i], lens[i], conts[i]};
    }
    double ll[6];
    for (int batch = 1; batch <= 4; batch++) {
        assert_int_equal(dga_eval_loglik(m, reqs, 6, batch, ll), DGA_OK);
        for (int i = 0; i < 6; i++)
            assert_float_equal(ll[i], direct_loglik(m, toks[i], lens[i], conts[i]), 1e-4);
    }
    reqs[1].n_cont = 5;   /* no context token left */
    assert_int_equal(dga_eval_loglik(m, reqs, 6, 2, ll), DGA_ERR_INVALID);
    reqs[1].n_cont = 0;
    assert_int_equal(dga_eval_loglik(m, reqs, 6, 2, ll), DGA_ERR_INVALID);
    reqs[1].n_cont = 3;
    reqs[4].n_cont = n_ctx + 1;   /* continuation longer than the context window */
    assert_int_equal(dga_eval_loglik(m, reqs, 6, 2, ll), DGA_ERR_INVALID);
    dga_model_free(m);
}

/* ------------------------------------------------------------------ MMLU scoring */

/* Byte-level tokenizer: token id = byte value. */
static dga_status byte_encode(void *ud, const char *text, size_t len, int32_t **ids, size_t *n)
{
    int *calls = ud;
    if (calls) {
        if (*calls == 0) return dga_fail(DGA_ERR_INVALID, "test tokenizer gave up");
        (*calls)--;
    }
    *ids = malloc((len ? len : 1) * sizeof **ids);
    if (!*ids) return dga_fail(DGA_ERR_NOMEM, "oom");
    for (size_t i = 0; i < len; i++) (*ids)[i] = (unsigned char)text[i];
    *n = len;
    return DGA_OK;
}

static const dga_mmlu_question dev[3] = {
    {.subject = "astronomy", .question = "Dev A1?", .choices = {"p", "q", "r", "s"}, .answer = 3},
    {.subject = "virology", .question = "Dev V1?", .choices = {"t", "u", "v", "w"}, .answer = 0},
    {.subject = "astronomy", .question = "Dev A2?", .choices = {"e", "f", "g", "h"}, .answer = 1},
};
static const dga_mmlu_question qs[3] = {
    {.subject = "astronomy", .question = "Which is a planet?",
     .choices = {"Mars", "Sirius", "Vega", "Orion"}, .answer = 0},
    {.subject = "virology", .question = "Which is a virus?",
     .choices = {"E. coli", "HIV", "yeast", "mold"}, .answer = 1},
    {.subject = "astronomy", .question = "Nearest star?",
     .choices = {"Sun", "Vega", "Rigel", "Deneb"}, .answer = 2},
};

/* Like byte_encode, but " A".." D" are one token each (ids 1..4, unused control bytes), as
 * GPT-2 style BPE makes them: the scorer then takes its one-forward-per-question path. */
static dga_status letter_encode(void *ud, const char *text, size_t len, int32_t **ids, size_t *n)
{
    (void)ud;
    *ids = malloc((len ? len : 1) * sizeof **ids);
    if (!*ids) return dga_fail(DGA_ERR_NOMEM, "oom");
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ' && i + 1 < len && text[i + 1] >= 'A' && text[i + 1] <= 'D') {
            (*ids)[k++] = 1 + (text[i + 1] - 'A');
            i++;
        } else {
            (*ids)[k++] = (unsigned char)text[i];
        }
    }
    *n = k;
    return DGA_OK;
}

/* Scores the three questions directly: render, append " X", tokenize both, continuation =
 * the extra tokens, each predicted token by token. */
static void direct_mmlu(dga_model *m, dga_encode_fn encode, int shots, double ll[12],
                        dga_mmlu_result *res)
{
    size_t correct = 0;
    double loss = 0;
    for (int i = 0; i < 3; i++) {
        dga_mmlu_question picked[2];
        int got = 0;
        for (int d = 0; d < 3 && got < shots; d++)
            if (strcmp(dev[d].subject, qs[i].subject) == 0) picked[got++] = dev[d];
        char *ctx = NULL;
        assert_int_equal(dga_mmlu_render(&qs[i], picked, shots, 0, &ctx), DGA_OK);
        size_t n = strlen(ctx), n_ctx_ids, n_ids;
        int32_t *ids;
        assert_int_equal(encode(NULL, ctx, n, &ids, &n_ctx_ids), DGA_OK);
        free(ids);
        char *whole = malloc(n + 3);
        memcpy(whole, ctx, n);
        whole[n] = ' ';
        int best = 0, n_cont = 0;
        for (int c = 0; c < 4; c++) {
            whole[n + 1] = (char)('A' + c);
            assert_int_equal(encode(NULL, whole, n + 2, &ids, &n_ids), DGA_OK);
            int nc = (int)(n_ids - n_ctx_ids);
            if (c == qs[i].answer) n_cont = nc;
            ll[4 * i + c] = direct_loglik(m, ids, (int)n_ids, nc);
            if (ll[4 * i + c] > ll[4 * i + best]) best = c;
            free(ids);
        }
        correct += best == qs[i].answer;
        loss += -ll[4 * i + qs[i].answer] / n_cont;
        free(whole);
        free(ctx);
    }
    res->accuracy = correct / 3.0;
    res->answer_loss = loss / 3;
    res->n = 3;
}

static void test_mmlu_scorer_matches_direct(void **state)
{
    (void)state;
    /* prompts are 110-190 bytes: n_ctx 48 truncates them from the left, 256 holds them;
     * byte tokens give 2-token continuations (batched rows), letter tokens 1-token ones
     * (one forward per question) */
    const int n_ctx[2] = {48, 256};
    const dga_encode_fn encoders[2] = {byte_encode, letter_encode};
    for (int k = 0; k < 2; k++) {
        dga_model *m = small_model(256, n_ctx[k], 5);
        for (int e = 0; e < 2; e++)
            for (int shots = 0; shots <= 1; shots++) {
                double want[12], got[12];
                dga_mmlu_result rw, rg;
                /* at n_ctx 48 no prompt fits even without its shot: the scorer drops the shot
                 * and cuts the 0-shot prompt from the left */
                direct_mmlu(m, encoders[e], n_ctx[k] < 100 ? 0 : shots, want, &rw);
                for (int batch = 3; batch <= 5; batch += 2) {
                    assert_int_equal(dga_eval_mmlu(m, encoders[e], NULL, qs, 3, dev, 3, shots,
                                                   batch, &rg, got, NULL),
                                     DGA_OK);
                    for (int i = 0; i < 12; i++) assert_float_equal(got[i], want[i], 1e-4);
                    assert_int_equal(rg.n, 3);
                    assert_float_equal(rg.accuracy, rw.accuracy, 1e-12);
                    assert_float_equal(rg.answer_loss, rw.answer_loss, 1e-4);
                }
            }
        if (k == 1) {   /* the 1-shot contexts differ from the 0-shot ones, so do the scores */
            double ll0[12], ll1[12];
            dga_mmlu_result r;
            assert_int_equal(dga_eval_mmlu(m, byte_encode, NULL, qs, 3, dev, 3, 0, 0, &r, ll0, NULL),
                             DGA_OK);
            assert_int_equal(dga_eval_mmlu(m, byte_encode, NULL, qs, 3, dev, 3, 1, 0, &r, ll1, NULL),
                             DGA_OK);
            assert_true(fabs(ll0[0] - ll1[0]) > 1e-6);
        }
        dga_model_free(m);
    }
}

/* A 1-shot prompt too long for the context loses its shot (and is scored as the 0-shot one)
 * instead of losing its start; one too long even without shots is cut, and both are counted. */
static void test_mmlu_drops_shots_that_do_not_fit(void **state)
{
    (void)state;
    int len0[3], len1[3];   /* tokens the model reads: prompt + " X" minus the last one */
    for (int i = 0; i < 3; i++) {
        const dga_mmlu_question *shot = strcmp(qs[i].subject, "astronomy") == 0 ? &dev[0] : &dev[1];
        char *p0 = NULL, *p1 = NULL;
        assert_int_equal(dga_mmlu_render(&qs[i], shot, 0, 0, &p0), DGA_OK);
        assert_int_equal(dga_mmlu_render(&qs[i], shot, 1, 0, &p1), DGA_OK);
        len0[i] = (int)strlen(p0) + 1;
        len1[i] = (int)strlen(p1) + 1;
        free(p0);
        free(p1);
    }
    /* question 1 fits exactly without its shot and not with it */
    const int n_ctx = len0[0];
    assert_true(len1[0] > n_ctx);
    dga_model *m = small_model(256, n_ctx, 4);
    double ll0[12], ll1[12];
    dga_mmlu_fit fit[3];
    dga_mmlu_result r0, r1;
    assert_int_equal(dga_eval_mmlu(m, byte_encode, NULL, qs, 3, dev, 3, 0, 0, &r0, ll0, NULL), DGA_OK);
    assert_int_equal(dga_eval_mmlu(m, byte_encode, NULL, qs, 3, dev, 3, 1, 0, &r1, ll1, fit), DGA_OK);
    size_t shortened = 0, truncated = 0, used = 0;
    for (int i = 0; i < 3; i++) {
        int want_shots = len1[i] <= n_ctx ? 1 : 0;
        int want_cut = len1[i] <= n_ctx ? 0 : (len0[i] > n_ctx ? len0[i] - n_ctx : 0);
        assert_int_equal(fit[i].shots, want_shots);
        assert_int_equal(fit[i].cut_tokens, want_cut);
        shortened += want_shots < 1 || want_cut > 0;
        truncated += want_cut > 0;
        used += (size_t)want_shots;
        if (want_shots == 0)   /* scored as the 0-shot prompt, bit for bit */
            for (int c = 0; c < 4; c++) assert_true(ll1[4 * i + c] == ll0[4 * i + c]);
    }
    assert_int_equal(fit[0].shots, 0);
    assert_int_equal(fit[0].cut_tokens, 0);
    assert_int_equal(r1.shortened, shortened);
    assert_int_equal(r1.truncated, truncated);
    assert_int_equal(r1.shots_used, used);
    assert_true(r1.shortened >= 1);
    /* 0-shot: nothing to drop; the prompts longer than the context are the cut ones */
    size_t cut0 = 0;
    for (int i = 0; i < 3; i++) cut0 += len0[i] > n_ctx;
    assert_int_equal(r0.truncated, cut0);
    assert_int_equal(r0.shortened, cut0);
    assert_int_equal(r0.shots_used, 0);
    dga_model_free(m);
}

static void test_mmlu_scorer_errors(void **state)
{
    (void)state;
    dga_model *m = small_model(256, 48, 4);
    dga_mmlu_result r;
    /* virology has one dev question: 2 shots cannot be built */
    assert_int_equal(dga_eval_mmlu(m, byte_encode, NULL, qs, 3, dev, 3, 2, 0, &r, NULL, NULL),
                     DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "virology"));
    /* a tokenizer failure half-way is returned (ASan checks nothing leaks) */
    int calls = 7;
    assert_int_equal(dga_eval_mmlu(m, byte_encode, &calls, qs, 3, dev, 3, 0, 0, &r, NULL, NULL),
                     DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "gave up"));
    /* token ids outside the vocabulary: bytes >= 128 with a 128-token model */
    dga_model *small = small_model(128, 48, 4);
    dga_mmlu_question q = qs[0];
    q.choices[3] = "caf\xc3\xa9";   /* near the end: survives left truncation */
    assert_int_not_equal(dga_eval_mmlu(small, byte_encode, NULL, &q, 1, dev, 3, 0, 0, &r, NULL, NULL),
                         DGA_OK);
    dga_model_free(small);
    dga_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mean_loss_matches_forward),
        cmocka_unit_test(test_seq_losses_match_eval),
        cmocka_unit_test(test_loglik_matches_direct),
        cmocka_unit_test(test_mmlu_scorer_matches_direct),
        cmocka_unit_test(test_mmlu_drops_shots_that_do_not_fit),
        cmocka_unit_test(test_mmlu_scorer_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

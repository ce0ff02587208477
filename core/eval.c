#include "eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static dga_status resolve_batch(dga_model *model, int batch, const char *fn, int *out)
{
    int max = dga_model_max_batch(model);
    if (batch <= 0) batch = max;
    if (batch > max)
        return dga_fail(DGA_ERR_INVALID, "%s: batch %d exceeds the model's max batch %d", fn, batch,
                        max);
    *out = batch;
    return DGA_OK;
}

/* The loop of dga_eval_mean_loss; with row_nll / row_cnt (n entries each) it also keeps every
 * row's loss sum and target count, for a caller that sums rows from several processes. */
static dga_status eval_rows(dga_model *model, const int32_t *inputs, const int32_t *targets,
                            size_t stride, size_t n, int T, int batch, double *mean,
                            double *row_nll, int *row_cnt)
{
    *mean = 0.0;
    int B = 0;
    dga_status st = resolve_batch(model, batch, "eval_loss", &B);
    if (st != DGA_OK) return st;
    int n_ctx = dga_model_context(model);
    if (T < 1 || T > n_ctx)
        return dga_fail(DGA_ERR_INVALID, "eval_loss: sequence length %d outside [1, %d] (the "
                        "model's context)", T, n_ctx);
    if (stride < (size_t)T)
        return dga_fail(DGA_ERR_INVALID, "eval_loss: row stride %zu below the sequence length "
                        "%d", stride, T);
    /* Rows that are not contiguous are packed into in/tg, a chunk at a time. */
    const int packed = stride != (size_t)T;
    int32_t *in = packed ? malloc((size_t)B * (size_t)T * sizeof *in) : NULL;
    int32_t *tg = packed ? malloc((size_t)B * (size_t)T * sizeof *tg) : NULL;
    double *nll = malloc((size_t)B * sizeof *nll);
    int *cnt = malloc((size_t)B * sizeof *cnt);
    if (!nll || !cnt || (packed && (!in || !tg))) {
        st = dga_fail(DGA_ERR_NOMEM, "eval_loss: out of memory");
        goto done;
    }
    double total = 0.0;
    long long count = 0;
    for (size_t i = 0; i < n && st == DGA_OK; i += (size_t)B) {
        int b = (int)(n - i < (size_t)B ? n - i : (size_t)B);
        const int32_t *x = inputs + i * stride, *y = targets + i * stride;
        if (packed) {
            for (int r = 0; r < b; r++) {
                memcpy(in + (size_t)r * T, x + (size_t)r * stride, (size_t)T * sizeof *in);
                memcpy(tg + (size_t)r * T, y + (size_t)r * stride, (size_t)T * sizeof *tg);
            }
            x = in, y = tg;
        }
        st = dga_model_eval(model, x, y, b, T, nll, cnt);
        for (int r = 0; r < b && st == DGA_OK; r++) {
            total += nll[r];
            count += cnt[r];
            if (row_nll && row_cnt) {
                row_nll[i + (size_t)r] = nll[r];
                row_cnt[i + (size_t)r] = cnt[r];
            }
        }
    }
    if (st == DGA_OK && count > 0) *mean = total / (double)count;
done:
    free(in);
    free(tg);
    free(nll);
    free(cnt);
    return st;
}

dga_status dga_eval_mean_loss(dga_model *model, const int32_t *inputs, const int32_t *targets,
                              size_t stride, size_t n, int T, int batch, double *mean)
{
    return eval_rows(model, inputs, targets, stride, n, T, batch, mean, NULL, NULL);
}

static dga_status check_seq_len(dga_model *model, int seq_len)
{
    int n_ctx = dga_model_context(model);
    if (seq_len < 2 || seq_len > n_ctx + 1)
        return dga_fail(DGA_ERR_INVALID,
                        "eval_loss: sequence length %d outside [2, %d] (context %d, plus the "
                        "last target)",
                        seq_len, n_ctx + 1, n_ctx);
    return DGA_OK;
}

dga_status dga_eval_row_losses_seqs(dga_model *model, const int32_t *seqs, size_t n_seqs,
                                    int seq_len, int batch, double *row_nll, int *row_cnt)
{
    dga_status st = check_seq_len(model, seq_len);
    double mean;
    if (st != DGA_OK) return st;
    return eval_rows(model, seqs, seqs + 1, (size_t)seq_len, n_seqs, seq_len - 1, batch, &mean,
                     row_nll, row_cnt);
}

dga_status dga_eval_mean_loss_seqs(dga_model *model, const int32_t *seqs, size_t n_seqs,
                                   int seq_len, int batch, double *mean)
{
    *mean = 0.0;
    dga_status st = check_seq_len(model, seq_len);
    if (st != DGA_OK) return st;
    return dga_eval_mean_loss(model, seqs, seqs + 1, (size_t)seq_len, n_seqs, seq_len - 1, batch,
                              mean);
}

/* ------------------------------------------------------------------ log-likelihoods */

static int row_len(const dga_loglik_request *r, int n_ctx)
{
    int len = r->n_tokens < n_ctx + 1 ? r->n_tokens : n_ctx + 1;
    return len - 1;
}

typedef struct {
    int    len;
    size_t idx;
} len_idx;

static int cmp_len_desc(const void *a, const void *b)
{
    const len_idx *x = a, *y = b;
    if (x->len != y->len) return y->len - x->len;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

dga_status dga_eval_loglik(dga_model *model, const dga_loglik_request *reqs, size_t n, int batch,
                           double *loglik)
{
    int B = 0;
    dga_status st = resolve_batch(model, batch, "loglik", &B);
    if (st != DGA_OK) return st;
    const int n_ctx = dga_model_context(model);
    for (size_t i = 0; i < n; i++) {
        const dga_loglik_request *r = &reqs[i];
        if (r->n_cont < 1 || r->n_cont > n_ctx || r->n_tokens < r->n_cont + 1 || !r->tokens)
            return dga_fail(DGA_ERR_INVALID,
                            "loglik: request %zu: %d tokens with a continuation of %d; need "
                            "1 <= continuation <= min(context length %d, tokens - 1)",
                            i, r->n_tokens, r->n_cont, n_ctx);
    }
    if (n == 0) return DGA_OK;

    len_idx *order = malloc(n * sizeof *order);
    int32_t *in = malloc((size_t)B * (size_t)n_ctx * sizeof *in);
    int32_t *tg = malloc((size_t)B * (size_t)n_ctx * sizeof *tg);
    double *nll = malloc((size_t)B * sizeof *nll);
    int *cnt = malloc((size_t)B * sizeof *cnt);
    if (!order || !in || !tg || !nll || !cnt) {
        st = dga_fail(DGA_ERR_NOMEM, "loglik: out of memory");
        goto done;
    }
    /* Longest first, as the harness orders requests: rows of similar length share a call,
     * so little compute goes to padding. */
    for (size_t i = 0; i < n; i++) order[i] = (len_idx){row_len(&reqs[i], n_ctx), i};
    qsort(order, n, sizeof *order, cmp_len_desc);

    for (size_t k = 0; k < n && st == DGA_OK; k += (size_t)B) {
        int b = (int)(n - k < (size_t)B ? n - k : (size_t)B);
        const int T = order[k].len;
        for (int r = 0; r < b; r++) {
            const dga_loglik_request *q = &reqs[order[k + (size_t)r].idx];
            const int len = row_len(q, n_ctx);
            const int start = q->n_tokens - (len + 1);    /* left truncation */
            const int first_cont = q->n_tokens - q->n_cont;
            int32_t *ri = in + (size_t)r * T, *rt = tg + (size_t)r * T;
            for (int j = 0; j < T; j++) {
                if (j < len) {
                    ri[j] = q->tokens[start + j];
                    rt[j] = start + j + 1 >= first_cont ? q->tokens[start + j + 1] : DGA_IGNORE;
                } else {            /* right padding: causal attention never sees it */
                    ri[j] = 0;
                    rt[j] = DGA_IGNORE;
                }
            }
        }
        st = dga_model_eval(model, in, tg, b, T, nll, cnt);
        for (int r = 0; r < b && st == DGA_OK; r++) loglik[order[k + (size_t)r].idx] = -nll[r];
    }
done:
    free(order);
    free(in);
    free(tg);
    free(nll);
    free(cnt);
    return st;
}

/* ------------------------------------------------------------------ MMLU */

#define MMLU_CHUNK 64   /* questions tokenized and scored together */

/* The first `shots` dev questions of q's subject, copied (shallowly) into out. */
static dga_status pick_shots(const dga_mmlu_question *q, const dga_mmlu_question *dev,
                             size_t n_dev, int shots, dga_mmlu_question *out)
{
    int got = 0;
    for (size_t i = 0; i < n_dev && got < shots; i++)
        if (dev[i].subject && q->subject && strcmp(dev[i].subject, q->subject) == 0)
            out[got++] = dev[i];
    if (got < shots)
        return dga_fail(DGA_ERR_INVALID,
                        "mmlu_score: %d-shot prompts need %d dev questions of subject '%s', "
                        "found %d",
                        shots, shots, q->subject ? q->subject : "(none)", got);
    return DGA_OK;
}

/* Fills the four requests of one question; the token arrays are malloc'd into reqs. */
static dga_status tokenize_question(dga_encode_fn encode, void *ud, const char *context,
                                    size_t qi, dga_loglik_request *reqs)
{
    static const char *const conts[4] = {" A", " B", " C", " D"};
    size_t clen = strlen(context);
    int32_t *ctx_ids = NULL;
    size_t n_ctx_ids = 0;
    dga_status st = encode(ud, context, clen, &ctx_ids, &n_ctx_ids);
    free(ctx_ids);
    if (st != DGA_OK) return st;
    char *whole = malloc(clen + 3);
    if (!whole) return dga_fail(DGA_ERR_NOMEM, "mmlu_score: out of memory");
    memcpy(whole, context, clen);
    for (int c = 0; c < 4 && st == DGA_OK; c++) {
        memcpy(whole + clen, conts[c], 3);
        int32_t *ids = NULL;
        size_t n_ids = 0;
        st = encode(ud, whole, clen + 2, &ids, &n_ids);
        if (st != DGA_OK) {
            free(ids);
            break;
        }
        if (n_ids <= n_ctx_ids || n_ctx_ids == 0 || n_ids > (size_t)1 << 30) {
            free(ids);
            st = dga_fail(DGA_ERR_INVALID,
                          "mmlu_score: question %zu: the context encodes to %zu tokens and "
                          "context+\"%s\" to %zu; the continuation needs at least one token "
                          "and the context at least one",
                          qi + 1, n_ctx_ids, conts[c], n_ids);
            break;
        }
        reqs[c].tokens = ids;
        reqs[c].n_tokens = (int)n_ids;
        reqs[c].n_cont = (int)(n_ids - n_ctx_ids);
    }
    free(whole);
    return st;
}

/* With GPT-2 style BPE, " A".." D" are single tokens after the same context tokens: the four
 * rows would be identical inputs differing only in the last target, so one forward of the
 * context (lm head at the last position only) gives all four log-probabilities, a quarter of
 * the work of four rows. The result is the same as the batched scorer's. */
static int shares_context(const dga_loglik_request *r)
{
    for (int c = 0; c < 4; c++)
        if (r[c].n_cont != 1 || r[c].n_tokens != r[0].n_tokens || !r[c].tokens) return 0;
    for (int c = 1; c < 4; c++)
        if (memcmp(r[c].tokens, r[0].tokens, (size_t)(r[0].n_tokens - 1) * sizeof *r[0].tokens))
            return 0;
    return 1;
}

static dga_status score_shared(dga_model *model, const dga_loglik_request *r, float *logits,
                               double *ll)
{
    const int V = dga_model_vocab(model), n_ctx = dga_model_context(model);
    const int n = r[0].n_tokens - 1;                 /* context tokens */
    const int start = n > n_ctx ? n - n_ctx : 0;   /* left truncation */
    for (int c = 0; c < 4; c++) {
        int32_t t = r[c].tokens[n];
        if (t < 0 || t >= V)
            return dga_fail(DGA_ERR_INVALID, "mmlu_score: continuation token id %d outside "
                            "vocabulary [0, %d)", (int)t, V);
    }
    dga_status st = dga_model_next_logits(model, r[0].tokens + start, n - start, logits);
    if (st != DGA_OK) return st;
    double mx = logits[0], sum = 0.0;
    for (int v = 1; v < V; v++)
        if (logits[v] > mx) mx = logits[v];
    for (int v = 0; v < V; v++) sum += exp((double)logits[v] - mx);
    const double lse = mx + log(sum);
    for (int c = 0; c < 4; c++) ll[c] = (double)logits[r[c].tokens[n]] - lse;
    return DGA_OK;
}

/* Tokens by which a question's longest request exceeds the context window (0: it fits). */
static int overflow(const dga_loglik_request *r, int n_ctx)
{
    int over = 0;
    for (int c = 0; c < 4; c++)
        if (r[c].n_tokens - 1 - n_ctx > over) over = r[c].n_tokens - 1 - n_ctx;
    return over;
}

dga_status dga_eval_mmlu(dga_model *model, dga_encode_fn encode, void *encode_ud,
                         const dga_mmlu_question *qs, size_t n, const dga_mmlu_question *dev,
                         size_t n_dev, int shots, int batch, dga_mmlu_result *res, double *loglik,
                         dga_mmlu_fit *fit)
{
    memset(res, 0, sizeof *res);
    if (shots < 0 || shots > 64)
        return dga_fail(DGA_ERR_INVALID, "mmlu_score: shots %d outside [0, 64]", shots);
    int B = 0;
    dga_status st = resolve_batch(model, batch, "mmlu_score", &B);
    if (st != DGA_OK) return st;
    for (size_t i = 0; i < n; i++)
        if (qs[i].answer < 0 || qs[i].answer > 3)
            return dga_fail(DGA_ERR_INVALID, "mmlu_score: question %zu: answer index %d outside 0..3",
                            i + 1, qs[i].answer);

    dga_loglik_request *reqs = calloc(4 * MMLU_CHUNK, sizeof *reqs);
    dga_loglik_request *rest = calloc(4 * MMLU_CHUNK, sizeof *rest);
    size_t *rest_at = malloc(4 * MMLU_CHUNK * sizeof *rest_at);
    double *ll = malloc(4 * MMLU_CHUNK * sizeof *ll);
    double *rest_ll = malloc(4 * MMLU_CHUNK * sizeof *rest_ll);
    float *logits = malloc((size_t)dga_model_vocab(model) * sizeof *logits);
    dga_mmlu_question *shot_buf = malloc((size_t)(shots ? shots : 1) * sizeof *shot_buf);
    if (!reqs || !rest || !rest_at || !ll || !rest_ll || !logits || !shot_buf) {
        free(reqs);
        free(rest);
        free(rest_at);
        free(ll);
        free(rest_ll);
        free(logits);
        free(shot_buf);
        return dga_fail(DGA_ERR_NOMEM, "mmlu_score: out of memory");
    }
    size_t correct = 0;
    double loss_sum = 0.0;
    const int n_ctx = dga_model_context(model);
    for (size_t k = 0; k < n && st == DGA_OK; k += MMLU_CHUNK) {
        size_t m = n - k < MMLU_CHUNK ? n - k : MMLU_CHUNK;
        memset(reqs, 0, 4 * m * sizeof *reqs);
        for (size_t i = 0; i < m && st == DGA_OK; i++) {
            const dga_mmlu_question *q = &qs[k + i];
            st = pick_shots(q, dev, n_dev, shots, shot_buf);
            dga_mmlu_fit f = {shots, 0};
            while (st == DGA_OK) {
                char *context = NULL;
                st = dga_mmlu_render(q, shot_buf, f.shots, 0, &context);
                if (st == DGA_OK) st = tokenize_question(encode, encode_ud, context, k + i, &reqs[4 * i]);
                free(context);
                if (st != DGA_OK) break;
                f.cut_tokens = overflow(&reqs[4 * i], n_ctx);
                if (f.cut_tokens == 0 || f.shots == 0) break;
                for (int c = 0; c < 4; c++) {   /* one shot fewer, and again */
                    free((void *)reqs[4 * i + (size_t)c].tokens);
                    reqs[4 * i + (size_t)c].tokens = NULL;
                }
                f.shots--;
            }
            if (st != DGA_OK) break;
            res->shortened += f.shots < shots || f.cut_tokens > 0;
            res->truncated += f.cut_tokens > 0;
            res->shots_used += (size_t)f.shots;
            if (fit) fit[k + i] = f;
        }
        /* Questions whose four continuations share the context are scored from one forward
         * each; the others go through the batched scorer together. */
        size_t n_rest = 0;
        for (size_t i = 0; i < m && st == DGA_OK; i++) {
            if (shares_context(&reqs[4 * i])) {
                st = score_shared(model, &reqs[4 * i], logits, &ll[4 * i]);
            } else {
                for (int c = 0; c < 4; c++) {
                    rest[n_rest] = reqs[4 * i + (size_t)c];
                    rest_at[n_rest++] = 4 * i + (size_t)c;
                }
            }
        }
        if (st == DGA_OK && n_rest) st = dga_eval_loglik(model, rest, n_rest, B, rest_ll);
        for (size_t r = 0; r < n_rest && st == DGA_OK; r++) ll[rest_at[r]] = rest_ll[r];
        for (size_t i = 0; i < m && st == DGA_OK; i++) {
            const double *l = &ll[4 * i];
            int best = 0;
            for (int c = 1; c < 4; c++)
                if (l[c] > l[best]) best = c;
            int a = qs[k + i].answer;
            correct += best == a;
            loss_sum += -l[a] / reqs[4 * i + a].n_cont;
            if (loglik) memcpy(&loglik[4 * (k + i)], l, 4 * sizeof *l);
        }
        for (size_t i = 0; i < 4 * m; i++) free((void *)reqs[i].tokens);
    }
    free(rest);
    free(rest_at);
    free(rest_ll);
    free(logits);
    free(reqs);
    free(ll);
    free(shot_buf);
    if (st != DGA_OK) {
        memset(res, 0, sizeof *res);
        return st;
    }
    res->n = n;
    if (n) {
        res->accuracy = (double)correct / (double)n;
        res->answer_loss = loss_sum / (double)n;
    }
    return DGA_OK;
}

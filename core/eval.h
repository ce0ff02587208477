/* Evaluation of a model: held-out mean losses and lm-evaluation-harness style log-likelihood
 * scoring (MMLU). Everything goes through dga_model_eval (no activations stored for backward,
 * gradients untouched). */
#ifndef DGA_EVAL_H
#define DGA_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "mmlu.h"
#include "status.h"

/* The held-out loss: token-weighted mean next-token loss (sum of NLL over non-ignored targets
 * / their number, 0 when there are none) over n rows of T tokens, row r's inputs at
 * inputs + r * stride and its targets at targets + r * stride (stride >= T; stride = T for
 * contiguous B x T blocks). Batches of `batch` rows (<= 0: the model's max batch; more than
 * the max batch is DGA_ERR_INVALID). */
dga_status dga_eval_mean_loss(dga_model *model, const int32_t *inputs, const int32_t *targets,
                              size_t stride, size_t n, int T, int batch, double *mean);

/* The same over n_seqs token sequences of seq_len tokens (row-major): inputs seq[0..L-2],
 * targets seq[1..L-1], so 2 <= seq_len <= n_ctx + 1. */
dga_status dga_eval_mean_loss_seqs(dga_model *model, const int32_t *seqs, size_t n_seqs,
                                   int seq_len, int batch, double *mean);

/* The rows of dga_eval_mean_loss_seqs one by one: row_nll[i] the sum of row i's next-token
 * losses, row_cnt[i] its number of targets (n_seqs entries each). Batches start at row 0, so a
 * process that evaluates whole batches of a larger set gets the rows' bits of the whole run;
 * summing row_nll in row order and dividing by the summed counts gives its mean, bit for bit. */
dga_status dga_eval_row_losses_seqs(dga_model *model, const int32_t *seqs, size_t n_seqs,
                                    int seq_len, int batch, double *row_nll, int *row_cnt);

/* One log-likelihood request: tokens = context followed by continuation; the last n_cont
 * tokens are the continuation (1 <= n_cont <= min(n_ctx, n_tokens - 1)). As the harness does,
 * a sequence longer than n_ctx + 1 is truncated from the left (the context loses its start). */
typedef struct {
    const int32_t *tokens;
    int            n_tokens;
    int            n_cont;
} dga_loglik_request;

/* loglik[i] = sum of log p(continuation token | everything before it) for request i.
 * Requests are sorted by length and packed `batch` rows per dga_model_eval call (right-padded,
 * DGA_IGNORE on context and padding targets). */
dga_status dga_eval_loglik(dga_model *model, const dga_loglik_request *reqs, size_t n, int batch,
                           double *loglik);

/* Tokenizer hook: *ids receives a malloc'd array of *n_ids token ids for text[0..len).
 * A failure returns a status after dga_fail(). */
typedef dga_status (*dga_encode_fn)(void *ud, const char *text, size_t len, int32_t **ids,
                                    size_t *n_ids);

typedef struct {
    double accuracy;      /* share of questions whose argmax letter is the answer */
    double answer_loss;   /* mean over questions of the NLL per token of " <answer letter>" */
    size_t n;             /* questions scored */
    size_t shortened;     /* prompts that did not fit the context as asked (shots dropped or cut) */
    size_t truncated;     /* of those, prompts still too long with no shot left: cut from the left */
    size_t shots_used;    /* examples in all the prompts scored, summed (n * shots when all fit) */
} dga_mmlu_result;

/* How one question's prompt was fitted to the model's context. */
typedef struct {
    int shots;            /* examples in the prompt scored (fewer than asked when it did not fit) */
    int cut_tokens;       /* tokens cut from its start with no shot left (0: it fitted) */
} dga_mmlu_fit;

/* MMLU scored as lm-evaluation-harness does: context = dga_mmlu_render(q, shots, 0) with
 * the first `shots` questions of `dev` that share q's subject (in dev order; fewer than
 * `shots` is DGA_ERR_INVALID), continuations " A", " B", " C", " D"; the continuation tokens
 * are encode(context + continuation) minus its first len(encode(context)) tokens; prediction =
 * argmax log-likelihood (first on ties). loglik (4 per question, may be NULL) gets the four
 * scores.
 * A prompt longer than the model's context loses its last shots, one at a time, until it fits
 * (the k-shot prompt becomes the j-shot one, j < k), rather than losing its start and with it
 * the task's header; a prompt that does not fit even with no shot is cut from the left, as the
 * harness cuts. res counts both, and fit (n entries, may be NULL) says per question what was
 * scored, so that a caller can report it: a cut prompt is a different measurement.
 * Questions are tokenized and scored in chunks, so memory does not grow with n.
 * When the four continuations are single tokens after identical context tokens (the usual
 * case with GPT-2 style BPE), one dga_model_next_logits of the context gives all four (4x less
 * work); otherwise the four rows of several questions share dga_model_eval calls
 * (dga_eval_loglik). Both give the same numbers (tests/c/test_eval.c checks both). */
dga_status dga_eval_mmlu(dga_model *model, dga_encode_fn encode, void *encode_ud,
                         const dga_mmlu_question *qs, size_t n, const dga_mmlu_question *dev,
                         size_t n_dev, int shots, int batch, dga_mmlu_result *res,
                         double *loglik, dga_mmlu_fit *fit);

#endif

/* dga_model: the interface between a trainable language model and everything that drives it
 * (alignment, evaluation, generation, the GPT embedder, checkpoints, the Lua bindings).
 *
 * A model keeps all its parameters in one flat float buffer and the gradients in a second
 * buffer of the same layout (llm.c's design): a gradient is one vector, so alignment is one
 * dot product, AdamW one loop and a checkpoint one write. The named tensors inside that
 * buffer are listed by dga_model_tensor().
 *
 * The common header (struct dga_model) holds what every architecture has; the vtable holds
 * what differs. The public functions below validate their arguments once (batch size,
 * sequence length, token ids, the interrupt flag) and then call the vtable, so an
 * implementation receives valid input only. docs/model.md says how to add an architecture.
 *
 * Targets equal to DGA_IGNORE contribute no loss (padding, prompt tokens). Losses are natural
 * log, averaged over the non-ignored target tokens of the whole batch. */
#ifndef DGA_MODEL_H
#define DGA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "rng.h"
#include "status.h"

#define DGA_IGNORE (-1)

/* One named parameter tensor inside the flat buffer. */
typedef struct {
    char   name[64];      /* the checkpoint's name, e.g. "transformer.h.3.attn.c_attn.weight" */
    size_t offset;        /* in floats, into params / grads */
    size_t numel;
    int    ndim;
    int    shape[2];
    int    is_matrix;     /* weight matrices and embeddings (decayed by default) vs biases/LN */
    int    is_embedding;  /* matrices that decay = "linear" exempts too */
} dga_tensor_info;

typedef struct dga_model dga_model;

/* Told during dga_model_backward that grads[offset .. offset + count) is final: the rest of
 * this backward neither writes nor reads it (the callback may change it in place). */
typedef void (*dga_grads_ready_fn)(void *ctx, size_t offset, size_t count);

/* What an architecture implements. Every function receives arguments that the dga_model_*
 * wrappers have already checked: 1 <= B <= max_batch, 1 <= T <= n_ctx, inputs in [0, V),
 * targets in [0, V) or DGA_IGNORE, non-NULL buffers. */
typedef struct {
    const char *arch;   /* "gpt2" */
    /* Training forward; stores what backward needs. n_valid: the non-ignored targets.
     * Must fill m->seq_loss[0..B) (dga_model_seq_losses). */
    dga_status (*forward)(dga_model *m, const int32_t *inputs, const int32_t *targets, int B,
                          int T, int n_valid, float *loss);
    /* Accumulates the gradient of the last forward's loss into m->grads, and announces
     * with dga_model_grads_ready each contiguous range of it as soon as it is final (in
     * floats; every float exactly once), so that a caller can start sending it while the
     * rest of the backward runs. One that announces nothing is announced whole at the end
     * by dga_model_backward, which is correct, only without overlap. */
    dga_status (*backward)(dga_model *m);
    /* Forward only: per-sequence NLL sums and target counts (either may be NULL). */
    dga_status (*eval)(dga_model *m, const int32_t *inputs, const int32_t *targets, int B,
                       int T, double *seq_nll, int *seq_count);
    /* Loss and its derivative along tangent (parameter layout), forward mode. */
    dga_status (*jvp)(dga_model *m, const int32_t *inputs, const int32_t *targets, int B,
                      int T, int n_valid, const float *tangent, double *loss, double *dloss);
    /* Logits (V floats) at the last of n positions. */
    dga_status (*next_logits)(dga_model *m, const int32_t *tokens, int n, float *logits);
    /* Adds the sum over n positions of the final hidden state (m->width floats) to out. */
    dga_status (*hidden_sum)(dga_model *m, const int32_t *tokens, int n, float *out);
    void (*init_weights)(dga_model *m, dga_rng *rng);
    double (*flops_per_token)(const dga_model *m, int T);   /* training FLOPs per token */
    void (*destroy)(dga_model *m);
} dga_model_vtable;

/* The common header, the first member of every implementation's struct. Filled by the
 * implementation's create function; read-only for everyone else (use the accessors). */
struct dga_model {
    const dga_model_vtable *vt;
    int     max_batch, n_ctx, vocab_size;
    int     width;              /* length of hidden_sum's vector */
    size_t  num_params;
    float  *params, *grads;     /* num_params floats each */
    int     n_tensors;
    const dga_tensor_info *tensors;
    float  *seq_loss;           /* max_batch floats: mean loss per sequence, last forward */
    int     fwd_B;              /* rows of the last successful forward, 0 if none */
    /* Set by dga_model_set_grads_ready (a zeroed header: none); the count of floats announced
     * in the current backward, kept by dga_model_grads_ready. */
    dga_grads_ready_fn grads_ready;
    void   *grads_ready_ctx;
    size_t  grads_announced;
};

void       dga_model_free(dga_model *m);                 /* NULL is fine */
const char *dga_model_arch(const dga_model *m);
int        dga_model_max_batch(const dga_model *m);
int        dga_model_context(const dga_model *m);        /* the longest sequence, n_ctx */
int        dga_model_vocab(const dga_model *m);
int        dga_model_width(const dga_model *m);          /* hidden_sum's vector length */
size_t     dga_model_num_params(const dga_model *m);
float     *dga_model_params(dga_model *m);               /* theta, num_params floats */
float     *dga_model_grads(dga_model *m);                /* same layout */
void       dga_model_zero_grad(dga_model *m);
int        dga_model_num_tensors(const dga_model *m);
const dga_tensor_info *dga_model_tensor(const dga_model *m, int i);   /* NULL out of range */
const dga_tensor_info *dga_model_find_tensor(const dga_model *m, const char *name);

/* The architecture's initialisation, drawn from rng. */
void       dga_model_init_weights(dga_model *m, dga_rng *rng);
/* Model FLOPs per trained token at sequence length T. */
double     dga_model_flops_per_token(const dga_model *m, int T);

/* Training forward: inputs and targets are B x T int32 (row-major), 1 <= B <= max_batch,
 * 1 <= T <= n_ctx. Stores activations for dga_model_backward. Token ids outside [0, V) in
 * inputs, or outside [0, V) and != DGA_IGNORE in targets, are DGA_ERR_INVALID with a message
 * naming the id and its [row,column] (1-based). *loss = mean NLL over non-ignored targets (0
 * if all are ignored). */
dga_status dga_model_forward(dga_model *m, const int32_t *inputs, const int32_t *targets,
                             int B, int T, float *loss);

/* Accumulates d(loss)/d(theta) of the last dga_model_forward into the gradient buffer.
 * With a grads_ready callback installed, calls it for ranges covering [0, num_params)
 * exactly once, each as soon as that range is final, in the order the architecture finishes
 * them (GPT-2: ln_f, the blocks from the last to the first, then wte and wpe, since the tied
 * wte also takes the embedding's gradient); the callback may read and change its range in
 * place (data parallelism scales it and starts its reduction: dp.h). A backward that fails
 * may have announced part of the buffer. */
dga_status dga_model_backward(dga_model *m);

/* Installs fn(ctx, offset, count) as the grads_ready callback of every later backward
 * (NULL removes it). */
void       dga_model_set_grads_ready(dga_model *m, dga_grads_ready_fn fn, void *ctx);
/* For architectures, inside backward: grads[offset .. offset + count) is final. Calls the
 * callback, if one is installed, and counts the floats for dga_model_backward's check. */
void       dga_model_grads_ready(dga_model *m, size_t offset, size_t count);

/* The mean loss of each of the B sequences of the last successful dga_model_forward (the
 * per-position losses that forward computed anyway; 0 for a sequence whose targets are all
 * ignored). Returns NULL and sets *B = 0 when there was no such forward. Valid until the
 * next forward. */
const float *dga_model_seq_losses(const dga_model *m, int *B);

/* Inference: stores no activations for backward. For each of the B sequences, seq_nll[b] =
 * sum of NLL over its non-ignored targets and seq_count[b] = their number (either output may
 * be NULL). Serves held-out losses, MMLU scoring and finite-difference alignment. */
dga_status dga_model_eval(dga_model *m, const int32_t *inputs, const int32_t *targets, int B,
                          int T, double *seq_nll, int *seq_count);

/* Forward-mode differentiation: the batch's mean loss (as dga_model_forward defines it) and
 * its directional derivative along `tangent` (num_params floats, the parameter layout):
 *   *loss = l(theta),  *dloss = d/dh l(theta + h tangent) at h = 0 = <grad l, tangent>.
 * Leaves the parameters, gradients and the last forward's activations alone. Both are 0 if
 * every target is ignored; either output may be NULL. */
dga_status dga_model_jvp(dga_model *m, const int32_t *inputs, const int32_t *targets, int B,
                         int T, const float *tangent, double *loss, double *dloss);

/* Logits (V floats) at the last position of one sequence of n tokens (n <= n_ctx). */
dga_status dga_model_next_logits(dga_model *m, const int32_t *tokens, int n, float *logits);

/* Adds to out[0..width) the sum over the n positions of one sequence (n <= n_ctx) of the
 * model's final hidden state, which an embedder mean-pools (embed_gpt.c). Forward only. */
dga_status dga_model_hidden_sum(dga_model *m, const int32_t *tokens, int n, float *out);

/* Text generation (generate.c): n_new tokens after a prompt of n_prompt >= 1 ids, written to
 * out[0 .. n_new). temperature 0 is greedy (argmax, lowest id on ties); > 0 samples from
 * softmax(logits / temperature) with rng (rng may be NULL when greedy). The window is the
 * last n_ctx tokens; a prompt longer than that keeps its last n_ctx - 1. Ids outside the
 * vocabulary, a negative count or non-finite logits (diverged parameters) are errors. */
dga_status dga_model_generate(dga_model *m, const int32_t *prompt, int n_prompt, int n_new,
                              double temperature, dga_rng *rng, int32_t *out);

/* Sampling restricted as well: with temperature > 0, only the top_k most likely tokens
 * (0: all) and, of those, the smallest set whose renormalised probability reaches top_p
 * (1: all) can be drawn. top_k = 0 and top_p = 1 draw exactly as dga_model_generate. */
typedef struct {
    double temperature;
    int top_k;
    double top_p;
} dga_sample_opts;
dga_status dga_model_generate_sampled(dga_model *m, const int32_t *prompt, int n_prompt,
                                      int n_new, const dga_sample_opts *opts, dga_rng *rng,
                                      int32_t *out);

/* Checks that the n = B x T token ids lie in [0, V) or, when allow_ignore (targets), equal
 * DGA_IGNORE. The message reads "<fn>: token id 40 at [2,3] outside vocabulary [0, 32)"
 * (target id for targets), row and column 1-based. Every dga_model_* function that takes
 * tokens calls it; exposed for callers that check ids before a long job. */
dga_status dga_model_check_ids(const dga_model *m, const char *fn, const int32_t *ids, int B,
                               int T, int allow_ignore);

#endif

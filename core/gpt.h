/* GPT-2 decoder: configuration, flat parameter/gradient buffers, forward and backward.
 *
 * Architecture (GPT-2): token + learned position embedding; L pre-LN blocks
 *   x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))   with mlp = c_proj(gelu_tanh(c_fc(.)), 4x width)
 * final ln_f; output head tied to the token embedding; causal multi-head self-attention.
 *
 * Memory (llm.c's design): all parameters live in one flat float buffer theta, the gradients
 * in a second buffer of the same layout. A gradient is therefore one vector: alignment is one
 * dot product, AdamW one loop, a checkpoint one write. Tensors are addressed by name through
 * dga_gpt_tensor(); matrices are stored [in, out] as Hugging Face's Conv1D stores them, so a
 * checkpoint is a straight copy.
 *
 * Targets equal to DGA_IGNORE contribute no loss (padding, prompt tokens). Losses are natural
 * log, averaged over the non-ignored target tokens of the whole batch. */
#ifndef DGA_GPT_H
#define DGA_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "rng.h"
#include "status.h"

#define DGA_IGNORE (-1)

typedef struct {
    int n_layer;     /* L */
    int n_head;      /* h, divides n_embd */
    int n_embd;      /* C */
    int n_ctx;       /* maximum sequence length T (n_positions) */
    int vocab_size;  /* V */
} dga_gpt_config;

/* One named parameter tensor inside the flat buffer (Hugging Face GPT-2 names). */
typedef struct {
    char   name[64];      /* e.g. "transformer.h.3.attn.c_attn.weight" */
    size_t offset;        /* in floats, into params / grads */
    size_t numel;
    int    ndim;
    int    shape[2];
    int    is_matrix;     /* weight matrices and embeddings (decayed by default) vs biases/LN */
    int    is_embedding;  /* wte, wpe: matrices that decay = "linear" exempts too */
} dga_tensor_info;

typedef struct dga_gpt dga_gpt;

dga_status dga_gpt_config_check(const dga_gpt_config *cfg);

/* Allocates parameters (zeroed), gradients and the activation arena for batches up to
 * max_batch x n_ctx. Activations are sized once here: forward/backward allocate nothing. */
dga_status dga_gpt_create(const dga_gpt_config *cfg, int max_batch, dga_gpt **out);
void       dga_gpt_free(dga_gpt *model);                 /* NULL is fine */

const dga_gpt_config *dga_gpt_get_config(const dga_gpt *model);
int        dga_gpt_max_batch(const dga_gpt *model);
size_t     dga_gpt_num_params(const dga_gpt *model);
float     *dga_gpt_params(dga_gpt *model);               /* theta, num_params floats */
float     *dga_gpt_grads(dga_gpt *model);                /* same layout */
int        dga_gpt_num_tensors(const dga_gpt *model);
const dga_tensor_info *dga_gpt_tensor(const dga_gpt *model, int i);
const dga_tensor_info *dga_gpt_find_tensor(const dga_gpt *model, const char *name);

/* GPT-2 initialisation: N(0, 0.02) for matrices and embeddings, N(0, 0.02/sqrt(2L)) for the
 * residual projections (attn.c_proj, mlp.c_proj), zeros for biases, ones/zeros for LN. */
void       dga_gpt_init_weights(dga_gpt *model, dga_rng *rng);

/* Training forward: inputs and targets are B x T int32 (row-major), 1 <= B <= max_batch,
 * 1 <= T <= n_ctx. Stores activations for dga_gpt_backward. Token ids outside [0, V) in
 * inputs, or outside [0, V) and != DGA_IGNORE in targets, are DGA_ERR_INVALID.
 * *loss = mean NLL over non-ignored targets (0 if all are ignored). */
dga_status dga_gpt_forward(dga_gpt *model, const int32_t *inputs, const int32_t *targets,
                           int B, int T, float *loss);

/* Accumulates d(loss)/d(theta) of the last dga_gpt_forward into the gradient buffer. */
dga_status dga_gpt_backward(dga_gpt *model);
void       dga_gpt_zero_grad(dga_gpt *model);

/* Inference fast path: stores no activations for backward. For each of the B sequences,
 * seq_nll[b] = sum of NLL over its non-ignored targets and seq_count[b] = their number
 * (either output may be NULL). Serves held-out losses, MMLU scoring and finite-difference
 * alignment. */
dga_status dga_gpt_eval(dga_gpt *model, const int32_t *inputs, const int32_t *targets,
                        int B, int T, double *seq_nll, int *seq_count);

/* Forward-mode differentiation: the batch's mean loss (as dga_gpt_forward defines it) and
 * its directional derivative along `tangent` (num_params floats, the parameter layout):
 *   *loss = l(theta),  *dloss = d/dh l(theta + h tangent) at h = 0 = <grad l, tangent>,
 * from one forward pass carrying tangents (each linear layer costs three matmuls instead of
 * one). Stores nothing for backward and leaves the parameters, gradients and the last
 * dga_gpt_forward's activations alone; the first call allocates a tangent arena (about one
 * transformer block's activations at the max batch), later calls allocate nothing. Both are 0
 * if every target is ignored; either output may be NULL. */
dga_status dga_gpt_jvp(dga_gpt *model, const int32_t *inputs, const int32_t *targets, int B,
                       int T, const float *tangent, double *loss, double *dloss);

/* Logits (V floats) at the last position of one sequence of n tokens (n <= n_ctx). */
dga_status dga_gpt_next_logits(dga_gpt *model, const int32_t *tokens, int n, float *logits);

/* Adds to out[0..n_embd) the sum over the n positions of one sequence (n <= n_ctx) of the
 * final layernorm's output: the trunk's representation of each position, which an embedder
 * mean-pools (embed_gpt.c). Forward only; uses the inference arena. */
dga_status dga_gpt_hidden_sum(dga_gpt *model, const int32_t *tokens, int n, float *out);

/* Text generation (generate.c): n_new tokens after a prompt of n_prompt >= 1 ids, written to
 * out[0 .. n_new). temperature 0 is greedy (argmax, lowest id on ties); > 0 samples from
 * softmax(logits / temperature) with rng (rng may be NULL when greedy). The window is the
 * last n_ctx tokens; a prompt longer than that keeps its last n_ctx - 1. Ids outside the
 * vocabulary, a negative count or non-finite logits (diverged parameters) are errors. */
dga_status dga_gpt_generate(dga_gpt *model, const int32_t *prompt, int n_prompt, int n_new,
                            double temperature, dga_rng *rng, int32_t *out);

/* Sampling restricted as well: with temperature > 0, only the top_k most likely tokens
 * (0: all) and, of those, the smallest set whose renormalised probability reaches top_p
 * (1: all) can be drawn. top_k = 0 and top_p = 1 draw exactly as dga_gpt_generate. */
typedef struct {
    double temperature;
    int top_k;
    double top_p;
} dga_sample_opts;
dga_status dga_gpt_generate_sampled(dga_gpt *model, const int32_t *prompt, int n_prompt, int n_new,
                                    const dga_sample_opts *opts, dga_rng *rng, int32_t *out);

/* Model FLOPs per trained token: 6 x (parameters except positions) + 12 L T C (attention). */
double     dga_gpt_flops_per_token(const dga_gpt_config *cfg, int T);

#endif

/* GPT-2 decoder: the first dga_model (core/model.h).
 *
 * Architecture (GPT-2): token + learned position embedding; L pre-LN blocks
 *   x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))   with mlp = c_proj(gelu_tanh(c_fc(.)), 4x width)
 * final ln_f; output head tied to the token embedding; causal multi-head self-attention.
 *
 * Parameters use Hugging Face's GPT-2 names and layouts (matrices stored [in, out], as its
 * Conv1D stores them), so a checkpoint is a straight copy. One table in gpt.c lists a
 * block's tensors; it drives the layout, the initialisation and those names. */
#ifndef DGA_GPT_H
#define DGA_GPT_H

#include "gemm_dnnl.h"
#include "model.h"

typedef struct {
    int n_layer;     /* L */
    int n_head;      /* h, divides n_embd */
    int n_embd;      /* C */
    int n_ctx;       /* maximum sequence length T (n_positions) */
    int vocab_size;  /* V */
} dga_gpt_config;

dga_status dga_gpt_config_check(const dga_gpt_config *cfg);

/* Allocates parameters (zeroed), gradients and the activation arena for batches up to
 * max_batch x n_ctx. Activations are sized once here: forward/backward allocate nothing
 * (the forward-mode arena is allocated by the first dga_model_jvp). Free with
 * dga_model_free. */
dga_status dga_gpt_create(const dga_gpt_config *cfg, int max_batch, dga_model **out);

/* The config of a GPT, or NULL if m is another architecture. */
const dga_gpt_config *dga_gpt_get_config(const dga_model *m);

/* Sets the precision of the linear layers' and the LM head's products (gemm_dnnl.h; a new
 * model is fp32). Where the request cannot run (bf16 without a bf16 matmul here) the model
 * runs fp32 and *note (may be NULL) gets the one-line reason, else NULL. Attention's
 * products and the forward-mode pass (dga_model_jvp) stay fp32 in every precision. */
dga_status    dga_gpt_set_precision(dga_model *m, dga_precision p, const char **note);
/* The precision the model runs (after any fallback). */
dga_precision dga_gpt_precision(const dga_model *m);

/* GPT-2 initialisation (dga_model_init_weights): N(0, 0.02) for matrices and embeddings,
 * N(0, 0.02/sqrt(2L)) for the residual projections (attn.c_proj, mlp.c_proj), zeros for
 * biases, ones/zeros for LN. */

/* Model FLOPs per trained token: 6 x (parameters except positions) + 12 L T C (attention). */
double     dga_gpt_flops_per_token(const dga_gpt_config *cfg, int T);

#endif

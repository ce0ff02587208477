/* Gradient alignment (DGA; "exact" mode described here, "fd" and "jvp"
 * at dga_align_method).
 *
 *   a_i = < grad l(theta, x_i), grad l'(theta, z) >
 *
 * with z the target (specific) batch and x_i one batch per domain. The target gradient is
 * computed once into a buffer owned by the workspace; then, for each domain batch, the
 * model's gradient buffer is zeroed, filled by forward+backward and dotted with it (double
 * accumulation). Memory: two gradient buffers (the model's and the workspace's) whatever k is.
 *
 * The model's gradient buffer is CLOBBERED (it holds the last domain's gradient on return):
 * call between optimizer steps, never between backward and step.
 *
 * A batch larger than the model's max batch is processed in chunks whose gradients are
 * combined with weights (tokens in chunk / tokens in batch), so the result is the gradient
 * of the batch's token-mean loss exactly as one pass would give (up to rounding). */
#ifndef DGA_ALIGN_H
#define DGA_ALIGN_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "status.h"

/* exact: one backward per domain batch (the paper's method, the reference).
 * fd: central difference of each domain loss along the target gradient:
 *     a_i ~ (l(theta + h g_t, x_i) - l(theta - h g_t, x_i)) / 2h, h = fd_eps / |g_t|,
 *     forward-only passes (dga_model_eval); theta is backed up in the model's gradient buffer
 *     and restored bit for bit. Gives no per-domain gradient norms (grad_norm = NaN);
 *     loss_i is the mean of the two perturbed losses (O(h^2) from l(theta)).
 * jvp: the same directional derivative by forward-mode differentiation (dga_model_jvp):
 *     a_i = d/dh l(theta + h g_t, x_i) at h = 0, exact up to float rounding, one forward
 *     pass carrying tangents per domain batch (chunked like the others, chunks weighted by
 *     their token counts). Like fd it gives no per-domain gradient norms (grad_norm = NaN);
 *     loss_i = l(theta, x_i) exactly. The
 *     parameters are not touched; the model's gradient buffer holds the target gradient on
 *     return. */
typedef enum { DGA_ALIGN_EXACT = 0, DGA_ALIGN_FD, DGA_ALIGN_JVP } dga_align_method;

const char *dga_align_method_name(dga_align_method m);              /* "exact", "fd", "jvp" */
dga_status  dga_align_method_parse(const char *name, dga_align_method *out);

/* Raw inner products only: normalising them (cosine, by the mean norm, by the learning rate)
 * is the policy's business, from dot, grad_norm and target_norm. */
typedef struct {
    dga_align_method method;
    double fd_eps;      /* fd: step length along the unit target direction; <= 0: 1e-3 */
} dga_align_opts;

/* One batch: B x T int32 inputs and targets (targets may hold DGA_IGNORE). */
typedef struct {
    const int32_t *inputs, *targets;
    int B, T;
} dga_batch;

typedef struct {
    double *dot;         /* k: <g_i, g_t> */
    double *loss;        /* k: mean loss of each domain batch */
    double *grad_norm;   /* k: |g_i| (NaN for fd and jvp) */
    double  target_norm; /* |g_t| */
    double  target_loss;
} dga_align_result;

typedef struct dga_align_ws dga_align_ws;

/* A workspace for models with num_params parameters (one gradient-sized float buffer). */
dga_status dga_align_ws_create(size_t num_params, dga_align_ws **out);
void       dga_align_ws_free(dga_align_ws *ws);
/* The target gradient of the last dga_align call (num_params floats). */
const float *dga_align_ws_target_grad(const dga_align_ws *ws);

/* k >= 1 domain batches. out's arrays (k entries each) are provided by the caller. */
dga_status dga_align(dga_model *model, dga_align_ws *ws, const dga_batch *target,
                     const dga_batch *domains, int k, const dga_align_opts *opts,
                     dga_align_result *out);

/* The gradient of a batch's mean loss into the model's gradient buffer (zeroed first),
 * chunked as above; *loss gets the batch's mean loss. Exposed for tests and the trainer. */
dga_status dga_batch_grad(dga_model *model, const dga_batch *batch, double *loss);

#endif

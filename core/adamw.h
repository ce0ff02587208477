/* AdamW on one flat parameter vector, with PyTorch's semantics (torch.optim.AdamW):
 *   t += 1;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   theta -= lr * wd * theta                       (decoupled decay, only where decayed)
 *   theta -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 * The moments m and v are flat buffers of the same layout as the parameters. Which elements
 * are decayed is a list of [begin, end) ranges, so the optimizer needs no model knowledge. */
#ifndef DGA_ADAMW_H
#define DGA_ADAMW_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct {
    float lr;            /* default for dga_adamw_step; usually set per step from Lua */
    float beta1, beta2;  /* 0.9, 0.95 */
    float eps;           /* 1e-8 */
    float weight_decay;  /* 0.1 */
} dga_adamw_config;

typedef struct dga_adamw dga_adamw;

dga_adamw_config dga_adamw_defaults(void);

/* n parameters; decay ranges [begin, end) in elements, copied (n_ranges may be 0: nothing
 * is decayed). */
dga_status dga_adamw_create(size_t n, const dga_adamw_config *cfg,
                            const size_t (*decay_ranges)[2], int n_ranges, dga_adamw **out);
void       dga_adamw_free(dga_adamw *opt);

dga_adamw_config *dga_adamw_get_config(dga_adamw *opt);   /* mutable: lr, betas, wd, eps */
size_t     dga_adamw_size(const dga_adamw *opt);
int64_t    dga_adamw_steps(const dga_adamw *opt);          /* t, for bias correction */
void       dga_adamw_set_steps(dga_adamw *opt, int64_t t); /* checkpoint restore */
float     *dga_adamw_m(dga_adamw *opt);
float     *dga_adamw_v(dga_adamw *opt);

/* One update with learning rate lr. Non-finite gradients are DGA_ERR_INVALID and leave the
 * parameters and moments untouched. */
dga_status dga_adamw_step(dga_adamw *opt, float *params, const float *grads, float lr);

/* Global L2 norm of g (accumulated in double). */
double     dga_vec_norm(const float *g, size_t n);
/* Scales g so that its global norm is at most max_norm (PyTorch's clip_grad_norm_);
 * returns the norm before clipping. max_norm <= 0 disables clipping. */
double     dga_grad_clip(float *g, size_t n, double max_norm);

#endif

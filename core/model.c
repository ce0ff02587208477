/* The dga_model wrappers: argument checks done once for every architecture, then the vtable. */
#include "model.h"

#include <stdlib.h>
#include <string.h>

void dga_model_free(dga_model *m)
{
    if (m) m->vt->destroy(m);
}

const char *dga_model_arch(const dga_model *m) { return m->vt->arch; }
int dga_model_max_batch(const dga_model *m) { return m->max_batch; }
int dga_model_context(const dga_model *m) { return m->n_ctx; }
int dga_model_vocab(const dga_model *m) { return m->vocab_size; }
int dga_model_width(const dga_model *m) { return m->width; }
size_t dga_model_num_params(const dga_model *m) { return m->num_params; }
float *dga_model_params(dga_model *m) { return m->params; }
float *dga_model_grads(dga_model *m) { return m->grads; }
int dga_model_num_tensors(const dga_model *m) { return m->n_tensors; }
void dga_model_zero_grad(dga_model *m) { memset(m->grads, 0, m->num_params * sizeof(float)); }

const dga_tensor_info *dga_model_tensor(const dga_model *m, int i)
{
    return i >= 0 && i < m->n_tensors ? &m->tensors[i] : NULL;
}

const dga_tensor_info *dga_model_find_tensor(const dga_model *m, const char *name)
{
    if (!name) return NULL;
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

void dga_model_init_weights(dga_model *m, dga_rng *rng) { m->vt->init_weights(m, rng); }

double dga_model_flops_per_token(const dga_model *m, int T)
{
    return m->vt->flops_per_token(m, T);
}

dga_status dga_model_check_ids(const dga_model *m, const char *fn, const int32_t *ids, int B,
                               int T, int allow_ignore)
{
    const int V = m->vocab_size;
    const size_t n = (size_t)B * (size_t)T;
    for (size_t i = 0; i < n; i++) {
        int32_t v = ids[i];
        if ((v >= 0 && v < V) || (allow_ignore && v == DGA_IGNORE)) continue;
        return dga_fail(DGA_ERR_INVALID, "%s: %s id %d at [%zu,%zu] outside vocabulary [0, %d)%s",
                        fn, allow_ignore ? "target" : "token", (int)v, i / (size_t)T + 1,
                        i % (size_t)T + 1, V,
                        allow_ignore ? " (-1 marks an ignored target)" : "");
    }
    return DGA_OK;
}

/* Every forward of every kind passes here: the interrupt flag, the shape, the ids. */
static dga_status check_batch(const dga_model *m, const char *fn, const int32_t *inputs,
                              const int32_t *targets, int B, int T, int need_targets,
                              int *n_valid)
{
    dga_status st = dga_interrupt_check(fn);
    if (st != DGA_OK) return st;
    if (B < 1 || B > m->max_batch)
        return dga_fail(DGA_ERR_INVALID, "%s: batch size %d outside [1, %d] (the model's "
                        "batch)", fn, B, m->max_batch);
    if (T < 1 || T > m->n_ctx)
        return dga_fail(DGA_ERR_INVALID, "%s: sequence length %d outside [1, %d] (the "
                        "model's context)", fn, T, m->n_ctx);
    if (!inputs) return dga_fail(DGA_ERR_INVALID, "%s: inputs is NULL", fn);
    if (need_targets && !targets) return dga_fail(DGA_ERR_INVALID, "%s: targets is NULL", fn);
    st = dga_model_check_ids(m, fn, inputs, B, T, 0);
    if (st == DGA_OK && targets) st = dga_model_check_ids(m, fn, targets, B, T, 1);
    if (st != DGA_OK) return st;
    if (n_valid) {
        int valid = 0;
        for (size_t i = 0, n = (size_t)B * T; i < n; i++) valid += targets[i] != DGA_IGNORE;
        *n_valid = valid;
    }
    return DGA_OK;
}

dga_status dga_model_forward(dga_model *m, const int32_t *inputs, const int32_t *targets,
                             int B, int T, float *loss)
{
    int n_valid = 0;
    m->fwd_B = 0;
    dga_status st = check_batch(m, "forward", inputs, targets, B, T, 1, &n_valid);
    if (st == DGA_OK) st = m->vt->forward(m, inputs, targets, B, T, n_valid, loss);
    if (st == DGA_OK) m->fwd_B = B;
    return st;
}

void dga_model_set_grads_ready(dga_model *m, dga_grads_ready_fn fn, void *ctx)
{
    m->grads_ready = fn;
    m->grads_ready_ctx = fn ? ctx : NULL;
}

void dga_model_grads_ready(dga_model *m, size_t offset, size_t count)
{
    m->grads_announced += count;
    if (m->grads_ready && count) m->grads_ready(m->grads_ready_ctx, offset, count);
}

dga_status dga_model_backward(dga_model *m)
{
    if (m->fwd_B == 0)
        return dga_fail(DGA_ERR_INVALID, "backward: no forward pass to differentiate (call "
                        "forward first; a failed forward clears it)");
    m->grads_announced = 0;
    dga_status st = m->vt->backward(m);
    if (st != DGA_OK) return st;
    /* an architecture that announces nothing: the whole buffer is final now */
    if (m->grads_announced == 0) dga_model_grads_ready(m, 0, m->num_params);
    /* A count that is off means a range announced twice or never: a caller reducing the
     * ranges as they come would have sent a wrong or partial gradient. */
    if (m->grads_announced != m->num_params)
        return dga_fail(DGA_ERR_INVALID, "backward: the %s architecture announced %zu gradient "
                        "floats as final, but the model has %zu", m->vt->arch,
                        m->grads_announced, m->num_params);
    return DGA_OK;
}

const float *dga_model_seq_losses(const dga_model *m, int *B)
{
    *B = m->fwd_B;
    return m->fwd_B ? m->seq_loss : NULL;
}

dga_status dga_model_eval(dga_model *m, const int32_t *inputs, const int32_t *targets, int B,
                          int T, double *seq_nll, int *seq_count)
{
    dga_status st = check_batch(m, "eval", inputs, targets, B, T, 1, NULL);
    if (st != DGA_OK) return st;
    return m->vt->eval(m, inputs, targets, B, T, seq_nll, seq_count);
}

dga_status dga_model_jvp(dga_model *m, const int32_t *inputs, const int32_t *targets, int B,
                         int T, const float *tangent, double *loss, double *dloss)
{
    int n_valid = 0;
    dga_status st = check_batch(m, "jvp", inputs, targets, B, T, 1, &n_valid);
    if (st != DGA_OK) return st;
    if (!tangent) return dga_fail(DGA_ERR_INVALID, "jvp: tangent is NULL");
    return m->vt->jvp(m, inputs, targets, B, T, n_valid, tangent, loss, dloss);
}

dga_status dga_model_next_logits(dga_model *m, const int32_t *tokens, int n, float *logits)
{
    if (!logits) return dga_fail(DGA_ERR_INVALID, "next_logits: logits is NULL");
    dga_status st = check_batch(m, "next_logits", tokens, NULL, 1, n, 0, NULL);
    if (st != DGA_OK) return st;
    return m->vt->next_logits(m, tokens, n, logits);
}

dga_status dga_model_hidden_sum(dga_model *m, const int32_t *tokens, int n, float *out)
{
    if (!out) return dga_fail(DGA_ERR_INVALID, "hidden_sum: out is NULL");
    dga_status st = check_batch(m, "hidden_sum", tokens, NULL, 1, n, 0, NULL);
    if (st != DGA_OK) return st;
    return m->vt->hidden_sum(m, tokens, n, out);
}

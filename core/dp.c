/* Data-parallel backward (dp.h): the reduction rides on the grads_ready announcements. */
#include "dp.h"

#include "comm.h"

typedef struct {
    float *grads;
    float scale;
    dga_status st;   /* the first failure of a start */
} dp_ctx;

/* This rank's share of the global batch's mean: the one product both reductions apply. */
static void scale_range(float *g, size_t count, float scale)
{
    if (scale != 1.0f)
        for (size_t i = 0; i < count; i++) g[i] *= scale;
}

/* Called by the architecture as each range becomes final: scale it and start its sum. */
static void dp_grads_ready(void *ctx, size_t offset, size_t count)
{
    dp_ctx *c = ctx;
    float *g = c->grads + offset;
    scale_range(g, count, c->scale);
    dga_status st = dga_comm_reduce_start(g, count);
    if (st != DGA_OK && c->st == DGA_OK) c->st = st;
}

dga_status dga_dp_backward(dga_model *m, float scale)
{
    float *g = dga_model_grads(m);
    const size_t n = dga_model_num_params(m);
    /* an architecture announces at most one range per tensor in practice; more only waits */
    dga_status st = dga_comm_reduce_begin(n, (size_t)dga_model_num_tensors(m));
    if (st != DGA_OK) return st;
    dp_ctx c = {g, scale, DGA_OK};
    dga_grads_ready_fn prev = m->grads_ready;
    void *prev_ctx = m->grads_ready_ctx;
    dga_model_set_grads_ready(m, dp_grads_ready, &c);
    st = dga_model_backward(m);
    dga_model_set_grads_ready(m, prev, prev_ctx);
    if (st == DGA_OK) st = c.st;
    if (st != DGA_OK) return dga_comm_reduce_abandon(st);
    return dga_comm_reduce_finish(g, n, DGA_REDUCE_SUM);
}

dga_status dga_dp_allreduce(dga_model *m, float scale)
{
    float *g = dga_model_grads(m);
    const size_t n = dga_model_num_params(m);
    scale_range(g, n, scale);
    return dga_comm_allreduce(g, n, DGA_REDUCE_SUM);
}

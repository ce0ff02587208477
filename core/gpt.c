/* GPT-2 model: the tensor table, the arenas, and the block's forward, backward and tangent.
 * The kernels live in ops.c; this file wires them and owns all memory. */
#include "gpt.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_dnnl.h"
#include "ops.h"

/* A block's parameters by name. One per layer for each buffer in the parameter layout: the
 * parameters, the gradients, and the tangent of a dga_model_jvp. */
typedef struct {
    float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *attproj_w, *attproj_b;
    float *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
} gpt_layer;

/* The model's parameters by name inside one flat buffer. */
typedef struct {
    float *wte, *wpe, *lnf_w, *lnf_b;
    gpt_layer *h;                      /* [n_layer] */
} gpt_weights;

typedef enum { INIT_ZERO, INIT_ONE, INIT_NORMAL, INIT_RESIDUAL } gpt_init;

/* Shape entries: k > 0 is k * C; the vocabulary and the context are named. */
enum { DIM_NONE = 0, DIM_V = -1, DIM_CTX = -2 };

/* One parameter tensor: its checkpoint name, shape, place in the named view and init.
 * Decay: 0 none (biases, layernorms), 1 a matrix, 2 an embedding (a matrix too). */
typedef struct {
    const char *name;
    int rows, cols;                    /* cols DIM_NONE: 1-D */
    size_t field;                      /* offsetof in gpt_layer (block) or gpt_weights */
    gpt_init init;
    int decay;
} gpt_tensor_row;

#define TOP(f) offsetof(gpt_weights, f)
#define BLK(f) offsetof(gpt_layer, f)

static const gpt_tensor_row head_rows[] = {
    {"transformer.wte.weight", DIM_V, 1, TOP(wte), INIT_NORMAL, 2},
    {"transformer.wpe.weight", DIM_CTX, 1, TOP(wpe), INIT_NORMAL, 2},
};

/* The block, in Hugging Face's order inside transformer.h.N: adding a parameter to the block
 * is one row here (and its use in the block functions below). */
static const gpt_tensor_row block_rows[] = {
    {"ln_1.weight", 1, DIM_NONE, BLK(ln1_w), INIT_ONE, 0},
    {"ln_1.bias", 1, DIM_NONE, BLK(ln1_b), INIT_ZERO, 0},
    {"attn.c_attn.weight", 1, 3, BLK(qkv_w), INIT_NORMAL, 1},
    {"attn.c_attn.bias", 3, DIM_NONE, BLK(qkv_b), INIT_ZERO, 0},
    {"attn.c_proj.weight", 1, 1, BLK(attproj_w), INIT_RESIDUAL, 1},
    {"attn.c_proj.bias", 1, DIM_NONE, BLK(attproj_b), INIT_ZERO, 0},
    {"ln_2.weight", 1, DIM_NONE, BLK(ln2_w), INIT_ONE, 0},
    {"ln_2.bias", 1, DIM_NONE, BLK(ln2_b), INIT_ZERO, 0},
    {"mlp.c_fc.weight", 1, 4, BLK(fc_w), INIT_NORMAL, 1},
    {"mlp.c_fc.bias", 4, DIM_NONE, BLK(fc_b), INIT_ZERO, 0},
    {"mlp.c_proj.weight", 4, 1, BLK(fcproj_w), INIT_RESIDUAL, 1},
    {"mlp.c_proj.bias", 1, DIM_NONE, BLK(fcproj_b), INIT_ZERO, 0},
};

static const gpt_tensor_row tail_rows[] = {
    {"transformer.ln_f.weight", 1, DIM_NONE, TOP(lnf_w), INIT_ONE, 0},
    {"transformer.ln_f.bias", 1, DIM_NONE, TOP(lnf_b), INIT_ZERO, 0},
};

#define N_HEAD (sizeof head_rows / sizeof head_rows[0])
#define N_BLOCK (sizeof block_rows / sizeof block_rows[0])
#define N_TAIL (sizeof tail_rows / sizeof tail_rows[0])

/* Activations of one block. Training keeps one set per layer for backward; inference and the
 * forward-mode pass point every layer at the same buffers (att_stride 0, no LN statistics). */
typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd;  /* [N,C], [N], [N] */
    float *qkv;                        /* [N,3C] */
    float *att;                        /* [B,NH,T,T] softmax probabilities, or one [T,T] */
    int    keep_att;                   /* att holds every head (for backward) */
    float *atty;                       /* [N,C] attention output before c_proj */
    float *res2;                       /* [N,C] residual after attention */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fchg;                 /* [N,4C] before / after GELU (may alias) */
    float *res3;                       /* [N,C] residual after the MLP = block output */
} gpt_acts;

/* The final layernorm's output and statistics. */
typedef struct {
    float *out, *mean, *rstd;
} gpt_final;

typedef struct {
    dga_model base;                    /* first: a gpt * is a dga_model * */
    dga_gpt_config cfg;
    dga_tensor_info *tensors;
    gpt_init *init;                    /* per tensor */
    gpt_weights w, g, u;               /* params, grads, the current tangent */

    /* training arena */
    float *arena;
    float *x0;                         /* [N,C] embeddings */
    gpt_acts *acts;                    /* [n_layer] */
    gpt_final lnf;
    float *logits;                     /* [N,V]; holds dlogits after forward */
    float *row_loss;                   /* [N] NLL of each position (0 where ignored) */
    float *dres, *dtmp, *dbig, *datt;  /* backward scratch: [N,C], [N,C], [N,4C], [T,T] */
    int32_t *inputs;                   /* copy of the last forward's inputs */
    int fwd_T;

    /* inference arena (eval, next_logits, hidden_sum, the primal of jvp) */
    float *iarena;
    gpt_acts infer;
    gpt_final ilnf;
    float *igather, *ilogits;
    int irows;                         /* rows of the lm-head chunk (igather, ilogits) */

    /* tangent arena (jvp), allocated by the first jvp, then reused */
    float *tarena;
    float *tx, *tln, *tqkv, *tatty, *tfch, *tmean, *trstd, *tatt, *tgather, *tlogits;

    /* precision of the linear layers' and the head's products (gemm_dnnl.h); mm is NULL for
     * fp32 (OpenBLAS) */
    dga_precision prec;
    dga_dnnl *mm;
} gpt;

static const dga_model_vtable gpt_vtable;

/* ---------------------------------------------------------------- configuration, layout */

dga_status dga_gpt_config_check(const dga_gpt_config *cfg)
{
    if (!cfg) return dga_fail(DGA_ERR_INVALID, "gpt config: NULL");
    struct { const char *name; int v, max; } f[] = {
        {"layers", cfg->n_layer, 1024},  {"heads", cfg->n_head, 4096},
        {"width", cfg->n_embd, 65536},   {"context", cfg->n_ctx, 1 << 20},
        {"vocab", cfg->vocab_size, 1 << 24},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < 1 || f[i].v > f[i].max)
            return dga_fail(DGA_ERR_INVALID, "gpt config: %s = %d, expected 1..%d", f[i].name,
                            f[i].v, f[i].max);
    if (cfg->n_embd % cfg->n_head != 0)
        return dga_fail(DGA_ERR_INVALID,
                        "gpt config: width %d is not a multiple of heads %d", cfg->n_embd,
                        cfg->n_head);
    return DGA_OK;
}

static int dim(const dga_gpt_config *c, int d)
{
    return d == DIM_V ? c->vocab_size : d == DIM_CTX ? c->n_ctx : d * c->n_embd;
}

static void add_tensor(gpt *m, size_t *off, const gpt_tensor_row *r, const char *name)
{
    dga_tensor_info *t = &m->tensors[m->base.n_tensors];
    m->init[m->base.n_tensors++] = r->init;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->offset = *off;
    t->ndim = r->cols != DIM_NONE ? 2 : 1;
    t->shape[0] = dim(&m->cfg, r->rows);
    t->shape[1] = r->cols != DIM_NONE ? dim(&m->cfg, r->cols) : 0;
    t->numel = (size_t)t->shape[0] * (size_t)(t->ndim == 2 ? t->shape[1] : 1);
    t->is_matrix = r->decay != 0;
    t->is_embedding = r->decay == 2;
    *off += t->numel;
}

/* The tensor list from the three tables: wte, wpe, the blocks, ln_f. */
static void build_layout(gpt *m)
{
    size_t off = 0;
    char name[64];
    for (size_t j = 0; j < N_HEAD; j++) add_tensor(m, &off, &head_rows[j], head_rows[j].name);
    for (int l = 0; l < m->cfg.n_layer; l++)
        for (size_t j = 0; j < N_BLOCK; j++) {
            snprintf(name, sizeof name, "transformer.h.%d.%s", l, block_rows[j].name);
            add_tensor(m, &off, &block_rows[j], name);
        }
    for (size_t j = 0; j < N_TAIL; j++) add_tensor(m, &off, &tail_rows[j], tail_rows[j].name);
    m->base.num_params = off;
}

/* Points the named view v at buffer base (params, grads or a tangent), in table order. */
static void fill_view(const gpt *m, float *base, gpt_weights *v)
{
    const dga_tensor_info *t = m->tensors;
    for (size_t j = 0; j < N_HEAD; j++, t++)
        *(float **)((char *)v + head_rows[j].field) = base + t->offset;
    for (int l = 0; l < m->cfg.n_layer; l++)
        for (size_t j = 0; j < N_BLOCK; j++, t++)
            *(float **)((char *)&v->h[l] + block_rows[j].field) = base + t->offset;
    for (size_t j = 0; j < N_TAIL; j++, t++)
        *(float **)((char *)v + tail_rows[j].field) = base + t->offset;
}

/* ---------------------------------------------------------------- arenas */

enum { ARENA_TRAIN, ARENA_INFER, ARENA_TANGENT };

/* Carves one of the three arenas; with base NULL it only counts floats. */
static size_t carve(gpt *m, float *base, int which)
{
    const size_t C = m->cfg.n_embd, V = m->cfg.vocab_size, T = m->cfg.n_ctx;
    const size_t N = (size_t)m->base.max_batch * T, NH = m->cfg.n_head;
    size_t off = 0;
#define TAKE(ptr, count)                           \
    do {                                           \
        if (base) (ptr) = base + off;              \
        off += ((count) + 15) & ~(size_t)15;       \
    } while (0)
    if (which == ARENA_TRAIN) {
        TAKE(m->x0, N * C);
        for (int l = 0; l < m->cfg.n_layer; l++) {
            gpt_acts *a = &m->acts[l];
            TAKE(a->ln1, N * C);
            TAKE(a->ln1_mean, N);
            TAKE(a->ln1_rstd, N);
            TAKE(a->qkv, N * 3 * C);
            TAKE(a->att, (size_t)m->base.max_batch * NH * T * T);
            TAKE(a->atty, N * C);
            TAKE(a->res2, N * C);
            TAKE(a->ln2, N * C);
            TAKE(a->ln2_mean, N);
            TAKE(a->ln2_rstd, N);
            TAKE(a->fch, N * 4 * C);
            TAKE(a->fchg, N * 4 * C);
            TAKE(a->res3, N * C);
            a->keep_att = 1;
        }
        TAKE(m->lnf.out, N * C);
        TAKE(m->lnf.mean, N);
        TAKE(m->lnf.rstd, N);
        TAKE(m->logits, N * V);
        TAKE(m->row_loss, N);
        TAKE(m->base.seq_loss, (size_t)m->base.max_batch);
        TAKE(m->dres, N * C);
        TAKE(m->dtmp, N * C);
        TAKE(m->dbig, N * 4 * C);
        TAKE(m->datt, T * T);
    } else if (which == ARENA_INFER) {
        /* One block's worth, reused layer after layer: the block output res3 is the next
         * block's input, the layernorm outputs share a buffer, GELU runs in place. */
        gpt_acts *a = &m->infer;
        TAKE(a->res3, N * C);
        TAKE(a->ln1, N * C);
        TAKE(a->qkv, N * 3 * C);
        TAKE(a->att, T * T);
        TAKE(a->atty, N * C);
        TAKE(a->res2, N * C);
        TAKE(a->fch, N * 4 * C);
        TAKE(m->igather, (size_t)m->irows * C);
        TAKE(m->ilogits, (size_t)m->irows * V);
        if (base) {
            a->ln2 = m->ilnf.out = a->ln1;
            a->fchg = a->fch;
            a->keep_att = 0;
        }
    } else {
        TAKE(m->tx, N * C);
        TAKE(m->tln, N * C);
        TAKE(m->tqkv, N * 3 * C);
        TAKE(m->tatty, N * C);
        TAKE(m->tfch, N * 4 * C);
        TAKE(m->tmean, N);
        TAKE(m->trstd, N);
        TAKE(m->tatt, 2 * T * T);
        TAKE(m->tgather, (size_t)m->irows * C);
        TAKE(m->tlogits, (size_t)m->irows * V);
    }
#undef TAKE
    return off;
}

static float *new_arena(gpt *m, int which)
{
    float *a = calloc(carve(m, NULL, which), sizeof(float));
    if (a) carve(m, a, which);
    return a;
}

static void gpt_destroy(dga_model *base)
{
    gpt *m = (gpt *)base;
    free(m->base.params);
    free(m->base.grads);
    free(m->tensors);
    free(m->init);
    free(m->w.h);
    free(m->g.h);
    free(m->u.h);
    free(m->acts);
    free(m->arena);
    free(m->iarena);
    free(m->tarena);
    free(m->inputs);
    dga_dnnl_free(m->mm);
    free(m);
}

dga_status dga_gpt_create(const dga_gpt_config *cfg, int max_batch, dga_model **out)
{
    if (!out) return dga_fail(DGA_ERR_INVALID, "dga_gpt_create: out is NULL");
    *out = NULL;
    dga_status st = dga_gpt_config_check(cfg);
    if (st != DGA_OK) return st;
    if (max_batch < 1 || max_batch > 1 << 20)
        return dga_fail(DGA_ERR_INVALID, "gpt: batch = %d, expected 1..%d", max_batch, 1 << 20);
    /* row counts go to cblas_sgemm as int */
    if ((size_t)max_batch * (size_t)cfg->n_ctx > (size_t)(INT_MAX / 4))
        return dga_fail(DGA_ERR_INVALID, "gpt: batch %d x context %d = %zu rows, at most %d",
                        max_batch, cfg->n_ctx, (size_t)max_batch * (size_t)cfg->n_ctx,
                        INT_MAX / 4);
    gpt *m = calloc(1, sizeof *m);
    if (!m) return dga_fail(DGA_ERR_NOMEM, "gpt: cannot allocate the model");
    const size_t L = (size_t)cfg->n_layer, n_tensors = N_HEAD + N_BLOCK * L + N_TAIL;
    const size_t N = (size_t)max_batch * cfg->n_ctx;
    m->cfg = *cfg;
    m->base.vt = &gpt_vtable;
    m->base.max_batch = max_batch;
    m->base.n_ctx = cfg->n_ctx;
    m->base.vocab_size = cfg->vocab_size;
    m->base.width = cfg->n_embd;
    m->irows = N < 256 ? (int)N : 256;
    m->tensors = calloc(n_tensors, sizeof *m->tensors);
    m->init = calloc(n_tensors, sizeof *m->init);
    m->w.h = calloc(L, sizeof(gpt_layer));
    m->g.h = calloc(L, sizeof(gpt_layer));
    m->u.h = calloc(L, sizeof(gpt_layer));
    m->acts = calloc(L, sizeof *m->acts);
    if (!m->tensors || !m->init || !m->w.h || !m->g.h || !m->u.h || !m->acts) {
        gpt_destroy(&m->base);
        return dga_fail(DGA_ERR_NOMEM, "gpt: cannot allocate the model");
    }
    build_layout(m);
    m->base.tensors = m->tensors;
    m->base.params = calloc(m->base.num_params, sizeof(float));
    m->base.grads = calloc(m->base.num_params, sizeof(float));
    m->inputs = calloc(N, sizeof(int32_t));
    m->arena = new_arena(m, ARENA_TRAIN);
    m->iarena = new_arena(m, ARENA_INFER);
    if (!m->base.params || !m->base.grads || !m->inputs || !m->arena || !m->iarena) {
        size_t mb = (m->base.num_params * 2 + carve(m, NULL, ARENA_TRAIN) +
                     carve(m, NULL, ARENA_INFER)) * sizeof(float) >> 20;
        gpt_destroy(&m->base);
        return dga_fail(DGA_ERR_NOMEM,
                        "gpt: cannot allocate %zu MiB for parameters and activations (batch %d "
                        "x context %d)", mb, max_batch, cfg->n_ctx);
    }
    fill_view(m, m->base.params, &m->w);
    fill_view(m, m->base.grads, &m->g);
    *out = &m->base;
    return DGA_OK;
}

const dga_gpt_config *dga_gpt_get_config(const dga_model *m)
{
    return m && m->vt == &gpt_vtable ? &((const gpt *)m)->cfg : NULL;
}

dga_status dga_gpt_set_precision(dga_model *base, dga_precision p, const char **note)
{
    if (note) *note = NULL;
    if (!dga_gpt_get_config(base))
        return dga_fail(DGA_ERR_INVALID, "precision: not a GPT model");
    if (p != DGA_PREC_FP32 && p != DGA_PREC_BF16 && p != DGA_PREC_FP32_ONEDNN)
        return dga_fail(DGA_ERR_INVALID, "precision: unknown value %d", (int)p);
    gpt *m = (gpt *)base;
    dga_precision eff = dga_dnnl_effective(p, note);
    if (eff == m->prec) return DGA_OK;
    dga_dnnl *mm = NULL;
    if (eff != DGA_PREC_FP32) {
        dga_status st = dga_dnnl_create(eff, &mm);
        if (st == DGA_OK) st = dga_dnnl_mirror(mm, base->params, base->num_params);
        if (st != DGA_OK) {
            dga_dnnl_free(mm);
            return st;
        }
        /* a backward right after this (the forward ran in the old precision) reads the copy */
        dga_dnnl_mirror_refresh(mm, 0, base->num_params);
    }
    dga_dnnl_free(m->mm);
    m->mm = mm;
    m->prec = eff;
    return DGA_OK;
}

dga_precision dga_gpt_precision(const dga_model *m)
{
    return dga_gpt_get_config(m) ? ((const gpt *)m)->prec : DGA_PREC_FP32;
}

static void gpt_init_weights(dga_model *base, dga_rng *rng)
{
    gpt *m = (gpt *)base;
    const double std = 0.02, std_proj = 0.02 / sqrt(2.0 * m->cfg.n_layer);
    for (int i = 0; i < base->n_tensors; i++) {
        const dga_tensor_info *t = &m->tensors[i];
        float *p = base->params + t->offset;
        if (m->init[i] == INIT_NORMAL || m->init[i] == INIT_RESIDUAL) {
            double s = m->init[i] == INIT_RESIDUAL ? std_proj : std;
            for (size_t j = 0; j < t->numel; j++) p[j] = (float)(s * dga_rng_normal(rng));
        } else {
            float v = m->init[i] == INIT_ONE ? 1.0f : 0.0f;
            for (size_t j = 0; j < t->numel; j++) p[j] = v;
        }
    }
}

double dga_gpt_flops_per_token(const dga_gpt_config *cfg, int T)
{
    double C = cfg->n_embd, L = cfg->n_layer, V = cfg->vocab_size;
    double params_no_wpe = V * C + L * (12.0 * C * C + 13.0 * C) + 2.0 * C;
    return 6.0 * params_no_wpe + 12.0 * L * T * C;
}

static double gpt_flops_per_token(const dga_model *m, int T)
{
    return dga_gpt_flops_per_token(&((const gpt *)m)->cfg, T);
}

/* ---------------------------------------------------------------- the block */

/* res3 = res2 + c_proj(gelu(c_fc(ln_2(res2)))),  res2 = x + c_proj(attn(c_attn(ln_1(x)))) */
static void block_forward(const gpt *m, const gpt_layer *w, gpt_acts *a, const float *x, int B,
                          int T)
{
    const int C = m->cfg.n_embd, NH = m->cfg.n_head;
    const size_t N = (size_t)B * T;
    dga_op_layernorm_fwd(a->ln1, a->ln1_mean, a->ln1_rstd, x, w->ln1_w, w->ln1_b, N, C);
    dga_op_linear_fwd_mm(m->mm, a->qkv, a->ln1, w->qkv_w, w->qkv_b, N, C, 3 * C);
    dga_op_attention_fwd(a->atty, a->att, a->keep_att ? (size_t)T * T : 0, a->qkv, B, T, C,
                         NH);
    dga_op_linear_fwd_mm(m->mm, a->res2, a->atty, w->attproj_w, w->attproj_b, N, C, C);
    dga_op_residual_fwd(a->res2, a->res2, x, N * C);
    dga_op_layernorm_fwd(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w->ln2_w, w->ln2_b, N, C);
    dga_op_linear_fwd_mm(m->mm, a->fch, a->ln2, w->fc_w, w->fc_b, N, C, 4 * C);
    dga_op_gelu_fwd(a->fchg, a->fch, N * 4 * C);
    dga_op_linear_fwd_mm(m->mm, a->res3, a->fchg, w->fcproj_w, w->fcproj_b, N, 4 * C, C);
    dga_op_residual_fwd(a->res3, a->res3, a->res2, N * C);
}

/* On entry m->dres holds d res3; on return d x (the block's input). */
static void block_backward(gpt *m, const gpt_layer *w, gpt_layer *g, const gpt_acts *a,
                           const float *x, int B, int T)
{
    const int C = m->cfg.n_embd, NH = m->cfg.n_head;
    const size_t N = (size_t)B * T;
    dga_op_linear_bwd_mm(m->mm, m->dbig, g->fcproj_w, g->fcproj_b, m->dres, a->fchg,
                         w->fcproj_w, N, 4 * C, C);
    dga_op_gelu_bwd(m->dbig, a->fch, m->dbig, N * 4 * C);
    dga_op_linear_bwd_mm(m->mm, m->dtmp, g->fc_w, g->fc_b, m->dbig, a->ln2, w->fc_w, N, C,
                         4 * C);
    dga_op_layernorm_bwd(m->dres, g->ln2_w, g->ln2_b, m->dtmp, a->res2, w->ln2_w, a->ln2_mean,
                         a->ln2_rstd, N, C);
    /* dres is d res2 here */
    dga_op_linear_bwd_mm(m->mm, m->dtmp, g->attproj_w, g->attproj_b, m->dres, a->atty,
                         w->attproj_w, N, C, C);
    dga_op_attention_bwd(m->dbig, m->datt, m->dtmp, a->qkv, a->att, B, T, C, NH);
    dga_op_linear_bwd_mm(m->mm, m->dtmp, g->qkv_w, g->qkv_b, m->dbig, a->ln1, w->qkv_w, N, C,
                         3 * C);
    dga_op_layernorm_bwd(m->dres, g->ln1_w, g->ln1_b, m->dtmp, x, w->ln1_w, a->ln1_mean,
                         a->ln1_rstd, N, C);
}

/* The block and its tangent, op by op, on the inference buffers (primal) and the tangent
 * arena: each tangent rule needs the primal values of its own op only, so one block's worth
 * of both is all that is ever held. x / tx: the block's input and its tangent, updated in
 * place to the output. */
static void block_jvp(gpt *m, const gpt_layer *w, const gpt_layer *u, int B, int T)
{
    const int C = m->cfg.n_embd, NH = m->cfg.n_head;
    const size_t N = (size_t)B * T;
    gpt_acts *a = &m->infer;
    float *x = a->res3, *ln = a->ln1;
    dga_op_layernorm_fwd(ln, m->tmean, m->trstd, x, w->ln1_w, w->ln1_b, N, C);
    dga_op_layernorm_jvp(m->tln, x, m->tx, w->ln1_w, u->ln1_w, u->ln1_b, m->tmean, m->trstd, N,
                         C);
    dga_op_linear_fwd(a->qkv, ln, w->qkv_w, w->qkv_b, N, C, 3 * C);
    dga_op_linear_jvp(m->tqkv, ln, m->tln, w->qkv_w, u->qkv_w, u->qkv_b, N, C, 3 * C);
    dga_op_attention_jvp(a->atty, m->tatty, m->tatt, a->qkv, m->tqkv, B, T, C, NH);
    dga_op_linear_fwd(ln, a->atty, w->attproj_w, w->attproj_b, N, C, C);
    dga_op_linear_jvp(m->tln, a->atty, m->tatty, w->attproj_w, u->attproj_w, u->attproj_b, N, C,
                      C);
    dga_op_residual_fwd(x, x, ln, N * C);
    dga_op_residual_jvp(m->tx, m->tx, m->tln, N * C);
    dga_op_layernorm_fwd(ln, m->tmean, m->trstd, x, w->ln2_w, w->ln2_b, N, C);
    dga_op_layernorm_jvp(m->tln, x, m->tx, w->ln2_w, u->ln2_w, u->ln2_b, m->tmean, m->trstd, N,
                         C);
    dga_op_linear_fwd(a->fch, ln, w->fc_w, w->fc_b, N, C, 4 * C);
    dga_op_linear_jvp(m->tfch, ln, m->tln, w->fc_w, u->fc_w, u->fc_b, N, C, 4 * C);
    /* the tangent first: it needs the pre-activation the in-place GELU overwrites */
    dga_op_gelu_jvp(m->tfch, a->fch, m->tfch, N * 4 * C);
    dga_op_gelu_fwd(a->fch, a->fch, N * 4 * C);
    dga_op_linear_fwd(ln, a->fch, w->fcproj_w, w->fcproj_b, N, 4 * C, C);
    dga_op_linear_jvp(m->tln, a->fch, m->tfch, w->fcproj_w, u->fcproj_w, u->fcproj_b, N, 4 * C,
                      C);
    dga_op_residual_fwd(x, x, ln, N * C);
    dga_op_residual_jvp(m->tx, m->tx, m->tln, N * C);
}

/* ---------------------------------------------------------------- the trunk */

/* The first failure of a oneDNN product since the last call (the kernels are void). */
static dga_status products_status(gpt *m)
{
    return m->mm ? dga_dnnl_take_status(m->mm) : DGA_OK;
}

/* Embedding, blocks and final layernorm, shared by training (activations kept per layer) and
 * inference (one block's buffers reused). Returns the final layernorm's output [B*T, C]. */
static const float *trunk_forward(gpt *m, const int32_t *inputs, int B, int T, int train)
{
    const int C = m->cfg.n_embd;
    float *x0 = train ? m->x0 : m->infer.res3;
    gpt_final *f = train ? &m->lnf : &m->ilnf;
    /* the bf16 copy of the weights, once per forward; backward reads the same copy */
    if (m->mm) dga_dnnl_mirror_refresh(m->mm, 0, m->base.num_params);
    dga_op_embed_fwd(x0, inputs, m->w.wte, m->w.wpe, B, T, C);
    const float *x = x0;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        gpt_acts *a = train ? &m->acts[l] : &m->infer;
        block_forward(m, &m->w.h[l], a, x, B, T);
        x = a->res3;
    }
    dga_op_layernorm_fwd(f->out, f->mean, f->rstd, x, m->w.lnf_w, m->w.lnf_b, (size_t)B * T, C);
    return f->out;
}

static dga_status gpt_forward(dga_model *base, const int32_t *inputs, const int32_t *targets,
                              int B, int T, int n_valid, float *loss)
{
    gpt *m = (gpt *)base;
    const int V = m->cfg.vocab_size;
    const size_t N = (size_t)B * T;
    memcpy(m->inputs, inputs, N * sizeof *inputs);
    const float *h = trunk_forward(m, inputs, B, T, 1);
    dga_op_lmhead_fwd_mm(m->mm, m->logits, h, m->w.wte, N, m->cfg.n_embd, V);
    /* The loss is a mean over valid targets, so its gradient w.r.t. the logits is known
     * now: the fused kernel leaves dlogits in place of the logits. */
    float dscale = n_valid > 0 ? 1.0f / (float)n_valid : 0.0f;
    double total = dga_op_xent_fwd_bwd(m->logits, m->row_loss, targets, N, V, dscale);
    if (loss) *loss = n_valid > 0 ? (float)(total / n_valid) : 0.0f;
    for (int b = 0; b < B; b++) {
        double s = 0;
        int n = 0;
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            s += m->row_loss[i];
            n += targets[i] != DGA_IGNORE;
        }
        base->seq_loss[b] = n > 0 ? (float)(s / n) : 0.0f;
    }
    m->fwd_T = T;
    return products_status(m);
}

/* Tells the caller of backward that tensors first .. first + count - 1 (adjacent in the
 * layout, so one range) are final. */
static void announce_tensors(gpt *m, size_t first, size_t count)
{
    const dga_tensor_info *a = &m->tensors[first], *z = &m->tensors[first + count - 1];
    dga_model_grads_ready(&m->base, a->offset, z->offset + z->numel - a->offset);
}

static dga_status gpt_backward(dga_model *base)
{
    gpt *m = (gpt *)base;
    const int B = base->fwd_B, T = m->fwd_T, L = m->cfg.n_layer;
    const int C = m->cfg.n_embd, V = m->cfg.vocab_size;
    const size_t N = (size_t)B * T;
    const float *x_last = L > 0 ? m->acts[L - 1].res3 : m->x0;
    dga_op_lmhead_bwd_mm(m->mm, m->dtmp, m->g.wte, m->logits, m->lnf.out, m->w.wte, N, C, V);
    memset(m->dres, 0, N * C * sizeof(float));
    dga_op_layernorm_bwd(m->dres, m->g.lnf_w, m->g.lnf_b, m->dtmp, x_last, m->w.lnf_w,
                         m->lnf.mean, m->lnf.rstd, N, C);
    /* Each range as soon as it is final (dga_model_backward). Not wte: the head is tied,
     * and the embedding's gradient goes into it last. */
    announce_tensors(m, N_HEAD + (size_t)L * N_BLOCK, N_TAIL);
    for (int l = L - 1; l >= 0; l--) {
        block_backward(m, &m->w.h[l], &m->g.h[l], &m->acts[l], l > 0 ? m->acts[l - 1].res3 : m->x0,
                       B, T);
        announce_tensors(m, N_HEAD + (size_t)l * N_BLOCK, N_BLOCK);
    }
    dga_op_embed_bwd(m->g.wte, m->g.wpe, m->dres, m->inputs, B, T, C);
    announce_tensors(m, 0, N_HEAD);
    return products_status(m);
}

/* ---------------------------------------------------------------- inference */

static dga_status gpt_hidden_sum(dga_model *base, const int32_t *tokens, int n, float *out)
{
    gpt *m = (gpt *)base;
    const int C = m->cfg.n_embd;
    const float *h = trunk_forward(m, tokens, 1, n, 0);
    for (int t = 0; t < n; t++)
        for (int c = 0; c < C; c++) out[c] += h[(size_t)t * C + c];
    return products_status(m);
}

/* The next chunk of positions that have a target, scanning from *cursor: at most irows of
 * them, their final-layernorm rows gathered into igather and, when tangent is given (the
 * tangent arena's tln), their tangents into tgather; rows[] gets their positions. Returns
 * how many (0 once the targets are exhausted). The lm head then runs on the gathered rows
 * only: MMLU scoring has one target per sequence. */
static int gather_target_rows(gpt *m, const int32_t *targets, size_t N, size_t *cursor,
                              const float *tangent, size_t *rows)
{
    const size_t C = (size_t)m->cfg.n_embd;
    int k = 0;
    size_t i = *cursor;
    for (; i < N && k < m->irows; i++) {
        if (targets[i] == DGA_IGNORE) continue;
        memcpy(m->igather + k * C, m->ilnf.out + i * C, C * sizeof(float));
        if (tangent) memcpy(m->tgather + k * C, tangent + i * C, C * sizeof(float));
        rows[k++] = i;
    }
    *cursor = i;
    return k;
}

static dga_status gpt_eval(dga_model *base, const int32_t *inputs, const int32_t *targets,
                           int B, int T, double *seq_nll, int *seq_count)
{
    gpt *m = (gpt *)base;
    const int C = m->cfg.n_embd, V = m->cfg.vocab_size;
    const size_t N = (size_t)B * T;
    for (int b = 0; b < B; b++) {
        if (seq_nll) seq_nll[b] = 0.0;
        if (seq_count) seq_count[b] = 0;
    }
    trunk_forward(m, inputs, B, T, 0);
    size_t row[256];
    size_t i = 0;
    for (int k; (k = gather_target_rows(m, targets, N, &i, NULL, row)) > 0;) {
        dga_op_lmhead_fwd_mm(m->mm, m->ilogits, m->igather, m->w.wte, (size_t)k, C, V);
        for (int r = 0; r < k; r++) {
            double nll = dga_op_xent_row(m->ilogits + (size_t)r * V, V, targets[row[r]]);
            size_t b = row[r] / T;
            if (seq_nll) seq_nll[b] += nll;
            if (seq_count) seq_count[b]++;
        }
    }
    return products_status(m);
}

static dga_status gpt_next_logits(dga_model *base, const int32_t *tokens, int n, float *logits)
{
    gpt *m = (gpt *)base;
    const int C = m->cfg.n_embd;
    const float *h = trunk_forward(m, tokens, 1, n, 0);
    dga_op_lmhead_fwd_mm(m->mm, logits, h + (size_t)(n - 1) * C, m->w.wte, 1, C,
                         m->cfg.vocab_size);
    return products_status(m);
}

/* ---------------------------------------------------------------- forward mode */

/* The inference trunk and lm head interleaved with their tangents (block_jvp). */
static dga_status gpt_jvp(dga_model *base, const int32_t *inputs, const int32_t *targets, int B,
                          int T, int n_valid, const float *tangent, double *loss, double *dloss)
{
    gpt *m = (gpt *)base;
    if (!m->tarena && !(m->tarena = new_arena(m, ARENA_TANGENT)))
        return dga_fail(DGA_ERR_NOMEM, "jvp: cannot allocate %zu MiB for the tangent "
                        "activations (batch %d x context %d)",
                        carve(m, NULL, ARENA_TANGENT) * sizeof(float) >> 20, base->max_batch,
                        m->cfg.n_ctx);
    const int C = m->cfg.n_embd, V = m->cfg.vocab_size;
    const size_t N = (size_t)B * T;
    const gpt_weights *w = &m->w, *u = &m->u;
    fill_view(m, (float *)tangent, &m->u);   /* only read through u */

    float *x = m->infer.res3, *ln = m->ilnf.out;
    dga_op_embed_fwd(x, inputs, w->wte, w->wpe, B, T, C);
    dga_op_embed_jvp(m->tx, inputs, u->wte, u->wpe, B, T, C);
    for (int l = 0; l < m->cfg.n_layer; l++) block_jvp(m, &w->h[l], &u->h[l], B, T);
    dga_op_layernorm_fwd(ln, m->tmean, m->trstd, x, w->lnf_w, w->lnf_b, N, C);
    dga_op_layernorm_jvp(m->tln, x, m->tx, w->lnf_w, u->lnf_w, u->lnf_b, m->tmean, m->trstd, N,
                         C);

    /* Lm head and loss on the rows with a target only, irows at a time (as in eval); the
     * head is tied, so the wte tangent enters here a second time. */
    const float dscale = n_valid > 0 ? 1.0f / (float)n_valid : 0.0f;
    double total = 0.0, dtotal = 0.0;
    int32_t tg[256];
    size_t row[256], i = 0;
    for (int k; (k = gather_target_rows(m, targets, N, &i, m->tln, row)) > 0;) {
        for (int r = 0; r < k; r++) tg[r] = targets[row[r]];
        dga_op_lmhead_fwd(m->ilogits, m->igather, w->wte, (size_t)k, C, V);
        dga_op_lmhead_jvp(m->tlogits, m->igather, m->tgather, w->wte, u->wte, (size_t)k, C, V);
        double d = 0.0;
        total += dga_op_xent_jvp(m->ilogits, m->tlogits, tg, (size_t)k, V, dscale, &d);
        dtotal += d;
    }
    if (loss) *loss = n_valid > 0 ? total / n_valid : 0.0;
    if (dloss) *dloss = dtotal;
    return DGA_OK;
}

static const dga_model_vtable gpt_vtable = {
    .arch = "gpt2",
    .forward = gpt_forward,
    .backward = gpt_backward,
    .eval = gpt_eval,
    .jvp = gpt_jvp,
    .next_logits = gpt_next_logits,
    .hidden_sum = gpt_hidden_sum,
    .init_weights = gpt_init_weights,
    .flops_per_token = gpt_flops_per_token,
    .destroy = gpt_destroy,
};

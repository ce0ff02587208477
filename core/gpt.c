/* GPT-2 model: parameter layout, activation arena, forward, backward, inference paths.
 * The kernels live in ops.c; this file wires them and owns all memory. */
#include "gpt.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* Per-layer tensors, in Hugging Face's order inside transformer.h.N */
enum {
    LN1_W, LN1_B, QKV_W, QKV_B, APROJ_W, APROJ_B, LN2_W, LN2_B, FC_W, FC_B, FPROJ_W, FPROJ_B,
    PER_LAYER
};

/* Activations of one block kept for backward. */
typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd;  /* [N,C], [N], [N] */
    float *qkv;                        /* [N,3C] */
    float *att;                        /* [B,NH,T,T] softmax probabilities */
    float *atty;                       /* [N,C] attention output before c_proj */
    float *res2;                       /* [N,C] residual after attention */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fchg;                 /* [N,4C] before / after GELU */
    float *res3;                       /* [N,C] residual after the MLP = block output */
} layer_acts;

struct dga_gpt {
    dga_gpt_config cfg;
    int max_batch;
    size_t num_params;
    float *params, *grads;
    int n_tensors;
    dga_tensor_info *tensors;

    /* training arena */
    float *arena;
    float *x0;                         /* [N,C] embeddings */
    layer_acts *layers;
    float *lnf, *lnf_mean, *lnf_rstd;
    float *logits;                     /* [N,V]; holds dlogits after forward */
    float *dres, *dtmp, *dbig, *datt;  /* backward scratch: [N,C], [N,C], [N,4C], [T,T] */
    int32_t *inputs;                   /* copy of the last forward's inputs */
    int fwd_B, fwd_T;                  /* 0 until a forward succeeded */

    /* inference arena (eval, next_logits): one block's worth, reused layer after layer */
    float *iarena;
    float *ix, *iln, *iqkv, *iatt, *iatty, *ifch, *igather, *ilogits;
    int irows;                         /* rows of the lm-head chunk (igather, ilogits) */

    /* tangent arena (dga_gpt_jvp), the mirror of the inference arena plus LN statistics and
     * the attention scratch; allocated by the first dga_gpt_jvp, then reused */
    float *tarena;
    float *tx, *tln, *tqkv, *tatty, *tfch, *tmean, *trstd, *tatt, *tgather, *tlogits;
};

static float *tensor_ptr(const dga_gpt *m, float *base, int idx)
{
    return base + m->tensors[idx].offset;
}

static float *layer_ptr(const dga_gpt *m, float *base, int l, int which)
{
    return tensor_ptr(m, base, 2 + l * PER_LAYER + which);
}

/* ---------------------------------------------------------------- configuration */

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

static void add_tensor(dga_gpt *m, size_t *off, const char *name, int d0, int d1, int matrix)
{
    dga_tensor_info *t = &m->tensors[m->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->offset = *off;
    t->ndim = d1 > 0 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1 > 0 ? d1 : 0;
    t->numel = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    t->is_matrix = matrix;
    *off += t->numel;
}

static void build_layout(dga_gpt *m)
{
    const int C = m->cfg.n_embd;
    size_t off = 0;
    char name[64];
    add_tensor(m, &off, "transformer.wte.weight", m->cfg.vocab_size, C, 1);
    add_tensor(m, &off, "transformer.wpe.weight", m->cfg.n_ctx, C, 1);
    m->tensors[0].is_embedding = m->tensors[1].is_embedding = 1;
    static const struct { const char *suffix; int rows, cols, matrix; } lt[PER_LAYER] = {
        /* rows/cols in units of C; cols 0 = 1-D */
        {"ln_1.weight", 1, 0, 0},       {"ln_1.bias", 1, 0, 0},
        {"attn.c_attn.weight", 1, 3, 1}, {"attn.c_attn.bias", 3, 0, 0},
        {"attn.c_proj.weight", 1, 1, 1}, {"attn.c_proj.bias", 1, 0, 0},
        {"ln_2.weight", 1, 0, 0},       {"ln_2.bias", 1, 0, 0},
        {"mlp.c_fc.weight", 1, 4, 1},   {"mlp.c_fc.bias", 4, 0, 0},
        {"mlp.c_proj.weight", 4, 1, 1}, {"mlp.c_proj.bias", 1, 0, 0},
    };
    for (int l = 0; l < m->cfg.n_layer; l++)
        for (int j = 0; j < PER_LAYER; j++) {
            snprintf(name, sizeof name, "transformer.h.%d.%s", l, lt[j].suffix);
            add_tensor(m, &off, name, lt[j].rows * C, lt[j].cols * C, lt[j].matrix);
        }
    add_tensor(m, &off, "transformer.ln_f.weight", C, 0, 0);
    add_tensor(m, &off, "transformer.ln_f.bias", C, 0, 0);
    m->num_params = off;
}

enum { ARENA_TRAIN, ARENA_INFER, ARENA_TANGENT };

/* Carves the arenas: first pass (base NULL) only counts floats. */
static size_t carve(dga_gpt *m, float *base, int which)
{
    const size_t C = m->cfg.n_embd, V = m->cfg.vocab_size, T = m->cfg.n_ctx;
    const size_t N = (size_t)m->max_batch * T, NH = m->cfg.n_head;
    size_t off = 0;
#define TAKE(ptr, count)                           \
    do {                                           \
        if (base) (ptr) = base + off;              \
        off += ((count) + 15) & ~(size_t)15;       \
    } while (0)
    if (which == ARENA_TANGENT) {
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
        return off;
    }
    if (which == ARENA_INFER) {
        TAKE(m->ix, N * C);
        TAKE(m->iln, N * C);
        TAKE(m->iqkv, N * 3 * C);
        TAKE(m->iatt, T * T);
        TAKE(m->iatty, N * C);
        TAKE(m->ifch, N * 4 * C);
        TAKE(m->igather, (size_t)m->irows * C);
        TAKE(m->ilogits, (size_t)m->irows * V);
        return off;
    }
    TAKE(m->x0, N * C);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        layer_acts *a = &m->layers[l];
        TAKE(a->ln1, N * C);
        TAKE(a->ln1_mean, N);
        TAKE(a->ln1_rstd, N);
        TAKE(a->qkv, N * 3 * C);
        TAKE(a->att, (size_t)m->max_batch * NH * T * T);
        TAKE(a->atty, N * C);
        TAKE(a->res2, N * C);
        TAKE(a->ln2, N * C);
        TAKE(a->ln2_mean, N);
        TAKE(a->ln2_rstd, N);
        TAKE(a->fch, N * 4 * C);
        TAKE(a->fchg, N * 4 * C);
        TAKE(a->res3, N * C);
    }
    TAKE(m->lnf, N * C);
    TAKE(m->lnf_mean, N);
    TAKE(m->lnf_rstd, N);
    TAKE(m->logits, N * V);
    TAKE(m->dres, N * C);
    TAKE(m->dtmp, N * C);
    TAKE(m->dbig, N * 4 * C);
    TAKE(m->datt, T * T);
#undef TAKE
    return off;
}

dga_status dga_gpt_create(const dga_gpt_config *cfg, int max_batch, dga_gpt **out)
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
    dga_gpt *m = calloc(1, sizeof *m);
    if (!m) return dga_fail(DGA_ERR_NOMEM, "gpt: cannot allocate the model");
    m->cfg = *cfg;
    m->max_batch = max_batch;
    size_t N = (size_t)max_batch * cfg->n_ctx;
    m->irows = N < 256 ? (int)N : 256;
    m->tensors = calloc(2 + (size_t)PER_LAYER * cfg->n_layer + 2, sizeof *m->tensors);
    m->layers = calloc((size_t)cfg->n_layer, sizeof *m->layers);
    if (!m->tensors || !m->layers) goto nomem;
    build_layout(m);
    m->params = calloc(m->num_params, sizeof(float));
    m->grads = calloc(m->num_params, sizeof(float));
    m->inputs = calloc(N, sizeof(int32_t));
    size_t n_train = carve(m, NULL, ARENA_TRAIN), n_inf = carve(m, NULL, ARENA_INFER);
    m->arena = calloc(n_train, sizeof(float));
    m->iarena = calloc(n_inf, sizeof(float));
    if (!m->params || !m->grads || !m->inputs || !m->arena || !m->iarena) {
        size_t mb = (m->num_params * 2 + n_train + n_inf) * sizeof(float) >> 20;
        dga_gpt_free(m);
        return dga_fail(DGA_ERR_NOMEM,
                        "gpt: cannot allocate %zu MiB for parameters and activations (batch %d "
                        "x context %d)", mb, max_batch, cfg->n_ctx);
    }
    carve(m, m->arena, ARENA_TRAIN);
    carve(m, m->iarena, ARENA_INFER);
    *out = m;
    return DGA_OK;
nomem:
    dga_gpt_free(m);
    return dga_fail(DGA_ERR_NOMEM, "gpt: cannot allocate the model");
}

void dga_gpt_free(dga_gpt *m)
{
    if (!m) return;
    free(m->params);
    free(m->grads);
    free(m->tensors);
    free(m->layers);
    free(m->arena);
    free(m->iarena);
    free(m->tarena);
    free(m->inputs);
    free(m);
}

const dga_gpt_config *dga_gpt_get_config(const dga_gpt *m) { return &m->cfg; }
int dga_gpt_max_batch(const dga_gpt *m) { return m->max_batch; }
size_t dga_gpt_num_params(const dga_gpt *m) { return m->num_params; }
float *dga_gpt_params(dga_gpt *m) { return m->params; }
float *dga_gpt_grads(dga_gpt *m) { return m->grads; }
int dga_gpt_num_tensors(const dga_gpt *m) { return m->n_tensors; }

const dga_tensor_info *dga_gpt_tensor(const dga_gpt *m, int i)
{
    return i >= 0 && i < m->n_tensors ? &m->tensors[i] : NULL;
}

const dga_tensor_info *dga_gpt_find_tensor(const dga_gpt *m, const char *name)
{
    if (!name) return NULL;
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

void dga_gpt_init_weights(dga_gpt *m, dga_rng *rng)
{
    const double std = 0.02, std_proj = 0.02 / sqrt(2.0 * m->cfg.n_layer);
    for (int i = 0; i < m->n_tensors; i++) {
        const dga_tensor_info *t = &m->tensors[i];
        float *p = m->params + t->offset;
        size_t len = strlen(t->name);
        int is_ln_w = strstr(t->name, "ln_") && len > 7 && !strcmp(t->name + len - 7, ".weight");
        if (t->is_matrix) {
            double s = strstr(t->name, "c_proj.weight") ? std_proj : std;
            for (size_t j = 0; j < t->numel; j++) p[j] = (float)(s * dga_rng_normal(rng));
        } else {
            float v = is_ln_w ? 1.0f : 0.0f;
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

/* ---------------------------------------------------------------- validation */

static dga_status check_batch(const dga_gpt *m, const char *fn, const int32_t *inputs,
                              const int32_t *targets, int B, int T, int need_targets,
                              int *n_valid)
{
    const int V = m->cfg.vocab_size;
    dga_status st = dga_interrupt_check(fn);   /* every forward of every kind passes here */
    if (st != DGA_OK) return st;
    if (B < 1 || B > m->max_batch)
        return dga_fail(DGA_ERR_INVALID, "%s: batch size %d outside [1, %d] (the model's "
                        "batch)", fn, B, m->max_batch);
    if (T < 1 || T > m->cfg.n_ctx)
        return dga_fail(DGA_ERR_INVALID, "%s: sequence length %d outside [1, %d] (the "
                        "model's context)", fn, T, m->cfg.n_ctx);
    if (!inputs) return dga_fail(DGA_ERR_INVALID, "%s: inputs is NULL", fn);
    if (need_targets && !targets) return dga_fail(DGA_ERR_INVALID, "%s: targets is NULL", fn);
    size_t n = (size_t)B * T;
    for (size_t i = 0; i < n; i++)
        if (inputs[i] < 0 || inputs[i] >= V)
            return dga_fail(DGA_ERR_INVALID, "%s: inputs: token id %d at [%zu,%zu] (row, "
                            "column; 1-based) outside vocabulary [0, %d)", fn, (int)inputs[i],
                            i / T + 1, i % T + 1, V);
    int valid = 0;
    if (targets)
        for (size_t i = 0; i < n; i++) {
            if (targets[i] == DGA_IGNORE) continue;
            if (targets[i] < 0 || targets[i] >= V)
                return dga_fail(DGA_ERR_INVALID, "%s: targets: token id %d at [%zu,%zu] (row, "
                                "column; 1-based) outside vocabulary [0, %d) and not %d "
                                "(ignore)", fn, (int)targets[i], i / T + 1, i % T + 1, V,
                                DGA_IGNORE);
            valid++;
        }
    if (n_valid) *n_valid = valid;
    return DGA_OK;
}

/* ---------------------------------------------------------------- training */

dga_status dga_gpt_forward(dga_gpt *m, const int32_t *inputs, const int32_t *targets, int B,
                           int T, float *loss)
{
    int n_valid = 0;
    m->fwd_B = m->fwd_T = 0;
    dga_status st = check_batch(m, "forward", inputs, targets, B, T, 1, &n_valid);
    if (st != DGA_OK) return st;
    const int C = m->cfg.n_embd, NH = m->cfg.n_head, V = m->cfg.vocab_size;
    const size_t N = (size_t)B * T;
    float *p = m->params;
    memcpy(m->inputs, inputs, N * sizeof *inputs);

    dga_op_embed_fwd(m->x0, inputs, tensor_ptr(m, p, 0), tensor_ptr(m, p, 1), B, T, C);
    const float *x = m->x0;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        layer_acts *a = &m->layers[l];
        dga_op_layernorm_fwd(a->ln1, a->ln1_mean, a->ln1_rstd, x, layer_ptr(m, p, l, LN1_W),
                             layer_ptr(m, p, l, LN1_B), N, C);
        dga_op_linear_fwd(a->qkv, a->ln1, layer_ptr(m, p, l, QKV_W), layer_ptr(m, p, l, QKV_B),
                          N, C, 3 * C);
        dga_op_attention_fwd(a->atty, a->att, (size_t)T * T, a->qkv, B, T, C, NH);
        dga_op_linear_fwd(a->res2, a->atty, layer_ptr(m, p, l, APROJ_W),
                          layer_ptr(m, p, l, APROJ_B), N, C, C);
        dga_op_residual_fwd(a->res2, a->res2, x, N * C);
        dga_op_layernorm_fwd(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2,
                             layer_ptr(m, p, l, LN2_W), layer_ptr(m, p, l, LN2_B), N, C);
        dga_op_linear_fwd(a->fch, a->ln2, layer_ptr(m, p, l, FC_W), layer_ptr(m, p, l, FC_B), N,
                          C, 4 * C);
        dga_op_gelu_fwd(a->fchg, a->fch, N * 4 * C);
        dga_op_linear_fwd(a->res3, a->fchg, layer_ptr(m, p, l, FPROJ_W),
                          layer_ptr(m, p, l, FPROJ_B), N, 4 * C, C);
        dga_op_residual_fwd(a->res3, a->res3, a->res2, N * C);
        x = a->res3;
    }
    int lf = 2 + PER_LAYER * m->cfg.n_layer;
    dga_op_layernorm_fwd(m->lnf, m->lnf_mean, m->lnf_rstd, x, tensor_ptr(m, p, lf),
                         tensor_ptr(m, p, lf + 1), N, C);
    dga_op_lmhead_fwd(m->logits, m->lnf, tensor_ptr(m, p, 0), N, C, V);
    /* The loss is a mean over valid targets, so its gradient w.r.t. the logits is known
     * now: the fused kernel leaves dlogits in place of the logits. */
    float dscale = n_valid > 0 ? 1.0f / (float)n_valid : 0.0f;
    double total = dga_op_xent_fwd_bwd(m->logits, targets, N, V, dscale);
    if (loss) *loss = n_valid > 0 ? (float)(total / n_valid) : 0.0f;
    m->fwd_B = B;
    m->fwd_T = T;
    return DGA_OK;
}

dga_status dga_gpt_backward(dga_gpt *m)
{
    const int B = m->fwd_B, T = m->fwd_T;
    if (B == 0)
        return dga_fail(DGA_ERR_INVALID, "backward: no forward pass to differentiate (call "
                        "forward first; a failed forward clears it)");
    const int C = m->cfg.n_embd, NH = m->cfg.n_head, V = m->cfg.vocab_size, L = m->cfg.n_layer;
    const size_t N = (size_t)B * T;
    float *p = m->params, *g = m->grads;
    int lf = 2 + PER_LAYER * L;
    const float *x_last = L > 0 ? m->layers[L - 1].res3 : m->x0;

    dga_op_lmhead_bwd(m->dtmp, tensor_ptr(m, g, 0), m->logits, m->lnf, tensor_ptr(m, p, 0), N,
                      C, V);
    memset(m->dres, 0, N * C * sizeof(float));
    dga_op_layernorm_bwd(m->dres, tensor_ptr(m, g, lf), tensor_ptr(m, g, lf + 1), m->dtmp,
                         x_last, tensor_ptr(m, p, lf), m->lnf_mean, m->lnf_rstd, N, C);
    for (int l = L - 1; l >= 0; l--) {
        layer_acts *a = &m->layers[l];
        const float *x = l > 0 ? m->layers[l - 1].res3 : m->x0;
        /* res3 = res2 + c_proj(gelu(c_fc(ln_2(res2)))); dres is d res3 here */
        dga_op_linear_bwd(m->dbig, layer_ptr(m, g, l, FPROJ_W), layer_ptr(m, g, l, FPROJ_B),
                          m->dres, a->fchg, layer_ptr(m, p, l, FPROJ_W), N, 4 * C, C);
        dga_op_gelu_bwd(m->dbig, a->fch, m->dbig, N * 4 * C);
        dga_op_linear_bwd(m->dtmp, layer_ptr(m, g, l, FC_W), layer_ptr(m, g, l, FC_B), m->dbig,
                          a->ln2, layer_ptr(m, p, l, FC_W), N, C, 4 * C);
        dga_op_layernorm_bwd(m->dres, layer_ptr(m, g, l, LN2_W), layer_ptr(m, g, l, LN2_B),
                             m->dtmp, a->res2, layer_ptr(m, p, l, LN2_W), a->ln2_mean,
                             a->ln2_rstd, N, C);
        /* res2 = x + c_proj(attn(c_attn(ln_1(x)))); dres is d res2 here */
        dga_op_linear_bwd(m->dtmp, layer_ptr(m, g, l, APROJ_W), layer_ptr(m, g, l, APROJ_B),
                          m->dres, a->atty, layer_ptr(m, p, l, APROJ_W), N, C, C);
        dga_op_attention_bwd(m->dbig, m->datt, m->dtmp, a->qkv, a->att, B, T, C, NH);
        dga_op_linear_bwd(m->dtmp, layer_ptr(m, g, l, QKV_W), layer_ptr(m, g, l, QKV_B), m->dbig,
                          a->ln1, layer_ptr(m, p, l, QKV_W), N, C, 3 * C);
        dga_op_layernorm_bwd(m->dres, layer_ptr(m, g, l, LN1_W), layer_ptr(m, g, l, LN1_B),
                             m->dtmp, x, layer_ptr(m, p, l, LN1_W), a->ln1_mean, a->ln1_rstd,
                             N, C);
    }
    dga_op_embed_bwd(tensor_ptr(m, g, 0), tensor_ptr(m, g, 1), m->dres, m->inputs, B, T, C);
    return DGA_OK;
}

void dga_gpt_zero_grad(dga_gpt *m) { memset(m->grads, 0, m->num_params * sizeof(float)); }

/* ---------------------------------------------------------------- inference */

/* Runs the blocks on B x T valid tokens with the inference arena; leaves ln_f(x) in iln. */
static void infer_trunk(dga_gpt *m, const int32_t *inputs, int B, int T)
{
    const int C = m->cfg.n_embd, NH = m->cfg.n_head;
    const size_t N = (size_t)B * T;
    float *p = m->params;
    dga_op_embed_fwd(m->ix, inputs, tensor_ptr(m, p, 0), tensor_ptr(m, p, 1), B, T, C);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        dga_op_layernorm_fwd(m->iln, NULL, NULL, m->ix, layer_ptr(m, p, l, LN1_W),
                             layer_ptr(m, p, l, LN1_B), N, C);
        dga_op_linear_fwd(m->iqkv, m->iln, layer_ptr(m, p, l, QKV_W),
                          layer_ptr(m, p, l, QKV_B), N, C, 3 * C);
        dga_op_attention_fwd(m->iatty, m->iatt, 0, m->iqkv, B, T, C, NH);
        dga_op_linear_fwd(m->iln, m->iatty, layer_ptr(m, p, l, APROJ_W),
                          layer_ptr(m, p, l, APROJ_B), N, C, C);
        dga_op_residual_fwd(m->ix, m->ix, m->iln, N * C);
        dga_op_layernorm_fwd(m->iln, NULL, NULL, m->ix, layer_ptr(m, p, l, LN2_W),
                             layer_ptr(m, p, l, LN2_B), N, C);
        dga_op_linear_fwd(m->ifch, m->iln, layer_ptr(m, p, l, FC_W), layer_ptr(m, p, l, FC_B),
                          N, C, 4 * C);
        dga_op_gelu_fwd(m->ifch, m->ifch, N * 4 * C);
        dga_op_linear_fwd(m->iln, m->ifch, layer_ptr(m, p, l, FPROJ_W),
                          layer_ptr(m, p, l, FPROJ_B), N, 4 * C, C);
        dga_op_residual_fwd(m->ix, m->ix, m->iln, N * C);
    }
    int lf = 2 + PER_LAYER * m->cfg.n_layer;
    dga_op_layernorm_fwd(m->iln, NULL, NULL, m->ix, tensor_ptr(m, p, lf),
                         tensor_ptr(m, p, lf + 1), N, C);
}

dga_status dga_gpt_hidden_sum(dga_gpt *m, const int32_t *tokens, int n, float *out)
{
    if (!out) return dga_fail(DGA_ERR_INVALID, "hidden_sum: out is NULL");
    dga_status st = check_batch(m, "hidden_sum", tokens, NULL, 1, n, 0, NULL);
    if (st != DGA_OK) return st;
    const int C = m->cfg.n_embd;
    infer_trunk(m, tokens, 1, n);
    for (int t = 0; t < n; t++) {
        const float *h = m->iln + (size_t)t * C;
        for (int c = 0; c < C; c++) out[c] += h[c];
    }
    return DGA_OK;
}

/* The next chunk of positions that have a target, scanning from *cursor: at most irows of
 * them, their final-layernorm rows (iln) gathered into igather and, when tangent is given
 * (the tangent arena's tln), their tangents into tgather; rows[] gets their positions.
 * Returns how many (0 once the targets are exhausted). The lm head then runs on the
 * gathered rows only: MMLU scoring has one target per sequence. */
static int gather_target_rows(dga_gpt *m, const int32_t *targets, size_t N, size_t *cursor,
                              const float *tangent, size_t *rows)
{
    const size_t C = (size_t)m->cfg.n_embd;
    int k = 0;
    size_t i = *cursor;
    for (; i < N && k < m->irows; i++) {
        if (targets[i] == DGA_IGNORE) continue;
        memcpy(m->igather + k * C, m->iln + i * C, C * sizeof(float));
        if (tangent) memcpy(m->tgather + k * C, tangent + i * C, C * sizeof(float));
        rows[k++] = i;
    }
    *cursor = i;
    return k;
}

dga_status dga_gpt_eval(dga_gpt *m, const int32_t *inputs, const int32_t *targets, int B,
                        int T, double *seq_nll, int *seq_count)
{
    dga_status st = check_batch(m, "eval", inputs, targets, B, T, 1, NULL);
    if (st != DGA_OK) return st;
    const int C = m->cfg.n_embd, V = m->cfg.vocab_size;
    const size_t N = (size_t)B * T;
    for (int b = 0; b < B; b++) {
        if (seq_nll) seq_nll[b] = 0.0;
        if (seq_count) seq_count[b] = 0;
    }
    infer_trunk(m, inputs, B, T);
    /* Only rows with a target reach the lm head (MMLU scoring has one per sequence). */
    size_t row[256];
    size_t i = 0;
    for (int k; (k = gather_target_rows(m, targets, N, &i, NULL, row)) > 0;) {
        dga_op_lmhead_fwd(m->ilogits, m->igather, tensor_ptr(m, m->params, 0), (size_t)k, C, V);
        for (int r = 0; r < k; r++) {
            double nll = dga_op_xent_row(m->ilogits + (size_t)r * V, V, targets[row[r]]);
            size_t b = row[r] / T;
            if (seq_nll) seq_nll[b] += nll;
            if (seq_count) seq_count[b]++;
        }
    }
    return DGA_OK;
}

dga_status dga_gpt_next_logits(dga_gpt *m, const int32_t *tokens, int n, float *logits)
{
    if (!logits) return dga_fail(DGA_ERR_INVALID, "next_logits: logits is NULL");
    dga_status st = check_batch(m, "next_logits", tokens, NULL, 1, n, 0, NULL);
    if (st != DGA_OK) return st;
    const int C = m->cfg.n_embd;
    infer_trunk(m, tokens, 1, n);
    dga_op_lmhead_fwd(logits, m->iln + (size_t)(n - 1) * C, m->params, 1, C,
                      m->cfg.vocab_size);
    return DGA_OK;
}

/* ---------------------------------------------------------------- forward mode */

/* The inference trunk and lm head (primal, in the inference arena) interleaved with their
 * tangents (in the tangent arena), op by op: each tangent rule needs the primal values of
 * its own op only, so one block's worth of both is all that is ever held. */
dga_status dga_gpt_jvp(dga_gpt *m, const int32_t *inputs, const int32_t *targets, int B, int T,
                       const float *tangent, double *loss, double *dloss)
{
    int n_valid = 0;
    dga_status st = check_batch(m, "jvp", inputs, targets, B, T, 1, &n_valid);
    if (st != DGA_OK) return st;
    if (!tangent) return dga_fail(DGA_ERR_INVALID, "jvp: tangent is NULL");
    if (!m->tarena) {
        float *a = calloc(carve(m, NULL, ARENA_TANGENT), sizeof(float));
        if (!a)
            return dga_fail(DGA_ERR_NOMEM, "jvp: cannot allocate %zu MiB for the tangent "
                            "activations (batch %d x context %d)",
                            carve(m, NULL, ARENA_TANGENT) * sizeof(float) >> 20, m->max_batch,
                            m->cfg.n_ctx);
        m->tarena = a;
        carve(m, a, ARENA_TANGENT);
    }
    const int C = m->cfg.n_embd, NH = m->cfg.n_head, V = m->cfg.vocab_size;
    const size_t N = (size_t)B * T;
    float *p = m->params, *u = (float *)tangent;   /* u is only read (tensor_ptr is not const) */

    dga_op_embed_fwd(m->ix, inputs, tensor_ptr(m, p, 0), tensor_ptr(m, p, 1), B, T, C);
    dga_op_embed_jvp(m->tx, inputs, tensor_ptr(m, u, 0), tensor_ptr(m, u, 1), B, T, C);
    for (int l = 0; l < m->cfg.n_layer; l++) {
#define P_(w) layer_ptr(m, p, l, w)
#define U_(w) layer_ptr(m, u, l, w)
        /* x = x + c_proj(attn(c_attn(ln_1(x)))) */
        dga_op_layernorm_fwd(m->iln, m->tmean, m->trstd, m->ix, P_(LN1_W), P_(LN1_B), N, C);
        dga_op_layernorm_jvp(m->tln, m->ix, m->tx, P_(LN1_W), U_(LN1_W), U_(LN1_B), m->tmean,
                             m->trstd, N, C);
        dga_op_linear_fwd(m->iqkv, m->iln, P_(QKV_W), P_(QKV_B), N, C, 3 * C);
        dga_op_linear_jvp(m->tqkv, m->iln, m->tln, P_(QKV_W), U_(QKV_W), U_(QKV_B), N, C, 3 * C);
        dga_op_attention_jvp(m->iatty, m->tatty, m->tatt, m->iqkv, m->tqkv, B, T, C, NH);
        dga_op_linear_fwd(m->iln, m->iatty, P_(APROJ_W), P_(APROJ_B), N, C, C);
        dga_op_linear_jvp(m->tln, m->iatty, m->tatty, P_(APROJ_W), U_(APROJ_W), U_(APROJ_B), N,
                          C, C);
        dga_op_residual_fwd(m->ix, m->ix, m->iln, N * C);
        dga_op_residual_jvp(m->tx, m->tx, m->tln, N * C);
        /* x = x + c_proj(gelu(c_fc(ln_2(x)))) */
        dga_op_layernorm_fwd(m->iln, m->tmean, m->trstd, m->ix, P_(LN2_W), P_(LN2_B), N, C);
        dga_op_layernorm_jvp(m->tln, m->ix, m->tx, P_(LN2_W), U_(LN2_W), U_(LN2_B), m->tmean,
                             m->trstd, N, C);
        dga_op_linear_fwd(m->ifch, m->iln, P_(FC_W), P_(FC_B), N, C, 4 * C);
        dga_op_linear_jvp(m->tfch, m->iln, m->tln, P_(FC_W), U_(FC_W), U_(FC_B), N, C, 4 * C);
        /* the tangent first: it needs the pre-activation the in-place GELU overwrites */
        dga_op_gelu_jvp(m->tfch, m->ifch, m->tfch, N * 4 * C);
        dga_op_gelu_fwd(m->ifch, m->ifch, N * 4 * C);
        dga_op_linear_fwd(m->iln, m->ifch, P_(FPROJ_W), P_(FPROJ_B), N, 4 * C, C);
        dga_op_linear_jvp(m->tln, m->ifch, m->tfch, P_(FPROJ_W), U_(FPROJ_W), U_(FPROJ_B), N,
                          4 * C, C);
        dga_op_residual_fwd(m->ix, m->ix, m->iln, N * C);
        dga_op_residual_jvp(m->tx, m->tx, m->tln, N * C);
#undef P_
#undef U_
    }
    int lf = 2 + PER_LAYER * m->cfg.n_layer;
    dga_op_layernorm_fwd(m->iln, m->tmean, m->trstd, m->ix, tensor_ptr(m, p, lf),
                         tensor_ptr(m, p, lf + 1), N, C);
    dga_op_layernorm_jvp(m->tln, m->ix, m->tx, tensor_ptr(m, p, lf), tensor_ptr(m, u, lf),
                         tensor_ptr(m, u, lf + 1), m->tmean, m->trstd, N, C);

    /* Lm head and loss on the rows with a target only, irows at a time (as in eval); the
     * head is tied, so the wte tangent enters here a second time. */
    const float dscale = n_valid > 0 ? 1.0f / (float)n_valid : 0.0f;
    double total = 0.0, dtotal = 0.0;
    int32_t tg[256];
    size_t row[256], i = 0;
    for (int k; (k = gather_target_rows(m, targets, N, &i, m->tln, row)) > 0;) {
        for (int r = 0; r < k; r++) tg[r] = targets[row[r]];
        dga_op_lmhead_fwd(m->ilogits, m->igather, tensor_ptr(m, p, 0), (size_t)k, C, V);
        dga_op_lmhead_jvp(m->tlogits, m->igather, m->tgather, tensor_ptr(m, p, 0),
                          tensor_ptr(m, u, 0), (size_t)k, C, V);
        double d = 0.0;
        total += dga_op_xent_jvp(m->ilogits, m->tlogits, tg, (size_t)k, V, dscale, &d);
        dtotal += d;
    }
    if (loss) *loss = n_valid > 0 ? total / n_valid : 0.0;
    if (dloss) *dloss = dtotal;
    return DGA_OK;
}

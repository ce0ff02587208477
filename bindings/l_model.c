/* dga.gpt: the GPT-2 model as a Lua object, and dga.set_threads / dga.get_threads.
 *
 * Token batches arrive as B x T int32 tensors or nested Lua tables (a 1-D one is a single
 * sequence). Shapes are checked here, so an error names the argument; token ids are checked
 * by the core (dga_model_check_ids), whose message names the id and its 1-based position.
 *
 * Scratch memory (converted batches, generation buffers) lives in Lua userdata on the stack,
 * so any Lua error raised half-way frees it. */
#include <cblas.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dgal.h"
#include "adamw.h"
#include "comm.h"
#include "dp.h"
#include "gpt.h"
#include "model.h"
#include "pool.h"

dga_model *dgal_check_model(lua_State *L, int idx)
{
    return dgal_box_check(L, idx, DGAL_MODEL);
}

dga_model *dgal_test_model(lua_State *L, int idx)
{
    dgal_box *b = luaL_testudata(L, idx, DGAL_MODEL);
    return b ? b->p : NULL;
}

void dgal_push_model(lua_State *L, dga_model *m)
{
    dgal_box_new(L, DGAL_MODEL, 0)->p = m;
}

static int m_release(lua_State *L)
{
    dga_model_free(dgal_box_take(L, 1, DGAL_MODEL));
    return 0;
}

static void format_count(char *buf, size_t size, size_t n)
{
    if (n >= 100000) snprintf(buf, size, "%.2fM", (double)n / 1e6);
    else if (n >= 1000) snprintf(buf, size, "%.1fK", (double)n / 1e3);
    else snprintf(buf, size, "%zu", n);
}

static int m_tostring(lua_State *L)
{
    dga_model *m = dgal_box_get(L, 1, DGAL_MODEL);
    if (!m) {
        lua_pushliteral(L, "dga.gpt (closed)");
        return 1;
    }
    const dga_gpt_config *c = dga_gpt_get_config(m);
    char n[32];
    format_count(n, sizeof n, dga_model_num_params(m));
    if (!c)
        lua_pushfstring(L, "dga.model(%s, T=%d, V=%d; %s params)", dga_model_arch(m),
                        dga_model_context(m), dga_model_vocab(m), n);
    else if (dga_gpt_precision(m) == DGA_PREC_FP32)
        lua_pushfstring(L, "dga.gpt(L=%d, C=%d, h=%d, T=%d, V=%d; %s params)", c->n_layer,
                        c->n_embd, c->n_head, c->n_ctx, c->vocab_size, n);
    else
        lua_pushfstring(L, "dga.gpt(L=%d, C=%d, h=%d, T=%d, V=%d; %s params; %s)", c->n_layer,
                        c->n_embd, c->n_head, c->n_ctx, c->vocab_size, n,
                        dga_precision_name(dga_gpt_precision(m)));
    return 1;
}

/* ------------------------------------------------------------------ token batches */

typedef struct {
    dga_tensor *t;
    int B, T;
} token_batch;

/* A B x T int32 tensor from argument idx (tensor or nested table; 1-D = one sequence),
 * anchored on the stack. Checks 1 <= B <= max_b (max_b 0: any) and 1 <= T <= max_t. */
static token_batch to_batch(lua_State *L, int idx, const char *what, int max_b, int max_t)
{
    idx = lua_absindex(L, idx);
    dga_tensor **box = luaL_testudata(L, idx, DGAL_TENSOR);
    if (box && *box && (*box)->dtype != DGA_I32) {
        char d[64];
        luaL_argerror(L, idx, lua_pushfstring(L, "%s must be an int32 tensor, got %s", what,
                                              dga_tensor_describe(*box, d, sizeof d)));
    }
    if (!box && !lua_istable(L, idx))
        luaL_typeerror(L, idx, "int32 dga.tensor or table of token ids");
    dga_tensor *t = dgal_to_tensor(L, idx, DGA_I32);
    dgal_push_tensor(L, t);   /* anchored: freed by the GC whatever happens next */
    token_batch b = {t, 1, 0};
    if (t->ndim == 1) {
        b.T = (int)(t->shape[0] < INT_MAX ? t->shape[0] : INT_MAX);
    } else if (t->ndim == 2) {
        b.B = (int)(t->shape[0] < INT_MAX ? t->shape[0] : INT_MAX);
        b.T = (int)(t->shape[1] < INT_MAX ? t->shape[1] : INT_MAX);
    } else {
        char d[64];
        luaL_argerror(L, idx, lua_pushfstring(L, "%s must be B x T (2-D) or one sequence (1-D), "
                                              "got %s", what, dga_tensor_describe(t, d, sizeof d)));
    }
    if (b.B < 1 || b.T < 1)
        luaL_argerror(L, idx, lua_pushfstring(L, "%s is empty (%d x %d)", what, b.B, b.T));
    if (max_b > 0 && b.B > max_b)
        luaL_argerror(L, idx, lua_pushfstring(L, "%s has batch size %d, above the model's "
                                              "maximum %d (dga.gpt{batch=...})", what, b.B, max_b));
    if (b.T > max_t)
        luaL_argerror(L, idx, lua_pushfstring(L, "%s has %d positions, above the model's "
                                              "context %d", what, b.T, max_t));
    return b;
}

/* Inputs at idx and targets at idx+1, shapes checked against the model. */
static void to_pair(lua_State *L, dga_model *m, int idx, int max_b, token_batch *in,
                    token_batch *tg)
{
    luaL_checkany(L, idx + 1);
    *in = to_batch(L, idx, "inputs", max_b, dga_model_context(m));
    *tg = to_batch(L, idx + 1, "targets", max_b, dga_model_context(m));
    if (in->B != tg->B || in->T != tg->T)
        luaL_argerror(L, idx + 1, lua_pushfstring(L, "targets are %d x %d, inputs %d x %d "
                                                  "(shapes must match)", tg->B, tg->T, in->B,
                                                  in->T));
}

/* ------------------------------------------------------------------ construction */

static const char *const gpt_keys[] = {"layers", "width", "heads", "context", "vocab",
                                       "batch",  "seed",  "precision", NULL};
static const char *const precisions[] = {"fp32", "bf16", "fp32-onednn", NULL};

/* Sets the model's precision by name, saying once per process on stderr
 * when a request falls back (bf16 on a CPU without a bf16 matmul): a config written on one
 * machine still runs on another, and the line says why it runs fp32. */
static int set_precision(lua_State *L, dga_model *m, const char *name)
{
    dga_precision p;
    DGAL_CHECK(L, dga_precision_parse(name, &p));
    const char *note = NULL;
    DGAL_CHECK(L, dga_gpt_set_precision(m, p, &note));
    static int said;
    if (note && !said) {
        said = 1;
        fprintf(stderr, "dgalua: %s\n", note);
    }
    return 0;
}

static void init_model(dga_model *m, lua_Integer seed)
{
    dga_rng rng;
    dga_rng_seed(&rng, (uint64_t)seed);
    dga_model_init_weights(m, &rng);
    dga_model_zero_grad(m);
}

/* dga.gpt{layers=, width=, heads=, context=, vocab=, batch=8, seed=0, precision="fp32"} */
static int l_gpt(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    dgal_check_keys(L, 1, gpt_keys, "field");
    dga_gpt_config cfg;
    cfg.n_layer = (int)dgal_need_int(L, 1, "layers", 1, INT_MAX);
    cfg.n_embd = (int)dgal_need_int(L, 1, "width", 1, INT_MAX);
    cfg.n_head = (int)dgal_need_int(L, 1, "heads", 1, INT_MAX);
    cfg.n_ctx = (int)dgal_need_int(L, 1, "context", 1, INT_MAX);
    cfg.vocab_size = (int)dgal_need_int(L, 1, "vocab", 1, INT_MAX);
    int batch = (int)dgal_opt_int(L, 1, "batch", 8, 1, INT_MAX);
    lua_Integer seed = dgal_opt_int(L, 1, "seed", 0, LUA_MININTEGER, LUA_MAXINTEGER);
    const char *prec = dgal_opt_str(L, 1, "precision", "fp32", precisions);
    if (dga_gpt_config_check(&cfg) != DGA_OK) luaL_argerror(L, 1, dga_last_error());

    dgal_box *b = dgal_box_new(L, DGAL_MODEL, 0);
    dga_model *m;
    DGAL_CHECK(L, dga_gpt_create(&cfg, batch, &m));
    b->p = m;
    init_model(m, seed);
    set_precision(L, m, prec);
    return 1;
}

/* ------------------------------------------------------------------ methods */

void dgal_push_gpt_config(lua_State *L, const dga_gpt_config *c, int batch)
{
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, c->n_layer);
    lua_setfield(L, -2, "layers");
    lua_pushinteger(L, c->n_embd);
    lua_setfield(L, -2, "width");
    lua_pushinteger(L, c->n_head);
    lua_setfield(L, -2, "heads");
    lua_pushinteger(L, c->n_ctx);
    lua_setfield(L, -2, "context");
    lua_pushinteger(L, c->vocab_size);
    lua_setfield(L, -2, "vocab");
    lua_pushinteger(L, batch);
    lua_setfield(L, -2, "batch");
}

static int m_config(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    const dga_gpt_config *c = dga_gpt_get_config(m);
    if (c) {
        dgal_push_gpt_config(L, c, dga_model_max_batch(m));
    } else {   /* what every architecture has */
        lua_createtable(L, 0, 4);
        lua_pushstring(L, dga_model_arch(m));
        lua_setfield(L, -2, "arch");
        lua_pushinteger(L, dga_model_context(m));
        lua_setfield(L, -2, "context");
        lua_pushinteger(L, dga_model_vocab(m));
        lua_setfield(L, -2, "vocab");
        lua_pushinteger(L, dga_model_max_batch(m));
        lua_setfield(L, -2, "batch");
    }
    return 1;
}

/* m:precision() -> the precision the products run in, and the reason when that is not the
 * one asked for (nil otherwise). */
static int m_precision(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    lua_pushstring(L, dga_precision_name(dga_gpt_precision(m)));
    return 1;
}

/* m:set_precision(name): as dga.gpt's precision option (for a model from a checkpoint). */
static int m_set_precision(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    const char *name = luaL_checkstring(L, 2);
    luaL_argcheck(L, dga_gpt_get_config(m), 1, "precision: not a GPT model");
    dga_precision p;
    if (dga_precision_parse(name, &p) != DGA_OK) luaL_argerror(L, 2, dga_last_error());
    set_precision(L, m, name);
    return 0;
}

static int m_num_params(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dga_model_num_params(dgal_check_model(L, 1)));
    return 1;
}

static int m_forward(lua_State *L)
{
    lua_settop(L, 3);   /* scratch values are anchored above the arguments */
    dga_model *m = dgal_check_model(L, 1);
    token_batch in, tg;
    to_pair(L, m, 2, dga_model_max_batch(m), &in, &tg);
    float loss = 0;
    DGAL_CHECK(L, dga_model_forward(m, dga_tensor_i32(in.t), dga_tensor_i32(tg.t), in.B, in.T,
                                    &loss));
    lua_pushnumber(L, loss);
    return 1;
}

static int m_backward(lua_State *L)
{
    DGAL_CHECK(L, dga_model_backward(dgal_check_model(L, 1)));
    return 0;
}

/* m:seq_losses() -> float32 [B]: the mean loss of each sequence of the last m:forward. */
static int m_seq_losses(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    int B = 0;
    const float *l = dga_model_seq_losses(m, &B);
    if (!l) return luaL_error(L, "seq_losses: no forward pass yet (a failed forward clears it)");
    int64_t shape = B;
    dga_tensor *t = NULL;
    DGAL_CHECK(L, dga_tensor_new(DGA_F32, 1, &shape, &t));
    memcpy(t->data, l, (size_t)B * sizeof(float));
    dgal_push_tensor(L, t);
    return 1;
}

static int m_zero_grad(lua_State *L)
{
    dga_model_zero_grad(dgal_check_model(L, 1));
    return 0;
}

static int m_grad_norm(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    lua_pushnumber(L, dga_vec_norm(dga_model_grads(m), dga_model_num_params(m)));
    return 1;
}

static int m_clip_grad(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    double max_norm = luaL_checknumber(L, 2);
    if (!(max_norm > 0))
        luaL_argerror(L, 2, lua_pushfstring(L, "max_norm must be a number > 0, got %f", max_norm));
    lua_pushnumber(L, dga_grad_clip(dga_model_grads(m), dga_model_num_params(m), max_norm));
    return 1;
}

static int push_copy(lua_State *L, const float *src, int ndim, const int64_t *shape)
{
    dga_tensor *t = NULL;
    DGAL_CHECK(L, dga_tensor_new(DGA_F32, ndim, shape, &t));
    memcpy(t->data, src, (size_t)t->numel * sizeof(float));
    dgal_push_tensor(L, t);
    return 1;
}

static int m_params(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    int64_t n = (int64_t)dga_model_num_params(m);
    return push_copy(L, dga_model_params(m), 1, &n);
}

static int m_grads(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    int64_t n = (int64_t)dga_model_num_params(m);
    return push_copy(L, dga_model_grads(m), 1, &n);
}

/* m:allreduce_grads([scale]): the gradient buffer <- the sum over ranks of scale * each
 * rank's buffer, in place and the same bits on every rank (data parallelism: scale is this
 * rank's share of the global batch, rows / B, so the sum is the global batch's mean
 * gradient). One rank: only the scaling. Returns m. */
static int m_allreduce_grads(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    lua_Number s = luaL_optnumber(L, 2, 1.0);
    luaL_argcheck(L, isfinite(s), 2, "scale must be a finite number");
    DGAL_CHECK(L, dga_dp_allreduce(m, (float)s));
    lua_settop(L, 1);
    return 1;
}

/* m:backward_allreduce([scale]): m:backward() and m:allreduce_grads(scale) in one, the
 * reduction of each block's gradient started as soon as the backward has finished it (dp.h):
 * the same bits on every rank, and the bits of the two calls at one or two ranks. Returns m. */
static int m_backward_allreduce(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    lua_Number s = luaL_optnumber(L, 2, 1.0);
    luaL_argcheck(L, isfinite(s), 2, "scale must be a finite number");
    /* as m:backward: the forward is checked by dga_model_backward, before anything is sent */
    DGAL_CHECK(L, dga_dp_backward(m, (float)s));
    lua_settop(L, 1);
    return 1;
}

/* m:checksum() -> a 16-digit hex string: FNV-1a over the parameters' bytes. Replicas of a
 * data-parallel run compare it to find a rank whose parameters drifted. */
static int m_checksum(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    const unsigned char *p = (const unsigned char *)dga_model_params(m);
    size_t n = dga_model_num_params(m) * sizeof(float);
    unsigned long long h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    char buf[17];
    snprintf(buf, sizeof buf, "%016llx", h);
    lua_pushstring(L, buf);
    return 1;
}

/* A float32 tensor from argument idx, anchored on the stack, with every value finite. */
static dga_tensor *to_values(lua_State *L, int idx)
{
    dga_tensor **box = luaL_testudata(L, idx, DGAL_TENSOR);
    if (box && *box && (*box)->dtype != DGA_F32) {
        char d[64];
        luaL_argerror(L, idx, lua_pushfstring(L, "expected a float32 tensor, got %s",
                                              dga_tensor_describe(*box, d, sizeof d)));
    }
    dga_tensor *t = dgal_to_tensor(L, idx, DGA_F32);
    dgal_push_tensor(L, t);
    const float *x = dga_tensor_f32(t);
    for (int64_t i = 0; i < t->numel; i++)
        if (!isfinite(x[i]))
            luaL_argerror(L, idx, lua_pushfstring(L, "non-finite value at index %I",
                                                  (lua_Integer)(i + 1)));
    return t;
}

static int m_set_params(lua_State *L)
{
    lua_settop(L, 2);   /* scratch values are anchored above the arguments */
    dga_model *m = dgal_check_model(L, 1);
    dga_tensor *t = to_values(L, 2);
    size_t n = dga_model_num_params(m);
    if ((size_t)t->numel != n)
        luaL_argerror(L, 2, lua_pushfstring(L, "has %I values, the model has %I parameters",
                                            (lua_Integer)t->numel, (lua_Integer)n));
    memcpy(dga_model_params(m), t->data, n * sizeof(float));
    return 0;
}

static const dga_tensor_info *check_name(lua_State *L, dga_model *m, int idx)
{
    const char *name = luaL_checkstring(L, idx);
    const dga_tensor_info *info = dga_model_find_tensor(m, name);
    if (!info)
        luaL_argerror(L, idx, lua_pushfstring(L, "no tensor named '%s' (m:tensors() lists them)",
                                              name));
    return info;
}

static int m_get(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    const dga_tensor_info *info = check_name(L, m, 2);
    int64_t shape[2] = {info->shape[0], info->ndim > 1 ? info->shape[1] : 1};
    return push_copy(L, dga_model_params(m) + info->offset, info->ndim, shape);
}

static int m_set(lua_State *L)
{
    lua_settop(L, 3);   /* scratch values are anchored above the arguments */
    dga_model *m = dgal_check_model(L, 1);
    const dga_tensor_info *info = check_name(L, m, 2);
    dga_tensor *t = to_values(L, 3);
    int same = t->ndim == info->ndim;
    for (int d = 0; same && d < info->ndim; d++) same = t->shape[d] == info->shape[d];
    if (!same) {
        char got[64];
        const char *want = info->ndim == 1
                               ? lua_pushfstring(L, "[%d]", info->shape[0])
                               : lua_pushfstring(L, "[%dx%d]", info->shape[0], info->shape[1]);
        luaL_argerror(L, 3, lua_pushfstring(L, "'%s' is %s, got %s", info->name, want,
                                            dga_tensor_describe(t, got, sizeof got)));
    }
    memcpy(dga_model_params(m) + info->offset, t->data, info->numel * sizeof(float));
    return 0;
}

static int m_tensors(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    int n = dga_model_num_tensors(m);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        const dga_tensor_info *info = dga_model_tensor(m, i);
        lua_createtable(L, 0, 5);
        lua_pushstring(L, info->name);
        lua_setfield(L, -2, "name");
        lua_createtable(L, info->ndim, 0);
        for (int d = 0; d < info->ndim; d++) {
            lua_pushinteger(L, info->shape[d]);
            lua_rawseti(L, -2, d + 1);
        }
        lua_setfield(L, -2, "shape");
        lua_pushinteger(L, (lua_Integer)info->numel);
        lua_setfield(L, -2, "numel");
        lua_pushinteger(L, (lua_Integer)info->offset + 1);
        lua_setfield(L, -2, "first");   /* 1-based index of its first value in m:params() */
        lua_pushboolean(L, info->is_matrix);
        lua_setfield(L, -2, "is_matrix");
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* eval accepts any number of sequences and runs them max-batch rows at a time. */
static int m_eval(lua_State *L)
{
    lua_settop(L, 3);   /* scratch values are anchored above the arguments */
    dga_model *m = dgal_check_model(L, 1);
    token_batch in, tg;
    to_pair(L, m, 2, 0, &in, &tg);
    double *nll = dgal_scratch(L, (size_t)in.B * sizeof(double));
    int *cnt = dgal_scratch(L, (size_t)in.B * sizeof(int));
    int max_b = dga_model_max_batch(m);
    for (int b0 = 0; b0 < in.B; b0 += max_b) {
        int nb = in.B - b0 < max_b ? in.B - b0 : max_b;
        size_t off = (size_t)b0 * (size_t)in.T;
        DGAL_CHECK(L, dga_model_eval(m, dga_tensor_i32(in.t) + off, dga_tensor_i32(tg.t) + off,
                                     nb, in.T, nll + b0, cnt + b0));
    }
    int64_t shape = in.B;
    dga_tensor *seq_nll = NULL, *seq_count = NULL;
    DGAL_CHECK(L, dga_tensor_new(DGA_F32, 1, &shape, &seq_nll));
    dgal_push_tensor(L, seq_nll);
    DGAL_CHECK(L, dga_tensor_new(DGA_I32, 1, &shape, &seq_count));
    dgal_push_tensor(L, seq_count);
    double total = 0;
    long long count = 0;
    for (int b = 0; b < in.B; b++) {
        dga_tensor_f32(seq_nll)[b] = (float)nll[b];
        dga_tensor_i32(seq_count)[b] = cnt[b];
        total += nll[b];
        count += cnt[b];
    }
    lua_pushnumber(L, count ? total / (double)count : 0.0);
    lua_insert(L, -3);
    return 3;
}

/* A 1-D token sequence (tensor or table) of any length >= 1, anchored on the stack. */
static token_batch to_sequence(lua_State *L, int idx, const char *what)
{
    token_batch s = to_batch(L, idx, what, 1, INT_MAX);
    if (s.t->ndim != 1) {
        char d[64];
        luaL_argerror(L, idx, lua_pushfstring(L, "%s must be one sequence (1-D), got %s", what,
                                              dga_tensor_describe(s.t, d, sizeof d)));
    }
    return s;
}

static int m_logits(lua_State *L)
{
    lua_settop(L, 2);   /* scratch values are anchored above the arguments */
    dga_model *m = dgal_check_model(L, 1);
    token_batch s = to_sequence(L, 2, "tokens");
    if (s.T > dga_model_context(m))
        luaL_argerror(L, 2, lua_pushfstring(L, "tokens has %d positions, above the model's "
                                            "context %d", s.T, dga_model_context(m)));
    int64_t v = dga_model_vocab(m);
    dga_tensor *out = NULL;
    DGAL_CHECK(L, dga_tensor_new(DGA_F32, 1, &v, &out));
    dgal_push_tensor(L, out);
    DGAL_CHECK(L, dga_model_next_logits(m, dga_tensor_i32(s.t), s.T, dga_tensor_f32(out)));
    return 1;
}

static const char *const gen_keys[] = {"temperature", "top_k", "top_p", "seed", NULL};

/* m:generate(prompt_ids, n_new, {temperature=0, top_k=0, top_p=1, seed=0}) -> table of the
 * n_new new ids. */
static int m_generate(lua_State *L)
{
    lua_settop(L, 4);   /* scratch values are anchored above the arguments */
    dga_model *m = dgal_check_model(L, 1);
    token_batch p = to_sequence(L, 2, "prompt");
    lua_Integer n_new = luaL_checkinteger(L, 3);
    luaL_argcheck(L, n_new >= 0 && n_new <= 1000000, 3, "expected 0..1000000 new tokens");
    dga_sample_opts so = {.temperature = 0, .top_k = 0, .top_p = 1.0};
    lua_Integer seed = 0;
    if (!lua_isnoneornil(L, 4)) {
        luaL_checktype(L, 4, LUA_TTABLE);
        dgal_check_keys(L, 4, gen_keys, "field");
        so.temperature = dgal_opt_num(L, 4, "temperature", 0, 0, 1e6, 0);
        so.top_k = (int)dgal_opt_int(L, 4, "top_k", 0, 0, INT_MAX);
        so.top_p = dgal_opt_num(L, 4, "top_p", 1.0, 0, 1.0, DGAL_LO_OPEN);
        seed = dgal_opt_int(L, 4, "seed", 0, LUA_MININTEGER, LUA_MAXINTEGER);
    }
    dga_rng rng;
    dga_rng_seed(&rng, (uint64_t)seed);
    luaL_argcheck(L, n_new <= INT32_MAX && p.T <= INT32_MAX, 3, "too many tokens");
    int32_t *out = dgal_scratch(L, ((size_t)n_new + 1) * sizeof(int32_t));
    DGAL_CHECK(L, dga_model_generate_sampled(m, dga_tensor_i32(p.t), (int)p.T, (int)n_new, &so,
                                             &rng, out));
    lua_createtable(L, (int)n_new, 0);
    for (lua_Integer i = 0; i < n_new; i++) {
        lua_pushinteger(L, out[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int m_init(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    init_model(m, luaL_optinteger(L, 2, 0));
    return 0;
}

static int m_flops_per_token(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    const int ctx = dga_model_context(m);
    lua_Integer T = luaL_optinteger(L, 2, ctx);
    luaL_argcheck(L, T >= 1 && T <= ctx, 2,
                  lua_pushfstring(L, "sequence length must be 1..%d", ctx));
    lua_pushnumber(L, dga_model_flops_per_token(m, (int)T));
    return 1;
}

/* ------------------------------------------------------------------ threads */

static int l_set_threads(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    luaL_argcheck(L, n >= 1 && n <= 1024, 1, "expected a thread count in 1..1024");
    openblas_set_num_threads((int)n);
    /* the non-GEMM kernels' pool follows OpenBLAS */
    if (dga_pool_set_threads((int)n) != DGA_OK) return luaL_error(L, "%s", dga_last_error());
    return 0;
}

static int l_get_threads(lua_State *L)
{
    lua_pushinteger(L, openblas_get_num_threads());
    return 1;
}

/* ------------------------------------------------------------------ registration */

void dgal_open_model(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"config", m_config},
        {"num_params", m_num_params},
        {"precision", m_precision},
        {"set_precision", m_set_precision},
        {"forward", m_forward},
        {"backward", m_backward},
        {"seq_losses", m_seq_losses},
        {"zero_grad", m_zero_grad},
        {"grad_norm", m_grad_norm},
        {"clip_grad", m_clip_grad},
        {"params", m_params},
        {"grads", m_grads},
        {"allreduce_grads", m_allreduce_grads},
        {"backward_allreduce", m_backward_allreduce},
        {"checksum", m_checksum},
        {"set_params", m_set_params},
        {"get", m_get},
        {"set", m_set},
        {"tensors", m_tensors},
        {"eval", m_eval},
        {"logits", m_logits},
        {"generate", m_generate},
        {"init", m_init},
        {"flops_per_token", m_flops_per_token},
        {"close", m_release},
        {NULL, NULL},
    };
    static const luaL_Reg meta[] = {
        {"__gc", m_release},
        {"__close", m_release},
        {"__tostring", m_tostring},
        {NULL, NULL},
    };
    dgal_new_class(L, DGAL_MODEL, methods, meta);
    static const luaL_Reg funcs[] = {
        {"gpt", l_gpt},
        {"set_threads", l_set_threads},
        {"get_threads", l_get_threads},
        {NULL, NULL},
    };
    luaL_setfuncs(L, funcs, 0);
}

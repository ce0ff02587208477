/* The mixing part of `dga`: the mixture sampler, basis histograms (distribution
 * reweighting), the gradient-alignment primitive and a held-out loss helper.
 *
 *   smp = dga.sampler(sizes, {seed=0, budget=nil, epoch_cap=0})
 *     sizes: sequences per domain (tensor or table, k entries, integers >= 0)
 *     budget: a number (every domain) or k numbers: only the first budget sequences exist
 *     epoch_cap: a domain leaves the mixture after this many epochs (0: never)
 *   smp:set_weights(w)          k weights >= 0, any positive sum (normalised)
 *   smp:weights()               float32 k: the mixture sampled now (capped domains zeroed)
 *   smp:draw(n)                 int32 n domains, int32 n indices (1-based): training draws
 *   smp:draw_from(domain, n)    int32 n indices (1-based): probe draws for alignment batches,
 *                               which do not advance epochs/counters (see core/sampler.h)
 *   smp:epochs() smp:drawn() smp:available()   int32 k
 *   smp:capped()                int32 list of capped domains (1-based) in capping order
 *   smp:num_capped()            how many domains are capped (cheap: for a per-step check)
 *   smp:state() / smp:set_state(str)           checkpoint blob, exact resume
 *   smp:k() smp:epoch_cap() smp:seed()
 *
 *   P = dga.basis(k, columns)   columns: list of N float32 k histograms (stored sparse,
 *                               each normalised)
 *   P:mix(alpha_dist)           float32 k = P alpha_dist
 *   P:draw(j, n, smp)           int32 n domains, int32 n indices (1-based) from mix(p_j),
 *                               using smp's probe generator and budgets
 *   P:column(j) P:k() P:n() P:nnz()
 *
 *   dga.align(model, t_inputs, t_targets, batches, {method="exact"|"fd"|"jvp", fd_eps=1e-3})
 *             -> {align=, dot=, loss=, grad_norm= (float32 k), target_norm=, target_loss=,
 *             method=, k=}
 *     align and dot are both the raw inner products <g_i, g_t>: normalising them (cosine, by
 *     the mean norm, by the learning rate) is the policy's business, from dot, grad_norm and
 *     target_norm.
 *     method "fd": central differences along the target gradient, forward passes only
 *     (core/align.h); grad_norm is NaN then.
 *     method "jvp": the same derivative by forward-mode differentiation, exact to rounding;
 *     grad_norm NaN as for "fd".
 *     batches: list of {inputs, targets} (or {inputs=, targets=}); B x T int32 each.
 *     Clobbers the model's gradients (call between optimizer steps). One workspace per
 *     model, cached (weakly) so repeated rounds allocate nothing.
 *   dga.eval_loss(model, inputs, targets [, batch]) -> token-mean loss (core/eval.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "align.h"
#include "dgal.h"
#include "eval.h"
#include "gpt.h"
#include "sampler.h"

#define DGAL_SAMPLER "dga.sampler"
#define DGAL_BASIS "dga.basis"
#define DGAL_ALIGN_WS "dga.align_workspace"

/* ------------------------------------------------------------------ helpers */

/* Unknown option keys are mistakes worth reporting (a misspelt "epoch_cap" silently
 * ignored would change an experiment). */
static void check_opts(lua_State *L, int idx, const char *const *allowed)
{
    if (lua_isnoneornil(L, idx)) return;
    luaL_checktype(L, idx, LUA_TTABLE);
    dgal_check_keys(L, idx, allowed, "option");
}

/* n non-negative integer counts from a tensor (float32 or int32) or a table of numbers, into
 * a scratch array left on the stack. */
static int64_t *read_counts(lua_State *L, int idx, int arg, const char *what, int64_t *n)
{
    idx = lua_absindex(L, idx);
    dga_tensor **box = luaL_testudata(L, idx, DGAL_TENSOR);
    if (box) {
        dga_tensor *t = *box;
        if (!t) luaL_argerror(L, arg, lua_pushfstring(L, "%s: attempt to use a closed dga.tensor", what));
        *n = t->numel;
        int64_t *out = dgal_scratch(L, (size_t)t->numel * sizeof *out);
        for (int64_t i = 0; i < t->numel; i++) {
            double v = t->dtype == DGA_F32 ? (double)dga_tensor_f32(t)[i] : (double)dga_tensor_i32(t)[i];
            if (!(v >= 0) || v != floor(v) || v > 9.0e15)
                luaL_argerror(L, arg, lua_pushfstring(L, "%s[%I] = %f, expected an integer >= 0", what,
                                                      (lua_Integer)i + 1, v));
            out[i] = (int64_t)v;
        }
        return out;
    }
    if (!lua_istable(L, idx))
        luaL_argerror(L, arg, lua_pushfstring(L, "%s is a %s, expected a dga.tensor or table of "
                                              "counts", what, luaL_typename(L, idx)));
    *n = (int64_t)luaL_len(L, idx);
    int64_t *out = dgal_scratch(L, (size_t)*n * sizeof *out);
    for (int64_t i = 0; i < *n; i++) {
        lua_geti(L, idx, i + 1);
        int isnum;
        lua_Number v = lua_tonumberx(L, -1, &isnum);
        if (!isnum || !(v >= 0) || v != floor(v) || v > 9.0e15)
            luaL_argerror(L, arg, lua_pushfstring(L, "%s[%I] is %s, expected an integer >= 0", what,
                                                  (lua_Integer)i + 1, luaL_tolstring(L, -1, NULL)));
        out[i] = (int64_t)v;
        lua_pop(L, 1);
    }
    return out;
}

/* A float32 vector (tensor of any shape, or a table) anchored on the stack. */
static dga_tensor *anchored_f32(lua_State *L, int idx)
{
    dga_tensor *t = dgal_to_tensor(L, idx, DGA_F32);
    dgal_push_tensor(L, t);   /* the box owns the reference: a later error cannot leak it */
    return t;
}

static dga_tensor *new_vec(lua_State *L, dga_dtype dtype, int64_t n)
{
    dga_tensor *t = NULL;
    dga_status st = dga_tensor_new(dtype, 1, &n, &t);
    if (st != DGA_OK) dgal_error(L, st);   /* raises */
    dgal_push_tensor(L, t);
    return t;
}

static void push_i32_counts(lua_State *L, const int64_t *v, int64_t n)
{
    int32_t *o = dga_tensor_i32(new_vec(L, DGA_I32, n));
    for (int64_t i = 0; i < n; i++) o[i] = v[i] > INT32_MAX ? INT32_MAX : (int32_t)v[i];
}

/* ------------------------------------------------------------------ dga.sampler */

static dga_sampler *check_sampler(lua_State *L, int idx)
{
    return dgal_box_check(L, idx, DGAL_SAMPLER);
}

static int smp_release(lua_State *L)
{
    dga_sampler_free(dgal_box_take(L, 1, DGAL_SAMPLER));
    return 0;
}

static int smp_tostring(lua_State *L)
{
    dga_sampler *s = dgal_box_get(L, 1, DGAL_SAMPLER);
    if (!s) {
        lua_pushliteral(L, "dga.sampler (closed)");
        return 1;
    }
    int64_t k = dga_sampler_k(s), total = 0, nc;
    const int64_t *av = dga_sampler_available(s);
    for (int64_t i = 0; i < k; i++) total += av[i];
    dga_sampler_capped(s, &nc);
    lua_pushfstring(L, "dga.sampler(k=%I, %I sequences available, epoch_cap=%I, seed=%I; %I capped)",
                    (lua_Integer)k, (lua_Integer)total, (lua_Integer)dga_sampler_epoch_cap(s),
                    (lua_Integer)dga_sampler_seed(s), (lua_Integer)nc);
    return 1;
}

static const char *const sampler_keys[] = {"seed", "budget", "epoch_cap", NULL};

/* dga.sampler(sizes, {seed=0, budget=nil, epoch_cap=0}) */
static int l_sampler(lua_State *L)
{
    lua_settop(L, 2);
    check_opts(L, 2, sampler_keys);
    int64_t k;
    int64_t *sizes = read_counts(L, 1, 1, "sizes", &k);   /* stack 3 */
    if (k < 1) luaL_argerror(L, 1, "sizes is empty, expected one entry per domain");
    lua_Integer seed = 0, cap = 0;
    int64_t *budget = NULL;
    if (lua_istable(L, 2)) {
        seed = dgal_opt_int(L, 2, "seed", 0, LUA_MININTEGER, LUA_MAXINTEGER);
        cap = dgal_opt_int(L, 2, "epoch_cap", 0, 0, LUA_MAXINTEGER);
        lua_getfield(L, 2, "budget");   /* stack 4 */
        if (lua_type(L, -1) == LUA_TNUMBER) {
            lua_Number v = lua_tonumber(L, -1);
            if (!(v >= 0) || v != floor(v))
                luaL_argerror(L, 2, lua_pushfstring(L, "budget = %f, expected an integer >= 0", v));
            budget = dgal_scratch(L, (size_t)k * sizeof *budget);
            for (int64_t i = 0; i < k; i++) budget[i] = (int64_t)v;
        } else if (!lua_isnil(L, -1)) {
            int64_t nb;
            budget = read_counts(L, 4, 2, "budget", &nb);
            if (nb != k)
                luaL_argerror(L, 2, lua_pushfstring(L, "budget has %I entries, expected one per domain (%I)",
                                                    (lua_Integer)nb, (lua_Integer)k));
        }
    }
    dgal_box *b = dgal_box_new(L, DGAL_SAMPLER, 0);
    dga_sampler *s;
    DGAL_CHECK(L, dga_sampler_create(k, sizes, budget, cap, (uint64_t)seed, &s));
    b->p = s;
    return 1;
}

static int smp_set_weights(lua_State *L)
{
    dga_sampler *s = check_sampler(L, 1);
    dga_tensor *w = anchored_f32(L, 2);
    if (dga_sampler_set_weights(s, dga_tensor_f32(w), w->numel) != DGA_OK)
        luaL_argerror(L, 2, dga_last_error());
    lua_settop(L, 1);
    return 1;   /* chainable */
}

static int smp_weights(lua_State *L)
{
    dga_sampler *s = check_sampler(L, 1);
    int64_t k = dga_sampler_k(s);
    double *tmp = dgal_scratch(L, (size_t)k * sizeof *tmp);
    dga_sampler_weights(s, tmp);
    float *o = dga_tensor_f32(new_vec(L, DGA_F32, k));
    for (int64_t i = 0; i < k; i++) o[i] = (float)tmp[i];
    return 1;
}

static lua_Integer check_count(lua_State *L, int idx)
{
    lua_Integer n = luaL_checkinteger(L, idx);
    luaL_argcheck(L, n >= 0 && n <= INT32_MAX, idx, "count must be in [0, 2^31)");
    return n;
}

static void to_one_based(dga_tensor *t)
{
    int32_t *p = dga_tensor_i32(t);
    for (int64_t i = 0; i < t->numel; i++) p[i] += 1;
}

static int smp_draw(lua_State *L)
{
    dga_sampler *s = check_sampler(L, 1);
    lua_Integer n = check_count(L, 2);
    dga_tensor *d = new_vec(L, DGA_I32, n), *i = new_vec(L, DGA_I32, n);
    DGAL_CHECK(L, dga_sampler_draw(s, n, dga_tensor_i32(d), dga_tensor_i32(i)));
    to_one_based(d);
    to_one_based(i);
    return 2;
}

static int smp_draw_from(lua_State *L)
{
    dga_sampler *s = check_sampler(L, 1);
    lua_Integer d = luaL_checkinteger(L, 2);
    luaL_argcheck(L, d >= 1 && d <= dga_sampler_k(s), 2,
                  lua_pushfstring(L, "domain %I outside [1, %I]", d, (lua_Integer)dga_sampler_k(s)));
    lua_Integer n = check_count(L, 3);
    dga_tensor *i = new_vec(L, DGA_I32, n);
    DGAL_CHECK(L, dga_sampler_draw_from(s, d - 1, n, dga_tensor_i32(i)));
    to_one_based(i);
    return 1;
}

static int smp_epochs(lua_State *L)
{
    dga_sampler *s = check_sampler(L, 1);
    push_i32_counts(L, dga_sampler_epochs(s), dga_sampler_k(s));
    return 1;
}

static int smp_drawn(lua_State *L)
{
    dga_sampler *s = check_sampler(L, 1);
    push_i32_counts(L, dga_sampler_drawn(s), dga_sampler_k(s));
    return 1;
}

static int smp_available(lua_State *L)
{
    dga_sampler *s = check_sampler(L, 1);
    push_i32_counts(L, dga_sampler_available(s), dga_sampler_k(s));
    return 1;
}

static int smp_capped(lua_State *L)
{
    dga_sampler *s = check_sampler(L, 1);
    int64_t n;
    const int32_t *c = dga_sampler_capped(s, &n);
    int32_t *o = dga_tensor_i32(new_vec(L, DGA_I32, n));
    for (int64_t i = 0; i < n; i++) o[i] = c[i] + 1;
    return 1;
}

static int smp_num_capped(lua_State *L)
{
    int64_t n;
    dga_sampler_capped(check_sampler(L, 1), &n);
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
}

static int smp_state(lua_State *L)
{
    dga_sampler *s = check_sampler(L, 1);
    size_t n = dga_sampler_state_size(s);
    luaL_Buffer b;   /* written in place: nothing to free if Lua runs out of memory */
    dga_sampler_state_write(s, luaL_buffinitsize(L, &b, n));
    luaL_pushresultsize(&b, n);
    return 1;
}

static int smp_set_state(lua_State *L)
{
    dga_sampler *s = check_sampler(L, 1);
    size_t len;
    const char *buf = luaL_checklstring(L, 2, &len);
    dga_status st = dga_sampler_state_load(s, buf, len);
    if (st != DGA_OK) luaL_argerror(L, 2, dga_last_error());
    lua_settop(L, 1);
    return 1;
}

static int smp_k(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dga_sampler_k(check_sampler(L, 1)));
    return 1;
}

static int smp_epoch_cap(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dga_sampler_epoch_cap(check_sampler(L, 1)));
    return 1;
}

static int smp_seed(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dga_sampler_seed(check_sampler(L, 1)));
    return 1;
}

/* ------------------------------------------------------------------ dga.basis */

static dga_basis *check_basis(lua_State *L, int idx)
{
    return dgal_box_check(L, idx, DGAL_BASIS);
}

static int basis_release(lua_State *L)
{
    dga_basis_free(dgal_box_take(L, 1, DGAL_BASIS));
    return 0;
}

static int basis_tostring(lua_State *L)
{
    dga_basis *P = dgal_box_get(L, 1, DGAL_BASIS);
    if (!P) lua_pushliteral(L, "dga.basis (closed)");
    else
        lua_pushfstring(L, "dga.basis(k=%I leaf domains, N=%I histograms, %I non-zeros)",
                        (lua_Integer)dga_basis_k(P), (lua_Integer)dga_basis_n(P),
                        (lua_Integer)dga_basis_nnz(P));
    return 1;
}

/* dga.basis(k, columns) */
static int l_basis(lua_State *L)
{
    lua_settop(L, 2);
    lua_Integer k = luaL_checkinteger(L, 1);
    luaL_argcheck(L, k >= 1 && k <= INT32_MAX, 1, "k must be in [1, 2^31)");
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 2);
    luaL_argcheck(L, n >= 1, 2, "columns is empty, expected a list of N >= 1 histograms");
    const float **cols = dgal_scratch(L, (size_t)n * sizeof *cols);   /* stack 3 */
    /* Converted columns are anchored in a table, not on the stack: N is unbounded. */
    lua_createtable(L, (int)n, 0);                                      /* stack 4 */
    for (lua_Integer j = 1; j <= n; j++) {
        lua_geti(L, 2, j);
        char what[48];
        snprintf(what, sizeof what, "columns[%lld]", (long long)j);
        dga_tensor *t = dgal_to_tensor_at(L, -1, DGA_F32, 2, what);
        dgal_push_tensor(L, t);
        if (t->numel != k)
            luaL_argerror(L, 2, lua_pushfstring(L, "column %I has %I entries, expected k = %I", j,
                                                (lua_Integer)t->numel, k));
        cols[j - 1] = dga_tensor_f32(t);
        lua_rawseti(L, 4, j);   /* keep the anchored tensor */
        lua_pop(L, 1);          /* drop the raw value */
    }
    dgal_box *b = dgal_box_new(L, DGAL_BASIS, 0);
    dga_basis *P;
    DGAL_CHECK(L, dga_basis_create(k, n, cols, &P));
    b->p = P;
    return 1;
}

static int basis_mix(lua_State *L)
{
    dga_basis *P = check_basis(L, 1);
    dga_tensor *a = anchored_f32(L, 2);
    float *o = dga_tensor_f32(new_vec(L, DGA_F32, dga_basis_k(P)));
    dga_status st = dga_mix_dist(P, dga_tensor_f32(a), a->numel, o);
    if (st != DGA_OK) luaL_argerror(L, 2, dga_last_error());
    return 1;
}

static int basis_draw(lua_State *L)
{
    dga_basis *P = check_basis(L, 1);
    lua_Integer j = luaL_checkinteger(L, 2);
    luaL_argcheck(L, j >= 1 && j <= dga_basis_n(P), 2,
                  lua_pushfstring(L, "basis %I outside [1, %I]", j, (lua_Integer)dga_basis_n(P)));
    lua_Integer n = check_count(L, 3);
    dga_sampler *s = check_sampler(L, 4);
    dga_tensor *d = new_vec(L, DGA_I32, n), *i = new_vec(L, DGA_I32, n);
    DGAL_CHECK(L, dga_basis_draw(P, j - 1, s, n, dga_tensor_i32(d), dga_tensor_i32(i)));
    to_one_based(d);
    to_one_based(i);
    return 2;
}

static int basis_column(lua_State *L)
{
    dga_basis *P = check_basis(L, 1);
    lua_Integer j = luaL_checkinteger(L, 2);
    luaL_argcheck(L, j >= 1 && j <= dga_basis_n(P), 2,
                  lua_pushfstring(L, "basis %I outside [1, %I]", j, (lua_Integer)dga_basis_n(P)));
    float *o = dga_tensor_f32(new_vec(L, DGA_F32, dga_basis_k(P)));
    DGAL_CHECK(L, dga_basis_column(P, j - 1, o));
    return 1;
}

static int basis_k(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dga_basis_k(check_basis(L, 1)));
    return 1;
}

static int basis_n(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dga_basis_n(check_basis(L, 1)));
    return 1;
}

static int basis_nnz(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dga_basis_nnz(check_basis(L, 1)));
    return 1;
}

/* ------------------------------------------------------------------ alignment */

static int ws_release(lua_State *L)
{
    dga_align_ws_free(dgal_box_take(L, 1, DGAL_ALIGN_WS));
    return 0;
}

/* The model's workspace, from a weak-keyed registry table (it dies with the model). */
static dga_align_ws *model_workspace(lua_State *L, int model_idx, size_t np)
{
    model_idx = lua_absindex(L, model_idx);
    if (luaL_getsubtable(L, LUA_REGISTRYINDEX, DGAL_ALIGN_WS) == 0) {
        lua_createtable(L, 0, 1);
        lua_pushliteral(L, "k");
        lua_setfield(L, -2, "__mode");
        lua_setmetatable(L, -2);
    }
    lua_pushvalue(L, model_idx);
    lua_rawget(L, -2);
    dgal_box *b = luaL_testudata(L, -1, DGAL_ALIGN_WS);
    if (b && b->p) {
        lua_remove(L, -2);
        return b->p;
    }
    lua_pop(L, 1);
    b = dgal_box_new(L, DGAL_ALIGN_WS, 0);
    dga_align_ws *ws;
    dga_status st = dga_align_ws_create(np, &ws);
    if (st != DGA_OK) dgal_error(L, st);   /* raises */
    b->p = ws;
    lua_pushvalue(L, model_idx);
    lua_pushvalue(L, -2);
    lua_rawset(L, -4);
    lua_remove(L, -2);
    return ws;
}

/* A B x T (or 1-D: one row) int32 batch anchored on the stack; arg/what name it in errors. */
static dga_batch to_batch(lua_State *L, int in_idx, int tg_idx, int arg, const char *what)
{
    in_idx = lua_absindex(L, in_idx);
    tg_idx = lua_absindex(L, tg_idx);
    if (lua_isnoneornil(L, in_idx) || lua_isnoneornil(L, tg_idx))
        luaL_argerror(L, arg, lua_pushfstring(L, "%s needs inputs and targets", what));
    char w[80];
    snprintf(w, sizeof w, "%s inputs", what);
    dga_tensor *in = dgal_to_tensor_at(L, in_idx, DGA_I32, arg, in_idx == arg ? NULL : w);
    dgal_push_tensor(L, in);
    snprintf(w, sizeof w, "%s targets", what);
    const int direct = in_idx == arg && tg_idx == arg + 1;   /* both are arguments */
    dga_tensor *tg = dgal_to_tensor_at(L, tg_idx, DGA_I32, direct ? tg_idx : arg, direct ? NULL : w);
    dgal_push_tensor(L, tg);
    char a[64], b[64];
    if (in->ndim > 2 || tg->ndim != in->ndim || memcmp(in->shape, tg->shape, sizeof(int64_t) * in->ndim) != 0)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: inputs %s and targets %s, expected two B x T int32 "
                                              "tensors of the same shape", what,
                                              dga_tensor_describe(in, a, sizeof a),
                                              dga_tensor_describe(tg, b, sizeof b)));
    dga_batch bt;
    bt.inputs = dga_tensor_i32(in);
    bt.targets = dga_tensor_i32(tg);
    bt.B = in->ndim == 2 ? (int)in->shape[0] : 1;
    bt.T = in->ndim == 2 ? (int)in->shape[1] : (int)in->shape[0];
    if (bt.B < 1 || bt.T < 1)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s is empty (%s)", what, dga_tensor_describe(in, a, sizeof a)));
    return bt;
}

static const char *const align_keys[] = {"method", "fd_eps", NULL};
static const char *const align_methods[] = {"exact", "fd", "jvp", NULL};

static void set_vec_field(lua_State *L, const char *name, const double *v, int k)
{
    float *o = dga_tensor_f32(new_vec(L, DGA_F32, k));
    for (int i = 0; i < k; i++) o[i] = (float)v[i];
    lua_setfield(L, -2, name);
}

/* dga.align(model, t_inputs, t_targets, batches, opts) */
static int l_align(lua_State *L)
{
    lua_settop(L, 5);
    dga_model *m = dgal_check_model(L, 1);
    check_opts(L, 5, align_keys);
    dga_align_opts o = {.method = DGA_ALIGN_EXACT};
    DGAL_CHECK(L, dga_align_method_parse(dgal_opt_str(L, 5, "method", "exact", align_methods),
                                         &o.method));
    o.fd_eps = dgal_opt_num(L, 5, "fd_eps", 0, 0, HUGE_VAL, DGAL_LO_OPEN);
    luaL_checktype(L, 4, LUA_TTABLE);
    lua_Integer k = luaL_len(L, 4);
    luaL_argcheck(L, k >= 1 && k <= INT32_MAX, 4, "batches must be a non-empty list of {inputs, targets}");
    dga_align_ws *ws = model_workspace(L, 1, dga_model_num_params(m));
    lua_pop(L, 1);   /* the workspace stays referenced by the registry table */

    dga_batch target = to_batch(L, 2, 3, 2, "target batch");
    dga_batch *batches = dgal_scratch(L, (size_t)k * sizeof *batches);
    /* The converted tensors of every batch are anchored in a table, not on the stack:
     * k is unbounded and the Lua stack is not. */
    lua_createtable(L, (int)(2 * k), 0);
    int anchors = lua_gettop(L);
    for (lua_Integer i = 1; i <= k; i++) {
        lua_geti(L, 4, i);
        int e = lua_gettop(L);
        if (!lua_istable(L, e))
            luaL_argerror(L, 4, lua_pushfstring(L, "batches[%I] is a %s, expected {inputs, targets}", i,
                                                luaL_typename(L, e)));
        if (lua_getfield(L, e, "inputs") == LUA_TNIL) {
            lua_pop(L, 1);
            lua_geti(L, e, 1);
            lua_geti(L, e, 2);
        } else {
            lua_getfield(L, e, "targets");
        }
        char what[48];
        snprintf(what, sizeof what, "batches[%lld]", (long long)i);
        batches[i - 1] = to_batch(L, e + 1, e + 2, 4, what);
        /* stack: e, in, tg, in-box, tg-box: the boxes keep the data alive */
        lua_rawseti(L, anchors, 2 * i);
        lua_rawseti(L, anchors, 2 * i - 1);
        lua_settop(L, e - 1);
    }
    double *res = dgal_scratch(L, (size_t)k * 3 * sizeof *res);
    dga_align_result r = {.dot = res, .loss = res + k, .grad_norm = res + 2 * k};
    DGAL_CHECK(L, dga_align(m, ws, &target, batches, (int)k, &o, &r));
    lua_createtable(L, 0, 8);
    set_vec_field(L, "align", r.dot, (int)k);
    set_vec_field(L, "dot", r.dot, (int)k);
    set_vec_field(L, "loss", r.loss, (int)k);
    set_vec_field(L, "grad_norm", r.grad_norm, (int)k);
    lua_pushnumber(L, r.target_norm);
    lua_setfield(L, -2, "target_norm");
    lua_pushnumber(L, r.target_loss);
    lua_setfield(L, -2, "target_loss");
    lua_pushstring(L, dga_align_method_name(o.method));
    lua_setfield(L, -2, "method");
    lua_pushinteger(L, k);
    lua_setfield(L, -2, "k");
    return 1;
}

/* dga.eval_loss(model, inputs, targets [, batch]) */
static int l_eval_loss(lua_State *L)
{
    lua_settop(L, 4);
    dga_model *m = dgal_check_model(L, 1);
    lua_Integer batch = luaL_optinteger(L, 4, 0);
    luaL_argcheck(L, batch >= 0 && batch <= dga_model_max_batch(m), 4,
                  lua_pushfstring(L, "batch must be in [0, %d] (0: the model's max batch)", dga_model_max_batch(m)));
    dga_batch b = to_batch(L, 2, 3, 2, "eval_loss");
    double mean = 0;
    DGAL_CHECK(L, dga_eval_mean_loss(m, b.inputs, b.targets, (size_t)b.T, (size_t)b.B, b.T, (int)batch,
                                     &mean));
    lua_pushnumber(L, mean);
    return 1;
}

/* ------------------------------------------------------------------ registration */

void dgal_open_mix(lua_State *L)
{
    static const luaL_Reg smp_methods[] = {
        {"set_weights", smp_set_weights}, {"weights", smp_weights},     {"draw", smp_draw},
        {"draw_from", smp_draw_from},     {"epochs", smp_epochs},       {"drawn", smp_drawn},
        {"available", smp_available},     {"capped", smp_capped}, {"num_capped", smp_num_capped},       {"state", smp_state},
        {"set_state", smp_set_state},     {"k", smp_k},                 {"epoch_cap", smp_epoch_cap},
        {"seed", smp_seed},               {"close", smp_release},       {NULL, NULL}};
    static const luaL_Reg smp_meta[] = {
        {"__gc", smp_release}, {"__close", smp_release}, {"__tostring", smp_tostring}, {NULL, NULL}};
    static const luaL_Reg basis_methods[] = {
        {"mix", basis_mix}, {"draw", basis_draw}, {"column", basis_column}, {"k", basis_k},
        {"n", basis_n},     {"nnz", basis_nnz},   {"close", basis_release}, {NULL, NULL}};
    static const luaL_Reg basis_meta[] = {
        {"__gc", basis_release}, {"__close", basis_release}, {"__tostring", basis_tostring}, {NULL, NULL}};
    static const luaL_Reg ws_meta[] = {{"__gc", ws_release}, {NULL, NULL}};
    static const luaL_Reg funcs[] = {
        {"sampler", l_sampler}, {"basis", l_basis}, {"align", l_align}, {"eval_loss", l_eval_loss},
        {NULL, NULL}};
    dgal_new_class(L, DGAL_SAMPLER, smp_methods, smp_meta);
    dgal_new_class(L, DGAL_BASIS, basis_methods, basis_meta);
    dgal_new_class(L, DGAL_ALIGN_WS, NULL, ws_meta);
    luaL_setfuncs(L, funcs, 0);
}

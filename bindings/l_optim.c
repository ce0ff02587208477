/* dga.adamw: AdamW over a dga.gpt's flat parameter buffer.
 *
 * The optimizer userdata keeps its model alive through its user value, so `opt:step()`
 * always finds the parameters it was built for (unless the model was closed explicitly,
 * which is an error). Which elements are weight-decayed is decided here from the model's
 * tensor table and handed to the core as [begin, end) ranges. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "adamw.h"
#include "dgal.h"
#include "gpt.h"

/* Which parameters weight decay applies to:
 *   matrices  every 2-D tensor: the linear weights and the two embeddings (biases and
 *             layernorm exempt; what nanoGPT and the shared PyTorch reference do)
 *   linear    the linear weights only: biases, layernorm and the embeddings exempt
 *   all / none */
enum { DECAY_MATRICES = 0, DECAY_LINEAR, DECAY_ALL, DECAY_NONE };
static const char *const decay_names[] = {"matrices", "linear", "all", "none", NULL};

typedef struct {
    dga_adamw *opt;   /* NULL once closed */
    int decay;
} adamw_box;

static adamw_box *check_box(lua_State *L, int idx)
{
    return luaL_checkudata(L, idx, DGAL_ADAMW);
}

dga_adamw *dgal_check_adamw(lua_State *L, int idx)
{
    adamw_box *b = check_box(L, idx);
    if (!b->opt) luaL_argerror(L, idx, "attempt to use a closed dga.adamw");
    return b->opt;
}

dga_adamw *dgal_test_adamw(lua_State *L, int idx)
{
    adamw_box *b = luaL_testudata(L, idx, DGAL_ADAMW);
    return b ? b->opt : NULL;
}

static int o_release(lua_State *L)
{
    adamw_box *b = check_box(L, 1);
    dga_adamw_free(b->opt);
    b->opt = NULL;
    return 0;
}

/* The optimizer's model (pushed on the stack); raises if it was closed meanwhile. */
static dga_model *box_model(lua_State *L, int idx)
{
    lua_getiuservalue(L, idx, 1);
    dga_model *m = dgal_test_model(L, -1);
    if (!m) luaL_error(L, "the optimizer's dga.gpt was closed");
    return m;
}

static int o_tostring(lua_State *L)
{
    adamw_box *b = check_box(L, 1);
    if (!b->opt) {
        lua_pushliteral(L, "dga.adamw (closed)");
        return 1;
    }
    const dga_adamw_config *c = dga_adamw_get_config(b->opt);
    char buf[256];
    snprintf(buf, sizeof buf,
             "dga.adamw(lr=%g, betas=(%g, %g), eps=%g, weight_decay=%g, decay=%s; %lld steps, "
             "%zu params)",
             c->lr, c->beta1, c->beta2, c->eps, c->weight_decay, decay_names[b->decay],
             (long long)dga_adamw_steps(b->opt), dga_adamw_size(b->opt));
    lua_pushstring(L, buf);
    return 1;
}

/* ------------------------------------------------------------------ construction */

static const char *const adamw_keys[] = {"lr", "beta1", "beta2", "eps", "weight_decay", "decay",
                                         NULL};

/* dga.adamw(model, {lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1,
 *                   decay="matrices"|"linear"|"all"|"none"}) */
static int l_adamw(lua_State *L)
{
    dga_model *m = dgal_check_model(L, 1);
    dga_adamw_config cfg = dga_adamw_defaults();
    int decay = DECAY_MATRICES;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        dgal_check_keys(L, 2, adamw_keys, "field");
        cfg.lr = (float)dgal_opt_num(L, 2, "lr", cfg.lr, 0, 1e3, 0);
        cfg.beta1 = (float)dgal_opt_num(L, 2, "beta1", cfg.beta1, 0, 1, DGAL_HI_OPEN);
        cfg.beta2 = (float)dgal_opt_num(L, 2, "beta2", cfg.beta2, 0, 1, DGAL_HI_OPEN);
        cfg.eps = (float)dgal_opt_num(L, 2, "eps", cfg.eps, 0, 1, DGAL_LO_OPEN);
        cfg.weight_decay = (float)dgal_opt_num(L, 2, "weight_decay", cfg.weight_decay, 0, 1e3, 0);
        const char *d = dgal_opt_str(L, 2, "decay", decay_names[DECAY_MATRICES], decay_names);
        for (int i = 0; decay_names[i]; i++)
            if (strcmp(d, decay_names[i]) == 0) decay = i;
    }

    /* Decay ranges, adjacent tensors merged. At most one range per tensor. */
    size_t n = dga_model_num_params(m);
    int nt = dga_model_num_tensors(m);
    size_t (*ranges)[2] = lua_newuserdatauv(L, sizeof *ranges * (size_t)(nt > 0 ? nt : 1), 0);
    int nr = 0;
    if (decay == DECAY_ALL) {
        ranges[0][0] = 0;
        ranges[0][1] = n;
        nr = n > 0;
    } else if (decay == DECAY_MATRICES || decay == DECAY_LINEAR) {
        for (int i = 0; i < nt; i++) {
            const dga_tensor_info *info = dga_model_tensor(m, i);
            if (!info->is_matrix || info->numel == 0) continue;
            if (decay == DECAY_LINEAR && info->is_embedding) continue;
            if (nr > 0 && ranges[nr - 1][1] == info->offset) {
                ranges[nr - 1][1] = info->offset + info->numel;
            } else {
                ranges[nr][0] = info->offset;
                ranges[nr][1] = info->offset + info->numel;
                nr++;
            }
        }
    }

    adamw_box *b = lua_newuserdatauv(L, sizeof *b, 1);
    b->opt = NULL;
    b->decay = decay;
    luaL_setmetatable(L, DGAL_ADAMW);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);   /* keeps the model alive as long as the optimizer */
    DGAL_CHECK(L, dga_adamw_create(n, &cfg, (const size_t(*)[2])ranges, nr, &b->opt));
    return 1;
}

/* ------------------------------------------------------------------ methods */

/* opt:step([lr]) -> number of steps taken so far */
static int o_step(lua_State *L)
{
    dga_adamw *opt = dgal_check_adamw(L, 1);
    double lr = dga_adamw_get_config(opt)->lr;
    if (!lua_isnoneornil(L, 2)) {
        lr = luaL_checknumber(L, 2);
        luaL_argcheck(L, isfinite(lr) && lr >= 0, 2, "learning rate must be finite and >= 0");
    }
    dga_model *m = box_model(L, 1);
    if (dga_model_num_params(m) != dga_adamw_size(opt))
        return luaL_error(L, "step: model has %I parameters, optimizer %I",
                          (lua_Integer)dga_model_num_params(m), (lua_Integer)dga_adamw_size(opt));
    DGAL_CHECK(L, dga_adamw_step(opt, dga_model_params(m), dga_model_grads(m), (float)lr));
    lua_pushinteger(L, (lua_Integer)dga_adamw_steps(opt));
    return 1;
}

static int o_steps(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dga_adamw_steps(dgal_check_adamw(L, 1)));
    return 1;
}

static int o_config(lua_State *L)
{
    adamw_box *b = check_box(L, 1);
    const dga_adamw_config *c = dga_adamw_get_config(dgal_check_adamw(L, 1));
    lua_createtable(L, 0, 6);
    lua_pushnumber(L, c->lr);
    lua_setfield(L, -2, "lr");
    lua_pushnumber(L, c->beta1);
    lua_setfield(L, -2, "beta1");
    lua_pushnumber(L, c->beta2);
    lua_setfield(L, -2, "beta2");
    lua_pushnumber(L, c->eps);
    lua_setfield(L, -2, "eps");
    lua_pushnumber(L, c->weight_decay);
    lua_setfield(L, -2, "weight_decay");
    lua_pushstring(L, decay_names[b->decay]);
    lua_setfield(L, -2, "decay");
    return 1;
}

static int o_model(lua_State *L)
{
    dgal_check_adamw(L, 1);
    lua_getiuservalue(L, 1, 1);
    return 1;
}

void dgal_open_optim(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"step", o_step},   {"steps", o_steps},     {"config", o_config},
        {"model", o_model}, {"close", o_release},   {NULL, NULL},
    };
    static const luaL_Reg meta[] = {
        {"__gc", o_release},
        {"__close", o_release},
        {"__tostring", o_tostring},
        {NULL, NULL},
    };
    dgal_new_class(L, DGAL_ADAMW, methods, meta);
    lua_pushcfunction(L, l_adamw);
    lua_setfield(L, -2, "adamw");
}

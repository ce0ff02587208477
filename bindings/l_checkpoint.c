/* dga.save_checkpoint / dga.load_checkpoint: a model, its optimizer and the run's state in
 * one safetensors file (see core/checkpoint.h for the layout).
 *
 * Names in the file: the caller's tensors are "extra.<name>", blobs (binary strings: RNG and
 * sampler states) are U8 "blob.<name>", metadata strings "user.<key>" and numbers
 * "user_number.<key>" (decimal text, so Python reads them too). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "dgal.h"
#include "fileio.h"

#define CKPT_FILE "dga.checkpoint_file"

static const char *const save_keys[] = {"model", "optimizer", "tensors", "blobs", "meta", NULL};
static const char *const load_keys[] = {"model", "optimizer", NULL};

/* Option values are not arguments: their errors name the options table, argument arg. */
static dga_model *option_model(lua_State *L, int idx, int arg)
{
    dga_model *m = dgal_test_model(L, idx);
    if (!m)
        luaL_argerror(L, arg, lua_pushfstring(L, "option 'model' must be an open dga.gpt, got %s",
                                              luaL_typename(L, idx)));
    return m;
}

static dga_adamw *option_adamw(lua_State *L, int idx, int arg)
{
    dga_adamw *o = dgal_test_adamw(L, idx);
    if (!o)
        luaL_argerror(L, arg, lua_pushfstring(L, "option 'optimizer' must be an open "
                                              "dga.adamw, got %s", luaL_typename(L, idx)));
    return o;
}

/* The model of option table idx: field "model", else the optimizer's own model (pushed on
 * the stack either way, or nil). */
static void push_model_option(lua_State *L, int idx)
{
    lua_getfield(L, idx, "model");
    if (!lua_isnil(L, -1)) return;
    lua_pop(L, 1);
    lua_getfield(L, idx, "optimizer");
    if (lua_isnil(L, -1)) return;
    option_adamw(L, -1, idx);
    lua_getfield(L, -1, "model");     /* opt:model() */
    lua_insert(L, -2);
    lua_call(L, 1, 1);
}

static int count_pairs(lua_State *L, int idx)
{
    int n = 0;
    if (lua_isnil(L, idx)) return 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        n++;
    }
    return n;
}

static int l_save(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    dgal_check_keys(L, 2, save_keys, "option");
    push_model_option(L, 2);                                   /* 3 */
    if (lua_isnil(L, 3))
        return luaL_error(L, "bad argument #2 to 'save_checkpoint' (no model: give model= "
                          "or optimizer=)");
    dga_model *model = option_model(L, 3, 2);
    lua_getfield(L, 2, "optimizer");                           /* 4 */
    dga_adamw *opt = lua_isnil(L, 4) ? NULL : option_adamw(L, 4, 2);
    lua_getfield(L, 2, "tensors");                             /* 5 */
    lua_getfield(L, 2, "blobs");                               /* 6 */
    lua_getfield(L, 2, "meta");                                /* 7 */
    for (int i = 5; i <= 7; i++)
        if (!lua_isnil(L, i) && !lua_istable(L, i))
            return luaL_error(L, "bad argument #2 to 'save_checkpoint' (%s must be a table)",
                              save_keys[i - 3]);
    lua_newtable(L);                                           /* 8: keeps names/tensors alive */
    int anchor = 8;
    int nt = count_pairs(L, 5), nb = count_pairs(L, 6), nm = count_pairs(L, 7);
    dga_st_entry *e = dgal_scratch(L, (size_t)(nt + nb) * sizeof *e);
    lua_rawseti(L, anchor, 1);   /* the scratch userdata stays referenced by the anchor */
    dga_st_meta *m = dgal_scratch(L, (size_t)nm * sizeof *m);
    lua_rawseti(L, anchor, 2);
    int k = 0, slot = 3;

    lua_pushnil(L);
    while (!lua_isnil(L, 5) && lua_next(L, 5)) {               /* key, value */
        if (lua_type(L, -2) != LUA_TSTRING)
            return luaL_error(L, "bad argument #2 to 'save_checkpoint' (tensors: keys must be "
                              "names)");
        const char *key = lua_tostring(L, -2);
        dga_tensor **box = luaL_testudata(L, -1, DGAL_TENSOR);
        char what[96];
        snprintf(what, sizeof what, "tensors.%s", key);
        dga_tensor *t = dgal_to_tensor_at(L, -1, box && *box ? (*box)->dtype : DGA_F32, 2, what);
        dgal_push_tensor(L, t);
        lua_rawseti(L, anchor, slot++);
        e[k].name = lua_pushfstring(L, "extra.%s", key);
        lua_rawseti(L, anchor, slot++);
        e[k].dtype = t->dtype == DGA_I32 ? DGA_ST_I32 : DGA_ST_F32;
        e[k].ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) e[k].shape[d] = t->shape[d];
        e[k].data = t->data;
        k++;
        lua_pop(L, 1);
    }
    lua_pushnil(L);
    while (!lua_isnil(L, 6) && lua_next(L, 6)) {
        if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
            return luaL_error(L, "bad argument #2 to 'save_checkpoint' (blobs: expected "
                              "name = binary string pairs)");
        size_t len;
        e[k].data = lua_tolstring(L, -1, &len);   /* alive: the blobs table holds it */
        e[k].name = lua_pushfstring(L, "blob.%s", lua_tostring(L, -2));
        lua_rawseti(L, anchor, slot++);
        e[k].dtype = DGA_ST_U8;
        e[k].ndim = 1;
        e[k].shape[0] = (int64_t)len;
        k++;
        lua_pop(L, 1);
    }
    int q = 0;
    lua_pushnil(L);
    while (!lua_isnil(L, 7) && lua_next(L, 7)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            return luaL_error(L, "bad argument #2 to 'save_checkpoint' (meta: keys must be "
                              "strings)");
        const char *key = lua_tostring(L, -2);
        if (lua_type(L, -1) == LUA_TSTRING) {
            m[q].key = lua_pushfstring(L, "user.%s", key);
            lua_rawseti(L, anchor, slot++);
            m[q].value = lua_tostring(L, -1);
        } else if (lua_type(L, -1) == LUA_TNUMBER) {
            char buf[64];
            if (lua_isinteger(L, -1)) {
                snprintf(buf, sizeof buf, "%lld", (long long)lua_tointeger(L, -1));
            } else {
                /* %.17g round-trips a double; a trailing ".0" keeps 3.0 a float on reload. */
                snprintf(buf, sizeof buf, "%.17g", (double)lua_tonumber(L, -1));
                if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
            }
            m[q].key = lua_pushfstring(L, "user_number.%s", key);
            lua_rawseti(L, anchor, slot++);
            m[q].value = lua_pushstring(L, buf);
            lua_rawseti(L, anchor, slot++);
        } else {
            return luaL_error(L, "bad argument #2 to 'save_checkpoint' (meta.%s is a %s, "
                              "expected a string or a number)", key, luaL_typename(L, -1));
        }
        q++;
        lua_pop(L, 1);
    }
    DGAL_CHECK(L, dga_checkpoint_save(path, model, opt, e, k, m, q));
    return 0;
}

/* ---- loading ---- */

static int file_gc(lua_State *L)
{
    dga_checkpoint_close(dgal_box_take(L, 1, CKPT_FILE));
    return 0;
}

static void push_entry_tensor(lua_State *L, const char *path, const dga_st_entry *e)
{
    if (e->ndim < 1 || e->ndim > DGA_MAX_DIMS || (e->dtype != DGA_ST_F32 &&
                                                   e->dtype != DGA_ST_I32))
        luaL_error(L, "%s: tensor '%s' is %s with %d dimensions (dga.tensor needs F32 or I32, "
                   "1 to 4 dimensions)", path, e->name, dga_st_dtype_name(e->dtype), e->ndim);
    dga_tensor **box = lua_newuserdatauv(L, sizeof *box, 0);
    *box = NULL;
    luaL_setmetatable(L, DGAL_TENSOR);
    dga_status st = dga_tensor_new(e->dtype == DGA_ST_I32 ? DGA_I32 : DGA_F32, e->ndim,
                                   e->shape, box);
    if (st != DGA_OK) dgal_error(L, st);
    memcpy((*box)->data, e->data, dga_st_entry_nbytes(e));
}

static void push_meta_number(lua_State *L, const char *s)
{
    if (!lua_stringtonumber(L, s)) lua_pushnumber(L, strtod(s, NULL));   /* inf, nan */
}

static int l_load(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    int has_opts = !lua_isnoneornil(L, 2);
    if (has_opts) {
        luaL_checktype(L, 2, LUA_TTABLE);
        dgal_check_keys(L, 2, load_keys, "option");
    }
    lua_settop(L, 2);
    dgal_box *ckbox = dgal_box_new(L, CKPT_FILE, 0);   /* 3 */
    dga_checkpoint *ck;
    DGAL_CHECK(L, dga_checkpoint_open(path, &ck));
    ckbox->p = ck;
    const dga_safetensors *f = dga_checkpoint_file(ck);

    if (has_opts) push_model_option(L, 2); else lua_pushnil(L);       /* 4 */
    if (has_opts) lua_getfield(L, 2, "optimizer"); else lua_pushnil(L); /* 5 */
    dga_adamw *opt = lua_isnil(L, 5) ? NULL : option_adamw(L, 5, 2);
    dga_model *model;
    if (lua_isnil(L, 4)) {   /* no model given: a new one, shaped as the file says */
        dgal_box *mbox = dgal_box_new(L, DGAL_MODEL, 0);   /* closed until the model exists */
        lua_replace(L, 4);
        model = NULL;
        DGAL_CHECK(L, dga_gpt_create(dga_checkpoint_config(ck), dga_checkpoint_max_batch(ck), &model));
        mbox->p = model;
    } else {
        model = option_model(L, 4, 2);
    }
    lua_settop(L, 5);
    /* Checked before touching the model: a missing optimizer state or a config mismatch (both
     * load functions check it first) changes nothing. */
    if (opt && !dga_checkpoint_has_optimizer(ck))
        return luaL_error(L, "%s: the checkpoint holds no optimizer state", path);
    DGAL_CHECK(L, dga_checkpoint_load_model(ck, model));
    if (opt) DGAL_CHECK(L, dga_checkpoint_load_optimizer(ck, model, opt));

    lua_createtable(L, 0, 6);                                            /* 6: result */
    dgal_push_gpt_config(L, dga_checkpoint_config(ck), dga_checkpoint_max_batch(ck));
    lua_setfield(L, 6, "config");
    lua_pushvalue(L, 4);
    lua_setfield(L, 6, "model");
    lua_newtable(L);                                                     /* 7: tensors */
    lua_newtable(L);                                                     /* 8: blobs */
    for (int i = 0; i < dga_safetensors_count(f); i++) {
        const dga_st_entry *e = dga_safetensors_entry(f, i);
        if (!strncmp(e->name, "extra.", 6)) {
            push_entry_tensor(L, path, e);
            lua_setfield(L, 7, e->name + 6);
        } else if (!strncmp(e->name, "blob.", 5) && e->dtype == DGA_ST_U8) {
            lua_pushlstring(L, (const char *)e->data, dga_st_entry_nbytes(e));
            lua_setfield(L, 8, e->name + 5);
        }
    }
    lua_setfield(L, 6, "blobs");
    lua_setfield(L, 6, "tensors");
    lua_newtable(L);
    for (int i = 0; i < dga_safetensors_meta_count(f); i++) {
        const dga_st_meta *mt = dga_safetensors_meta_at(f, i);
        if (!strncmp(mt->key, "user.", 5)) {
            lua_pushstring(L, mt->value);
            lua_setfield(L, -2, mt->key + 5);
        } else if (!strncmp(mt->key, "user_number.", 12)) {
            push_meta_number(L, mt->value);
            lua_setfield(L, -2, mt->key + 12);
        }
    }
    lua_setfield(L, 6, "meta");
    if (dga_checkpoint_has_optimizer(ck)) {
        const char *s = dga_safetensors_meta(f, "optimizer.steps");
        lua_pushinteger(L, s ? strtoll(s, NULL, 10) : 0);
        lua_setfield(L, 6, "steps");
    }
    dga_checkpoint_close(dgal_box_take(L, 3, CKPT_FILE));   /* early: its memory is not needed */
    lua_settop(L, 6);
    return 1;
}

/* dga.write_file_atomic(path, text): the core's atomic write (temporary file, fsync, rename,
 * directory sync), so the small files Lua writes (configs, CSV rewrites, pointers) survive a
 * crash as whole files exactly like checkpoints do. */
static int l_write_file_atomic(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    size_t len;
    const char *text = luaL_checklstring(L, 2, &len);
    const void *parts[1] = {text};
    size_t sizes[1] = {len};
    DGAL_CHECK(L, dga_write_file_atomic(path, 1, parts, sizes));
    return 0;
}

void dgal_open_checkpoint(lua_State *L)
{
    static const luaL_Reg meta[] = {{"__gc", file_gc}, {"__close", file_gc}, {NULL, NULL}};
    dgal_new_class(L, CKPT_FILE, NULL, meta);
    static const luaL_Reg funcs[] = {
        {"save_checkpoint", l_save}, {"load_checkpoint", l_load},
        {"write_file_atomic", l_write_file_atomic}, {NULL, NULL},
    };
    luaL_setfuncs(L, funcs, 0);
}

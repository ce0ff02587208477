/* Helpers shared by every binding file: errors, classes, scratch memory, option keys, object
 * boxes, and the tensor box.
 *
 * A dga.tensor userdata holds exactly one `dga_tensor *` (NULL once closed) and owns one
 * reference on it. */
#include "dgal.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int dgal_error(lua_State *L, dga_status st)
{
    const char *msg = dga_last_error();
    if (!msg || !*msg) msg = dga_status_name(st);
    return luaL_error(L, "%s", msg);
}

void dgal_new_class(lua_State *L, const char *tname, const luaL_Reg *methods,
                    const luaL_Reg *metamethods)
{
    luaL_newmetatable(L, tname);            /* sets __name */
    if (metamethods) luaL_setfuncs(L, metamethods, 0);
    if (methods) {
        lua_newtable(L);
        luaL_setfuncs(L, methods, 0);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
}

void *dgal_scratch(lua_State *L, size_t bytes)
{
    void *p = lua_newuserdatauv(L, bytes ? bytes : 1, 0);
    memset(p, 0, bytes ? bytes : 1);
    return p;
}

void dgal_check_keys(lua_State *L, int idx, const char *const *allowed, const char *what)
{
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        int ok = 0;
        if (lua_type(L, -1) == LUA_TSTRING)
            for (const char *const *a = allowed; *a && !ok; a++)
                ok = strcmp(lua_tostring(L, -1), *a) == 0;
        if (ok) continue;
        const char *key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1)
                                                         : luaL_typename(L, -1);
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        for (const char *const *a = allowed; *a; a++) {
            if (a != allowed) luaL_addstring(&b, ", ");
            luaL_addstring(&b, *a);
        }
        luaL_pushresult(&b);
        luaL_argerror(L, idx, lua_pushfstring(L, "unknown %s '%s' (expected %s)", what, key,
                                              lua_tostring(L, -1)));
    }
}

/* The option's value on the stack top, or 0 (nothing pushed) when the table or the field is
 * absent. */
static int push_opt(lua_State *L, int arg, const char *name)
{
    if (lua_isnoneornil(L, arg)) return 0;
    luaL_checktype(L, arg, LUA_TTABLE);
    if (lua_getfield(L, arg, name) != LUA_TNIL) return 1;
    lua_pop(L, 1);
    return 0;
}

static int opt_error(lua_State *L, int arg, const char *name, const char *expected)
{
    const char *got = lua_type(L, -1) == LUA_TNUMBER ? luaL_tolstring(L, -1, NULL)
                      : lua_type(L, -1) == LUA_TSTRING ? lua_pushfstring(L, "\"%s\"", lua_tostring(L, -1))
                                                       : luaL_typename(L, -1);
    return luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' must be %s, got %s", name,
                                                 expected, got));
}

static const char *int_range(lua_State *L, lua_Integer lo, lua_Integer hi)
{
    if (lo == LUA_MININTEGER && hi == LUA_MAXINTEGER) return "an integer";
    if (hi == LUA_MAXINTEGER || hi == INT_MAX) return lua_pushfstring(L, "an integer >= %I", lo);
    return lua_pushfstring(L, "an integer in [%I, %I]", lo, hi);
}

static lua_Integer check_int(lua_State *L, int arg, const char *name, lua_Integer lo,
                             lua_Integer hi)
{
    int isint = 0;
    lua_Integer v = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
    if (!isint || v < lo || v > hi) {
        const char *want = int_range(L, lo, hi);
        lua_pushvalue(L, -2);   /* the value back on top for the message */
        opt_error(L, arg, name, want);
    }
    lua_pop(L, 1);
    return v;
}

lua_Integer dgal_opt_int(lua_State *L, int arg, const char *name, lua_Integer def,
                         lua_Integer lo, lua_Integer hi)
{
    return push_opt(L, arg, name) ? check_int(L, arg, name, lo, hi) : def;
}

lua_Integer dgal_need_int(lua_State *L, int arg, const char *name, lua_Integer lo,
                          lua_Integer hi)
{
    luaL_checktype(L, arg, LUA_TTABLE);
    if (!push_opt(L, arg, name))
        luaL_argerror(L, arg, lua_pushfstring(L, "missing option '%s' (%s)", name,
                                              int_range(L, lo, hi)));
    return check_int(L, arg, name, lo, hi);
}

double dgal_opt_num(lua_State *L, int arg, const char *name, double def, double lo, double hi,
                    int open)
{
    if (!push_opt(L, arg, name)) return def;
    double v = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : NAN;
    int ok = isfinite(v) && ((open & DGAL_LO_OPEN) ? v > lo : v >= lo) &&
             ((open & DGAL_HI_OPEN) ? v < hi : v <= hi);
    if (!ok) {
        char want[96];
        if (lo == -HUGE_VAL && hi == HUGE_VAL) snprintf(want, sizeof want, "a finite number");
        else if (hi == HUGE_VAL)
            snprintf(want, sizeof want, "a number %s %g", (open & DGAL_LO_OPEN) ? ">" : ">=", lo);
        else
            snprintf(want, sizeof want, "a number in %c%g, %g%c", (open & DGAL_LO_OPEN) ? '(' : '[',
                     lo, hi, (open & DGAL_HI_OPEN) ? ')' : ']');
        opt_error(L, arg, name, want);
    }
    lua_pop(L, 1);
    return v;
}

const char *dgal_opt_str(lua_State *L, int arg, const char *name, const char *def,
                         const char *const *choices)
{
    if (!push_opt(L, arg, name)) return def;
    if (lua_type(L, -1) == LUA_TSTRING) {
        const char *v = lua_tostring(L, -1);
        int ok = !choices;
        for (const char *const *c = choices; c && *c && !ok; c++) ok = strcmp(v, *c) == 0;
        if (ok) {
            lua_pop(L, 1);   /* still referenced by the options table */
            return v;
        }
    }
    if (!choices) opt_error(L, arg, name, "a string");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "one of ");
    for (const char *const *c = choices; *c; c++) {
        if (c != choices) luaL_addstring(&b, ", ");
        lua_pushfstring(L, "\"%s\"", *c);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    lua_insert(L, -2);   /* the value stays on top for the message */
    opt_error(L, arg, name, lua_tostring(L, -2));
    return NULL;
}

int dgal_opt_bool(lua_State *L, int arg, const char *name, int def)
{
    if (!push_opt(L, arg, name)) return def;
    if (lua_type(L, -1) != LUA_TBOOLEAN) opt_error(L, arg, name, "a boolean");
    int v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

dgal_box *dgal_box_new(lua_State *L, const char *tname, int nuv)
{
    dgal_box *b = lua_newuserdatauv(L, sizeof *b, nuv);
    b->p = NULL;
    luaL_setmetatable(L, tname);
    return b;
}

void *dgal_box_check(lua_State *L, int idx, const char *tname)
{
    dgal_box *b = luaL_checkudata(L, idx, tname);
    if (!b->p) luaL_argerror(L, idx, lua_pushfstring(L, "attempt to use a closed %s", tname));
    return b->p;
}

void *dgal_box_get(lua_State *L, int idx, const char *tname)
{
    return ((dgal_box *)luaL_checkudata(L, idx, tname))->p;
}

void *dgal_box_take(lua_State *L, int idx, const char *tname)
{
    dgal_box *b = luaL_checkudata(L, idx, tname);
    void *p = b->p;
    b->p = NULL;
    return p;
}

dga_tensor *dgal_check_tensor(lua_State *L, int idx)
{
    dga_tensor **box = luaL_checkudata(L, idx, DGAL_TENSOR);
    if (!*box) luaL_argerror(L, idx, "attempt to use a closed dga.tensor");
    return *box;
}

void dgal_push_tensor(lua_State *L, dga_tensor *t)
{
    dga_tensor **box = lua_newuserdatauv(L, sizeof *box, 0);
    *box = t;
    luaL_setmetatable(L, DGAL_TENSOR);
}

/* ---- tables -> tensors ---- */

/* Finds the shape of a nested table by following first elements. */
static int arg_error(lua_State *L, int arg, const char *what, const char *msg)
{
    if (what) msg = lua_pushfstring(L, "%s: %s", what, msg);
    if (arg <= 0) return luaL_error(L, "%s", msg);
    return luaL_argerror(L, arg, msg);
}

static void table_shape(lua_State *L, int idx, int arg, const char *what, int *ndim,
                        int64_t *shape)
{
    int top = lua_gettop(L);
    lua_pushvalue(L, idx);
    *ndim = 0;
    for (;;) {
        if (*ndim == DGA_MAX_DIMS)
            arg_error(L, arg, what, "table nested deeper than 4 levels (tensors are at most 4-D)");
        int64_t n = (int64_t)lua_rawlen(L, -1);
        shape[(*ndim)++] = n;
        if (n == 0) break;
        lua_rawgeti(L, -1, 1);
        if (!lua_istable(L, -1)) break;
    }
    lua_settop(L, top);
}

static void index_text(char *buf, size_t size, const int64_t *pos, int depth)
{
    size_t n = 0;
    buf[0] = 0;
    for (int d = 0; d < depth && n + 1 < size; d++) {
        int w = snprintf(buf + n, size - n, "%s%lld", d ? "," : "[", (long long)pos[d]);
        if (w > 0) n += (size_t)w;
    }
    if (n + 1 < size) snprintf(buf + n, size - n, "]");
}

/* Fills t from the table on the top of the stack (recursively); raises a Lua error naming
 * argument `arg` on a ragged table or a non-number. */
static void table_fill(lua_State *L, int arg, const char *what, dga_tensor *t, int depth,
                       int64_t *pos, int64_t *k)
{
    char where[80];
    if (depth < 0 || depth >= DGA_MAX_DIMS) return;   /* table_shape caps the depth */
    int64_t n = (int64_t)lua_rawlen(L, -1);
    if (n != t->shape[depth]) {
        index_text(where, sizeof where, pos, depth);
        arg_error(L, arg, what, lua_pushfstring(L, "ragged table: %s%s has %I entries, expected %I",
                                              depth ? "row " : "table", depth ? where : "",
                                              (lua_Integer)n, (lua_Integer)t->shape[depth]));
    }
    for (int64_t i = 1; i <= n; i++) {
        pos[depth] = i;
        lua_rawgeti(L, -1, (lua_Integer)i);
        if (depth + 1 < t->ndim) {
            if (!lua_istable(L, -1)) {
                index_text(where, sizeof where, pos, depth + 1);
                arg_error(L, arg, what, lua_pushfstring(L, "entry %s is a %s, expected a table "
                              "(ragged nesting)", where, luaL_typename(L, -1)));
            }
            table_fill(L, arg, what, t, depth + 1, pos, k);
        } else {
            int isnum;
            lua_Number v = lua_tonumberx(L, -1, &isnum);
            if (!isnum || lua_type(L, -1) != LUA_TNUMBER) {
                index_text(where, sizeof where, pos, depth + 1);
                arg_error(L, arg, what, lua_pushfstring(L, "entry %s is a %s, expected a number",
                                                      where, luaL_typename(L, -1)));
            }
            if (t->dtype == DGA_F32) {
                dga_tensor_f32(t)[*k] = (float)v;
            } else {
                if (v != floor(v) || v < INT32_MIN || v > INT32_MAX) {
                    index_text(where, sizeof where, pos, depth + 1);
                    arg_error(L, arg, what, lua_pushfstring(L, "entry %s is %f, expected an int32 "
                                                          "integer", where, v));
                }
                dga_tensor_i32(t)[*k] = (int32_t)v;
            }
            (*k)++;
        }
        lua_pop(L, 1);
    }
}

dga_tensor *dgal_to_tensor_at(lua_State *L, int idx, dga_dtype dtype, int arg,
                              const char *what)
{
    idx = lua_absindex(L, idx);
    dga_tensor **box = luaL_testudata(L, idx, DGAL_TENSOR);
    if (box) {
        if (!*box) arg_error(L, arg, what, "attempt to use a closed dga.tensor");
        if ((*box)->dtype == dtype) {
            dga_tensor_retain(*box);
            return *box;
        }
    } else if (!lua_istable(L, idx)) {
        if (!what) luaL_typeerror(L, idx, "dga.tensor or table of numbers");
        arg_error(L, arg, what, lua_pushfstring(L, "dga.tensor or table of numbers expected, "
                                                "got %s", luaL_typename(L, idx)));
    }
    /* The new tensor sits in a box on the stack while it is filled, so a Lua error raised
     * half-way frees it. */
    dga_tensor **tmp = lua_newuserdatauv(L, sizeof *tmp, 0);
    *tmp = NULL;
    luaL_setmetatable(L, DGAL_TENSOR);
    dga_status st;
    if (box) {
        st = dga_tensor_new(dtype, (*box)->ndim, (*box)->shape, tmp);
        if (st == DGA_OK) st = dga_tensor_copy_(*tmp, *box);
        if (st != DGA_OK) arg_error(L, arg, what, dga_last_error());
    } else {
        int ndim;
        int64_t shape[DGA_MAX_DIMS], pos[DGA_MAX_DIMS] = {0}, k = 0;
        table_shape(L, idx, arg, what, &ndim, shape);
        st = dga_tensor_new(dtype, ndim, shape, tmp);
        if (st != DGA_OK) dgal_error(L, st);
        lua_pushvalue(L, idx);
        table_fill(L, arg, what, *tmp, 0, pos, &k);
        lua_pop(L, 1);
    }
    dga_tensor *t = *tmp;
    dga_tensor_retain(t);   /* one reference for the caller, one for the box until its __gc */
    lua_pop(L, 1);
    return t;
}

dga_tensor *dgal_to_tensor(lua_State *L, int idx, dga_dtype dtype)
{
    idx = lua_absindex(L, idx);
    return dgal_to_tensor_at(L, idx, dtype, idx, NULL);
}

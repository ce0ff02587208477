/* dga.tensor: float32/int32 arrays of up to 4 dimensions for Lua, 1-based.
 *
 * All math runs in C on the whole tensor (policies handle vectors of 262,144 weights), so no
 * function here loops over elements in Lua. Views (reshape, narrow) share data with their
 * base and keep it alive through the core's reference count. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dgal.h"

#define DIST_TOL 1e-4   /* relative tolerance of dga.check_distribution */

/* ---- helpers ---- */

static dga_dtype check_dtype(lua_State *L, int idx)
{
    static const char *const names[] = {"float32", "int32", NULL};
    return luaL_checkoption(L, idx, NULL, names) == 1 ? DGA_I32 : DGA_F32;
}

/* Raises "bad argument #arg to 'fn' (<core message>)" when st is a failure. */
static void arg_check(lua_State *L, int arg, dga_status st)
{
    if (st != DGA_OK) luaL_argerror(L, arg, dga_last_error());
}

/* A new tensor pushed in a box before its allocation can fail, so errors never leak it. */
static dga_tensor *push_new(lua_State *L, dga_dtype dtype, int ndim, const int64_t *shape)
{
    dga_tensor **box = lua_newuserdatauv(L, sizeof *box, 0);
    *box = NULL;
    luaL_setmetatable(L, DGAL_TENSOR);
    dga_status st = dga_tensor_new(dtype, ndim, shape, box);
    if (st != DGA_OK) dgal_error(L, st);
    return *box;
}

static dga_tensor *push_clone(lua_State *L, const dga_tensor *src)
{
    dga_tensor *t = push_new(L, src->dtype, src->ndim, src->shape);
    memcpy(t->data, src->data, (size_t)src->numel * dga_dtype_size(src->dtype));
    return t;
}

static void set_value(lua_State *L, dga_tensor *t, int64_t i, int vidx)
{
    if (t->dtype == DGA_F32) {
        dga_tensor_f32(t)[i] = (float)luaL_checknumber(L, vidx);
        return;
    }
    lua_Number v = luaL_checknumber(L, vidx);
    if (v != floor(v) || v < INT32_MIN || v > INT32_MAX)
        luaL_argerror(L, vidx, lua_pushfstring(L, "%f is not an int32 value (tensor is int32)",
                                                v));
    dga_tensor_i32(t)[i] = (int32_t)v;
}

static void push_value(lua_State *L, const dga_tensor *t, int64_t i)
{
    if (t->dtype == DGA_F32)
        lua_pushnumber(L, dga_tensor_f32(t)[i]);
    else
        lua_pushinteger(L, dga_tensor_i32(t)[i]);
}

/* 1-based flat index at `arg` -> 0-based, with an error naming the valid range. */
static int64_t check_flat_index(lua_State *L, const dga_tensor *t, int arg)
{
    int isint;
    lua_Integer i = lua_tointegerx(L, arg, &isint);
    if (!isint)
        luaL_argerror(L, arg, lua_pushfstring(L, "index must be an integer, got %s",
                                              luaL_typename(L, arg)));
    if (i < 1 || i > t->numel)
        luaL_argerror(L, arg, lua_pushfstring(L, "index %I outside [1, %I]", i,
                                              (lua_Integer)t->numel));
    return (int64_t)(i - 1);
}

/* ---- constructors (module functions) ---- */

static int l_tensor(lua_State *L)
{
    dga_dtype dtype = lua_isnoneornil(L, 2) ? DGA_F32 : check_dtype(L, 2);
    dga_tensor **box = luaL_testudata(L, 1, DGAL_TENSOR);
    dga_tensor *t = dgal_to_tensor(L, 1, dtype);
    /* dgal_to_tensor hands back the same tensor when the dtype matches: copy it, since
     * dga.tensor(t) must not alias t. */
    if (box && *box == t) {
        dga_tensor_release(t);
        push_clone(L, t);
        return 1;
    }
    dgal_push_tensor(L, t);
    return 1;
}

static int l_zeros(lua_State *L)
{
    int n = lua_gettop(L);
    dga_dtype dtype = DGA_F32;
    if (n >= 1 && lua_type(L, n) == LUA_TSTRING) dtype = check_dtype(L, n--);
    if (n < 1) return luaL_error(L, "bad argument #1 to 'zeros' (expected at least one dimension)");
    if (n > DGA_MAX_DIMS)
        return luaL_error(L, "bad argument #%d to 'zeros' (at most %d dimensions)", n, DGA_MAX_DIMS);
    int64_t shape[DGA_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        lua_Integer d = luaL_checkinteger(L, i + 1);
        luaL_argcheck(L, d >= 0, i + 1, "dimension must be >= 0");
        shape[i] = d;
    }
    push_new(L, dtype, n, shape);
    return 1;
}

static int l_vec(lua_State *L)
{
    if (lua_type(L, 1) == LUA_TNUMBER) {
        lua_Integer n = luaL_checkinteger(L, 1);
        luaL_argcheck(L, n >= 0, 1, "length must be >= 0");
        lua_Number fill = luaL_optnumber(L, 2, 0);   /* dga.vec(n [, value]) */
        int64_t shape[1] = {n};
        dga_tensor *t = push_new(L, DGA_F32, 1, shape);
        for (int64_t i = 0; fill != 0 && i < n; i++) dga_tensor_f32(t)[i] = (float)fill;
        return 1;
    }
    luaL_argcheck(L, lua_isnoneornil(L, 2), 2, "a fill value goes with a length, not a table");
    luaL_argexpected(L, lua_istable(L, 1), 1, "number or table of numbers");
    dga_tensor *t = dgal_to_tensor(L, 1, DGA_F32);
    dgal_push_tensor(L, t);
    if (t->ndim != 1) luaL_argerror(L, 1, "expected a flat table of numbers (a vector)");
    return 1;
}

static int l_full(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    luaL_argcheck(L, n >= 0, 1, "length must be >= 0");
    lua_Number v = luaL_checknumber(L, 2);
    dga_dtype dtype = lua_isnoneornil(L, 3) ? DGA_F32 : check_dtype(L, 3);
    int64_t shape[1] = {n};
    dga_tensor *t = push_new(L, dtype, 1, shape);
    arg_check(L, 2, dga_tensor_fill_(t, v));
    return 1;
}

static int l_arange(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    luaL_argcheck(L, n >= 0 && n <= INT32_MAX, 1, "length must be in [0, 2^31)");
    int64_t shape[1] = {n};
    dga_tensor *t = push_new(L, DGA_I32, 1, shape);
    int32_t *x = dga_tensor_i32(t);
    for (lua_Integer i = 0; i < n; i++) x[i] = (int32_t)i;
    return 1;
}

static int l_check_distribution(lua_State *L)
{
    const char *what = luaL_optstring(L, 2, "distribution");
    dga_tensor *t = dgal_to_tensor(L, 1, DGA_F32);
    dga_status st = dga_tensor_check_distribution(t, DIST_TOL, what);
    dga_tensor_release(t);
    if (st != DGA_OK) return dgal_error(L, st);
    lua_pushboolean(L, 1);
    return 1;
}

/* ---- metamethods ---- */

static int m_gc(lua_State *L)
{
    dga_tensor **box = luaL_checkudata(L, 1, DGAL_TENSOR);
    dga_tensor_release(*box);
    *box = NULL;
    return 0;
}

/* NumPy's layout: nested brackets, one row per line, and past a total of PREVIEW_MAX
 * elements only the first and last PREVIEW_EDGE entries of each long dimension. */
#define PREVIEW_MAX 64
#define PREVIEW_EDGE 3
#define TOSTRING_HEAD "dga.tensor("

static void add_number(luaL_Buffer *b, const dga_tensor *t, int64_t i)
{
    char num[32];
    if (t->dtype == DGA_F32) snprintf(num, sizeof num, "%.6g", (double)dga_tensor_f32(t)[i]);
    else snprintf(num, sizeof num, "%d", (int)dga_tensor_i32(t)[i]);
    luaL_addstring(b, num);
}

/* Dimension d of the block starting at flat index `base`; `stride` elements per entry. */
static void add_block(luaL_Buffer *b, const dga_tensor *t, int d, int64_t base, int truncate)
{
    if (d >= DGA_MAX_DIMS) return;
    int64_t n = t->shape[d], stride = 1;
    for (int e = d + 1; e < t->ndim; e++) stride *= t->shape[e];
    int skip = truncate && n > 2 * PREVIEW_EDGE;
    luaL_addchar(b, '[');
    for (int64_t i = 0; i < n; i++) {
        if (skip && i == PREVIEW_EDGE) {
            i = n - PREVIEW_EDGE;
            if (d == t->ndim - 1) {
                luaL_addstring(b, "..., ");
            } else {
                luaL_addstring(b, "...,\n");
                for (int k = 0; k < (int)strlen(TOSTRING_HEAD) + d + 1; k++) luaL_addchar(b, ' ');
            }
        }
        if (d == t->ndim - 1) add_number(b, t, base + i);
        else add_block(b, t, d + 1, base + i * stride, truncate);
        if (i + 1 < n) {
            if (d == t->ndim - 1) {
                luaL_addstring(b, ", ");
            } else {
                luaL_addchar(b, ',');
                for (int k = d + 1; k < t->ndim; k++) luaL_addchar(b, '\n');
                for (int k = 0; k < (int)strlen(TOSTRING_HEAD) + d + 1; k++) luaL_addchar(b, ' ');
            }
        }
    }
    luaL_addchar(b, ']');
}

static int m_tostring(lua_State *L)
{
    dga_tensor **box = luaL_checkudata(L, 1, DGAL_TENSOR);
    if (!*box) {
        lua_pushliteral(L, "dga.tensor (closed)");
        return 1;
    }
    const dga_tensor *t = *box;
    char desc[96];
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, TOSTRING_HEAD);
    if (t->ndim == 0 || t->numel == 0) luaL_addstring(&b, "[]");
    else add_block(&b, t, 0, 0, t->numel > PREVIEW_MAX);
    luaL_addstring(&b, ", ");
    luaL_addstring(&b, dga_tensor_describe(t, desc, sizeof desc));
    luaL_addchar(&b, ')');
    luaL_pushresult(&b);
    return 1;
}

static int m_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dgal_check_tensor(L, 1)->numel);
    return 1;
}

/* __index: integers address elements, strings look up methods (upvalue 1). */
static int m_index(lua_State *L)
{
    luaL_checkudata(L, 1, DGAL_TENSOR);   /* methods (close, ...) stay reachable after close */
    if (lua_type(L, 2) == LUA_TNUMBER) {
        dga_tensor *t = dgal_check_tensor(L, 1);
        push_value(L, t, check_flat_index(L, t, 2));
        return 1;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1));
    return 1;
}

static int m_newindex(lua_State *L)
{
    dga_tensor *t = dgal_check_tensor(L, 1);
    if (lua_type(L, 2) != LUA_TNUMBER)
        return luaL_error(L, "cannot set field '%s' of a dga.tensor (only integer indices)",
                          luaL_tolstring(L, 2, NULL));
    set_value(L, t, check_flat_index(L, t, 2), 3);
    return 0;
}

/* t op u into a new tensor; either side may be a number (or a table). */
static int arith(lua_State *L, dga_binop op, const char *name)
{
    int tidx = luaL_testudata(L, 1, DGAL_TENSOR) ? 1 : 2;
    int oidx = 3 - tidx;
    dga_tensor *t = dgal_check_tensor(L, tidx);
    dga_status st;
    if (lua_type(L, oidx) == LUA_TNUMBER) {
        dga_tensor *r = push_clone(L, t);
        st = dga_tensor_scalar_op_(r, lua_tonumber(L, oidx), op, tidx == 2);
    } else {
        dga_tensor *u = dgal_to_tensor(L, oidx, t->dtype);
        dgal_push_tensor(L, u);   /* Lua owns u from here on */
        dga_tensor *r = push_clone(L, tidx == 1 ? t : u);
        st = dga_tensor_binop_(r, tidx == 1 ? u : t, op);
    }
    if (st != DGA_OK)
        return luaL_error(L, "bad argument to '%s' (%s)", name, dga_last_error());
    return 1;
}

static int m_add(lua_State *L) { return arith(L, DGA_OP_ADD, "add"); }
static int m_sub(lua_State *L) { return arith(L, DGA_OP_SUB, "sub"); }
static int m_mul(lua_State *L) { return arith(L, DGA_OP_MUL, "mul"); }
static int m_div(lua_State *L) { return arith(L, DGA_OP_DIV, "div"); }

static int m_unm(lua_State *L)
{
    dga_tensor *r = push_clone(L, dgal_check_tensor(L, 1));
    DGAL_CHECK(L, dga_tensor_scalar_op_(r, -1, DGA_OP_MUL, 0));
    return 1;
}

/* ---- methods: shape and access ---- */

static int t_shape(lua_State *L)
{
    dga_tensor *t = dgal_check_tensor(L, 1);
    lua_createtable(L, t->ndim, 0);
    for (int d = 0; d < t->ndim; d++) {
        lua_pushinteger(L, (lua_Integer)t->shape[d]);
        lua_rawseti(L, -2, d + 1);
    }
    return 1;
}

static int t_dtype(lua_State *L)
{
    lua_pushstring(L, dga_dtype_name(dgal_check_tensor(L, 1)->dtype));
    return 1;
}

static int t_at(lua_State *L)
{
    dga_tensor *t = dgal_check_tensor(L, 1);
    int n = lua_gettop(L) - 1;
    if (n != t->ndim)
        return luaL_error(L, "bad argument to 'at' (%d indices for a %d-D tensor)", n, t->ndim);
    int64_t flat = 0;
    for (int d = 0; d < t->ndim; d++) {
        lua_Integer i = luaL_checkinteger(L, d + 2);
        if (i < 1 || i > t->shape[d])
            luaL_argerror(L, d + 2, lua_pushfstring(L, "index %I outside [1, %I] (dimension %d)",
                                                    i, (lua_Integer)t->shape[d], d + 1));
        flat = flat * t->shape[d] + (i - 1);
    }
    push_value(L, t, flat);
    return 1;
}

static void push_nested(lua_State *L, const dga_tensor *t, int depth, int64_t *k)
{
    if (depth >= DGA_MAX_DIMS) return;
    int64_t n = t->shape[depth];
    luaL_checkstack(L, 4, "totable");
    lua_createtable(L, n > INT32_MAX ? 0 : (int)n, 0);
    for (int64_t i = 1; i <= n; i++) {
        if (depth + 1 < t->ndim)
            push_nested(L, t, depth + 1, k);
        else
            push_value(L, t, (*k)++);
        lua_rawseti(L, -2, (lua_Integer)i);
    }
}

static int t_totable(lua_State *L)
{
    int64_t k = 0;
    push_nested(L, dgal_check_tensor(L, 1), 0, &k);
    return 1;
}

static int t_clone(lua_State *L)
{
    push_clone(L, dgal_check_tensor(L, 1));
    return 1;
}

static int convert(lua_State *L, dga_dtype dtype)
{
    dga_tensor *t = dgal_check_tensor(L, 1);
    dga_tensor *r = push_new(L, dtype, t->ndim, t->shape);
    arg_check(L, 1, dga_tensor_copy_(r, t));
    return 1;
}

static int t_float(lua_State *L) { return convert(L, DGA_F32); }
static int t_int(lua_State *L) { return convert(L, DGA_I32); }

static void push_view(lua_State *L, dga_tensor *t, int64_t offset, int ndim,
                      const int64_t *shape)
{
    dga_tensor **box = lua_newuserdatauv(L, sizeof *box, 0);
    *box = NULL;
    luaL_setmetatable(L, DGAL_TENSOR);
    dga_status st = dga_tensor_view(t, offset, ndim, shape, box);
    if (st != DGA_OK) dgal_error(L, st);
}

static int t_reshape(lua_State *L)
{
    dga_tensor *t = dgal_check_tensor(L, 1);
    int64_t shape[DGA_MAX_DIMS];
    int n, from_table = lua_istable(L, 2);
    n = from_table ? (int)lua_rawlen(L, 2) : lua_gettop(L) - 1;
    if (n < 1 || n > DGA_MAX_DIMS)
        return luaL_error(L, "bad argument to 'reshape' (%d dimensions, expected 1 to %d)", n,
                          DGA_MAX_DIMS);
    int infer = -1;
    int64_t known = 1;
    for (int d = 0; d < n; d++) {
        lua_Integer v;
        if (from_table) {
            lua_rawgeti(L, 2, d + 1);
            int isint;
            v = lua_tointegerx(L, -1, &isint);
            lua_pop(L, 1);
            if (!isint) luaL_argerror(L, 2, "shape entries must be integers");
        } else {
            v = luaL_checkinteger(L, d + 2);
        }
        if (v == -1 && infer < 0) {
            infer = d;
            continue;
        }
        if (v < 0) return luaL_error(L, "bad argument to 'reshape' (dimension %d is %I)", d + 1, v);
        shape[d] = v;
        known *= v;
    }
    if (infer >= 0) {
        if (known == 0 || t->numel % known)
            return luaL_error(L, "bad argument to 'reshape' (cannot infer dimension %d: %I "
                              "elements)", infer + 1, (lua_Integer)t->numel);
        shape[infer] = t->numel / known;
        known *= shape[infer];
    }
    if (known != t->numel)
        return luaL_error(L, "bad argument to 'reshape' (new shape has %I elements, tensor has "
                          "%I)", (lua_Integer)known, (lua_Integer)t->numel);
    push_view(L, t, 0, n, shape);
    return 1;
}

static int t_narrow(lua_State *L)
{
    dga_tensor *t = dgal_check_tensor(L, 1);
    lua_Integer first = luaL_checkinteger(L, 2), count = luaL_checkinteger(L, 3);
    lua_Integer rows = t->shape[0];
    if (count < 0 || first < 1 || first > rows + 1 || count > rows - first + 1)
        return luaL_error(L, "bad argument to 'narrow' (rows [%I, %I] outside [1, %I])", first,
                          first + count - 1, rows);
    int64_t row = rows ? t->numel / rows : 0;
    int64_t shape[DGA_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[0] = count;
    push_view(L, t, (first - 1) * row, t->ndim, shape);
    return 1;
}

static int t_close(lua_State *L) { return m_gc(L); }

/* ---- methods: math ---- */

/* Applies op to a fresh copy (new = 1) or in place, with operand at index 2. */
static int binop(lua_State *L, dga_binop op, int inplace)
{
    dga_tensor *t = dgal_check_tensor(L, 1);
    dga_tensor *r;
    if (inplace) {
        r = t;
        lua_pushvalue(L, 1);
    } else {
        r = push_clone(L, t);
    }
    dga_status st;
    if (lua_type(L, 2) == LUA_TNUMBER) {
        st = dga_tensor_scalar_op_(r, lua_tonumber(L, 2), op, 0);
    } else {
        dga_tensor *u = dgal_to_tensor(L, 2, t->dtype);
        st = dga_tensor_binop_(r, u, op);
        dga_tensor_release(u);
    }
    arg_check(L, 2, st);
    return 1;
}

static int t_add(lua_State *L) { return binop(L, DGA_OP_ADD, 0); }
static int t_sub(lua_State *L) { return binop(L, DGA_OP_SUB, 0); }
static int t_mul(lua_State *L) { return binop(L, DGA_OP_MUL, 0); }
static int t_div(lua_State *L) { return binop(L, DGA_OP_DIV, 0); }
static int t_add_(lua_State *L) { return binop(L, DGA_OP_ADD, 1); }
static int t_sub_(lua_State *L) { return binop(L, DGA_OP_SUB, 1); }
static int t_mul_(lua_State *L) { return binop(L, DGA_OP_MUL, 1); }
static int t_div_(lua_State *L) { return binop(L, DGA_OP_DIV, 1); }

static dga_tensor *float_target(lua_State *L, int inplace, const char *op)
{
    dga_tensor *t = dgal_check_tensor(L, 1);
    if (t->dtype != DGA_F32)
        luaL_error(L, "bad self to '%s' (needs a float32 tensor, got int32)", op);
    if (inplace) {
        lua_pushvalue(L, 1);
        return t;
    }
    return push_clone(L, t);
}

static int do_exp(lua_State *L, int inplace)
{
    dga_tensor_exp_(float_target(L, inplace, inplace ? "exp_" : "exp"));
    return 1;
}

static int do_log(lua_State *L, int inplace)
{
    DGAL_CHECK(L, dga_tensor_log_(float_target(L, inplace, inplace ? "log_" : "log")));
    return 1;
}

static int do_normalize(lua_State *L, int inplace)
{
    DGAL_CHECK(L, dga_tensor_normalize_(float_target(L, inplace,
                                                     inplace ? "normalize_" : "normalize")));
    return 1;
}

static int do_scale(lua_State *L, int inplace)
{
    lua_Number a = luaL_checknumber(L, 2);
    dga_tensor_affine_(float_target(L, inplace, inplace ? "scale_" : "scale"), a, 0);
    return 1;
}

static int t_exp(lua_State *L) { return do_exp(L, 0); }
static int t_exp_(lua_State *L) { return do_exp(L, 1); }
static int t_log(lua_State *L) { return do_log(L, 0); }
static int t_log_(lua_State *L) { return do_log(L, 1); }
static int t_normalize(lua_State *L) { return do_normalize(L, 0); }
static int t_normalize_(lua_State *L) { return do_normalize(L, 1); }
static int t_scale(lua_State *L) { return do_scale(L, 0); }
static int t_scale_(lua_State *L) { return do_scale(L, 1); }

static int t_fill_(lua_State *L)
{
    dga_tensor *t = dgal_check_tensor(L, 1);
    arg_check(L, 2, dga_tensor_fill_(t, luaL_checknumber(L, 2)));
    lua_pushvalue(L, 1);
    return 1;
}

static int t_copy_(lua_State *L)
{
    dga_tensor *t = dgal_check_tensor(L, 1);
    dga_tensor *u = dgal_to_tensor(L, 2, t->dtype);
    dga_status st = dga_tensor_copy_(t, u);
    dga_tensor_release(u);
    arg_check(L, 2, st);
    lua_pushvalue(L, 1);
    return 1;
}

/* ---- methods: reductions ---- */

static int push_reduction(lua_State *L, const dga_tensor *t, double v)
{
    if (t->dtype == DGA_I32 && v == floor(v) && fabs(v) < 9.007199254740992e15)
        lua_pushinteger(L, (lua_Integer)v);
    else
        lua_pushnumber(L, v);
    return 1;
}

static const dga_tensor *nonempty(lua_State *L, const char *op)
{
    dga_tensor *t = dgal_check_tensor(L, 1);
    if (!t->numel) luaL_error(L, "bad self to '%s' (the tensor is empty)", op);
    return t;
}

static int t_sum(lua_State *L)
{
    dga_tensor *t = dgal_check_tensor(L, 1);
    return push_reduction(L, t, dga_tensor_sum(t));
}

static int t_mean(lua_State *L)
{
    lua_pushnumber(L, dga_tensor_mean(nonempty(L, "mean")));
    return 1;
}

static int t_std(lua_State *L)
{
    lua_pushnumber(L, dga_tensor_std(nonempty(L, "std")));
    return 1;
}

static int t_min(lua_State *L)
{
    const dga_tensor *t = nonempty(L, "min");
    return push_reduction(L, t, dga_tensor_min(t));
}

static int t_max(lua_State *L)
{
    const dga_tensor *t = nonempty(L, "max");
    return push_reduction(L, t, dga_tensor_max(t));
}

static int t_argmax(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dga_tensor_argmax(nonempty(L, "argmax")) + 1);
    return 1;
}

static int t_norm(lua_State *L)
{
    lua_pushnumber(L, dga_tensor_norm(dgal_check_tensor(L, 1)));
    return 1;
}

static int t_dot(lua_State *L)
{
    dga_tensor *t = dgal_check_tensor(L, 1);
    dga_tensor *u = dgal_to_tensor(L, 2, t->dtype);
    dga_status st;
    double v = dga_tensor_dot(t, u, &st);
    dga_tensor_release(u);
    arg_check(L, 2, st);
    lua_pushnumber(L, v);
    return 1;
}

static int t_numel(lua_State *L) { return m_len(L); }

void dgal_open_tensor(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"shape", t_shape},     {"numel", t_numel},   {"dtype", t_dtype},
        {"at", t_at},           {"totable", t_totable}, {"clone", t_clone},
        {"float", t_float},     {"int", t_int},       {"reshape", t_reshape},
        {"narrow", t_narrow},   {"close", t_close},
        {"exp", t_exp},         {"log", t_log},       {"add", t_add},
        {"sub", t_sub},         {"mul", t_mul},       {"div", t_div},
        {"scale", t_scale},     {"normalize", t_normalize},
        {"exp_", t_exp_},       {"log_", t_log_},     {"add_", t_add_},
        {"sub_", t_sub_},       {"mul_", t_mul_},     {"div_", t_div_},
        {"scale_", t_scale_},   {"fill_", t_fill_},   {"copy_", t_copy_},
        {"normalize_", t_normalize_},
        {"sum", t_sum},         {"mean", t_mean},     {"std", t_std},
        {"min", t_min},         {"max", t_max},       {"argmax", t_argmax},
        {"dot", t_dot},         {"norm", t_norm},
        {NULL, NULL},
    };
    static const luaL_Reg meta[] = {
        {"__gc", m_gc},   {"__close", m_gc}, {"__tostring", m_tostring}, {"__len", m_len},
        {"__newindex", m_newindex}, {"__add", m_add}, {"__sub", m_sub}, {"__mul", m_mul},
        {"__div", m_div}, {"__unm", m_unm},
        {NULL, NULL},
    };
    dgal_new_class(L, DGAL_TENSOR, methods, meta);
    /* Replace the plain __index table by a function that also serves t[i]. */
    luaL_getmetatable(L, DGAL_TENSOR);
    lua_getfield(L, -1, "__index");
    lua_pushcclosure(L, m_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);

    static const luaL_Reg funcs[] = {
        {"tensor", l_tensor}, {"zeros", l_zeros}, {"vec", l_vec}, {"full", l_full},
        {"arange", l_arange}, {"check_distribution", l_check_distribution},
        {NULL, NULL},
    };
    luaL_setfuncs(L, funcs, 0);
}

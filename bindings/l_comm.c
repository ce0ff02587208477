/* dga.rank, dga.size, dga.allreduce, dga.bcast, dga.allgather: the collectives of core/comm.h
 * for Lua. In a dgalua built without MPI they act as the one-rank job they are (rank 0,
 * size 1), so a script written for several ranks runs unchanged on one. */
#include <string.h>

#include "dgal.h"
#include "comm.h"

static dga_tensor *check_f32(lua_State *L, int idx)
{
    dga_tensor *t = dgal_check_tensor(L, idx);
    if (t->dtype != DGA_F32)
        luaL_argerror(L, idx, lua_pushfstring(L, "expected a float32 tensor, got %s",
                                              dga_dtype_name(t->dtype)));
    return t;
}

static int l_rank(lua_State *L)
{
    DGAL_CHECK(L, dga_comm_init());
    lua_pushinteger(L, dga_comm_rank());
    return 1;
}

static int l_size(lua_State *L)
{
    DGAL_CHECK(L, dga_comm_init());
    lua_pushinteger(L, dga_comm_size());
    return 1;
}

static int l_has_mpi(lua_State *L)
{
    lua_pushboolean(L, dga_comm_has_mpi());
    return 1;
}

/* dga.allreduce(t [, "sum" | "mean"]): in place; returns t */
static int l_allreduce(lua_State *L)
{
    static const char *const ops[] = {"sum", "mean", NULL};
    dga_tensor *t = check_f32(L, 1);
    int op = luaL_checkoption(L, 2, "sum", ops);
    DGAL_CHECK(L, dga_comm_allreduce(dga_tensor_f32(t), (size_t)t->numel,
                                     op == 0 ? DGA_REDUCE_SUM : DGA_REDUCE_MEAN));
    lua_settop(L, 1);
    return 1;
}

static int check_root(lua_State *L, int idx)
{
    lua_Integer root = luaL_optinteger(L, idx, 0);
    int size = dga_comm_size();
    luaL_argcheck(L, root >= 0 && root < size, idx,
                  lua_pushfstring(L, "root must be a rank in 0..%d", size - 1));
    return (int)root;
}

/* dga.bcast(t, root): t <- root's t, in place (same element count on every rank; float32 or
 * int32); returns t.  dga.bcast(s, root): returns root's string (other ranks' s is ignored,
 * and may be nil). */
static int l_bcast(lua_State *L)
{
    DGAL_CHECK(L, dga_comm_init());
    int root = check_root(L, 2);
    if (lua_isuserdata(L, 1)) {
        dga_tensor *t = dgal_check_tensor(L, 1);
        DGAL_CHECK(L, dga_comm_bcast(t->data, (size_t)t->numel * dga_dtype_size(t->dtype),
                                     root));
        lua_settop(L, 1);
        return 1;
    }
    int me = dga_comm_rank();
    size_t len = 0;
    const char *s = NULL;
    if (me == root) s = luaL_checklstring(L, 1, &len);
    else luaL_argcheck(L, lua_isnoneornil(L, 1) || lua_type(L, 1) == LUA_TSTRING, 1,
                       "expected a string, a tensor or nil");
    /* the length first, so every rank can make room for the bytes */
    unsigned long long n = len;
    DGAL_CHECK(L, dga_comm_bcast(&n, sizeof n, root));
    char *buf = dgal_scratch(L, (size_t)n + 1);
    if (me == root) memcpy(buf, s, len);
    DGAL_CHECK(L, dga_comm_bcast(buf, (size_t)n, root));
    lua_pushlstring(L, buf, (size_t)n);
    return 1;
}

/* dga.allgather(t) -> every rank's float32 t flattened and concatenated in rank order (a 1-D
 * tensor), and a table of the element count each rank sent (counts[r + 1] for rank r) */
static int l_allgather(lua_State *L)
{
    dga_tensor *t = check_f32(L, 1);
    DGAL_CHECK(L, dga_comm_init());
    int size = dga_comm_size();
    size_t *counts = dgal_scratch(L, (size_t)size * sizeof *counts);
    DGAL_CHECK(L, dga_comm_allgather_counts((size_t)t->numel, counts));
    size_t total = 0;
    for (int r = 0; r < size; r++) total += counts[r];
    dga_tensor *out = NULL;
    int64_t shape[1] = {(int64_t)total};
    DGAL_CHECK(L, dga_tensor_new(DGA_F32, 1, shape, &out));
    dgal_push_tensor(L, out);
    DGAL_CHECK(L, dga_comm_allgatherv(dga_tensor_f32(t), (size_t)t->numel, dga_tensor_f32(out),
                                      counts));
    lua_createtable(L, size, 0);
    for (int r = 0; r < size; r++) {
        lua_pushinteger(L, (lua_Integer)counts[r]);
        lua_rawseti(L, -2, r + 1);
    }
    return 2;
}

void dgal_open_comm(lua_State *L)
{
    static const luaL_Reg funcs[] = {
        {"rank", l_rank},           {"size", l_size},   {"has_mpi", l_has_mpi},
        {"allreduce", l_allreduce}, {"bcast", l_bcast}, {"allgather", l_allgather},
        {NULL, NULL},
    };
    luaL_setfuncs(L, funcs, 0);
}

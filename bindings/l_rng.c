/* dga.rng: a seedable xoshiro256** generator whose state is a 32-byte string.
 *
 * The state lives inside the userdata (no separate allocation, nothing to close), so a
 * checkpoint stores r:state() as a blob and r:set_state() resumes the exact stream. */
#include <string.h>

#include "dgal.h"

dga_rng *dgal_check_rng(lua_State *L, int idx) { return luaL_checkudata(L, idx, DGAL_RNG); }

static int l_rng(lua_State *L)
{
    lua_Integer seed = luaL_optinteger(L, 1, 0);
    dga_rng *r = lua_newuserdatauv(L, sizeof *r, 0);
    dga_rng_seed(r, (uint64_t)seed);
    luaL_setmetatable(L, DGAL_RNG);
    return 1;
}

static int r_uniform(lua_State *L)
{
    lua_pushnumber(L, dga_rng_uniform(dgal_check_rng(L, 1)));
    return 1;
}

static int r_normal(lua_State *L)
{
    lua_pushnumber(L, dga_rng_normal(dgal_check_rng(L, 1)));
    return 1;
}

/* Uniform integer in [0, n), like the core (not 1-based: it is a number, not an index). */
static int r_below(lua_State *L)
{
    dga_rng *r = dgal_check_rng(L, 1);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_argcheck(L, n > 0, 2, "n must be > 0");
    lua_pushinteger(L, (lua_Integer)dga_rng_below(r, (uint64_t)n));
    return 1;
}

/* r:shuffle(list) shuffles a Lua list in place (Fisher-Yates from the end: for i = n..2,
 * swap i with 1 + below(i)) and returns it, so the same seed gives the same order. */
static int r_shuffle(lua_State *L)
{
    dga_rng *r = dgal_check_rng(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    for (lua_Integer i = (lua_Integer)luaL_len(L, 2); i >= 2; i--) {
        lua_Integer j = 1 + (lua_Integer)dga_rng_below(r, (uint64_t)i);
        lua_geti(L, 2, i);
        lua_geti(L, 2, j);
        lua_seti(L, 2, i);
        lua_seti(L, 2, j);
    }
    lua_settop(L, 2);
    return 1;
}

/* Four little-endian uint64 words, whatever the host's byte order. */
static int r_state(lua_State *L)
{
    dga_rng *r = dgal_check_rng(L, 1);
    unsigned char buf[32];
    for (int w = 0; w < 4; w++)
        for (int b = 0; b < 8; b++) buf[w * 8 + b] = (unsigned char)(r->s[w] >> (8 * b));
    lua_pushlstring(L, (const char *)buf, sizeof buf);
    return 1;
}

static int r_set_state(lua_State *L)
{
    dga_rng *r = dgal_check_rng(L, 1);
    size_t len;
    const unsigned char *buf = (const unsigned char *)luaL_checklstring(L, 2, &len);
    if (len != 32)
        luaL_argerror(L, 2, lua_pushfstring(L, "rng state must be 32 bytes, got %d", (int)len));
    uint64_t s[4] = {0};
    for (int w = 0; w < 4; w++)
        for (int b = 0; b < 8; b++) s[w] |= (uint64_t)buf[w * 8 + b] << (8 * b);
    /* xoshiro's all-zero state only ever produces zeros. */
    luaL_argcheck(L, s[0] | s[1] | s[2] | s[3], 2, "rng state is all zeros (invalid)");
    memcpy(r->s, s, sizeof s);
    lua_settop(L, 1);
    return 1;
}

static int r_tostring(lua_State *L)
{
    dga_rng *r = dgal_check_rng(L, 1);
    lua_pushfstring(L, "dga.rng(state %p...)", (void *)(uintptr_t)(r->s[0] ^ r->s[2]));
    return 1;
}

void dgal_open_rng(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"uniform", r_uniform}, {"normal", r_normal}, {"below", r_below},
        {"state", r_state},     {"set_state", r_set_state}, {"shuffle", r_shuffle},
        {NULL, NULL},
    };
    static const luaL_Reg meta[] = {{"__tostring", r_tostring}, {NULL, NULL}};
    dgal_new_class(L, DGAL_RNG, methods, meta);
    lua_pushcfunction(L, l_rng);
    lua_setfield(L, -2, "rng");
}

/* luaopen_dga: the `dga` module, assembled from the binding files. */
#include "dgal.h"

/* Binding files are developed in parallel; a file that is not there yet leaves its part of
 * the module out instead of breaking the build. */
#define DGAL_OPTIONAL __attribute__((weak))
DGAL_OPTIONAL void dgal_open_tensor(lua_State *L);
DGAL_OPTIONAL void dgal_open_rng(lua_State *L);
DGAL_OPTIONAL void dgal_open_model(lua_State *L);
DGAL_OPTIONAL void dgal_open_optim(lua_State *L);
DGAL_OPTIONAL void dgal_open_checkpoint(lua_State *L);
DGAL_OPTIONAL void dgal_open_text(lua_State *L);
DGAL_OPTIONAL void dgal_open_store(lua_State *L);
DGAL_OPTIONAL void dgal_open_mmlu(lua_State *L);
DGAL_OPTIONAL void dgal_open_mix(lua_State *L);

int luaopen_dga(lua_State *L)
{
    void (*parts[])(lua_State *) = {
        dgal_open_tensor, dgal_open_rng,  dgal_open_model, dgal_open_optim, dgal_open_checkpoint,
        dgal_open_text,   dgal_open_store, dgal_open_mmlu, dgal_open_mix,
    };
    lua_newtable(L);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i]) parts[i](L);
    lua_pushliteral(L, "0.1.0");
    lua_setfield(L, -2, "version");
    return 1;
}

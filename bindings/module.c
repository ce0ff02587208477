/* luaopen_dga: the `dga` module, assembled from the binding files. */
#include "dgal.h"

int luaopen_dga(lua_State *L)
{
    void (*parts[])(lua_State *) = {
        dgal_open_tensor, dgal_open_rng,  dgal_open_model, dgal_open_optim, dgal_open_checkpoint,
        dgal_open_text,   dgal_open_store, dgal_open_mmlu, dgal_open_mix, dgal_open_lock,
    };
    lua_newtable(L);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        parts[i](L);
    lua_pushliteral(L, "0.1.0");
    lua_setfield(L, -2, "version");
    return 1;
}

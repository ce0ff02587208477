/* dga.isatty: whether a standard stream is a terminal, so the Lua tools can choose between
 * in-place progress lines and one line per milestone without spawning a shell. */
#include <unistd.h>

#include "dgal.h"

static int l_isatty(lua_State *L)
{
    lua_Integer fd = luaL_optinteger(L, 1, 1);
    luaL_argcheck(L, fd >= 0 && fd <= 2, 1, "expected 0 (stdin), 1 (stdout) or 2 (stderr)");
    lua_pushboolean(L, isatty((int)fd) == 1);
    return 1;
}

void dgal_open_sys(lua_State *L)
{
    static const luaL_Reg funcs[] = {{"isatty", l_isatty}, {NULL, NULL}};
    luaL_setfuncs(L, funcs, 0);
}

/* dga.isatty: whether a standard stream is a terminal, so the Lua tools can choose between
 * in-place progress lines and one line per milestone without spawning a shell.
 * dga.getpid / dga.getppid / dga.kill: what a sweep needs to tie its worker processes to
 * their coordinator (scripts/harness/exec/jobs.lua): the pids its workers log and check,
 * and a signal to the launcher when the coordinator leaves by an error. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "dgal.h"

static int l_isatty(lua_State *L)
{
    lua_Integer fd = luaL_optinteger(L, 1, 1);
    luaL_argcheck(L, fd >= 0 && fd <= 2, 1, "expected 0 (stdin), 1 (stdout) or 2 (stderr)");
    lua_pushboolean(L, isatty((int)fd) == 1);
    return 1;
}

static int l_getpid(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)getpid());
    return 1;
}

static int l_getppid(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)getppid());
    return 1;
}

/* Only the signals a sweep sends, by name: a number would let a typo signal the wrong thing. */
static const struct {
    const char *name;
    int sig;
} SIGNALS[] = {{"TERM", SIGTERM}, {"INT", SIGINT}, {"KILL", SIGKILL}, {"HUP", SIGHUP}, {"0", 0}};

/* dga.kill(pid, name): true when sent; false and a message when the process does not exist
 * (or may not be signalled). A pid <= 1 would reach a process group or every process. */
static int l_kill(lua_State *L)
{
    lua_Integer pid = luaL_checkinteger(L, 1);
    const char *name = luaL_checkstring(L, 2);
    luaL_argcheck(L, pid > 1 && pid == (lua_Integer)(pid_t)pid, 1, "expected a process id > 1");
    int sig = -1;
    for (size_t i = 0; i < sizeof SIGNALS / sizeof SIGNALS[0]; i++)
        if (strcmp(name, SIGNALS[i].name) == 0) sig = SIGNALS[i].sig;
    if (sig < 0) return luaL_argerror(L, 2, "expected \"TERM\", \"INT\", \"KILL\", \"HUP\" or \"0\"");
    if (kill((pid_t)pid, sig) == 0) {
        lua_pushboolean(L, 1);
        return 1;
    }
    int err = errno;
    lua_pushboolean(L, 0);
    lua_pushfstring(L, "kill %d: %s", (int)pid, strerror(err));
    return 2;
}

void dgal_open_sys(lua_State *L)
{
    static const luaL_Reg funcs[] = {{"isatty", l_isatty},
                                     {"getpid", l_getpid},
                                     {"getppid", l_getppid},
                                     {"kill", l_kill},
                                     {NULL, NULL}};
    luaL_setfuncs(L, funcs, 0);
}

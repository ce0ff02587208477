/* dga.isatty: whether a standard stream is a terminal, so the Lua tools can choose between
 * in-place progress lines and one line per milestone without spawning a shell.
 * dga.getpid / dga.getppid / dga.kill: what a sweep needs to tie its worker processes to
 * their coordinator (scripts/harness/exec/jobs.lua): the pids its workers log and check,
 * and a signal to the launcher when the coordinator leaves by an error.
 * dga.path_kind: what a path is, without opening it (opening a FIFO blocks).
 * dga.check_output: the one check every tool makes before writing, that its output is none of
 * its inputs (core/fileio.h, dga_output_check). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "dgal.h"
#include "fileio.h"

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

/* dga.path_kind(path) -> "file", "directory", "fifo", "character device", "block device",
 * "socket", or nil and a message when there is nothing there (links are followed). */
static int l_path_kind(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        luaL_pushfail(L);
        lua_pushfstring(L, "%s: %s", path, strerror(errno));
        return 2;
    }
    const char *kind = S_ISREG(sb.st_mode)  ? "file"
                     : S_ISDIR(sb.st_mode)  ? "directory"
                     : S_ISFIFO(sb.st_mode) ? "fifo"
                     : S_ISCHR(sb.st_mode)  ? "character device"
                     : S_ISBLK(sb.st_mode)  ? "block device"
                     : S_ISSOCK(sb.st_mode) ? "socket" : "other";
    lua_pushstring(L, kind);
    return 1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* dga.check_output(out, {["--corpus"] = path or {paths}, ...}): errors, naming both, when
 * out would overwrite one of the inputs; the option names are checked in sorted order so the
 * message does not depend on table order. */
static int l_check_output(lua_State *L)
{
    const char *out = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    int n = 0;
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        if (lua_type(L, -2) != LUA_TSTRING) luaL_error(L, "check_output: input names must be strings");
        n++;
        lua_pop(L, 1);
    }
    const char **names = dgal_scratch(L, sizeof *names * (size_t)(n > 0 ? n : 1));
    int i = 0;
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        names[i++] = lua_tostring(L, -2);   /* the keys stay alive in the table */
        lua_pop(L, 1);
    }
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (i = 0; i < n; i++) {
        lua_getfield(L, 2, names[i]);
        if (lua_type(L, -1) == LUA_TSTRING) {
            DGAL_CHECK(L, dga_output_check(out, lua_tostring(L, -1), names[i]));
        } else if (lua_istable(L, -1)) {
            lua_Integer len = luaL_len(L, -1);
            for (lua_Integer j = 1; j <= len; j++) {
                if (lua_geti(L, -1, j) == LUA_TSTRING)
                    DGAL_CHECK(L, dga_output_check(out, lua_tostring(L, -1), names[i]));
                lua_pop(L, 1);
            }
        } else if (!lua_isnil(L, -1) && lua_toboolean(L, -1)) {
            return luaL_error(L, "check_output: input %s must be a path or a list of paths", names[i]);
        }
        lua_pop(L, 1);
    }
    return 0;
}

void dgal_open_sys(lua_State *L)
{
    static const luaL_Reg funcs[] = {{"isatty", l_isatty},
                                     {"getpid", l_getpid},
                                     {"getppid", l_getppid},
                                     {"kill", l_kill},
                                     {"path_kind", l_path_kind},
                                     {"check_output", l_check_output},
                                     {NULL, NULL}};
    luaL_setfuncs(L, funcs, 0);
}

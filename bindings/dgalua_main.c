/* dgalua: the Lua 5.4 interpreter with the `dga` module built in.
 *
 *   dgalua [options] [script [args]]
 *
 * Behaves like the standard `lua` front end (arg table, -e, -l, -i, -v, -, --), plus:
 *   - `dga` is preloaded (package.preload.dga, package.loaded.dga and a global `dga`);
 *   - the project's scripts/ directory is put first on package.path, found relative to the
 *     executable's real path so the tools work from any directory (DGALUA_SCRIPTS overrides);
 *   - --threads N / env DGA_THREADS set the thread count of OpenBLAS and of the kernels' pool;
 *   - errors are reported by the rule below (see user_error), and the exit status is 2 for a
 *     usage mistake (a bad option, a script that cannot be opened) and 1 for a runtime error;
 *   - the interactive REPL uses GNU readline with a persistent history (~/.dgalua_history or
 *     $DGALUA_HISTORY; a multi-line entry stays one entry, see load_history), and Ctrl-C at
 *     the prompt discards the line instead of quitting;
 *   - the REPL's Lua side is scripts/repl/repl.lua: help(), pretty-printed results, tab
 *     completion of Lua names and of file names inside strings, and top-level `local`s that
 *     persist (see M.rewrite there).
 *
 * Ctrl-C during a computation uses lua.c's technique: the signal handler only installs a
 * debug hook (lua_sethook is documented as async-signal-safe), and the hook raises
 * "interrupted!" at the next Lua instruction, so the state is never touched mid-update. A
 * long call into the core (a store build, an alignment round, an evaluation) is stopped too:
 * the handler also raises the core's interrupt flag, which every model forward, k-means
 * iteration and corpus read checks, so the call returns DGA_ERR_INTERRUPTED within about
 * one forward pass and the binding raises "interrupted (in ...)". */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cblas.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <readline/history.h>
#include <readline/readline.h>

#include "comm.h"
#include "dgal.h"
#include "pool.h"

#define PROGNAME "dgalua"
#define PROMPT1 "> "
#define PROMPT2 ">> "
#define HISTORY_MAX 1000
#define EXIT_USAGE 2

static lua_State *volatile g_L;          /* the state a running chunk can be interrupted in */
static volatile sig_atomic_t g_sigint;   /* Ctrl-C seen while waiting for input */
static int g_debug;                      /* --debug / DGALUA_DEBUG=1: always a traceback */
static int g_usage_error;                /* the error was a usage error: exit status 2 */

/* ------------------------------------------------------------------ messages and calls */

static void print_error(const char *msg)
{
    fprintf(stderr, "%s: %s\n", PROGNAME, msg);
    fflush(stderr);
}

/* Reports a non-OK status: the message (with its traceback) on stderr. */
static int report(lua_State *L, int status)
{
    if (status != LUA_OK) {
        print_error(lua_tostring(L, -1));
        lua_pop(L, 1);
    }
    return status;
}

/* The rule for what an error report shows. A user's mistake (a missing file, a bad value, a
 * malformed line) reaches us as a plain string raised by a tool's error() or by a binding
 * with the core's message: the traceback would only bury that one line, so it is printed
 * alone, without the script position either. A bug shows itself differently: the VM's own
 * messages (indexing nil, arithmetic on a string, a C function given the wrong type), a
 * failed assert(), or an error value that is not a string. Those keep the traceback, and so
 * does everything under --debug or DGALUA_DEBUG=1. */
static int is_bug_message(const char *msg)
{
    static const char *const marks[] = {
        "attempt to ", "stack overflow", "table index is ", "assertion failed!", " expected, got ",
        "'for' ", "number has no integer representation", "invalid key to 'next'",
        "wrong number of arguments", "error in error handling", "string slice too long",
        "object length is not an integer", "invalid value (at index", NULL};
    for (int i = 0; marks[i]; i++)
        if (strstr(msg, marks[i])) return 1;
    return 0;
}

/* Length of a leading Lua position ("x.lua:12: ", "stdin:3: ", "(command line):1: ",
 * '[string "..."]:1: '), else 0.
 * Only chunk names: a core message may itself start with a data file's name and line. */
static size_t lua_position_len(const char *msg)
{
    const char *colon = strstr(msg, ": ");
    if (!colon) return 0;
    const char *p = colon;
    while (p > msg && p[-1] >= '0' && p[-1] <= '9') p--;
    if (p == colon || p == msg || p[-1] != ':') return 0;
    size_t name_len = (size_t)(p - 1 - msg);
    int lua_chunk = (name_len >= 4 && strncmp(p - 5, ".lua", 4) == 0) ||
                    (name_len == 5 && strncmp(msg, "stdin", 5) == 0) ||
                    (name_len == 14 && strncmp(msg, "(command line)", 14) == 0) ||
                    (strncmp(msg, "[string ", 8) == 0 && p[-2] == ']');
    if (!lua_chunk || memchr(msg, '\n', (size_t)(colon - msg))) return 0;
    return (size_t)(colon + 2 - msg);
}

/* Message handler: a user error becomes its message alone, anything else a string with a
 * traceback. */
static int msghandler(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        /* scripts/util/errors.lua's values: a user's mistake, said in one line; a usage
         * mistake also sets the exit status */
        if (lua_type(L, 1) == LUA_TTABLE) {
            lua_getfield(L, 1, "usage");
            g_usage_error = lua_toboolean(L, -1);
            lua_pop(L, 1);
        }
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) {
            if (!g_debug) return 1;
            luaL_traceback(L, L, lua_tostring(L, -1), 1);
            return 1;
        }
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    } else if (!g_debug && lua_type(L, 1) == LUA_TSTRING && !is_bug_message(msg)) {
        lua_pushstring(L, msg + lua_position_len(msg));
        return 1;
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

static void stop_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

static void on_sigint_running(int sig)
{
    signal(sig, SIG_DFL);   /* a second Ctrl-C kills the process if the hook never fires */
    dga_interrupt_request();
    lua_sethook(g_L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
}

/* Calls the function below narg arguments with a traceback handler and Ctrl-C armed. */
static int docall(lua_State *L, int narg, int nres)
{
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    g_L = L;
    dga_interrupt_clear();
    void (*old)(int) = signal(SIGINT, on_sigint_running);
    int status = lua_pcall(L, narg, nres, base);
    signal(SIGINT, old == SIG_ERR ? SIG_DFL : old);
    lua_sethook(L, NULL, 0, 0);
    lua_remove(L, base);
    return status;
}

static int dochunk(lua_State *L, int status)
{
    if (status == LUA_OK) status = docall(L, 0, 0);
    return report(L, status);
}

static int dostring(lua_State *L, const char *s, const char *name)
{
    return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* `-l name` or `-l g=name`: require the module and store it in a global. */
static int dolibrary(lua_State *L, const char *spec)
{
    const char *eq = strchr(spec, '=');
    const char *mod = eq ? eq + 1 : spec;
    lua_getglobal(L, "require");
    lua_pushstring(L, mod);
    int status = docall(L, 1, 1);
    if (status == LUA_OK) {
        if (eq) lua_pushlstring(L, spec, (size_t)(eq - spec));
        else lua_pushstring(L, mod);
        lua_insert(L, -2);
        lua_setglobal(L, lua_tostring(L, -2));
        lua_pop(L, 1);
    }
    return report(L, status);
}

/* ------------------------------------------------------------------ command line */

typedef struct {
    int script;          /* index of the script in argv (0: none) */
    int interactive;     /* -i */
    int version;         /* -v */
    int help;
    int has_exec;        /* -e or -l given */
    int threads;         /* --threads N (0: not given) */
    int debug;           /* --debug */
    const char *bad;     /* the offending option, when parsing failed */
} cmdline;

static void print_usage(FILE *out)
{
    fprintf(out,
            "usage: " PROGNAME " [options] [script [args]]\n"
            "Lua 5.4 with the dga module (Dynamic Gradient Alignment experiments) built in.\n"
            "Options:\n"
            "  -e stat        execute string 'stat'\n"
            "  -l mod         require module 'mod' into global 'mod' (-l g=mod: into 'g')\n"
            "  -i             enter interactive mode after running the script\n"
            "  -v             show version information\n"
            "  --threads N    threads for OpenBLAS and the kernels (default: env DGA_THREADS, else OpenBLAS's)\n"
            "  --debug        report every error with its traceback (default: only bugs)\n"
            "  -h, --help     show this help\n"
            "  --             stop handling options\n"
            "  -              run stdin as a script and stop handling options\n"
            "With no script and no -e: an interactive REPL when stdin is a terminal (history in\n"
            "$DGALUA_HISTORY or ~/.dgalua_history), else stdin is run as a script.\n"
            "Errors: a mistake in the input (a missing file, a bad value) prints one line; a bug\n"
            "prints a traceback. Exit status: 0 success, 1 runtime error, 2 usage error.\n"
            "Environment: DGA_THREADS, DGALUA_SCRIPTS (the scripts/ directory put on\n"
            "package.path), DGALUA_HISTORY, DGALUA_DEBUG=1 or DGA_TRACEBACK=1 (as --debug).\n");
}

/* Parses interpreter options; returns 0 on success. Mirrors lua.c: options end at the
 * first non-option (the script), at "--" or at "-". */
static int parse_args(int argc, char **argv, cmdline *c)
{
    memset(c, 0, sizeof *c);
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') break;                        /* the script */
        if (strcmp(a, "-") == 0) break;                /* stdin as the script */
        if (strcmp(a, "--") == 0) { i++; break; }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) { c->help = 1; continue; }
        if (strcmp(a, "-i") == 0) { c->interactive = c->version = 1; continue; }
        if (strcmp(a, "-v") == 0) { c->version = 1; continue; }
        if (strcmp(a, "--debug") == 0) { c->debug = 1; continue; }
        if (strcmp(a, "-e") == 0 || strcmp(a, "-l") == 0) {
            if (i + 1 >= argc) { c->bad = a; return 1; }
            c->has_exec = 1;
            i++;
            continue;
        }
        if (strncmp(a, "-e", 2) == 0 || strncmp(a, "-l", 2) == 0) { c->has_exec = 1; continue; }
        if (strcmp(a, "--threads") == 0 || strncmp(a, "--threads=", 10) == 0) {
            const char *v = a[9] == '=' ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);
            char *end = NULL;
            long n = v ? strtol(v, &end, 10) : 0;
            if (!v || *v == '\0' || *end != '\0' || n < 1 || n > 1024) { c->bad = a; return 1; }
            c->threads = (int)n;
            continue;
        }
        c->bad = a;
        return 1;
    }
    c->script = i < argc ? i : 0;
    return 0;
}

/* Runs -e and -l options in order (the ones before the script). */
static int run_exec_options(lua_State *L, int argc, char **argv, int script)
{
    int last = script ? script : argc;
    for (int i = 1; i < last; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) break;
        if (strcmp(a, "--threads") == 0) { i++; continue; }
        if (strcmp(a, "--debug") == 0) continue;
        if (a[0] != '-' || (a[1] != 'e' && a[1] != 'l')) continue;
        const char *v = a[2] != '\0' ? a + 2 : argv[++i];
        int status = a[1] == 'e' ? dostring(L, v, "=(command line)") : dolibrary(L, v);
        if (status != LUA_OK) return status;
    }
    return LUA_OK;
}

/* arg table as lua.c builds it: arg[0] = script, negative indices for the interpreter and
 * its options, positive ones for the script's arguments. */
static void create_arg_table(lua_State *L, int argc, char **argv, int script)
{
    /* no script (script == 0): arg[0] is the interpreter, as in lua.c */
    lua_createtable(L, argc - script - 1 > 0 ? argc - script - 1 : 0, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

static int run_script(lua_State *L, int argc, char **argv, int script)
{
    const char *fname = argv[script];
    if (strcmp(fname, "-") == 0 && strcmp(argv[script - 1], "--") != 0) fname = NULL;
    int status = luaL_loadfile(L, fname);
    if (status == LUA_OK) {
        int n = argc - script - 1;
        luaL_checkstack(L, n + 3, "too many arguments to script");
        for (int i = script + 1; i < argc; i++) lua_pushstring(L, argv[i]);
        status = docall(L, n, LUA_MULTRET);
    }
    return report(L, status);
}

/* ------------------------------------------------------------------ environment setup */

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The scripts/ directory: $DGALUA_SCRIPTS, else the first ancestor of the executable's real
 * directory holding scripts/harness/. Writes it into buf; returns 0 if none was found. */
static int find_scripts_dir(char *buf, size_t size)
{
    const char *env = getenv("DGALUA_SCRIPTS");
    if (env && *env) {
        snprintf(buf, size, "%s", env);
        return 1;
    }
    char dir[PATH_MAX];
    if (!realpath("/proc/self/exe", dir)) return 0;
    char probe[PATH_MAX + 32];
    for (;;) {
        char *slash = strrchr(dir, '/');
        if (!slash) return 0;
        *slash = '\0';                               /* up one level */
        snprintf(probe, sizeof probe, "%s/scripts/harness", dir);
        if (is_dir(probe)) {
            snprintf(buf, size, "%s/scripts", dir);
            return 1;
        }
        if (dir[0] == '\0') return 0;
    }
}

static void prepend_package_path(lua_State *L, const char *scripts)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", scripts, scripts, lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
}

/* package.preload.dga, package.loaded.dga and the global `dga` (one and the same table). */
static int open_dga(lua_State *L)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_dga);
    lua_setfield(L, -2, "dga");
    lua_pop(L, 1);
    lua_pushcfunction(L, msghandler);
    lua_pushcfunction(L, luaopen_dga);
    lua_pushliteral(L, "dga");
    int status = lua_pcall(L, 1, 1, -3);
    if (status != LUA_OK) {
        lua_remove(L, -2);
        return report(L, status);
    }
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushvalue(L, -2);
    lua_setfield(L, -2, "dga");
    lua_pop(L, 1);
    lua_setglobal(L, "dga");
    lua_pop(L, 1);
    return LUA_OK;
}

static void set_threads(int threads)
{
    if (threads == 0) {
        const char *env = getenv("DGA_THREADS");
        if (env && *env) {
            char *end = NULL;
            long n = strtol(env, &end, 10);
            if (*end == '\0' && n >= 1 && n <= 1024) threads = (int)n;
            else fprintf(stderr, "%s: ignoring DGA_THREADS=%s (expected an integer >= 1)\n",
                         PROGNAME, env);
        }
    }
    if (threads > 0) openblas_set_num_threads(threads);
    /* the non-GEMM kernels' pool follows OpenBLAS, whose default is its own choice */
    if (dga_pool_set_threads(openblas_get_num_threads()) != DGA_OK)
        fprintf(stderr, "%s: %s\n", PROGNAME, dga_last_error());
}

static void print_version(lua_State *L)
{
    const char *v = "?";
    lua_getglobal(L, "dga");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "version");
        if (lua_isstring(L, -1)) v = lua_tostring(L, -1);
    }
    printf("%s %s (%s; OpenBLAS %d threads)\n", PROGNAME, v, LUA_COPYRIGHT,
           openblas_get_num_threads());
    fflush(stdout);
    lua_settop(L, 0);
}

/* ------------------------------------------------------------------ the REPL */

/* What the REPL carries from one input line to the next. */
typedef struct {
    lua_State *L;
    int helper;          /* registry ref of repl.repl, or LUA_NOREF when it did not load */
    char *pending;       /* lines of a statement still incomplete, or NULL */
    const char *hist;    /* history file, or NULL */
    int tty;
    int eof;
} repl_state;

static repl_state *g_repl;   /* for readline's line callback */

static const char *history_path(char *buf, size_t size)
{
    const char *env = getenv("DGALUA_HISTORY");
    if (env && *env) return env;
    const char *home = getenv("HOME");
    if (!home || !*home) return NULL;
    snprintf(buf, size, "%s/.dgalua_history", home);
    return buf;
}

/* Is the status a syntax error caused only by the input ending too early? */
static int incomplete(lua_State *L, int status)
{
    if (status != LUA_ERRSYNTAX) return 0;
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    const char *eof = "<eof>";
    size_t elen = strlen(eof);
    if (len >= elen && strcmp(msg + len - elen, eof) == 0) {
        lua_pop(L, 1);
        return 1;
    }
    return 0;
}

/* Compiles "return <line>" so that expressions print their value, else the line itself. */
static int load_input(lua_State *L, const char *code)
{
    const char *ret = lua_pushfstring(L, "return %s;", code);
    int status = luaL_loadbuffer(L, ret, strlen(ret), "=stdin");
    lua_remove(L, -2);
    if (status == LUA_OK) return LUA_OK;
    lua_pop(L, 1);
    return luaL_loadbuffer(L, code, strlen(code), "=stdin");
}

/* Pushes field `name` of the REPL helper module; 0 (nothing pushed) without it. */
static int push_helper(lua_State *L, int ref, const char *name)
{
    if (ref == LUA_NOREF || ref == LUA_REFNIL) return 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
    if (lua_isfunction(L, -1)) return 1;
    lua_pop(L, 1);
    return 0;
}

/* Prints the results on the stack with the helper's pretty-printer (else print). */
static void print_results(lua_State *L, int helper)
{
    int n = lua_gettop(L);
    if (n == 0) return;
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    if (!push_helper(L, helper, "show")) lua_getglobal(L, "print");
    lua_insert(L, 1);
    if (lua_pcall(L, n, 0, 0) != LUA_OK)
        print_error(lua_pushfstring(L, "error printing the result (%s)", lua_tostring(L, -1)));
}

/* The code with its top-level `local`s made global by the helper, pushed as a string. */
static const char *rewrite_input(lua_State *L, int helper, const char *code)
{
    if (push_helper(L, helper, "rewrite")) {
        lua_pushstring(L, code);
        if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING) return lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    return lua_pushstring(L, code);
}

/* The history file keeps a multi-line entry whole: every entry is written after a "#<time>"
 * line (readline's timestamps), and lines up to the next timestamp are read back as one
 * entry. A file written before (no timestamps) is read line by line once and rewritten in
 * the new form, so its lines stay separate entries. */
static void load_history(const char *path)
{
    history_comment_char = '#';
    history_write_timestamps = 1;
    FILE *f = fopen(path, "r");
    if (!f) return;
    int c0 = fgetc(f), c1 = fgetc(f);
    fclose(f);
    if (c0 == EOF) return;
    int stamped = c0 == '#' && c1 >= '0' && c1 <= '9';
    history_multiline_entries = stamped;
    read_history(path);
    if (!stamped) write_history(path);
    history_multiline_entries = 1;
}

static void remember(repl_state *st, const char *code)
{
    if (!st->tty || code[strspn(code, " \t\n")] == '\0') return;
    add_history(code);
    if (st->hist) {
        /* appending keeps what concurrent sessions wrote; then trim to the cap */
        if (append_history(1, st->hist) != 0) write_history(st->hist);
        history_truncate_file(st->hist, HISTORY_MAX);
    }
}

/* One input line: joined to a pending incomplete statement, compiled, run, printed. */
static void process_line(repl_state *st, const char *line)
{
    lua_State *L = st->L;
    char *code;
    if (st->pending) {
        size_t n = strlen(st->pending) + strlen(line) + 2;
        code = malloc(n);
        if (code) snprintf(code, n, "%s\n%s", st->pending, line);
        free(st->pending);
        st->pending = NULL;
    } else {
        code = strdup(line);
    }
    if (!code) {
        print_error("not enough memory for the input line");
        return;
    }
    const char *run = rewrite_input(L, st->helper, code);
    int status = load_input(L, run);
    lua_remove(L, -2);   /* the rewritten text */
    if (incomplete(L, status)) {
        lua_settop(L, 0);
        st->pending = code;
        return;
    }
    remember(st, code);
    free(code);
    if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET);
    if (status == LUA_OK) print_results(L, st->helper);
    else report(L, status);
    lua_settop(L, 0);
    fflush(stdout);
}

/* readline's callback: runs the line (NULL at Ctrl-D) and sets the next prompt. Staying
 * installed between lines lets readline deliver typed-ahead lines in order. */
static void on_rl_line(char *line)
{
    repl_state *st = g_repl;
    if (!line) {
        st->eof = 1;
        rl_callback_handler_remove();
        return;
    }
    process_line(st, line);
    free(line);
    rl_set_prompt(st->pending ? PROMPT2 : PROMPT1);
}

static void on_sigint_waiting(int sig)
{
    (void)sig;
    g_sigint = 1;
}

/* ------------------------------------------------------------------ tab completion */

static char **g_matches;   /* the helper's candidates for the word being completed */
static int g_nmatches;

static char *next_match(const char *text, int state)
{
    (void)text;
    return state < g_nmatches ? strdup(g_matches[state]) : NULL;
}

/* Inside a string literal, file names through repl.repl's complete_string() (the whole
 * path since the opening quote, so "../shared/da<TAB> completes past every '/'); elsewhere
 * Lua names (globals, fields, methods) through its complete(). */
static char **complete_lua(const char *text, int start, int end)
{
    repl_state *st = g_repl;
    rl_attempted_completion_over = 1;
    if (!st) return NULL;
    lua_State *L = st->L;
    int top = lua_gettop(L);
    char **result = NULL;
    int got = 0;
    if (push_helper(L, st->helper, "complete_string")) {
        lua_pushlstring(L, rl_line_buffer, (size_t)end);
        lua_pushinteger(L, start);
        got = lua_pcall(L, 2, 1, 0) == LUA_OK && lua_istable(L, -1);
        if (!got) lua_settop(L, top);
    }
    if (!got && push_helper(L, st->helper, "complete")) {
        lua_pushstring(L, text);
        got = lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1);
    }
    if (got) {
        int n = (int)luaL_len(L, -1);
        g_matches = calloc((size_t)n + 1, sizeof *g_matches);
        g_nmatches = 0;
        for (int i = 1; g_matches && i <= n; i++) {
            lua_rawgeti(L, -1, i);
            if (lua_type(L, -1) == LUA_TSTRING) g_matches[g_nmatches++] = strdup(lua_tostring(L, -1));
            lua_pop(L, 1);
        }
        rl_completion_append_character = '\0';
        if (g_nmatches > 0) result = rl_completion_matches(text, next_match);
        for (int i = 0; i < g_nmatches; i++) free(g_matches[i]);
        free(g_matches);
        g_matches = NULL;
        g_nmatches = 0;
    }
    lua_settop(L, top);
    return result;
}

/* Terminal REPL on readline's callback interface: select() is interrupted by Ctrl-C (no
 * SA_RESTART), which then discards the line being typed and any pending statement. */
static void repl_tty(repl_state *st)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint_waiting;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    g_repl = st;
    rl_callback_handler_install(PROMPT1, on_rl_line);
    while (!st->eof) {
        fd_set fds;
        FD_ZERO(&fds);
        FD_SET(fileno(rl_instream), &fds);
        g_sigint = 0;
        int r = select(fileno(rl_instream) + 1, &fds, NULL, NULL, NULL);
        if (r < 0) {
            if (errno != EINTR) break;
            if (g_sigint) {
                rl_free_line_state();
                rl_callback_sigcleanup();
                rl_replace_line("", 0);
                free(st->pending);
                st->pending = NULL;
                fputs("\n", rl_outstream);
                rl_set_prompt(PROMPT1);
                rl_on_new_line();
                rl_redisplay();
            }
            continue;
        }
        rl_callback_read_char();
    }
    if (!st->eof) rl_callback_handler_remove();
    g_repl = NULL;
    sigaction(SIGINT, &old, NULL);
    fputs("\n", stdout);
}

/* REPL on a non-terminal stdin (-i with redirected input): prompts, no line editing. */
static void repl_plain(repl_state *st)
{
    size_t cap = 0;
    char *line = NULL;
    for (;;) {
        fputs(st->pending ? PROMPT2 : PROMPT1, stdout);
        fflush(stdout);
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) break;
        if (n > 0 && line[n - 1] == '\n') line[n - 1] = '\0';
        process_line(st, line);
    }
    free(line);
    fputs("\n", stdout);
}

static void repl(lua_State *L)
{
    char histbuf[PATH_MAX];
    repl_state st = {L, LUA_NOREF, NULL, NULL, isatty(STDIN_FILENO), 0};
    /* The helper is optional: without scripts/ on package.path the REPL still works. */
    lua_getglobal(L, "require");
    lua_pushliteral(L, "repl.repl");
    if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1)) {
        st.helper = luaL_ref(L, LUA_REGISTRYINDEX);
        if (push_helper(L, st.helper, "install") && lua_pcall(L, 0, 0, 0) != LUA_OK) lua_pop(L, 1);
    } else {
        print_error(lua_pushfstring(L, "REPL helpers unavailable (%s)", luaL_tolstring(L, -1, NULL)));
    }
    lua_settop(L, 0);
    if (st.tty) {
        rl_readline_name = PROGNAME;
        rl_catch_signals = 0;   /* SIGINT is ours: see repl_tty */
        /* '.' and ':' belong to the word, so "dga.to" and "m:for" complete as one name */
        rl_basic_word_break_characters = " \t\n\"'`@$><=;|&{(,+-*/%^~#[]})";
        rl_attempted_completion_function = complete_lua;
        using_history();
        stifle_history(HISTORY_MAX);
        st.hist = history_path(histbuf, sizeof histbuf);
        if (st.hist) load_history(st.hist);
        repl_tty(&st);
    } else {
        repl_plain(&st);
    }
    free(st.pending);
    if (st.helper != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, st.helper);
    lua_settop(L, 0);
    fflush(stdout);
}

/* ------------------------------------------------------------------ main */

typedef struct {
    int argc;
    char **argv;
    int exit_code;
} main_args;

/* Runs everything inside a protected call, so a memory error while setting up is reported. */
static int pmain(lua_State *L)
{
    main_args *ma = lua_touserdata(L, 1);
    int argc = ma->argc;
    char **argv = ma->argv;
    cmdline c;
    ma->exit_code = EXIT_FAILURE;
    if (parse_args(argc, argv, &c) != 0) {
        fprintf(stderr, "%s: unrecognized option or missing value: '%s'\n", PROGNAME, c.bad);
        print_usage(stderr);
        ma->exit_code = EXIT_USAGE;
        return 0;
    }
    if (c.help) {
        print_usage(stdout);
        ma->exit_code = EXIT_SUCCESS;
        return 0;
    }
    const char *dbg = getenv("DGALUA_DEBUG");
    const char *tb = getenv("DGA_TRACEBACK");
    g_debug = c.debug || (dbg && *dbg && strcmp(dbg, "0") != 0) || (tb && *tb && strcmp(tb, "0") != 0);
    luaL_checkversion(L);
    luaL_openlibs(L);
    set_threads(c.threads);

    char scripts[PATH_MAX + 16];
    if (find_scripts_dir(scripts, sizeof scripts)) prepend_package_path(L, scripts);
    if (open_dga(L) != LUA_OK) return 0;
    create_arg_table(L, argc, argv, c.script);
    lua_gc(L, LUA_GCRESTART);
    lua_gc(L, LUA_GCGEN, 0, 0);

    if (c.version) print_version(L);
    if (run_exec_options(L, argc, argv, c.script) != LUA_OK) return 0;
    if (c.script) {
        int status = run_script(L, argc, argv, c.script);
        /* no such script, or a usage error value: the command is wrong */
        if (status == LUA_ERRFILE || g_usage_error) ma->exit_code = EXIT_USAGE;
        if (status != LUA_OK) return 0;
    }
    if (c.interactive) {
        repl(L);
    } else if (c.script == 0 && !c.has_exec && !c.version) {
        if (isatty(STDIN_FILENO)) {
            print_version(L);
            repl(L);
        } else if (dochunk(L, luaL_loadfile(L, NULL)) != LUA_OK) {
            return 0;
        }
    }
    ma->exit_code = EXIT_SUCCESS;
    return 0;
}

/* print() and io.write() do not report failed writes, and stdout is buffered: a tool whose
 * output goes to a full disk (or /dev/full) would end with status 0 and a truncated output.
 * Checked once, at exit, whichever way the program ends (os.exit included). */
static void check_stdout(void)
{
    if (fflush(stdout) == 0 && !ferror(stdout)) return;
    int err = errno;
    fprintf(stderr, "dgalua: error writing to standard output: %s\n", err ? strerror(err) : "write failed");
    _exit(EXIT_FAILURE);
}

int main(int argc, char **argv)
{
    atexit(check_stdout);
    /* the plain build under mpirun: say so now rather than run the job once per process */
    if (!dga_comm_has_mpi() && dga_comm_init() != DGA_OK) {
        print_error(dga_last_error());
        return EXIT_FAILURE;
    }
    lua_State *L = luaL_newstate();
    if (L == NULL) {
        print_error("cannot create the Lua state: not enough memory");
        return EXIT_FAILURE;
    }
    lua_gc(L, LUA_GCSTOP);   /* as lua.c: no collection while building the environment */
    main_args ma = {argc, argv, EXIT_FAILURE};
    lua_pushcfunction(L, pmain);
    lua_pushlightuserdata(L, &ma);
    int status = lua_pcall(L, 1, 0, 0);
    if (status != LUA_OK) report(L, status);
    lua_close(L);
    return status == LUA_OK ? ma.exit_code : EXIT_FAILURE;
}

-- Lua 5.4's own functions and libraries, for the REPL's help(): a signature, one line of our
-- own words, and the section of the Lua 5.4 reference manual (https://www.lua.org/manual/5.4/)
-- that has the full story. repl.repl looks names up here after the dga documentation.
--
-- An entry is "name(args) -> returns | what it does"; a library lists its entries under the
-- manual section that describes it.
local M = {}

M.libraries = {
    {name = "_G", section = "6.1", title = "basic functions", entries = {
        "assert(v [, message]) -> v, ... | Raises message (default \"assertion failed!\") unless v is truthy; else returns its arguments.",
        "collectgarbage([opt [, ...]]) -> depends on opt | Drives the collector: \"collect\", \"count\" (KB in use), \"step\", ...",
        "dofile([filename]) -> ... | Runs a Lua file (stdin without a name) and returns what it returns.",
        "error(message [, level]) | Raises an error; level 1 (default) prefixes the position of the caller of error, 0 none.",
        "getmetatable(object) -> table or nil | The metatable (its __metatable field when set).",
        "ipairs(t) -> iterator | Iterates t[1], t[2], ... up to the first nil: for i, v in ipairs(t).",
        "load(chunk [, chunkname [, mode [, env]]]) -> function or nil, message | Compiles a string (or reader) without running it.",
        "loadfile([filename [, mode [, env]]]) -> function or nil, message | Compiles a file without running it.",
        "next(t [, key]) -> key, value | The field after key (first with nil) in an unspecified order.",
        "pairs(t) -> iterator | Iterates every key/value (through __pairs if the metatable has one).",
        "pcall(f, ...) -> ok, results or message | Calls f in protected mode: false and the error instead of raising.",
        "print(...) | Writes its arguments with tostring, tab-separated, and a newline, on stdout.",
        "rawequal(a, b) -> boolean | Equality without __eq.",
        "rawget(t, key) -> value | t[key] without __index.",
        "rawlen(v) -> integer | The length of a table or string without __len.",
        "rawset(t, key, value) -> t | t[key] = value without __newindex.",
        "select(n, ...) -> ... | The arguments after the n-th (a negative n counts from the end); select('#', ...) counts them.",
        "setmetatable(t, mt) -> t | Sets (nil: removes) the metatable of a table.",
        "tonumber(v [, base]) -> number or nil | A number from a string or number (base 2-36 for integers in a string).",
        "tostring(v) -> string | A readable string (through __tostring / __name).",
        "type(v) -> string | \"nil\", \"number\", \"string\", \"boolean\", \"table\", \"function\", \"thread\" or \"userdata\".",
        "warn(msg1, ...) | Emits a warning built from its string arguments (\"@on\" / \"@off\" switch warnings).",
        "xpcall(f, handler, ...) -> ok, results or handler's value | pcall with a message handler that sees the failing stack.",
    }},
    {name = "coroutine", section = "6.2", title = "coroutines", entries = {
        "coroutine.close(co) -> ok [, message] | Closes a suspended or dead coroutine, running its pending to-be-closed variables.",
        "coroutine.create(f) -> thread | A new coroutine running f.",
        "coroutine.isyieldable([co]) -> boolean | Whether the (running) coroutine may yield.",
        "coroutine.resume(co, ...) -> ok, values | Starts or continues co; true and what it yielded or returned, or false and the error.",
        "coroutine.running() -> thread, ismain | The running coroutine and whether it is the main one.",
        "coroutine.status(co) -> string | \"running\", \"suspended\", \"normal\" or \"dead\".",
        "coroutine.wrap(f) -> function | A function that resumes a new coroutine at each call and raises its errors.",
        "coroutine.yield(...) -> values | Suspends the running coroutine; resume's extra arguments come back.",
    }},
    {name = "package", section = "6.3", title = "modules", entries = {
        "require(modname) -> module, loaderdata | Loads a module once (package.loaded caches it), searching package.path and cpath.",
        "package.config -> string | Compile-time configuration: directory separator, path separators and marks.",
        "package.cpath -> string | Where require looks for C libraries (templates with ?).",
        "package.loaded -> table | The modules already loaded, by name.",
        "package.loadlib(libname, funcname) -> function or nil, message | Links a C library and returns one of its functions.",
        "package.path -> string | Where require looks for Lua modules (templates with ?); dgalua puts scripts/ first.",
        "package.preload -> table | Loaders for modules, consulted before any file.",
        "package.searchers -> table | The functions require tries in turn to find a loader.",
        "package.searchpath(name, path [, sep [, rep]]) -> filename or nil, message | The first file of path that opens.",
    }},
    {name = "string", section = "6.4", title = "strings (patterns: 6.4.1; format of pack: 6.4.2)", entries = {
        "string.byte(s [, i [, j]]) -> integers | The byte values of s[i..j] (default i, i).",
        "string.char(...) -> string | The string of the given byte values.",
        "string.dump(f [, strip]) -> string | The binary chunk of a Lua function (load reads it back).",
        "string.find(s, pattern [, init [, plain]]) -> start, end, captures or nil | The first match (plain = true: a substring).",
        "string.format(fmt, ...) -> string | printf-style formatting: %d %5.2f %s %q (a Lua literal) %x %g %c %%.",
        "string.gmatch(s, pattern [, init]) -> iterator | Iterates the matches (their captures) of pattern in s.",
        "string.gsub(s, pattern, repl [, n]) -> string, count | Replaces matches by a string (%1: a capture), a table or a function.",
        "string.len(s) -> integer | The length in bytes (as #s).",
        "string.lower(s) -> string | ASCII letters to lower case.",
        "string.match(s, pattern [, init]) -> captures or nil | The captures (or the whole match) of the first match.",
        "string.pack(fmt, v1, ...) -> string | Values serialized in a binary format (\"<i4\", \"d\", \"z\", ...).",
        "string.packsize(fmt) -> integer | The size of string.pack's result for a fixed-size format.",
        "string.rep(s, n [, sep]) -> string | n copies of s, separated by sep.",
        "string.reverse(s) -> string | The bytes in reverse order.",
        "string.sub(s, i [, j]) -> string | The substring s[i..j]; negative indices count from the end.",
        "string.unpack(fmt, s [, pos]) -> values, next position | Reads values written by string.pack.",
        "string.upper(s) -> string | ASCII letters to upper case.",
    }},
    {name = "utf8", section = "6.5", title = "UTF-8", entries = {
        "utf8.char(...) -> string | The UTF-8 encoding of the given code points.",
        "utf8.charpattern -> string | A pattern matching one UTF-8 character.",
        "utf8.codepoint(s [, i [, j [, lax]]]) -> integers | The code points of the characters starting in s[i..j].",
        "utf8.codes(s [, lax]) -> iterator | Iterates position, code point over s.",
        "utf8.len(s [, i [, j [, lax]]]) -> integer or nil, position | Characters in s[i..j], or nil and the first invalid byte.",
        "utf8.offset(s, n [, i]) -> integer | The byte position of the n-th character (counted from i).",
    }},
    {name = "table", section = "6.6", title = "tables", entries = {
        "table.concat(list [, sep [, i [, j]]]) -> string | The strings or numbers list[i..j] joined by sep.",
        "table.insert(list, [pos,] value) | Inserts value at pos (default: the end), shifting the rest up.",
        "table.move(a1, f, e, t [, a2]) -> a2 | Copies a1[f..e] into a2 (default a1) from position t.",
        "table.pack(...) -> table | The arguments as {..., n = count}.",
        "table.remove(list [, pos]) -> value | Removes list[pos] (default: the last) and shifts the rest down.",
        "table.sort(list [, comp]) | Sorts in place with < or comp(a, b) (not stable).",
        "table.unpack(list [, i [, j]]) -> ... | list[i], ..., list[j] as separate values.",
    }},
    {name = "math", section = "6.7", title = "mathematics", entries = {
        "math.abs(x) -> number | The absolute value.",
        "math.acos(x) -> number | Arc cosine (radians).",
        "math.asin(x) -> number | Arc sine (radians).",
        "math.atan(y [, x]) -> number | Arc tangent of y/x, using both signs for the quadrant.",
        "math.ceil(x) -> integer | The smallest integer >= x.",
        "math.cos(x) -> number | Cosine (radians).",
        "math.deg(x) -> number | Radians to degrees.",
        "math.exp(x) -> number | e^x.",
        "math.floor(x) -> integer | The largest integer <= x.",
        "math.fmod(x, y) -> number | The remainder of x / y rounded towards zero.",
        "math.huge -> number | Infinity (a float larger than any other).",
        "math.log(x [, base]) -> number | The logarithm (natural by default).",
        "math.max(x, ...) -> number | The largest argument.",
        "math.maxinteger -> integer | The largest integer (2^63 - 1).",
        "math.min(x, ...) -> number | The smallest argument.",
        "math.mininteger -> integer | The smallest integer (-2^63).",
        "math.modf(x) -> integral part, fraction | Splits x into its integral and fractional parts.",
        "math.pi -> number | The value of pi.",
        "math.rad(x) -> number | Degrees to radians.",
        "math.random([m [, n]]) -> number | A float in [0, 1), or an integer in [1, m] or [m, n] (xoshiro256**).",
        "math.randomseed([x [, y]]) -> x, y | Seeds math.random (no argument: a random seed).",
        "math.sin(x) -> number | Sine (radians).",
        "math.sqrt(x) -> number | The square root.",
        "math.tan(x) -> number | Tangent (radians).",
        "math.tointeger(x) -> integer or nil | x as an integer when it has an exact integer value.",
        "math.type(x) -> string or nil | \"integer\", \"float\", or nil when x is not a number.",
        "math.ult(m, n) -> boolean | Whether m < n as unsigned integers.",
    }},
    {name = "io", section = "6.8", title = "input and output", entries = {
        "io.close([file]) -> ok | Closes the file (default: the default output).",
        "io.flush() | Flushes the default output.",
        "io.input([file]) -> file | Sets or returns the default input (a name or a handle).",
        "io.lines([filename, ...]) -> iterator | Iterates a file's lines (default: the default input) and closes it at the end.",
        "io.open(filename [, mode]) -> file or nil, message | Opens a file, mode \"r\", \"w\", \"a\", \"r+\", ... (\"b\": binary).",
        "io.output([file]) -> file | Sets or returns the default output.",
        "io.popen(prog [, mode]) -> file | Runs a shell command and reads its output (\"r\") or writes its input (\"w\").",
        "io.read(...) -> values | Reads from the default input, as file:read.",
        "io.tmpfile() -> file | A temporary file opened for update, removed when the program ends.",
        "io.type(obj) -> string or nil | \"file\", \"closed file\", or nil when obj is not a file handle.",
        "io.write(...) -> file | Writes strings or numbers to the default output.",
    }},
    {name = "file", section = "6.8", title = "file handles (io.open's result)", entries = {
        "file:close() -> ok | Closes the file (also at garbage collection).",
        "file:flush() | Writes out buffered data.",
        "file:lines(...) -> iterator | Iterates reads of the given formats (default \"l\": lines) without closing the file.",
        "file:read(...) -> values | Reads by formats: \"l\" a line, \"L\" with its newline, \"n\" a number, \"a\" everything, n bytes.",
        "file:seek([whence [, offset]]) -> position | Moves to \"set\", \"cur\" (default) or \"end\" plus offset; returns the position.",
        "file:setvbuf(mode [, size]) -> ok | Buffering: \"no\", \"full\" or \"line\".",
        "file:write(...) -> file | Writes strings or numbers.",
    }},
    {name = "os", section = "6.9", title = "operating system", entries = {
        "os.clock() -> number | CPU time used by the program, in seconds.",
        "os.date([format [, time]]) -> string or table | A formatted date (strftime format; \"*t\" a table; \"!\" for UTC).",
        "os.difftime(t2, t1) -> number | t2 - t1 in seconds.",
        "os.execute([command]) -> ok, \"exit\" or \"signal\", code | Runs a shell command.",
        "os.exit([code [, close]]) | Ends the program with the status (true: success).",
        "os.getenv(name) -> string or nil | An environment variable.",
        "os.remove(filename) -> ok or nil, message | Deletes a file or an empty directory.",
        "os.rename(old, new) -> ok or nil, message | Renames a file or directory.",
        "os.setlocale(locale [, category]) -> string or nil | Sets or queries the C locale.",
        "os.time([t]) -> integer | The current time, or the time of a date table, in seconds since the epoch.",
        "os.tmpname() -> string | A name usable for a temporary file.",
    }},
    {name = "debug", section = "6.10", title = "the debug library", entries = {
        "debug.debug() | An interactive prompt that runs lines until \"cont\".",
        "debug.gethook([thread]) -> hook, mask, count | The current hook settings.",
        "debug.getinfo([thread,] f [, what]) -> table | Information on a function or stack level (source, currentline, name, ...).",
        "debug.getlocal([thread,] f, local) -> name, value | A local variable of a stack level (or a function's parameter name).",
        "debug.getmetatable(value) -> table or nil | The metatable, ignoring __metatable.",
        "debug.getregistry() -> table | The registry table.",
        "debug.getupvalue(f, up) -> name, value | The up-th upvalue of f.",
        "debug.getuservalue(u, n) -> value, ok | The n-th user value of a full userdata.",
        "debug.sethook([thread,] hook, mask [, count]) | Hooks calls (\"c\"), returns (\"r\"), lines (\"l\") or every count instructions.",
        "debug.setlocal([thread,] level, local, value) -> name | Sets a local variable of a stack level.",
        "debug.setmetatable(value, mt) -> value | Sets the metatable of any value.",
        "debug.setupvalue(f, up, value) -> name | Sets the up-th upvalue of f.",
        "debug.setuservalue(u, value, n) -> u | Sets the n-th user value of a full userdata.",
        "debug.traceback([thread,] [message [, level]]) -> string | The message followed by a traceback of the stack.",
        "debug.upvalueid(f, n) -> light userdata | An identity of an upvalue, to tell shared ones.",
        "debug.upvaluejoin(f1, n1, f2, n2) | Makes f1's n1-th upvalue refer to f2's n2-th.",
    }},
}

local by_name, by_library

-- "print", "string.format", "file:read" -> {name, sig, summary, section, library}.
local function index()
    if by_name then return end
    by_name, by_library = {}, {}
    for _, lib in ipairs(M.libraries) do
        by_library[lib.name] = lib
        for _, line in ipairs(lib.entries) do
            local sig, summary = line:match("^(.-)%s*|%s*(.*)$")
            local name = sig:match("^([%w_.:]+)")
            by_name[name] = {name = name, sig = sig, summary = summary, section = lib.section, library = lib}
        end
    end
end

function M.find(name)
    index()
    return by_name[name]
end

function M.library(name)
    index()
    return by_library[name]
end

local function manual(section) return "Lua 5.4 manual §" .. section end

function M.format(e)
    return string.format("%s\n  %s\n  (Lua's own; %s)", e.sig, e.summary, manual(e.section))
end

function M.format_library(lib)
    local lines = {string.format("%s: Lua's %s library (%s)", lib.name, lib.title, manual(lib.section))}
    for _, line in ipairs(lib.entries) do lines[#lines + 1] = "  " .. line:match("^(.-)%s*|") end
    return table.concat(lines, "\n")
end

return M

-- What the dgalua REPL does in Lua: help(), the printing of results, tab completion and
-- the rewriting of top-level `local`s. bindings/dgalua_main.c loads this module when the
-- REPL starts and calls M.show, M.complete and M.rewrite; M.install puts help() in _G.
local apidoc = require "repl.apidoc"
local luadoc = require "repl.luadoc"

local M = {}

-- ------------------------------------------------------------------ printing values

-- Whether v is a dga object, and its metatable name ("dga.gpt").
local function dga_type(v)
    local mt = getmetatable(v)
    local name = type(mt) == "table" and rawget(mt, "__name")
    if type(name) == "string" and name:match("^dga%.") then return name end
    return nil
end

local complete = require "repl.complete"
local methods_of, is_identifier = complete.methods_of, complete.is_identifier
M.methods_of = methods_of


local function key_order(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return ta < tb end
    if ta == "number" or ta == "string" then return a < b end
    return tostring(a) < tostring(b)
end

local MAX_ITEMS, MAX_DEPTH, WIDTH = 40, 3, 96

local format

-- A table as "{1, 2, x = 3}" on one line when short, else one field per line.
local function format_table(t, depth, seen, indent)
    if seen[t] then return "<cycle>" end
    if t == _G then return "<_G>" end
    if depth > MAX_DEPTH then return "{...}" end
    seen[t] = true
    local n = #t
    local parts, keys = {}, {}
    for i = 1, math.min(n, MAX_ITEMS) do parts[#parts + 1] = format(t[i], depth + 1, seen, indent .. "  ") end
    for k in pairs(t) do
        if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
    end
    table.sort(keys, key_order)
    local room = MAX_ITEMS - #parts
    for i = 1, math.min(#keys, room) do
        local k = keys[i]
        local ks = is_identifier(k) and k or "[" .. format(k, depth + 1, seen, indent) .. "]"
        parts[#parts + 1] = ks .. " = " .. format(t[k], depth + 1, seen, indent .. "  ")
    end
    local hidden = math.max(0, n - MAX_ITEMS) + math.max(0, #keys - room)
    if hidden > 0 then parts[#parts + 1] = string.format("... (%d more)", hidden) end
    seen[t] = nil
    if #parts == 0 then return "{}" end
    local one = "{" .. table.concat(parts, ", ") .. "}"
    if #one + #indent <= WIDTH and not one:find("\n", 1, true) then return one end
    return "{\n" .. indent .. "  " .. table.concat(parts, ",\n" .. indent .. "  ") .. "\n" .. indent .. "}"
end

-- A function's name when it is one of dga's or of the standard library's.
local function function_name(f)
    if not M.fnames then
        M.fnames = {}
        for _, lib in ipairs{"string", "table", "math", "io", "os", "coroutine", "utf8", "debug", "package"} do
            local t = rawget(_G, lib)
            if type(t) == "table" then
                for k, v in pairs(t) do if type(v) == "function" then M.fnames[v] = lib .. "." .. k end end
            end
        end
        for k, v in pairs(_G) do if type(v) == "function" then M.fnames[v] = k end end
        local file_methods = getmetatable(io.stdout).__index
        for k, v in pairs(type(file_methods) == "table" and file_methods or {}) do
            if type(v) == "function" then M.fnames[v] = "file:" .. k end
        end
        local d = rawget(_G, "dga")
        if type(d) == "table" then
            for k, v in pairs(d) do if type(v) == "function" then M.fnames[v] = "dga." .. k end end
        end
    end
    return M.fnames[f]
end

local help_text

function format(v, depth, seen, indent)
    local tv = type(v)
    if tv == "string" then
        if depth == 0 then return v end
        return string.format("%q", v):gsub("\\\n", "\\n")
    elseif tv == "table" then
        if depth == 0 and v == rawget(_G, "dga") then return help_text(v) end
        local mt = getmetatable(v)
        if type(mt) == "table" and rawget(mt, "__tostring") then return tostring(v) end
        return format_table(v, depth, seen, indent)
    elseif tv == "function" then
        -- `help` typed without its parentheses: say how to call it, as Python's REPL does
        if depth == 0 and v == M.help then return "help is a function: type help().\n" .. M.HELP_ON_HELP end
        local name = function_name(v)
        return name and ("function " .. name) or tostring(v)
    end
    return tostring(v)
end

-- The text the REPL prints for one value.
function M.format(v) return format(v, 0, {}, "") end

-- Prints the values an expression returned, separated by tabs as print() does.
function M.show(...)
    local n = select("#", ...)
    local out = {}
    for i = 1, n do out[i] = M.format((select(i, ...))) end
    io.stdout:write(table.concat(out, "\t"), "\n")
    io.stdout:flush()
end

-- ------------------------------------------------------------------ help

M.HELP_ON_HELP = table.concat({
    "help([x]): what x is and how to use it.",
    "  help()                  a guide to the dga module",
    "  help(dga.gpt), help(\"gpt\")   one dga function;  help(m): an object and its methods",
    "  help(m.forward), help(\"m:forward\"), help(\"gpt:forward\")   one method",
    "  help(print), help(string.format), help(\"io.open\"), help(table)   Lua's own, with the manual section",
    "  help(f) for your own function: where it is defined and its parameters; any other value: its type",
}, "\n")

-- The apidoc entry of a method function, found through the metatables of dga's classes.
local function method_entry(f)
    for _, c in ipairs(apidoc.classes) do
        local methods = methods_of(debug.getregistry()[c.name])
        for k, g in pairs(methods or {}) do
            if g == f then
                local e = apidoc.find(c.name .. ":" .. k)
                if e then return e end
            end
        end
    end
    return nil
end

-- A function with no documentation: a user's Lua function says where it is defined and its
-- parameters; a C function says so.
local function describe_function(f)
    local info = debug.getinfo(f, "Su")
    if info.what == "C" then return "a C function without documentation (" .. tostring(f) .. ")" end
    local params = {}
    for i = 1, info.nparams do params[i] = debug.getlocal(f, i) end
    if info.isvararg then params[#params + 1] = "..." end
    return string.format("a Lua function (%s), defined at %s:%d", table.concat(params, ", "),
                         info.short_src, info.linedefined)
end

local function describe_table(t)
    local n, other, names = #t, 0, {}
    for k in pairs(t) do
        if not (math.type(k) == "integer" and k >= 1 and k <= n) then
            other = other + 1
            if is_identifier(k) then names[#names + 1] = k end
        end
    end
    table.sort(names)
    local shown = {}
    for i = 1, math.min(8, #names) do shown[i] = names[i] end
    local mt = getmetatable(t)
    return string.format("a table: %d list items, %d other keys%s%s", n, other,
                         #shown > 0 and " (" .. table.concat(shown, ", ") .. (#names > 8 and ", ..." or "") .. ")" or "",
                         mt and ", with a metatable" or "")
end

-- A global's dga class ("x" -> the class of the object x holds), or a class by its short or
-- full name ("tensor", "dga.tensor").
local function class_named(name)
    local v = rawget(_G, name)
    local tname = v ~= nil and dga_type(v)
    if tname then return apidoc.class(tname) end
    return apidoc.class(name) or apidoc.class("dga." .. name)
end

-- help("name"): dga names ("gpt", "dga.gpt", "m:forward", "tensor:shape", "x:shape" with x a
-- global object), then Lua's ("print", "string.format", "io.open", "file:read", "table").
local function help_on_name(x)
    -- a Lua name first, unless dga has a function of that name ("next" is Lua's, not reader:next)
    local lua = luadoc.find(x)
    if lua and (apidoc.find(x) or {}).kind ~= "function" then return luadoc.format(lua) end
    local e = apidoc.find(x) or apidoc.find((x:gsub("%.", ":", 1))) or apidoc.find((x:gsub("^dga%.", "")))
    if e then return apidoc.format(e) end
    local obj, method = x:match("^([%w_.]+)[:.]([%w_]+)$")
    local c = obj and class_named(obj)
    if c then
        e = apidoc.find(c.name .. ":" .. method)
        if e then return apidoc.format(e) end
        return string.format("%s has no method '%s' (help(\"%s\") lists them)", c.name, method, obj)
    end
    e = luadoc.find(x)
    if e then return luadoc.format(e) end
    local lib = luadoc.library(x)
    if lib then return luadoc.format_library(lib) end
    return string.format("no entry for '%s' (help() lists everything)", x)
end

function help_text(x)
    if x == nil then
        local names = {}
        for _, g in ipairs(apidoc.groups) do
            local fs = {}
            for _, f in ipairs(g.functions) do fs[#fs + 1] = f[1] end
            names[#names + 1] = string.format("  %-38s %s", g.title .. ":", table.concat(fs, ", "))
        end
        local classes = {}
        for _, c in ipairs(apidoc.classes) do classes[#classes + 1] = c.name end
        return table.concat({
            apidoc.intro, "",
            "help(dga.gpt) or help(\"gpt\"): one function; help(m) for an object: its methods;",
            "help(m.forward) or help(\"m:forward\"): one method. Tab completes names. docs/api.md has it all.",
            "help(print), help(string.format), help(\"io.open\"): Lua's own; help(help): what help takes.",
            "", "Functions of dga:", table.concat(names, "\n"),
            "", "Objects: " .. table.concat(classes, ", "),
        }, "\n")
    end
    if x == rawget(_G, "dga") then
        local lines = {"dga " .. tostring(x.version) .. ", the module (help(dga.NAME) for one function, help() for a guide):"}
        for _, g in ipairs(apidoc.groups) do
            lines[#lines + 1] = g.title .. ":"
            for _, f in ipairs(g.functions) do
                lines[#lines + 1] = string.format("  dga.%s%s -> %s", f[1], f.args, f.returns)
            end
        end
        return table.concat(lines, "\n")
    end
    if x == M.help then return M.HELP_ON_HELP end
    if x == "config" then
        return "The trainer's configuration (scripts/trainer/schema.lua; --set key=value sets any but data keys):\n"
               .. require("trainer.schema").doc_text()
    end
    if type(x) == "string" then return help_on_name(x) end
    if type(x) == "function" then
        local name = function_name(x)
        if name then
            local e = apidoc.find(name) or luadoc.find(name)
            if e then return e.sig and luadoc.format(e) or apidoc.format(e) end
        end
        local e = method_entry(x)
        if e then return apidoc.format(e) end
        return describe_function(x)
    end
    local tname = dga_type(x)
    if tname then
        local c = apidoc.class(tname)
        if c then return apidoc.format(c) end
        return tname .. ": an internal object"
    end
    if type(x) == "table" then
        for _, lib in ipairs(luadoc.libraries) do
            if rawget(_G, lib.name) == x and lib.name ~= "_G" then return luadoc.format_library(lib) end
        end
        if x == _G then return luadoc.format_library(luadoc.library("_G")) end
        return describe_table(x)
    end
    if io.type(x) then
        local lib = luadoc.format_library(luadoc.library("file")):gsub("^[^\n]*", "")
        return string.format("a %s handle (Lua 5.4 manual §6.8); its methods:%s", io.type(x), lib)
    end
    if math.type(x) then return string.format("a number (%s): %s", math.type(x), tostring(x)) end
    return string.format("a %s: %s", type(x), tostring(x))
end
M.help_text = help_text

function M.help(x) io.stdout:write(help_text(x), "\n") end

-- ------------------------------------------------------------------ completion
-- repl/complete.lua: names, and file paths inside strings.
for _, name in ipairs{"complete", "open_string", "complete_path", "complete_string"} do M[name] = complete[name] end

-- ------------------------------------------------------------------ top-level locals

-- Each REPL line is its own chunk, so `local x = 1` would be gone on the next line. The
-- REPL therefore drops the `local` of a declaration at the top level of the line (not
-- inside a function or a block) and the name becomes a global, which the following lines
-- see. Declarations with attributes (<const>, <close>) are left alone.
local openers = {["function"] = true, ["do"] = true, ["if"] = true, ["repeat"] = true}
local closers = {["end"] = true, ["until"] = true}

-- Start and end positions of the code's top-level `local` keywords.
local function top_level_locals(code)
    local found, depth, i, n = {}, 0, 1, #code
    while i <= n do
        local c = code:sub(i, i)
        if c == "-" and code:sub(i, i + 1) == "--" then
            local eq = code:match("^%[(=*)%[", i + 2)
            if eq then
                local _, e = code:find("]" .. eq .. "]", i + 4 + #eq, true)
                i = (e or n) + 1
            else
                local e = code:find("\n", i, true)
                i = (e or n) + 1
            end
        elseif c == "[" and code:match("^%[=*%[", i) then
            local eq = code:match("^%[(=*)%[", i)
            local _, e = code:find("]" .. eq .. "]", i + 2 + #eq, true)
            i = (e or n) + 1
        elseif c == '"' or c == "'" then
            local j = i + 1
            while j <= n do
                local d = code:sub(j, j)
                if d == "\\" then j = j + 2
                elseif d == c or d == "\n" then break
                else j = j + 1 end
            end
            i = j + 1
        elseif c:match("[%a_]") then
            local s, e = code:find("^[%w_]+", i)
            local word = code:sub(s, e)
            local prev = s > 1 and code:sub(s - 1, s - 1) or ""
            if prev ~= "." and prev ~= ":" then
                if openers[word] then
                    -- `while c do` and `for ... do` open one block, counted at `do`.
                    depth = depth + 1
                elseif closers[word] then
                    depth = depth - 1
                elseif word == "local" and depth == 0 then
                    found[#found + 1] = {s, e}
                end
            end
            i = e + 1
        elseif c:match("%d") then
            local _, e = code:find("^[%w_.]+", i)
            i = e + 1
        else
            i = i + 1
        end
    end
    return found
end

function M.rewrite(code)
    if code:find("<const>", 1, true) or code:find("<close>", 1, true) then return code end
    local spots = top_level_locals(code)
    for k = #spots, 1, -1 do
        local s, e = spots[k][1], spots[k][2]
        local after = e + 1
        while code:sub(after, after):match("[ \t]") do after = after + 1 end
        local rest = code:sub(after)
        if not rest:match("^function[^%w_]") then
            -- `local a, b` with no values declares nils: as globals, `a, b = nil`
            local pos = rest:match("^[%a_][%w_]*()")
            while pos do
                local nxt = rest:match("^[ \t]*,[ \t]*[%a_][%w_]*()", pos)
                if not nxt then break end
                pos = nxt
            end
            if pos and not rest:match("^[ \t]*=", pos) then
                rest = rest:sub(1, pos - 1) .. " = nil" .. rest:sub(pos)
            end
        end
        code = code:sub(1, s - 1) .. rest
    end
    return code
end

-- Puts help() in the globals.
function M.install()
    rawset(_G, "help", M.help)
end

return M

-- The REPL's tab completion (bindings/dgalua_main.c calls it through repl/repl.lua): Lua
-- names (globals, keywords, fields, methods through metatables) and, inside a string
-- literal, file paths past every '/'.
local M = {}

-- The methods table of a metatable whose __index may be a function (dga.tensor's resolves
-- integer indices and keeps its methods in the first upvalue).
local function methods_of(mt)
    if type(mt) ~= "table" then return nil end
    local idx = rawget(mt, "__index")
    if type(idx) == "table" then return idx end
    if type(idx) == "function" then
        local _, up = debug.getupvalue(idx, 1)
        if type(up) == "table" then return up end
    end
    return nil
end
M.methods_of = methods_of

local function is_identifier(k)
    return type(k) == "string" and k:match("^[%a_][%w_]*$") ~= nil
end
M.is_identifier = is_identifier

local lua_keywords = {"and", "break", "do", "else", "elseif", "end", "false", "for", "function",
                      "goto", "if", "in", "local", "nil", "not", "or", "repeat", "return",
                      "then", "true", "until", "while"}

-- Names that complete `text` ("dga.tok", "m:for", "pri"): globals and keywords, fields of
-- tables, methods through metatables (for ':' and for '.' on objects). Values are reached
-- with raw lookups only, so completing never runs a user's __index.
function M.complete(text)
    local base, sep, partial = text:match("^(.-)([%.:])([%w_]*)$")
    local out = {}
    local function add(prefix, names)
        for _, k in ipairs(names) do
            if is_identifier(k) and k:sub(1, #partial) == partial then out[#out + 1] = prefix .. k end
        end
    end
    local function keys(t)
        local r = {}
        if type(t) == "table" then for k in pairs(t) do r[#r + 1] = k end end
        return r
    end
    if not base then
        partial = text
        add("", keys(_G))
        add("", lua_keywords)
    else
        if not base:match("^[%a_][%w_]*([%.][%a_][%w_]*)*$") and not base:match("^[%a_][%w_.]*$") then return {} end
        local v = _G
        for part in base:gmatch("[^%.]+") do
            if type(v) ~= "table" then v = nil break end
            v = rawget(v, part)
        end
        if v == nil then return {} end
        local names = {}
        if sep == "." and type(v) == "table" then names = keys(v) end
        local mt = getmetatable(v)
        local methods = methods_of(mt)
        if methods and (sep == ":" or type(v) ~= "table") then
            for _, k in ipairs(keys(methods)) do names[#names + 1] = k end
        elseif sep == ":" and type(v) == "table" then
            for _, k in ipairs(keys(v)) do if type(v[k]) == "function" then names[#names + 1] = k end end
        end
        if type(v) == "string" and sep == ":" then names = keys(string) end
        add(base .. sep, names)
    end
    table.sort(out)
    local uniq = {}
    for _, s in ipairs(out) do if uniq[#uniq] ~= s then uniq[#uniq + 1] = s end end
    return uniq
end

-- The text of the string literal the cursor is in: `before` is the line up to the cursor;
-- returns the literal's text so far and its first position in `before`, or nil outside a
-- string (and in a comment).
function M.open_string(before)
    local i, n, quote, first = 1, #before, nil, nil
    while i <= n do
        local c = before:sub(i, i)
        if quote then
            if c == "\\" then i = i + 1
            elseif c == quote then quote = nil end
        elseif c == '"' or c == "'" then
            quote, first = c, i + 1
        elseif c == "-" and before:sub(i + 1, i + 1) == "-" then
            return nil
        end
        i = i + 1
    end
    if quote then return before:sub(first), first end
    return nil
end

-- File names that complete a path: the entries of its directory (relative to the current
-- one, or absolute) starting with its last part, directories with a trailing "/"; names
-- starting with "." only when the part does.
function M.complete_path(path)
    local dir, base = path:match("^(.*/)([^/]*)$")
    if not dir then dir, base = "", path end
    local lfs = require "lfs"
    local ok, iter, state = pcall(lfs.dir, dir == "" and "." or dir)
    if not ok then return {} end
    local out = {}
    for name in iter, state do
        if name ~= "." and name ~= ".." and name:sub(1, #base) == base
           and (name:sub(1, 1) ~= "." or base:sub(1, 1) == ".") then
            local full = dir .. name
            if lfs.attributes(full, "mode") == "directory" then full = full .. "/" end
            out[#out + 1] = full
        end
    end
    table.sort(out)
    return out
end

-- Completion inside a string literal: nil when the cursor is outside one, else the file
-- names completing the literal's text, each cut to start where readline's word does (start:
-- its 0-based offset in the line; the word stops at characters such as "/" and "-").
function M.complete_string(before, start)
    local path, first = M.open_string(before)
    if not path then return nil end
    local skip = start + 1 - first   -- characters of the path before readline's word
    if skip < 0 then return {} end
    local out = {}
    for i, full in ipairs(M.complete_path(path)) do out[i] = full:sub(skip + 1) end
    return out
end

return M

-- A small JSON writer and reader for the sweep's summary.json and aggregate.json files:
-- objects, arrays, strings, numbers, booleans and null, nothing more.
--
--   local json = require "util.json"
--   local text = json.encode{cell = "b256/dga", seed = 2, metrics = {loss = 5.25}}
--   local t = json.decode(text, "summary.json")   -- errors name the source and the offset
--
-- The one JSON writer of the project (summary.json, aggregate.json, mmlu_results.json).
-- JSON has no NaN or infinity, but a diverged run's loss is a result worth keeping, so
-- they are written as the strings "nan", "inf" and "-inf"; json.number() reads them back
-- (the convention scripts/rundir/init.lua states for every file of a run).
-- Keys are written sorted, so the same table always gives the same text. A Lua table is
-- an array when its keys are exactly 1..n (n >= 1), or when it has the metatable
-- json.ARRAY (then an empty one is written as []); any other empty table is written as {}.
-- Floats are written with 17 significant digits (exact; the sweep compares the text it
-- recorded); opts.numbers = "shortest" writes %.15g where that reads back the same.
local M = {}

local escapes = {['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
                 ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t"}

local function enc_string(s)
    return '"' .. s:gsub('[%c"\\]', function(c)
        return escapes[c] or string.format("\\u%04x", c:byte())
    end) .. '"'
end

local function is_array(t)
    if getmetatable(t) == M.ARRAY then return true end
    local n = #t
    if n == 0 then return false end
    local count = 0
    for key in pairs(t) do
        if math.type(key) ~= "integer" or key < 1 or key > n then return false end
        count = count + 1
    end
    return count == n
end

local function float_text(v, shortest)
    if shortest then
        local short = string.format("%.15g", v)
        if tonumber(short) == v then return short end
    end
    return string.format("%.17g", v)
end

local function enc(v, indent, out, seen, path, shortest)
    local t = type(v)
    if v == nil or v == M.null then
        out[#out + 1] = "null"
    elseif t == "boolean" then
        out[#out + 1] = tostring(v)
    elseif t == "number" then
        if v ~= v then out[#out + 1] = '"nan"'
        elseif v == math.huge then out[#out + 1] = '"inf"'
        elseif v == -math.huge then out[#out + 1] = '"-inf"'
        elseif math.type(v) == "integer" then out[#out + 1] = string.format("%d", v)
        else out[#out + 1] = float_text(v, shortest) end
    elseif t == "string" then
        out[#out + 1] = enc_string(v)
    elseif t == "table" then
        if seen[v] then error("json.encode: cycle at " .. path, 0) end
        seen[v] = true
        local pad = indent and (indent .. "  ") or nil
        local nl = indent and "\n" or ""
        if is_array(v) and #v == 0 then
            out[#out + 1] = "[]"
        elseif is_array(v) then
            out[#out + 1] = "["
            for i = 1, #v do
                out[#out + 1] = (i > 1 and "," or "") .. nl .. (pad or "")
                enc(v[i], pad, out, seen, path .. "[" .. i .. "]", shortest)
            end
            out[#out + 1] = nl .. (indent or "") .. "]"
        else
            local keys = {}
            for key in pairs(v) do
                if type(key) ~= "string" and math.type(key) ~= "integer" then
                    error("json.encode: key of type " .. type(key) .. " at " .. path, 0)
                end
                keys[#keys + 1] = tostring(key)
            end
            table.sort(keys)
            if #keys == 0 then out[#out + 1] = "{}" else
                out[#out + 1] = "{"
                for i, key in ipairs(keys) do
                    local val = v[key]
                    if val == nil then val = v[math.tointeger(tonumber(key))] end
                    out[#out + 1] = (i > 1 and "," or "") .. nl .. (pad or "") .. enc_string(key)
                                    .. (indent and ": " or ":")
                    enc(val, pad, out, seen, path .. "." .. key, shortest)
                end
                out[#out + 1] = nl .. (indent or "") .. "}"
            end
        end
        seen[v] = nil
    else
        error("json.encode: cannot write a " .. t .. " at " .. path, 0)
    end
end

-- JSON text of v; opts.indent = true writes one member a line; opts.numbers = "shortest".
function M.encode(v, opts)
    local out = {}
    enc(v, (opts and opts.indent) and "" or nil, out, {}, "$", opts and opts.numbers == "shortest")
    return table.concat(out)
end

-- The value written for null (a Lua nil would drop an object's key, or shorten an array).
M.null = setmetatable({}, {__tostring = function() return "null" end})

-- The metatable of a table always written as an array, [] when empty.
M.ARRAY = {}

-- ---- reading ---------------------------------------------------------------------------

local function fail(src, s, pos, msg)
    local line = 1
    for _ in s:sub(1, pos - 1):gmatch("\n") do line = line + 1 end
    error(string.format("%s: line %d (byte %d): %s", src, line, pos, msg), 0)
end

local function skip(s, pos) return s:find("[^ \t\r\n]", pos) or #s + 1 end

local dec

local function dec_string(s, pos, src)
    local out, i = {}, pos + 1
    while true do
        local c = s:sub(i, i)
        if c == "" then fail(src, s, pos, "unterminated string") end
        if c == '"' then return table.concat(out), i + 1 end
        if c == "\\" then
            local e = s:sub(i + 1, i + 1)
            local map = {['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f",
                         n = "\n", r = "\r", t = "\t"}
            if map[e] then out[#out + 1] = map[e]; i = i + 2
            elseif e == "u" then
                local hex = s:sub(i + 2, i + 5)
                if not hex:match("^%x%x%x%x$") then fail(src, s, i, "bad \\u escape") end
                local cp = tonumber(hex, 16)
                i = i + 6
                if cp >= 0xD800 and cp <= 0xDBFF and s:sub(i, i + 1) == "\\u" then
                    local lo = tonumber(s:sub(i + 2, i + 5), 16)
                    if lo and lo >= 0xDC00 and lo <= 0xDFFF then
                        cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
                        i = i + 6
                    end
                end
                out[#out + 1] = utf8.char(cp)
            else fail(src, s, i, "bad escape \\" .. e) end
        elseif c:byte() < 32 then
            fail(src, s, i, "control character in string")
        else
            local j = s:find('["\\%c]', i) or #s + 1
            out[#out + 1] = s:sub(i, j - 1)
            i = j
        end
    end
end

dec = function(s, pos, src, depth)
    if depth > 200 then fail(src, s, pos, "nesting deeper than 200") end
    pos = skip(s, pos)
    local c = s:sub(pos, pos)
    if c == "{" then
        local obj = {}
        pos = skip(s, pos + 1)
        if s:sub(pos, pos) == "}" then return obj, pos + 1 end
        while true do
            if s:sub(pos, pos) ~= '"' then fail(src, s, pos, "expected a string key") end
            local key
            key, pos = dec_string(s, pos, src)
            pos = skip(s, pos)
            if s:sub(pos, pos) ~= ":" then fail(src, s, pos, "expected ':' after key \"" .. key .. "\"") end
            local val
            val, pos = dec(s, pos + 1, src, depth + 1)
            if val == M.null then val = nil end
            obj[key] = val
            pos = skip(s, pos)
            local d = s:sub(pos, pos)
            if d == "}" then return obj, pos + 1 end
            if d ~= "," then fail(src, s, pos, "expected ',' or '}'") end
            pos = skip(s, pos + 1)
        end
    elseif c == "[" then
        local arr = {}
        pos = skip(s, pos + 1)
        if s:sub(pos, pos) == "]" then return arr, pos + 1 end
        while true do
            local val
            val, pos = dec(s, pos, src, depth + 1)
            arr[#arr + 1] = val
            pos = skip(s, pos)
            local d = s:sub(pos, pos)
            if d == "]" then return arr, pos + 1 end
            if d ~= "," then fail(src, s, pos, "expected ',' or ']'") end
            pos = pos + 1
        end
    elseif c == '"' then
        return dec_string(s, pos, src)
    elseif s:sub(pos, pos + 3) == "true" then return true, pos + 4
    elseif s:sub(pos, pos + 4) == "false" then return false, pos + 5
    elseif s:sub(pos, pos + 3) == "null" then return M.null, pos + 4
    else
        local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
        local v = num and math.tointeger(tonumber(num)) or (num and tonumber(num))
        if not v then fail(src, s, pos, c == "" and "unexpected end of text" or "unexpected '" .. c .. "'") end
        return v, pos + #num
    end
end

-- The value of a JSON text; `src` names it in errors (a file path). Nulls inside objects
-- are dropped; inside arrays they stay as json.null.
function M.decode(s, src)
    src = src or "json"
    if type(s) ~= "string" then error(src .. ": expected JSON text, got " .. type(s), 0) end
    local v, pos = dec(s, 1, src, 0)
    pos = skip(s, pos)
    if pos <= #s then fail(src, s, pos, "trailing characters") end
    return v
end

-- Reads a JSON file; errors name the file.
function M.read_file(path)
    local kind = dga and dga.path_kind and dga.path_kind(path)
    if kind and kind ~= "file" then error("cannot read " .. path .. ": it is a " .. kind .. ", not a file", 0) end
    local f, err = io.open(path, "rb")
    if not f then error("cannot read " .. path .. ": " .. tostring(err), 0) end
    local s = f:read("a")
    f:close()
    return M.decode(s, path)
end

-- A number written by encode: numbers as they are, "nan" / "inf" / "-inf" back to floats.
function M.number(v)
    if type(v) == "number" then return v end
    if v == "nan" then return 0 / 0 end
    if v == "inf" then return math.huge end
    if v == "-inf" then return -math.huge end
    return nil
end

return M

-- Small helpers for the command-line tools (built on lua-argparse).
--
--   local args = require "cli.args"
--   parser:option("--steps"):convert(args.int(1))        -- integer >= 1
--   parser:option("--lr"):convert(args.number(0))         -- finite number >= 0
--   args.ids("1 2 3")  -> {1, 2, 3} (or nil, message)
--   args.check_int(parser, "12", "--level", 1)  -> 12 (or the parser's error naming --level)
--   args.fail(parser, msg)  -> prints usage + message, exits 2 (argparse's own error path)
--
-- Loading this module makes every argparse parser exit with status 2 on a usage error, as
-- dgalua does for its own options (1 stays the status of a runtime error): the tools and
-- harness.experiment load it before parsing.
local argparse = require "argparse"

local M = {}

M.EXIT_USAGE = 2

-- argparse does not export its Parser class: an instance's metatable is the class.
local Parser = getmetatable(argparse("probe"))
Parser.error = function(self, msg)
    io.stderr:write(("%s\n\nError: %s\n"):format(self:get_usage(), msg))
    os.exit(M.EXIT_USAGE, true)   -- closing the state releases the to-be-closed locks
end

-- A converter's message names its option ("--batch: 0 is outside 1..inf"): argparse reports
-- it bare, and with several numeric options the reader cannot tell which one was wrong.
local Option = getmetatable(argparse("probe"):option("--probe"))
local set_convert = Option.convert
Option.convert = function(self, conv)
    if type(conv) == "function" then
        local inner, name = conv, self._name
        conv = function(s)
            local v, err = inner(s)
            if v == nil and type(err) == "string" and name then err = name .. ": " .. err end
            return v, err
        end
    end
    return set_convert(self, conv)
end

-- A negative number after an option that takes a value is that value ("--steps -5" gives
-- --steps its range error), not an unknown option '-5' as argparse reads it: the pair is
-- passed on as "--steps=-5".
local function is_negative_number(a)
    return type(a) == "string" and a:match("^%-[%d.]") ~= nil and tonumber(a) ~= nil
end

local function takes_value(parser, name)
    for _, o in ipairs(parser._options or {}) do
        for _, alias in ipairs(o._aliases or {}) do
            if alias == name then return (o._maxargs or 0) > 0 end
        end
    end
    return false
end

function M.join_negative_values(parser, list)
    local out = {}
    for _, a in ipairs(list) do
        local prev = out[#out]
        if is_negative_number(a) and type(prev) == "string" and prev:match("^%-%-?[^-=][^=]*$")
           and takes_value(parser, prev) then
            out[#out] = prev .. (prev:match("^%-%-") and "=" or "") .. a   -- "-s-5" for a short one
        else
            out[#out + 1] = a
        end
    end
    return out
end

local parse_list = Parser._parse
Parser._parse = function(self, list, handler)
    return parse_list(self, M.join_negative_values(self, list or rawget(_G, "arg") or {}), handler)
end

-- Converter for an integer >= lo (and <= hi when given).
function M.int(lo, hi)
    return function(s)
        local v = math.tointeger(tonumber(s))
        if not v then return nil, string.format("'%s' is not an integer", s) end
        if (lo and v < lo) or (hi and v > hi) then
            return nil, string.format("%d is outside %s..%s", v, tostring(lo or "-inf"),
                                      tostring(hi or "inf"))
        end
        return v
    end
end

-- Converter for a finite number >= lo (and <= hi when given).
function M.number(lo, hi)
    return function(s)
        local v = tonumber(s)
        if not v or v ~= v or v == math.huge or v == -math.huge then
            return nil, string.format("'%s' is not a finite number", s)
        end
        if (lo and v < lo) or (hi and v > hi) then
            return nil, string.format("%s is outside %s..%s", s, tostring(lo or "-inf"),
                                      tostring(hi or "inf"))
        end
        return v
    end
end

-- "1 2 3" or "1,2,3" -> {1, 2, 3}; nil and a message on anything else.
function M.ids(s)
    local out = {}
    for tok in tostring(s):gmatch("[^%s,]+") do
        local v = math.tointeger(tonumber(tok))
        if not v or v < 0 then return nil, string.format("'%s' is not a token id (integer >= 0)", tok) end
        out[#out + 1] = v
    end
    if #out == 0 then return nil, "no token ids given" end
    return out
end

-- A value read as a string (a list item, a plain option): the integer >= lo it holds, or the
-- parser's usage error naming the option.
function M.check_int(parser, v, name, lo)
    local n = math.tointeger(tonumber(v))
    if not n or n < lo then
        parser:error(string.format("%s: expected an integer >= %d, got '%s'", name, lo, v))
    end
    return n
end

function M.fail(parser, msg)
    parser:error(msg)   -- prints usage and the message on stderr, exits with status 2
end

-- The vocabulary size a shard declares (dga.shard_read's info), or nil.
function M.shard_vocab(info)
    if type(info) ~= "table" then return nil end
    local v = info.vocab_size or info.vocab
    if type(v) == "number" and v > 0 then return math.tointeger(v) end
    return nil
end

return M

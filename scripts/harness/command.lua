-- A sweep's command line: its key (what a finished pair's numbers depend on), the line to
-- paste into a shell that summary.json records, and the command of a --jobs worker.
local M = {}

-- Options that choose which pairs run, how, or where, but not what a pair computes.
local CONTROL_VALUE = {["--seeds"] = true, ["--seed"] = true, ["--jobs"] = true,
                       ["--cell"] = true, ["--policy"] = true, ["--out"] = true, ["--cache"] = true}
local CONTROL_FLAG = {["--resume"] = true, ["--overwrite"] = true, ["--no-plot"] = true}

-- argv without the options of `drop_value` (with their values) and `drop_flag`.
local function strip(argv, drop_value, drop_flag)
    local out, i = {}, 1
    while i <= #argv do
        local t = argv[i]
        local name = t:match("^(%-%-[^=]+)=") or t
        if drop_value[name] then
            i = i + (t:find("=", 1, true) and 1 or 2)
        elseif drop_flag and drop_flag[t] then
            i = i + 1
        else
            out[#out + 1] = t
            i = i + 1
        end
    end
    return out
end

function M.shell_quote(s)
    return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- A token as the shell needs it: bare when it is plain, else single-quoted.
local function shell_word(s)
    s = tostring(s)
    if s ~= "" and s:match("^[%w_%-%.,/=+:@]+$") then return s end
    return M.shell_quote(s)
end

-- The command line to paste into a shell: the interpreter, its options and the script
-- when this process was started from one (with_script), then the arguments.
function M.display(argv, with_script)
    local parts = {}
    if with_script and type(arg) == "table" then
        local lo = 0
        while arg[lo - 1] ~= nil do lo = lo - 1 end
        for i = lo, 0 do parts[#parts + 1] = shell_word(arg[i]) end
    end
    for _, t in ipairs(argv) do parts[#parts + 1] = shell_word(t) end
    return table.concat(parts, " ")
end

-- The sweep's arguments: sweep.run's `argv`, else the script's (the global arg).
function M.argv_of(o)
    local src = o.argv or arg or {}
    local out = {}
    for i = 1, #src do out[i] = src[i] end
    return out
end

-- The key of a command: what a finished pair's numbers depend on. The argv without the
-- control options (and the caller's `ignore`: option -> "value" | "flag"), cut into units
-- (an option and the values after it), the units sorted by option name, keeping the order
-- of repeated options (--set a=1 --set a=2 differs from the reverse).
function M.key(argv, ignore)
    local drop_value, drop_flag = {}, {}
    for k in pairs(CONTROL_VALUE) do drop_value[k] = true end
    for k in pairs(CONTROL_FLAG) do drop_flag[k] = true end
    for k, kind in pairs(ignore or {}) do
        if kind == "flag" then drop_flag[k] = true else drop_value[k] = true end
    end
    local t = strip(argv, drop_value, drop_flag)
    local units = {}
    for _, tok in ipairs(t) do
        if tok:match("^%-%-") or #units == 0 then
            units[#units + 1] = {name = tok:match("^(%-%-[^=]+)") or "", toks = {tok}, i = #units + 1}
        else
            local u = units[#units]
            u.toks[#u.toks + 1] = tok
        end
    end
    table.sort(units, function(x, y)
        if x.name ~= y.name then return x.name < y.name end
        return x.i < y.i
    end)
    local parts = {}
    for _, u in ipairs(units) do parts[#parts + 1] = table.concat(u.toks, " ") end
    return table.concat(parts, " ")
end

-- The interpreter and its options as this script was started (arg[-n] .. arg[-1]), and
-- the script.
local function interpreter()
    if type(arg) ~= "table" then return nil end
    local lo = 0
    while arg[lo - 1] ~= nil do lo = lo - 1 end
    if lo == 0 then return nil end
    local out = {}
    for i = lo, -1 do out[#out + 1] = arg[i] end
    return out, arg[0]
end

-- The shell words of the command that runs one pair in a worker process: the same
-- interpreter, script and arguments, with --cell ID --seeds S --jobs 1.
function M.worker(argv, pair)
    local interp, script = interpreter()
    if not interp or not script then
        error("sweep: --jobs needs the script to be run as `dgalua script.lua ...` (no arg table)", 0)
    end
    local parts = {}
    for _, t in ipairs(interp) do parts[#parts + 1] = M.shell_quote(t) end
    parts[#parts + 1] = M.shell_quote(script)
    for _, t in ipairs(strip(argv, {["--seeds"] = true, ["--seed"] = true, ["--jobs"] = true,
                                    ["--cell"] = true}, nil)) do
        parts[#parts + 1] = M.shell_quote(t)
    end
    for _, t in ipairs{"--cell", pair.cell.id, "--seeds", tostring(pair.seed), "--jobs", "1"} do
        parts[#parts + 1] = M.shell_quote(t)
    end
    return table.concat(parts, " ")
end

return M

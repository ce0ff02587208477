-- Experiments as declarations. An experiment is one file under experiments/ that returns a
-- descriptor; the sweep, the report and the study read it, so a new experiment is that one
-- file and no edit elsewhere.
--
--   return require("harness.descriptor").define({
--       name = "lowdata", title = "...", about = "...", out = "runs/lowdata", order = 1,
--       options = function(p) p:option("--targets", "...") end,   -- its own options
--       preset = function(a) return a.quick and {...} or {...} end,
--       setup = function(x) return data end,     -- the data, built once per process
--       cells = function(x) return cells end,    -- {id =, group =, policy = spec, ...}
--       run_cell = function(x, cell, seed, dir, topts) return metrics end,
--       cost = function(x, cell) return 4 end,  -- optional: one run's work relative to the
--                                                -- others (default 1), for the ETA
--       notes = function(x) return lines end,    -- optional: notes.md lines from the runs
--       report = {reference = "natural", metrics = {...}, ...},   -- report.experiment's options
--       title_of = function(x) return "lowdata: ..." end,  -- optional: the table's title
--       key_ignore = {["--key-seeds"] = "value"},  -- its options that choose which pairs run
--                                                  -- (not what one computes): harness/sweep.lua
--       columns = {metric = "what it means", ...},   -- beyond harness/cells.lua's METRIC_DOC
--       cell_names = "what the cell ids say", equal_rows = "rows equal by construction",
--       claims = {claim, ...},
--       study = {args = {...}, quick_args = {...}} or false,  -- how the study runs it (under
--                                                -- --quick: quick_args if given; false: not at all)
--   }, ...)
--
-- As a script (dgalua experiments/lowdata.lua --quick) define runs it: the shared options
-- (harness/cells.lua's parser: --quick, --out, --seeds, --jobs, --policy NAME:key=value,
-- --set, ...) plus its own, the preset, the cells, the data (once the command is checked and
-- before the first run, so the children of --jobs find the caches warm), the cells' runs as a
-- resumable sweep, then notes.md, table.md, table.csv and the figures. Loaded by M.load (the
-- study, the report), it returns the descriptor only.
-- The callbacks get x = {a = parsed options, preset =, steps =, descriptor =, data() = the
-- setup's data (memoised)}.
--
-- A claim: {id =, source = "paper" | "ours", section =, quote = (the paper's sentence; "paper"
-- claims only), question = (what "ours" asks), x = cell label, y = cell label, metric =,
-- y_metric = (default metric), better = "lower" | "higher", text = (the comparison in words),
-- where = (a Lua pattern: only the groups it matches, e.g. "/b%d+$" for the regimes with a
-- limit), margin = (a non-inferiority claim: x is no worse than y by more than margin)}.
-- The report decides it by the paired difference x - y over seeds in every group holding both.
local runinfo = require "util.runinfo"

local M = {}

-- The value M.load passes to an experiment file: define then returns the descriptor.
M.DESCRIBE = setmetatable({}, {__tostring = function() return "harness.descriptor.DESCRIBE" end})

local FIELDS = {
    name = "string", title = "string", about = "string", out = "string", order = "number",
    options = "function", preset = "function", setup = "function", cells = "function",
    run_cell = "function", notes = "function", report = "table", columns = "table",
    cell_names = "string", equal_rows = "string", claims = "table", study = "any", path = "string",
    title_of = "function", key_ignore = "table", cost = "function",
}
local REQUIRED = {"name", "cells", "run_cell"}
local CLAIM_FIELDS = {id = "string", source = "string", section = "string", quote = "string",
                      question = "string", x = "string", y = "string", metric = "string",
                      y_metric = "string", better = "string", text = "string", where = "string",
                      margin = "number"}

local function fail(where, msg) error(string.format("%s: %s", where, msg), 0) end

local function check_claim(cl, i, where)
    local w = string.format("%s: claim %d", where, i)
    if type(cl) ~= "table" then fail(w, "expected a table") end
    for k, v in pairs(cl) do
        if not CLAIM_FIELDS[k] then fail(w, "unknown field '" .. tostring(k) .. "'") end
        if type(v) ~= CLAIM_FIELDS[k] then fail(w, string.format("%s must be a %s", k, CLAIM_FIELDS[k])) end
    end
    for _, k in ipairs{"id", "source", "x", "y", "metric", "better", "text"} do
        if cl[k] == nil then fail(w, "needs " .. k) end
    end
    if cl.source ~= "paper" and cl.source ~= "ours" then fail(w, 'source must be "paper" or "ours"') end
    if cl.source == "paper" and not (cl.quote and cl.section) then
        fail(w, "a paper claim quotes its sentence (quote) and names its section (section)")
    end
    if cl.better ~= "lower" and cl.better ~= "higher" then fail(w, 'better must be "lower" or "higher"') end
end

-- Raises an error naming `where` when d is not a descriptor.
function M.check(d, where)
    where = where or "experiment"
    if type(d) ~= "table" then fail(where, "an experiment file returns a descriptor table, got " .. type(d)) end
    for k, v in pairs(d) do
        local want = FIELDS[k]
        if not want then
            local known = {}
            for f in pairs(FIELDS) do known[#known + 1] = f end
            table.sort(known)
            fail(where, string.format("unknown field '%s' (fields: %s)", tostring(k), table.concat(known, ", ")))
        end
        if want ~= "any" and type(v) ~= want then fail(where, string.format("%s must be a %s, got %s", k, want, type(v))) end
    end
    for _, k in ipairs(REQUIRED) do
        if d[k] == nil then fail(where, "a descriptor needs " .. k) end
    end
    if not d.name:match("^[%w_%-]+$") then fail(where, "name '" .. d.name .. "' is not a directory name") end
    local ids = {}
    for i, cl in ipairs(d.claims or {}) do
        check_claim(cl, i, where)
        if ids[cl.id] then fail(where, "two claims have the id " .. cl.id) end
        ids[cl.id] = true
    end
    return d
end

-- The descriptor of an experiment file, without running it.
function M.load(path)
    local chunk, err = loadfile(path)
    if not chunk then error(err, 0) end
    local d = chunk(M.DESCRIBE)
    M.check(d, path)
    d.path = runinfo.abspath(path)
    return d
end

-- The descriptors of every experiment file in dir, in study order (order, then name).
function M.list(dir)
    local out = {}
    for _, f in ipairs(runinfo.list(dir)) do
        if f:match("%.lua$") then out[#out + 1] = M.load(dir .. "/" .. f) end
    end
    return M.sort(out)
end

-- Sorts a list of tables with `order` and `name` (descriptors, report sections) into study
-- order: by order (none last), then by name. Returns the list.
function M.sort(list)
    table.sort(list, function(p, q)
        local op, oq = p.order or math.huge, q.order or math.huge
        if op ~= oq then return op < oq end
        return p.name < q.name
    end)
    return list
end

-- ---- running one ------------------------------------------------------------------------

-- The notes.md of an experiment: what its columns, cells and intervals mean, then its own
-- lines (d.notes).
local function notes_text(d, x)
    local cells = require "harness.cells"
    local report = require "harness.report"
    local lines = {}
    local own = d.notes and d.notes(x) or {}
    for _, l in ipairs(own) do lines[#lines + 1] = l end
    if #lines > 0 then lines[#lines + 1] = "" end
    if d.cell_names then lines[#lines + 1] = "Cells: " .. d.cell_names end
    if d.equal_rows then lines[#lines + 1] = "Equal by construction: " .. d.equal_rows end
    lines[#lines + 1] = report.INTERVALS
    local col = report.collect(x.a.out)
    local per = {}
    for _, id in ipairs(col.order) do
        local n = 0
        for _ in pairs(col.cells[id].seeds) do n = n + 1 end
        per[n] = (per[n] or 0) + 1
    end
    local counts = {}
    for n, k in pairs(per) do counts[#counts + 1] = string.format("%d cell%s with %d seed%s", k, k == 1 and "" or "s",
                                                                  n, n == 1 and "" or "s") end
    table.sort(counts)
    if #counts > 0 then lines[#lines + 1] = "Seeds per cell: " .. table.concat(counts, ", ") .. "." end
    lines[#lines + 1] = ""
    lines[#lines + 1] = "| column | what it is |"
    lines[#lines + 1] = "|---|---|"
    for _, m in ipairs((d.report or {}).metrics or report.METRICS) do
        local doc = (d.columns or {})[m] or cells.METRIC_DOC[m]
        if doc then lines[#lines + 1] = string.format("| %s | %s |", m, doc) end
    end
    return table.concat(lines, "\n") .. "\n"
end

function M.main(d, argv)
    local C = require "harness.cells"
    local p = C.parser(d.name .. ".lua", d.about or d.title or d.name, d.out or ("runs/" .. d.name))
    if d.options then d.options(p) end
    local a = C.parse(p, argv)
    local x = {a = a, descriptor = d}
    x.preset = d.preset and d.preset(a) or {}
    x.steps = a.steps or x.preset.steps
    local data
    function x.data()
        if data == nil then data = d.setup and d.setup(x) or false end
        return data
    end
    local cells = d.cells(x)
    -- The preset's plain settings (model, steps, data sizes) go into every cell, so a finished
    -- run made under other settings (an edited preset, --out reused) is refused like a run of
    -- another cell, instead of being reported as this configuration's. Its tables (lists made
    -- from the options) are left out: the options themselves are in the command's key.
    local settings = require("harness.summary").plain_fields(x.preset)
    for _, cell in ipairs(cells) do cell.preset = settings end
    if not a.cell and not (dga.rank and dga.rank() ~= 0) then
        runinfo.mkdir_p(a.out)
        runinfo.write_atomic(a.out .. "/experiment.json", require("util.json").encode(
            {name = d.name, descriptor = d.path or (type(arg) == "table" and arg[0] and runinfo.abspath(arg[0])) or nil},
            {indent = true}) .. "\n")
    end
    local summaries = require("harness.sweep").run{
        name = d.name, out = a.out, args = a, cells = cells, key_ignore = d.key_ignore,
        -- The data once the command is checked (a bad --set or --cell costs no store build) and
        -- before the first run: the workers then find the store cached, and the leakage check
        -- has passed before any training. With every run finished, only what reads it builds it.
        prepare = x.data,
        cost = d.cost and function(cell) return d.cost(x, cell) end or nil,
        run_cell = function(cell, seed, dir, topts) return d.run_cell(x, cell, seed, dir, topts) end,
    }
    -- a worker (a --cell process, an MPI rank other than 0) ends here: the coordinator reports
    if not summaries then return end
    local text = notes_text(d, x)
    runinfo.write_atomic(a.out .. "/notes.md", text)
    local o = {plot = not a.no_plot, claims = d.claims, title = d.title}
    for k, v in pairs(d.report or {}) do o[k] = v end
    if d.title_of then o.title = d.title_of(x) end
    require("harness.report").experiment(d.name, a.out, o)
    return x
end

-- The last line of an experiment file: `return require("harness.descriptor").define({...}, ...)`.
-- With M.DESCRIBE as the file's first argument it returns the descriptor; as a script it runs.
function M.define(d, ...)
    local first = select("#", ...) > 0 and (...) or nil
    M.check(d, d and d.name or "experiment")
    if first == M.DESCRIBE then return d end
    if type(arg) == "table" and arg[0] then d.path = d.path or runinfo.abspath(arg[0]) end
    M.main(d, arg)
    return d
end

return M

-- Metrics over the seeds of a sweep's cells, from the run directories' summary.json alone
-- (read through the run-directory module): the one seed aggregation behind
-- harness/aggregate.lua (aggregate.csv / .json) and scripts/report.lua (the study's tables).
--
--   local seeds = require "harness.seeds"
--   local col = seeds.collect("runs/lowdata")            -- {order = {ids}, cells = {[id] = cell}}
--   local r = seeds.compare(cell, ref_cell, "specific_final")
--
-- A metric's value is a number of the summary's `metrics` table, or "nan" / "inf" / "-inf"
-- (the JSON convention of scripts/rundir/init.lua) read back as a number: a diverged seed
-- stays in (its NaN shows in the mean) rather than being dropped unseen.
local rundir = require "rundir"
local stats = require "util.stats"

local M = {}

-- The id up to its last "/" ("b256/natural" -> "b256"; "" without a "/").
function M.default_group(id) return id:match("^(.*)/[^/]+$") or "" end

local function new_cell(s, group_of)
    local fields = type(s.fields) == "table" and s.fields or {}
    local group = group_of and group_of(s.cell) or s.group or M.default_group(s.cell)
    return {id = s.cell, group = tostring(group), label = s.cell:match("([^/]+)$"),
            policy = fields.policy, seeds = {}, dirs = {}}
end

-- The cells of the sweep under root, in the order their first run is found (depth first,
-- names sorted):
--   {order = {ids}, cells = {[id] = {id, group, label (the id's last part), policy,
--    seeds = {[seed] = {metric = number}}, dirs = {[seed] = run directory}}}}
-- group_of(id) -> group; default: the group the cell declared to the sweep, else
-- default_group(id). Every summary must be a sweep summary (cell, seed, metrics), and a
-- (cell, seed) may have only one: both are errors naming the file.
function M.collect(root, group_of)
    local col = {order = {}, cells = {}}
    for _, dir in ipairs(rundir.find(root)) do
        local s = rundir.read_summary(dir, true)
        local cell = col.cells[s.cell]
        if not cell then
            cell = new_cell(s, group_of)
            col.cells[s.cell] = cell
            col.order[#col.order + 1] = s.cell
        end
        if cell.seeds[s.seed] then
            error(string.format("cell %s seed %d has two summaries (%s/summary.json)", s.cell, s.seed, dir), 0)
        end
        local m = {}
        for name, v in pairs(s.metrics) do m[name] = rundir.number(v) end
        -- a `same_as` cell's numbers, curves and weights are its source run's
        cell.seeds[s.seed], cell.dirs[s.seed] = m, rundir.source_dir(dir, s)
    end
    return col
end

-- {[seed] = value} of one metric of a cell (seeds without it left out).
function M.values(cell, metric)
    local xs = {}
    for seed, m in pairs(cell.seeds) do xs[seed] = m[metric] end
    return xs
end

-- The numbers of one (cell, metric) against the reference cell `ref` (optional):
--   summary             over the cell's seeds (util.stats: mean, sd, 95% Student-t interval)
--   diff                the paired difference cell - ref over the seeds both hold (not for
--                       the reference itself)
--   ref_n, ref_sd       the noise floor: the reference's seed count and sd across seeds
--   ref_gap             its mean |ref(s_i) - ref(s_j)| over seed pairs (nil below 2 seeds)
function M.compare(cell, ref, metric)
    local xs = M.values(cell, metric)
    local r = {summary = stats.summary(xs)}
    if ref then
        local ys = M.values(ref, metric)
        local rs = stats.summary(ys)
        r.ref_n, r.ref_sd, r.ref_gap = rs.n, rs.sd, stats.mean_pair_gap(ys)
        if ref ~= cell then r.diff = stats.paired(xs, ys) end
    end
    return r
end

-- The seeds of a cell (with `metric`: those that hold it), sorted.
function M.seed_list(cell, metric)
    local out = {}
    for seed, m in pairs(cell.seeds) do
        if metric == nil or m[metric] ~= nil then out[#out + 1] = seed end
    end
    table.sort(out)
    return out
end

-- Groups in order, each the list of its cells in order.
function M.groups(col)
    local order, by = {}, {}
    for _, id in ipairs(col.order) do
        local c = col.cells[id]
        if not by[c.group] then
            by[c.group] = {}
            order[#order + 1] = c.group
        end
        table.insert(by[c.group], c)
    end
    return order, by
end

return M

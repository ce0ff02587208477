-- The figures of one experiment's report (scripts/report.lua), from its cells
-- (harness/seeds.collect) and their run directories: the curves of a metrics.csv column over
-- seeds, the mixture weights of a run, the Pareto figure of two metrics.
local rundir = require "rundir"
local seeds = require "harness.seeds"
local stats = require "util.stats"

local M = {}

-- Mean and 95% interval of a metrics.csv column against step, over a cell's seeds (steps
-- every seed logged).
function M.curve(cell, column)
    local per_step, count, nseeds = {}, {}, 0
    for _, dir in pairs(cell.dirs) do
        nseeds = nseeds + 1
        for _, r in ipairs(rundir.open(dir):metrics()) do
            local v = r[column]
            if type(v) == "number" and v == v and type(r.step) == "number" then
                per_step[r.step] = per_step[r.step] or {}
                table.insert(per_step[r.step], v)
                count[r.step] = (count[r.step] or 0) + 1
            end
        end
    end
    local steps = {}
    for st, n in pairs(count) do if n == nseeds then steps[#steps + 1] = st end end
    table.sort(steps)
    local rows = {}
    for _, st in ipairs(steps) do
        local s = stats.summary(per_step[st])
        rows[#rows + 1] = {st, s.mean, s.ci_lo, s.ci_hi}
    end
    return rows
end

-- A name as a file-name part.
function M.safe(s) return (tostring(s):gsub("[^%w%-_.]", "_")) end
local safe = M.safe

-- Figures of one experiment into <out>/plots: per group, the `column` curves (mean, CI band)
-- of every cell; the weights of the first seed of every cell whose weights change.
function M.figures(col, out, opts)
    local plot = require "plot"
    local made = {}
    local groups, by = seeds.groups(col)
    local column = opts.column or "specific_loss"
    for _, g in ipairs(groups) do
        local series = {}
        for _, c in ipairs(by[g]) do
            local rows = M.curve(c, column)
            if #rows > 0 then series[#series + 1] = {name = c.label, rows = rows} end
        end
        if #series > 0 then
            local f = plot.band_figure(out, "curves_" .. safe(g ~= "" and g or "all"), series,
                {title = string.format("%s%s: %s (mean over seeds, 95%% CI band)", opts.name or "",
                                       g ~= "" and (" " .. g) or "", opts.ylabel or column:gsub("_", " ")),
                 ylabel = opts.ylabel or column})
            made[#made + 1] = f
        end
        for _, c in ipairs(by[g]) do
            local first = seeds.seed_list(c)[1]
            local m = c.seeds[first] or {}
            if (m.updates or 0) > 0 and (not opts.weights_labels or opts.weights_labels[c.label]) then
                local run = plot.read_run(c.dirs[first])
                run.name = c.id:gsub("/", "_") .. "_seed" .. first
                local f = plot.weights_figure(run, out, {top = opts.top or 8,
                    title = "mixture weights: " .. c.id .. ", seed " .. first})
                if f then made[#made + 1] = f end
            end
        end
    end
    return made
end

-- The Pareto figure: one point per cell (or per cell of opts.groups), x / y metrics with their
-- intervals over seeds.
function M.pareto(col, out, o)
    local pts = {}
    for _, id in ipairs(col.order) do
        local c = col.cells[id]
        if not o.filter or o.filter(c) then
            local sx, sy = stats.summary(seeds.values(c, o.x)), stats.summary(seeds.values(c, o.y))
            if sx.n and sx.n > 0 and sy.n and sy.n > 0 then
                pts[#pts + 1] = {name = o.filter and c.label or c.id, x = sx.mean, x_lo = sx.ci_lo, x_hi = sx.ci_hi,
                                 y = sy.mean, y_lo = sy.ci_lo, y_hi = sy.ci_hi}
            end
        end
    end
    if #pts == 0 then return nil end
    return require("plot").pareto_figure(out, o.stem or "pareto", pts,
        {title = o.title, xlabel = o.xlabel, ylabel = o.ylabel})
end

return M

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

-- The curves of one group: a band only for cells with at least util/stats.MIN_INTERVAL_N
-- seeds, and the title says how many seeds each line averages. A curve whose last value lies
-- more than `outlier` (default 0.5, in the column's units) above the median of the last values
-- is drawn but left out of the y range, and named in the title, so it does not flatten the
-- others (IS's overfitting curve, for one).
local function curves_figure(plot, out, g, cells, column, opts)
    local series, lasts, counts = {}, {}, {}
    for _, c in ipairs(cells) do
        local rows = M.curve(c, column)
        local n = #seeds.seed_list(c)
        if #rows > 0 then
            series[#series + 1] = {name = string.format("%s (%d seed%s)", c.label, n, n == 1 and "" or "s"),
                                   rows = rows, band = n >= stats.MIN_INTERVAL_N, label = c.label}
            lasts[#lasts + 1] = rows[#rows][2]
            counts[n] = true
        end
    end
    if #series == 0 then return nil end
    local sorted = {table.unpack(lasts)}
    table.sort(sorted)
    local median = sorted[(#sorted + 1) // 2]
    local lo, hi, off = math.huge, -math.huge, {}
    for _, sr in ipairs(series) do
        if sr.rows[#sr.rows][2] > median + (opts.outlier or 0.5) then
            off[#off + 1] = sr.label
        else
            for _, r in ipairs(sr.rows) do lo, hi = math.min(lo, r[3] or r[2]), math.max(hi, r[4] or r[2]) end
        end
    end
    local ns = {}
    for n in pairs(counts) do ns[#ns + 1] = n end
    table.sort(ns)
    local band = ns[#ns] >= stats.MIN_INTERVAL_N and (ns[1] >= stats.MIN_INTERVAL_N and ", 95% CI band"
                 or string.format(", 95%% CI band from %d seeds on", stats.MIN_INTERVAL_N)) or ""
    local title = string.format("%s%s: %s, mean over seeds%s%s", opts.name or "", g ~= "" and (" " .. g) or "",
                                opts.ylabel or column:gsub("_", " "), band,
                                #off > 0 and ("; off scale: " .. table.concat(off, ", ")) or "")
    local margin = (hi - lo) * 0.05
    return plot.band_figure(out, "curves_" .. safe(g ~= "" and g or "all"), series,
        {title = title, ylabel = opts.ylabel or column,
         yrange = (#off > 0 and hi > lo) and string.format("[%.9g:%.9g]", lo - margin, hi + margin) or nil})
end

-- The paired differences to the reference of one group's first metric, with their intervals
-- (the numbers of the table's difference column, drawn).
local function differences_figure(plot, out, g, cells, metric, reference)
    local ref
    for _, c in ipairs(cells) do if c.label == reference then ref = c end end
    if not ref then return nil end
    local points, labels = {}, {}
    for _, c in ipairs(cells) do
        if c ~= ref then
            local d = seeds.compare(c, ref, metric).diff
            if d and d.n and d.n > 0 then
                labels[#labels + 1] = string.format("%s (n=%d)", c.label, d.n)
                local wide = d.n >= stats.MIN_INTERVAL_N
                points[#points + 1] = {x = #labels, y = d.mean, lo = wide and d.ci_lo or nil,
                                       hi = wide and d.ci_hi or nil}
            end
        end
    end
    if #points == 0 then return nil end
    -- a difference far beyond the others (IS's overfitting) is named, not drawn to scale; the
    -- range starts from 0 so the zero line is always drawn
    local mags = {}
    for i, pt in ipairs(points) do mags[i] = math.abs(pt.y) end
    table.sort(mags)
    local typical = mags[(#mags + 1) // 2]
    local lo, hi, off = 0, 0, {}
    for i, pt in ipairs(points) do
        if #points > 2 and math.abs(pt.y) > 0.5 and math.abs(pt.y) > 5 * typical then
            off[#off + 1] = string.format("%s %+.2f", labels[i]:match("^(%S+)"), pt.y)
        else
            lo, hi = math.min(lo, pt.lo or pt.y), math.max(hi, pt.hi or pt.y)
        end
    end
    local pad = (hi - lo) * 0.1 + 1e-3
    return plot.errorbar_figure(out, "differences_" .. safe(g ~= "" and g or "all"),
        {{name = metric .. " - " .. reference, points = points}},
        {xlabels = labels, ylabel = metric .. " - " .. reference,
         yrange = string.format("[%.9g:%.9g]", lo - pad, hi + pad),
         title = string.format("%s: %s minus %s, paired by seed (95%% CI from %d seeds on)%s", g, metric, reference,
                               stats.MIN_INTERVAL_N, #off > 0 and ("; off scale: " .. table.concat(off, ", ")) or "")})
end

-- Figures of one experiment into <out>/plots: per group, the `column` curves of every cell
-- (curves_figure), the paired differences of `metric` to the reference (differences_figure),
-- and the weights of the first seed of every cell whose weights change.
function M.figures(col, out, opts)
    local plot = require "plot"
    local made = {}
    local groups, by = seeds.groups(col)
    local column = opts.column or "specific_loss"
    for _, g in ipairs(groups) do
        made[#made + 1] = curves_figure(plot, out, g, by[g], column, opts)
        if opts.metric and opts.reference then
            made[#made + 1] = differences_figure(plot, out, g, by[g], opts.metric, opts.reference)
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

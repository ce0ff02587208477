-- Figures of runs with gnuplot (Debian gnuplot-nox: terminals pngcairo and svg).
--
--   dgalua scripts/plot.lua RUN_DIR... [--out DIR] [--top N] [--title T]
--
-- writes into DIR (default: the first run's parent directory /plots):
--   specific_loss.{gp,dat files,png,svg}   the specific held-out loss against steps, one
--                                          line per run (legend: run name / policy)
--   weights_<run>.{gp,dat,png,svg}         each run's mixture weights over time as stacked
--                                          areas: the top N domains and "other", the
--                                          legend in stack order (top band first)
-- The .gp scripts stay next to the figures so a figure can be restyled by hand.
-- As a module (require "plot"): plot.loss_figure(runs, out, opts), plot.weights_figure(run,
-- out, opts), plot.read_run(dir), plot.run_gnuplot(script_path).
local rundir = require "rundir"
local runinfo = require "util.runinfo"

local M = {}

-- gnuplot string literal (double quotes; backslash and quote escaped).
local function gq(s)
    return '"' .. tostring(s):gsub('\\', '\\\\'):gsub('"', '\\"') .. '"'
end
M.quote = gq

local function basename(p) return (p:gsub("/+$", ""):match("([^/]+)$")) or p end

local function safe(s) return (tostring(s):gsub("[^%w%-_.]", "_")) end

-- Everything plots need from a run directory (read through scripts/rundir).
function M.read_run(dir)
    local rd = rundir.open(dir)
    local run = {dir = dir, name = basename(dir)}
    local ok, cfg = pcall(rd.config, rd, {tensors = false})
    if ok and type(cfg) == "table" then
        run.config = cfg
        run.policy = cfg.policy and cfg.policy.name
        if cfg.name and cfg.name ~= "run" then run.name = cfg.name end
    end
    if not rd:has("metrics.csv") then error(dir .. ": no metrics.csv (not a run directory?)", 2) end
    run.metrics = rd:metrics()
    run.weights = rd:weights()
    run.domain_names = rd:domain_names()
    return run
end

-- A domain's legend text. The trainer names a store domain "12:latex 83%", where 83% is the
-- share of the domain's sequences that come from its main source, not a mixture weight:
-- the legend says so, "12: latex (83% of its sequences)".
function M.domain_label(name)
    local d, source, pct = tostring(name):match("^(%d+):(.-) (%d+)%%$")
    if d then return string.format("%s: %s (%s%% of its sequences)", d, source, pct) end
    return tostring(name)
end

function M.label(run)
    if run.policy and not tostring(run.name):find(run.policy, 1, true) then
        return run.name .. " (" .. run.policy .. ")"
    end
    return run.name
end

local TERMINALS = {
    png = "set terminal pngcairo size %d,%d enhanced font 'sans,11'",
    svg = "set terminal svg size %d,%d dynamic font 'sans,11'",
}
local WIDTH, HEIGHT = 1000, 620

-- Runs gnuplot on a script; raises with gnuplot's messages on failure.
function M.run_gnuplot(script)
    local errf = script .. ".err"
    local ok = os.execute(string.format("gnuplot %s 2>%s", script, errf))
    local msg = runinfo.read_file(errf) or ""
    os.remove(errf)
    if not ok then error("gnuplot failed on " .. script .. ":\n" .. msg, 2) end
    return msg
end

-- The script body is written once per terminal. height: pixels (a figure of several rows of
-- panels needs more than one plot's).
local function write_and_plot(out, stem, preamble, body, height)
    local lines = {"# written by scripts/plot.lua; run: gnuplot " .. stem .. ".gp"}
    for _, ext in ipairs{"png", "svg"} do
        lines[#lines + 1] = string.format(TERMINALS[ext], WIDTH, height or HEIGHT)
        lines[#lines + 1] = "set output " .. gq(out .. "/" .. stem .. "." .. ext)
        lines[#lines + 1] = preamble
        lines[#lines + 1] = body
        lines[#lines + 1] = "unset output"
    end
    local script = out .. "/" .. stem .. ".gp"
    runinfo.write_atomic(script, table.concat(lines, "\n") .. "\n")
    M.run_gnuplot(script)
    return {png = out .. "/" .. stem .. ".png", svg = out .. "/" .. stem .. ".svg", gp = script}
end

-- Specific (or another metrics column's) loss against steps, one line per run.
function M.loss_figure(runs, out, opts)
    opts = opts or {}
    local column = opts.column or "specific_loss"
    runinfo.mkdir_p(out)
    local plots = {}
    for i, run in ipairs(runs) do
        local rows = {}
        for _, r in ipairs(run.metrics) do
            local v = r[column]
            if type(v) == "number" and v == v then
                rows[#rows + 1] = string.format("%s %.9g", tostring(r.step), v)
            end
        end
        local dat = string.format("%s/%s_%02d_%s.dat", out, column, i, safe(run.name))
        runinfo.write_atomic(dat, "# step " .. column .. "\n" .. table.concat(rows, "\n") .. "\n")
        plots[#plots + 1] = string.format("%s using 1:2 with linespoints lw 2 pt 7 ps 0.5 title %s",
                                          gq(dat), gq(M.label(run)))
    end
    local preamble = table.concat({
        "set termoption noenhanced",
        "set title " .. gq(opts.title or (column:gsub("_", " ") .. " against steps")),
        "set xlabel 'step'",
        "set ylabel " .. gq(opts.ylabel or column),
        "set key top right",
        "set grid",
    }, "\n")
    local stem = opts.stem or column
    return write_and_plot(out, stem, preamble, "plot " .. table.concat(plots, ", \\\n     "))
end

-- Distinct colours for the stacked areas (a qualitative palette); "other" is grey.
local PALETTE = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5",
                 "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5"}
local OTHER = "#b0b0b0"

-- Weights over time as stacked areas: top `top` domains by mean weight, the rest as "other".
-- Weights are piecewise constant between updates, drawn as steps.
function M.weights_figure(run, out, opts)
    opts = opts or {}
    local top = opts.top or 8
    runinfo.mkdir_p(out)
    local by_step, steps, domains = {}, {}, {}
    for _, r in ipairs(run.weights) do
        local s = r.step
        if not by_step[s] then
            by_step[s] = {}
            steps[#steps + 1] = s
        end
        by_step[s][r.domain] = r.weight
        domains[r.domain] = true
    end
    table.sort(steps)
    if #steps == 0 then return nil end
    -- Rank domains by their mean weight over the recorded updates.
    local mean = {}
    for d in pairs(domains) do
        local s = 0
        for _, st in ipairs(steps) do s = s + (by_step[st][d] or 0) end
        mean[#mean + 1] = {d = d, w = s / #steps}
    end
    table.sort(mean, function(a, b) if a.w ~= b.w then return a.w > b.w end return a.d < b.d end)
    local shown = {}
    for i = 1, math.min(top, #mean) do shown[i] = mean[i].d end
    local has_other = #mean > #shown
    local last_step = steps[#steps]
    for _, r in ipairs(run.metrics or {}) do
        if type(r.step) == "number" and r.step > last_step then last_step = r.step end
    end
    -- Cumulative columns: c_1 = w_top1, c_2 = c_1 + w_top2, ..., last = 1 (with other).
    local function cum_row(x, st)
        local acc, vals = 0, {string.format("%.9g", x)}
        for _, d in ipairs(shown) do
            acc = acc + (by_step[st][d] or 0)
            vals[#vals + 1] = string.format("%.9g", acc)
        end
        if has_other then
            local total = 0
            for _, w in pairs(by_step[st]) do total = total + w end
            vals[#vals + 1] = string.format("%.9g", total)
        end
        return table.concat(vals, " ")
    end
    local rows = {}
    for i, st in ipairs(steps) do
        rows[#rows + 1] = cum_row(st, st)
        local nxt = steps[i + 1] or last_step
        if nxt > st then rows[#rows + 1] = cum_row(nxt, st) end
    end
    local stem = "weights_" .. safe(run.name)
    local dat = out .. "/" .. stem .. ".dat"
    runinfo.write_atomic(dat, "# step cumulative weights (top domains, then other)\n"
                              .. table.concat(rows, "\n") .. "\n")
    local plots = {}
    local ncol = #shown + (has_other and 1 or 0)
    -- The key lists entries in plot order: plotting the top band first puts the legend in
    -- the order the areas are stacked, "other" (the top band) first.
    for c = ncol, 1, -1 do
        local title = c <= #shown and M.domain_label(run.domain_names[shown[c]] or ("domain " .. shown[c]))
                      or "other"
        local colour = c <= #shown and PALETTE[(c - 1) % #PALETTE + 1] or OTHER
        local lower = c == 1 and "(0)" or tostring(c)
        plots[#plots + 1] = string.format(
            "%s using 1:%s:%d with filledcurves fs solid 0.85 noborder lc rgb %s title %s",
            gq(dat), lower, c + 1, gq(colour), gq(title))
    end
    local preamble = table.concat({
        "set termoption noenhanced",
        "set title " .. gq(opts.title or ("mixture weights: " .. M.label(run))),
        "set xlabel 'step'",
        "set ylabel 'weight'",
        "set yrange [0:1]",
        string.format("set xrange [%s:%s]", tostring(steps[1]), tostring(last_step)),
        "set key outside right top",
        "set grid front",
    }, "\n")
    return write_and_plot(out, stem, preamble, "plot " .. table.concat(plots, ", \\\n     "))
end

-- Final values against a categorical x axis, one line per series (e.g. the specific loss
-- against the token budget, one line per policy). xlabels: list of strings; series: list of
-- {name =, values = {y per x label (nil: missing)}}.
function M.series_figure(out, stem, xlabels, series, opts)
    opts = opts or {}
    runinfo.mkdir_p(out)
    local rows = {"# x label " .. table.concat((function()
        local n = {}
        for i, sr in ipairs(series) do n[i] = safe(sr.name) end
        return n
    end)(), " ")}
    for i, label in ipairs(xlabels) do
        local vals = {tostring(i - 1), gq(label)}
        for _, sr in ipairs(series) do
            local v = sr.values[i]
            vals[#vals + 1] = (type(v) == "number" and v == v) and string.format("%.9g", v) or "NaN"
        end
        rows[#rows + 1] = table.concat(vals, " ")
    end
    local dat = out .. "/" .. stem .. ".dat"
    runinfo.write_atomic(dat, table.concat(rows, "\n") .. "\n")
    local plots = {}
    for j, sr in ipairs(series) do
        plots[#plots + 1] = string.format("%s using 1:%d:xticlabels(2) with linespoints lw 2 pt 7 "
                                          .. "lc rgb %s title %s", gq(dat), j + 2,
                                          gq(PALETTE[(j - 1) % #PALETTE + 1]), gq(sr.name))
    end
    local preamble = table.concat({
        "set termoption noenhanced",
        "set title " .. gq(opts.title or stem),
        "set xlabel " .. gq(opts.xlabel or ""),
        "set ylabel " .. gq(opts.ylabel or ""),
        string.format("set xrange [-0.3:%g]", #xlabels - 0.7),
        "set key top right",
        "set grid",
    }, "\n")
    return write_and_plot(out, stem, preamble, "plot " .. table.concat(plots, ", \\\n     "))
end

-- Curves across seeds: for each series the mean against x with its 95% interval as a shaded
-- band (series = list of {name =, rows = {{x, mean, lo, hi}, ...}}; lo = hi = mean where one
-- seed gives no interval).
-- Points with error bars, one series per entry of `series` ({name =, points = {{x =, y =,
-- lo =, hi =}, ...}}), against numeric x (opts.logx: a log scale, e.g. tokens per run) or, with
-- opts.xlabels, against those labels at 1..n; a zero line (differences); a point without an
-- interval is drawn alone.
-- Writes points {x, y, lo, hi} (no interval: lo = hi = y) as a gnuplot data file; returns its path.
local function write_points(dat, points)
    local rows = {}
    for _, pt in ipairs(points) do
        rows[#rows + 1] = string.format("%.9g %.9g %.9g %.9g", pt.x, pt.y, pt.lo or pt.y, pt.hi or pt.y)
    end
    runinfo.write_atomic(dat, "# x y lo hi\n" .. table.concat(rows, "\n") .. "\n")
    return dat
end

function M.errorbar_figure(out, stem, series, opts)
    opts = opts or {}
    runinfo.mkdir_p(out)
    local plots = {}
    for j, sr in ipairs(series) do
        local dat = write_points(string.format("%s/%s_%02d_%s.dat", out, stem, j, safe(sr.name)), sr.points)
        -- categories (xlabels) are not a line: points with their bars only
        plots[#plots + 1] = string.format("%s using 1:2:3:4 with %s lw 2 pt 7 lc rgb %s title %s",
                                          gq(dat), opts.xlabels and "yerrorbars" or "yerrorlines",
                                          gq(PALETTE[(j - 1) % #PALETTE + 1]), gq(sr.name))
    end
    local pre = {"set termoption noenhanced", "set title " .. gq(opts.title or stem),
                 "set xlabel " .. gq(opts.xlabel or ""), "set ylabel " .. gq(opts.ylabel or ""),
                 "set key outside right", "set grid", "set xzeroaxis lt -1"}
    if opts.logx then pre[#pre + 1] = "set logscale x 2" end
    if opts.yrange then pre[#pre + 1] = "set yrange " .. opts.yrange end
    if opts.xlabels then
        local tics = {}
        for i, l in ipairs(opts.xlabels) do tics[i] = string.format("%s %d", gq(l), i) end
        pre[#pre + 1] = "set xtics rotate by -30 (" .. table.concat(tics, ", ") .. ")"
        pre[#pre + 1] = string.format("set xrange [0.5:%g]", #opts.xlabels + 0.5)
    end
    return write_and_plot(out, stem, table.concat(pre, "\n"), "plot " .. table.concat(plots, ", \\\n     "))
end

-- Several errorbar plots of differences in one figure, one panel each ({title =, ylabel =,
-- series = as errorbar_figure's}), laid out two a row: quantities in different units side by
-- side, each with 0 in view.
function M.errorbar_panels(out, stem, panels, opts)
    opts = opts or {}
    runinfo.mkdir_p(out)
    local cols = #panels > 1 and 2 or 1
    local rows = (#panels + cols - 1) // cols
    local body = {string.format("set multiplot layout %d,%d title %s", rows, cols, gq(opts.title or stem))}
    for p, panel in ipairs(panels) do
        local plots = {}
        for j, sr in ipairs(panel.series) do
            local dat = write_points(string.format("%s/%s_%d_%02d_%s.dat", out, stem, p, j, safe(sr.name)), sr.points)
            plots[#plots + 1] = string.format("%s using 1:2:3:4 with yerrorlines lw 2 pt 7 lc rgb %s title %s",
                                              gq(dat), gq(PALETTE[(j - 1) % #PALETTE + 1]), gq(sr.name))
        end
        body[#body + 1] = "set title " .. gq(panel.title or "")
        body[#body + 1] = "set ylabel " .. gq(panel.ylabel or "")
        body[#body + 1] = "plot " .. table.concat(plots, ", \\\n     ")
    end
    body[#body + 1] = "unset multiplot"
    local pre = {"set termoption noenhanced", "set xlabel " .. gq(opts.xlabel or ""), "set key below",
                 "set grid", "set xzeroaxis lt -1", "set offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05",
                 "set yrange [*<0:0<*]"}   -- autoscaled, 0 kept in view: the zero line is the sign's reference
    if opts.logx then pre[#pre + 1] = "set logscale x 2" end
    -- each row of panels as tall as half a single plot, with room for its legend below
    return write_and_plot(out, stem, table.concat(pre, "\n"), table.concat(body, "\n"),
                          math.max(HEIGHT, rows * 340))
end

function M.band_figure(out, stem, series, opts)
    opts = opts or {}
    runinfo.mkdir_p(out)
    local bands, lines = {}, {}
    for j, sr in ipairs(series) do
        local rows = {}
        for _, r in ipairs(sr.rows) do
            rows[#rows + 1] = string.format("%.9g %.9g %.9g %.9g", r[1], r[2], r[3] or r[2], r[4] or r[2])
        end
        local dat = string.format("%s/%s_%02d_%s.dat", out, stem, j, safe(sr.name))
        runinfo.write_atomic(dat, "# x mean ci_lo ci_hi\n" .. table.concat(rows, "\n") .. "\n")
        local colour = gq(PALETTE[(j - 1) % #PALETTE + 1])
        if sr.band ~= false then
            bands[#bands + 1] = string.format("%s using 1:3:4 with filledcurves fs transparent solid 0.18 "
                                              .. "noborder lc rgb %s notitle", gq(dat), colour)
        end
        -- a dash pattern per series as well as a colour: variants stay apart in grey print
        lines[#lines + 1] = string.format("%s using 1:2 with lines lw 2 dt %d lc rgb %s title %s",
                                          gq(dat), (j - 1) % 5 + 1, colour, gq(sr.name))
    end
    local preamble = table.concat({
        "set termoption noenhanced",
        "set title " .. gq(opts.title or stem),
        "set xlabel " .. gq(opts.xlabel or "step"),
        "set ylabel " .. gq(opts.ylabel or ""),
        opts.yrange and ("set yrange " .. opts.yrange) or "set autoscale y",
        "set key top right",
        "set grid",
    }, "\n")
    local all = {}
    for _, b in ipairs(bands) do all[#all + 1] = b end
    for _, l in ipairs(lines) do all[#all + 1] = l end
    return write_and_plot(out, stem, preamble, "plot " .. table.concat(all, ", \\\n     "))
end

-- One point per row with its 95% intervals on both axes (the paper's Pareto figure of
-- section 3.2: x = mean basis loss, y = specific loss). points = list of {name =, x =,
-- x_lo =, x_hi =, y =, y_lo =, y_hi =} (missing bounds: the point alone).
function M.pareto_figure(out, stem, points, opts)
    opts = opts or {}
    runinfo.mkdir_p(out)
    local plots = {}
    for j, pt in ipairs(points) do
        local dat = string.format("%s/%s_%02d_%s.dat", out, stem, j, safe(pt.name))
        runinfo.write_atomic(dat, string.format("# x y x_lo x_hi y_lo y_hi\n%.9g %.9g %.9g %.9g %.9g %.9g\n",
            pt.x, pt.y, pt.x_lo or pt.x, pt.x_hi or pt.x, pt.y_lo or pt.y, pt.y_hi or pt.y))
        plots[#plots + 1] = string.format("%s using 1:2:3:4:5:6 with xyerrorbars pt 7 ps 1.2 lw 2 "
                                          .. "lc rgb %s title %s", gq(dat),
                                          gq(PALETTE[(j - 1) % #PALETTE + 1]), gq(pt.name))
    end
    local preamble = table.concat({
        "set termoption noenhanced",
        "set title " .. gq(opts.title or stem),
        "set xlabel " .. gq(opts.xlabel or "mean basis held-out loss"),
        "set ylabel " .. gq(opts.ylabel or "specific loss"),
        "set key outside right top",
        "set grid",
        "set offsets graph 0.08, graph 0.08, graph 0.08, graph 0.08",
    }, "\n")
    return write_and_plot(out, stem, preamble, "plot " .. table.concat(plots, ", \\\n     "))
end

-- All figures for a list of run directories.
-- Distinct runs get distinct names (legends and file names): runs that share one (two runs
-- of one policy) are told apart by the last parts of their directories that differ, and the
-- collision is said on stderr, naming both runs. Returns runs.
function M.distinct_names(runs, say)
    say = say or function(msg) io.stderr:write(msg, "\n") end
    local by = {}
    for _, run in ipairs(runs) do
        by[run.name] = by[run.name] or {}
        table.insert(by[run.name], run)
    end
    for name, same in pairs(by) do
        if #same > 1 then
            local parts, dirs = {}, {}
            for i, run in ipairs(same) do
                parts[i] = {}
                for piece in tostring(run.dir):gsub("/+$", ""):gmatch("[^/]+") do table.insert(parts[i], 1, piece) end
                dirs[i] = run.dir
            end
            -- the fewest trailing directory parts that tell every run apart
            local k, unique = 1, false
            while not unique and k <= 16 do
                local seen = {}
                unique = true
                for i in ipairs(same) do
                    local tail = {}
                    for j = math.min(k, #parts[i]), 1, -1 do tail[#tail + 1] = parts[i][j] end
                    local key = table.concat(tail, "/")
                    if seen[key] then unique = false end
                    seen[key] = true
                    same[i].tail = key
                end
                k = k + 1
            end
            for _, run in ipairs(same) do run.name = name .. " [" .. run.tail .. "]" end
            say(string.format("plot: %d runs are named %s (%s): labelled by their directories", #same, name,
                              table.concat(dirs, ", ")))
        end
    end
    return runs
end

function M.plot_runs(dirs, out, opts)
    opts = opts or {}
    local runs = {}
    for i, d in ipairs(dirs) do runs[i] = M.read_run(d) end
    M.distinct_names(runs)
    local made = {M.loss_figure(runs, out, {title = opts.title})}
    for _, run in ipairs(runs) do
        local f = M.weights_figure(run, out, {top = opts.top})
        if f then made[#made + 1] = f end
    end
    return made
end

local function main(args)
    local argparse = require "argparse"
    require "cli.args"   -- usage errors exit with status 2
    local p = argparse("plot.lua", "Draw loss curves and mixture-weight evolutions of runs with gnuplot.")
    p:argument("runs", "Run directories (each holding metrics.csv, weights.csv).")
        :args("+")
    p:option("--out", "Output directory (default: <parent of the first run>/plots).")
    p:option("--top", "Domains shown in the weight figures (the rest is 'other').", "8")
        :convert(tonumber)
    p:option("--title", "Title of the loss figure.")
    local a = p:parse(args)
    local out = a.out or ((a.runs[1]:gsub("/+$", ""):match("^(.*)/[^/]+$") or ".") .. "/plots")
    local made = M.plot_runs(a.runs, out, {top = a.top, title = a.title})
    for _, f in ipairs(made) do print(f.png) print(f.svg) end
end

local modname = ...
if modname == "plot" then return M end
main({...})
return M

-- The study's report, generated from the run directories alone: no number is copied by hand.
--
--   dgalua scripts/report.lua [--study runs/study] [--docs docs] [--no-plot] [--readme README.md]
--                              [--against OTHER_STUDY [--against-note TEXT]]
--   (the command; this is its module, harness/report.lua)
--
-- reads <study>/{lowdata,mmlu_dist,recover,quickstart}/**/summary.json (written by
-- harness/sweep for every (cell, seed)), and writes <docs>/results.md with, per experiment:
--   a table per group of cells: every metric as mean and 95% Student-t interval over seeds
--   (util.stats), the paired difference to the group's reference policy over the common
--   seeds with its interval, and the noise floor beside it: the reference's own seed-to-seed
--   sd and the mean |ref(s_i) - ref(s_j)| over seed pairs;
--   the paper's findings as claims, each with the verdict its interval gives: "supported"
--   (the interval of the paired difference lies on the paper's side of 0), "contradicted"
--   (on the other side), "not established" (it contains 0), "n=1" (one seed: no interval);
--   the figures, copied as PNG into <docs>/.
-- As a module (require "harness.report"): report.collect(dir), report.experiment(name, out, opts)
-- (the experiments call it at the end: table, CSV and figures of one experiment),
-- report.results(study_dir, docs_dir, opts).
local runinfo = require "util.runinfo"
local rundir = require "rundir"
local seeds = require "harness.seeds"
local figs = require "harness.figures"

local M = {}

local function stats() return require "util.stats" end

-- The cells of an experiment's output directory (harness/seeds.collect, the seed aggregation
-- harness/aggregate.lua uses too): {order = {cell ids in order found}, cells = {[id] = {id,
-- group, label, seeds = {[seed] = {metric = number}}, dirs = {[seed] = run dir}}}}. A cell's
-- group is its id without the last component (its policy), its label that component.
function M.collect(dir)
    return seeds.collect(dir:gsub("/+$", ""), seeds.default_group)
end

M.groups = seeds.groups

-- A summary as every table prints it (util/stats.format: intervals from 3 seeds on, two
-- seeds as their two values, clipped to the metric's range when `metric` has one).
local function fmt_summary(s, f, metric)
    return stats().format(s, f, metric and require("harness.cells").METRIC_RANGE[metric] or nil)
end
M.fmt_summary = fmt_summary

-- The claims: decided, tabled and summarised in harness/claims.lua.
local claims_of = require "harness.claims"
for _, name in ipairs{"verdict", "verdict_word", "decide", "claims", "claims_tables", "claims_summary",
                      "scale_table", "scale_of"} do M[name] = claims_of[name] end

-- A markdown table of one group: rows = cells, columns = metrics (mean [CI]), then for the
-- first metric the paired difference to the reference and its noise floor.
function M.group_table(cells, metrics, ref_label, fmts)
    local ref
    for _, c in ipairs(cells) do if c.label == ref_label then ref = c end end
    -- The reference first, then the cells in their order.
    local ordered = {}
    if ref then ordered[1] = ref end
    for _, c in ipairs(cells) do if c ~= ref then ordered[#ordered + 1] = c end end
    local key = metrics[1]
    local head = {"policy", "seeds", key}
    if ref then
        head[#head + 1] = string.format("%s - %s (paired)", key, ref_label)
        head[#head + 1] = "noise floor (" .. ref_label .. " sd / mean pair gap)"
    end
    for i = 2, #metrics do head[#head + 1] = metrics[i] end
    local lines = {"| " .. table.concat(head, " | ") .. " |",
                   "|" .. string.rep("---|", #head)}
    local csv = {}
    local floor = ref and seeds.compare(ref, ref, key) or {}
    local floor_sd, floor_gap = floor.ref_sd, floor.ref_gap
    for _, c in ipairs(ordered) do
        local n = 0
        for _ in pairs(c.seeds) do n = n + 1 end
        local row = {c.label, tostring(n)}
        local rec = {cell = c.id, seeds = n}
        for i, m in ipairs(metrics) do
            local r = seeds.compare(c, ref, m)
            row[#row + 1] = fmt_summary(r.summary, (fmts or {})[m], m)
            rec[m .. "_mean"], rec[m .. "_lo"], rec[m .. "_hi"] = r.summary.mean, r.summary.ci_lo, r.summary.ci_hi
            if i == 1 and ref then
                if c == ref then
                    row[#row + 1] = "(reference)"
                else
                    row[#row + 1] = fmt_summary(r.diff, (fmts or {})[m])
                    rec.diff_mean, rec.diff_lo, rec.diff_hi = r.diff.mean, r.diff.ci_lo, r.diff.ci_hi
                end
                row[#row + 1] = (floor_sd and string.format("%.4f", floor_sd) or "-") .. " / "
                                .. (floor_gap and string.format("%.4f", floor_gap) or "-")
                rec.floor_sd, rec.floor_gap = floor_sd, floor_gap
            end
        end
        lines[#lines + 1] = "| " .. table.concat(row, " | ") .. " |"
        csv[#csv + 1] = rec
    end
    return table.concat(lines, "\n"), csv
end

-- What an experiment prints at its end: its tables (<out>/table.md, <out>/table.csv), and its
-- figures (<out>/plots). opts: metrics (list), reference (label), claims, plot, title,
-- column / ylabel (the curve figures), pareto = {x =, y =} (metrics of the Pareto figure).
-- What the tables' numbers are (notes.md of every experiment).
M.INTERVALS = "Numbers: mean [95% Student-t interval over seeds, n - 1 degrees of freedom]; with one seed, "
              .. "the value and (n=1). A paired difference (x - reference) is taken over the seeds both cells "
              .. "ran; the noise floor is the reference's own seed-to-seed sd and its mean |ref(s_i) - ref(s_j)| "
              .. "over seed pairs."
M.METRICS = {"specific_final", "specific_best", "specific_gap", "spikes", "generic_final",
             "l1_mean", "epochs_max", "epochs_mean", "basis_mean"}
M.FORMATS = {spikes = "%.1f", epochs_max = "%.1f", epochs_mean = "%.1f", accuracy = "%.1f",
             accuracy_top_letter_share = "%.1f", updates = "%.0f"}

function M.experiment(name, out, opts)
    opts = opts or {}
    local col = M.collect(out)
    if #col.order == 0 then
        print(name .. ": no finished run under " .. out)
        return {col = col, md = "", figures = {}}
    end
    local groups, by = M.groups(col)
    local metrics = opts.metrics or M.METRICS
    local parts, csv_rows = {}, {}
    for _, g in ipairs(groups) do
        local present = {}
        for _, m in ipairs(metrics) do
            for _, c in ipairs(by[g]) do
                local has = false
                for _, sm in pairs(c.seeds) do if sm[m] ~= nil then has = true end end
                if has then present[#present + 1] = m break end
            end
        end
        local md, csv = M.group_table(by[g], present, opts.reference or "natural", opts.fmts or M.FORMATS)
        parts[#parts + 1] = "#### " .. (g ~= "" and g or name) .. "\n\n" .. md
        for _, r in ipairs(csv) do csv_rows[#csv_rows + 1] = r end
    end
    if opts.claims then
        local lines = M.claims(groups, by, opts.claims)
        if #lines > 0 then parts[#parts + 1] = "#### Claims\n\n" .. table.concat(lines, "\n") end
    end
    local md = table.concat(parts, "\n\n") .. "\n"
    runinfo.write_atomic(out .. "/table.md", md)
    local cols = {"cell", "seeds"}
    for _, m in ipairs(metrics) do
        cols[#cols + 1] = m .. "_mean"; cols[#cols + 1] = m .. "_lo"; cols[#cols + 1] = m .. "_hi"
    end
    for _, c in ipairs{"diff_mean", "diff_lo", "diff_hi", "floor_sd", "floor_gap"} do cols[#cols + 1] = c end
    local tmp = out .. "/table.csv.tmp"
    os.remove(tmp)
    local log = require("util.csvlog").open(tmp, cols)
    for _, r in ipairs(csv_rows) do log:write(r) end
    log:close()
    os.rename(tmp, out .. "/table.csv")
    if not opts.quiet then
        print("\n" .. (opts.title or name) .. "\n")
        print(md)
    end
    local figures = {}
    if opts.plot ~= false then
        figures = figs.figures(col, out .. "/plots", {name = name, column = opts.column, ylabel = opts.ylabel,
                                                    weights_labels = opts.weights_labels,
                                                    metric = metrics[1], reference = opts.reference or "natural"})
        if opts.pareto then
            -- One Pareto figure per group (a specific set at one k).
            for _, g in ipairs(groups) do
                local o = {}
                for key, v in pairs(opts.pareto) do o[key] = v end
                o.filter = function(c) return c.group == g end
                o.stem = "pareto_" .. figs.safe(g)
                o.title = (opts.pareto.title or "Pareto") .. ": " .. g
                local f = figs.pareto(col, out .. "/plots", o)
                if f then figures[#figures + 1] = f end
            end
        end
        if not opts.quiet then
            for _, f in ipairs(figures) do print("figure: " .. f.png) end
        end
    end
    return {col = col, md = md, figures = figures}
end

-- ---- docs/results.md -------------------------------------------------------------------

-- The descriptor of the experiment whose runs are in dir (harness/descriptor.lua): this
-- repository's experiments/<name>.lua when it has one (so the report reads today's claims and
-- tables, wherever and from whichever checkout the runs were made), else the one
-- <dir>/experiment.json names (an experiment from outside the repository), else the script
-- its summaries name. nil when none loads.
local function descriptor_of(dir, name)
    local descriptor = require "harness.descriptor"
    local tried = {runinfo.repo_root() .. "/experiments/" .. name .. ".lua"}
    local ej = dir .. "/experiment.json"
    if runinfo.is_file(ej) then
        local ok, e = pcall(require("util.json").read_file, ej)
        if ok and type(e) == "table" and type(e.descriptor) == "string" then tried[#tried + 1] = e.descriptor end
    end
    local first = rundir.find(dir)[1]
    if first then
        local ok, s = pcall(rundir.read_summary, first)
        if ok and type(s) == "table" and type(s.script) == "string" then
            tried[#tried + 1] = s.script
            tried[#tried + 1] = runinfo.repo_root() .. "/" .. s.script
        end
    end
    for _, path in ipairs(tried) do
        if runinfo.is_file(path) then
            local ok, d = pcall(descriptor.load, path)
            if ok and d.name == name then return d end
        end
    end
    return nil
end

-- The sections of a study: one per experiment directory under it whose descriptor loads, in
-- the descriptors' order, each with what the descriptor says (title, intro, reference,
-- metrics, claims, figures).
function M.sections(study)
    local out = {}
    for _, name in ipairs(runinfo.list(study)) do
        local dir = study .. "/" .. name
        if runinfo.is_dir(dir) then
            local d = descriptor_of(dir, name)
            if d then
                local r = d.report or {}
                out[#out + 1] = {name = name, order = d.order, title = d.title or name, intro = r.intro or d.about,
                                 reference = r.reference, metrics = r.metrics, claims = d.claims,
                                 pareto = r.pareto, column = r.column, weights_labels = r.weights_labels,
                                 curve_note = r.curve_note}
            end
        end
    end
    return require("harness.descriptor").sort(out)
end

-- "2026-11-25T08:12:06Z" -> seconds; only differences of these are used, so the time zone
-- os.time assumes cancels out.
local function iso_seconds(t)
    local y, mo, d, h, mi, se = tostring(t or ""):match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)")
    if not y then return nil end
    return os.time({year = tonumber(y), month = tonumber(mo), day = tonumber(d), hour = tonumber(h),
                    min = tonumber(mi), sec = tonumber(se)})
end

-- Seconds covered by a list of {start, end} intervals (their union).
local function covered(intervals)
    table.sort(intervals, function(p, q) return p[1] < q[1] end)
    local total, lo, hi = 0, nil, nil
    for _, iv in ipairs(intervals) do
        if hi and iv[1] <= hi then
            hi = math.max(hi, iv[2])
        else
            if hi then total = total + (hi - lo) end
            lo, hi = iv[1], iv[2]
        end
    end
    if hi then total = total + (hi - lo) end
    return total
end

-- The most runs going at once. summary.json's `finished` is to the second, so a run that
-- starts as another ends may seem to overlap it by up to a second: each run counts as ended a
-- second early.
local function most_at_once(intervals)
    local events = {}
    for _, iv in ipairs(intervals) do
        events[#events + 1] = {iv[1], 1}
        events[#events + 1] = {math.max(iv[1], iv[2] - 1), -1}
    end
    table.sort(events, function(p, q)
        if p[1] ~= q[1] then return p[1] < q[1] end
        return p[2] < q[2]      -- an end before a start at the same time
    end)
    local now, most = 0, 0
    for _, e in ipairs(events) do
        now = now + e[2]
        most = math.max(most, now)
    end
    return most
end

-- How long the study took, from its runs' summary.json alone: per experiment the number of
-- runs, the sum of their wall seconds and the time during which at least one of its runs was
-- going (the union of the runs' intervals: a study made in several sittings does not count
-- the hours between them); and the same for the whole study. Store builds and setup between
-- runs are not inside it, nor is the report. Returns {rows = {{name, runs, sum, going}},
-- going = whole study's seconds, at_once = the most runs going at once}, or nil when no run
-- recorded its times.
function M.timings(study)
    local rows, all = {}, {}
    for _, sec in ipairs(M.sections(study)) do
        local n, sum, own = 0, 0, {}
        for _, dir in ipairs(rundir.find(study .. "/" .. sec.name)) do
            local s = rundir.read_summary(dir)
            local fin, secs = iso_seconds(s.finished), tonumber(s.seconds)
            if fin and secs and not s.same_as then
                n, sum = n + 1, sum + secs
                own[#own + 1] = {fin - secs, fin}
                all[#all + 1] = {fin - secs, fin}
            end
        end
        if n > 0 then rows[#rows + 1] = {name = sec.name, runs = n, sum = sum, going = covered(own)} end
    end
    if #rows == 0 then return nil end
    return {rows = rows, going = covered(all), at_once = most_at_once(all)}
end

-- M.timings as a markdown table (t: M.timings(study), when the caller has it already).
function M.timing(study, t)
    t = t or M.timings(study)
    if not t then return nil end
    local lines = {}
    for _, r in ipairs(t.rows) do
        lines[#lines + 1] = string.format("| %s | %d | %.0f | %.0f (%.2f h) |", r.name, r.runs, r.sum, r.going,
                                          r.going / 3600)
    end
    lines[#lines + 1] = string.format("| **whole study** | | | %.0f (%.2f h) |", t.going, t.going / 3600)
    return "| experiment | runs | sum of run times (s) | time with a run going (s) |\n"
           .. "|---|---:|---:|---:|\n" .. table.concat(lines, "\n")
end

-- The README's sentence on how long the committed study took (M.timings, in hours).
function M.timing_sentence(study)
    local t = M.timings(study)
    if not t then return nil end
    local parts, runs = {}, 0
    for _, r in ipairs(t.rows) do
        parts[#parts + 1] = string.format("%s %.2f h", r.name, r.going / 3600)
        runs = runs + r.runs
    end
    return string.format("The %d runs of these records took %.2f hours with a run going (%s), from their own "
                         .. "start and end times (up to %d at a time), the hours between sittings left out "
                         .. "([docs/results.md](docs/results.md#how-long-it-took)).", runs, t.going / 3600,
                         table.concat(parts, ", "), t.at_once)
end

local function copy_file(src, dst)
    local text = runinfo.read_file(src)
    if text then runinfo.write_atomic(dst, text) end
end

-- The claims decided by a study's runs, per section: {{section =, rows = M.decide(...)}, ...}.
function M.decided(study, sections)
    local out = {}
    for _, sec in ipairs(sections or M.sections(study)) do
        local dir = study .. "/" .. sec.name
        if sec.claims and runinfo.is_dir(dir) then
            local groups, by = M.groups(M.collect(dir))
            out[#out + 1] = {name = sec.name, rows = M.decide(groups, by, sec.claims)}
        end
    end
    return out
end

-- The digest of a study: the claims tables, and how the effects move with scale (markdown).
-- With docs, the scale figure is drawn (in <study>/plots) and copied there, and referenced.
function M.digest(study, sections, docs)
    local decided = M.decided(study, sections)
    local parts = {M.claims_tables(decided)}
    local scale_md, series = M.scale_table(decided)
    if scale_md then
        parts[#parts + 1] = "### How the effects move with scale\n\n"
            .. "The last column reads the intervals, not the means alone: \"grows\" or \"shrinks\" when every "
            .. "scale's interval excludes 0 on the same side and the mean moves away from 0 or towards it (\"largest "
            .. "at\" when neither); \"changes sign\" when intervals lie on both sides of 0; \"emerges at\" or "
            .. "\"fades by\" the scale from which the interval excludes 0, or no longer does; \"within noise\" when "
            .. "no interval excludes 0.\n\n" .. scale_md
        if docs then
            local panels = claims_of.scale_panels(series)
            local f = require("plot").errorbar_panels(study .. "/plots", "scale_claims", panels,
                {logx = true, xlabel = "tokens per run (multiple of the base run)",
                 title = "Each claim's paired difference against tokens per run (95% CI from 3 seeds on)"})
            if f then
                copy_file(f.png, docs .. "/study_scale_claims.png")
                parts[#parts + 1] = "![study_scale_claims.png](study_scale_claims.png)\n"
            end
        end
    end
    return table.concat(parts, "\n")
end

-- One experiment's section of results.md (its tables, notes and figures, copied into docs).
local function section_md(sec, dir, docs, opts)
    local r = M.experiment(sec.name, dir, {metrics = sec.metrics, reference = sec.reference, claims = sec.claims,
                                           plot = opts.plot, pareto = sec.pareto, column = sec.column,
                                           weights_labels = sec.weights_labels, quiet = opts.quiet})
    local out = {"## " .. sec.title, "", sec.intro, ""}
    local extra = runinfo.read_file(dir .. "/notes.md")
    if extra then out[#out + 1] = extra; out[#out + 1] = "" end
    out[#out + 1] = r.md
    if sec.curve_note and #r.figures > 0 then out[#out + 1] = "*" .. sec.curve_note .. "*"; out[#out + 1] = "" end
    for _, f in ipairs(r.figures) do
        local name = sec.name .. "_" .. f.png:match("([^/]+)$")
        copy_file(f.png, docs .. "/" .. name)
        out[#out + 1] = string.format("![%s](%s)", name, name)
        out[#out + 1] = ""
    end
    return table.concat(out, "\n")
end

-- Figures of an earlier report that this one did not write (an experiment or cell not run now)
-- would sit in docs/ unreferenced: remove them (names of this study's experiments and every
-- experiment of the repository's).
local function remove_stale_figures(docs, sections, text)
    local written = {}
    for f in text:gmatch("!%[[^%]]*%]%(([^)]+)%)") do written[f] = true end
    local names = {"study"}
    for _, sec in ipairs(sections) do names[#names + 1] = sec.name end
    local okl, list = pcall(require("harness.descriptor").list, runinfo.repo_root() .. "/experiments")
    for _, d in ipairs(okl and list or {}) do names[#names + 1] = d.name end
    for name in require("lfs").dir(docs) do
        for _, exp_name in ipairs(names) do
            if name:sub(1, #exp_name + 1) == exp_name .. "_" and name:match("%.png$") and not written[name] then
                os.remove(docs .. "/" .. name)
            end
        end
    end
end

-- A study's sections, or a usage error when it has none: a mistyped --study would otherwise
-- replace results.md by an empty report and delete the figures it referenced.
local function sections_of(study, flag)
    if not runinfo.is_dir(study) then
        error(require("util.errors").usage(string.format("report: %s %s is not a directory; nothing written",
                                                         flag, study)), 0)
    end
    local sections = M.sections(study)
    if #sections == 0 then
        error(require("util.errors").usage(string.format("report: %s %s holds no experiment's runs (a directory "
              .. "per experiment, as scripts/study.lua --out writes them); nothing written", flag, study)), 0)
    end
    return sections
end

function M.results(study, docs, opts)
    opts = opts or {}
    local sections = sections_of(study, "--study")
    -- before any figure is drawn: a bad --against leaves docs/ as it was
    local agreement = opts.against and M.agreement_md(study, sections, opts.against, opts.against_note)
    runinfo.mkdir_p(docs)
    local out = {"# Results of the study", "",
                 "Generated by `scripts/report.lua` from the run directories under `" .. study .. "`; "
                 .. "no number here is typed by hand. Intervals are 95% Student-t intervals over seeds "
                 .. "(n - 1 degrees of freedom), shown from 3 seeds on (two seeds show both values); a paired "
                 .. "difference is taken over the seeds both cells ran. The noise floor is the reference policy's "
                 .. "own seed-to-seed sd and its mean |ref(s_i) - ref(s_j)| over seed pairs: a difference below it "
                 .. "is noise at this scale.", ""}
    if opts.note then
        table.insert(out, 3, "**" .. opts.note .. "**")
        table.insert(out, 4, "")
    end
    out[#out + 1] = "## Claims at a glance"
    out[#out + 1] = ""
    out[#out + 1] = M.digest(study, sections, opts.plot ~= false and docs or nil)
    for _, sec in ipairs(sections) do
        local dir = study .. "/" .. sec.name
        if runinfo.is_dir(dir) then out[#out + 1] = section_md(sec, dir, docs, opts) end
    end
    if agreement then out[#out + 1] = agreement end
    local times = M.timings(study)
    if times then
        out[#out + 1] = "## How long it took"
        out[#out + 1] = ""
        out[#out + 1] = string.format("From the runs' own start and end times (`summary.json`). Up to %d run%s "
                        .. "went at a time, so the sum of run times can be up to %d times the time with a run "
                        .. "going. That time leaves out store builds and setup when no run was going, the "
                        .. "report, and the hours between sittings of a study made in several.", times.at_once,
                        times.at_once == 1 and "" or "s", times.at_once)
        out[#out + 1] = ""
        out[#out + 1] = M.timing(study, times)
        out[#out + 1] = ""
    end
    local text = table.concat(out, "\n") .. "\n"
    remove_stale_figures(docs, sections, text)
    runinfo.write_atomic(docs .. "/results.md", text)
    if not opts.quiet then print("wrote " .. docs .. "/results.md") end
end

-- results.md's section on the same claims in another study (`against`, described by `note`):
-- how many verdicts agree, then every (claim, group) decided in both.
function M.agreement_md(study, sections, against, note)
    local there = sections_of(against, "--against")
    local md, n = claims_of.agreement(M.decided(study, sections), M.decided(against, there))
    local out = {"## The same claims in another study", "",
                 string.format("Here: `%s`; there: `%s`%s.", study, against, note and (" (" .. note .. ")") or "")}
    if not md then
        out[#out + 1] = "No claim is decided in the same group in both."
        return table.concat(out, "\n") .. "\n"
    end
    local differ = n.total - n.same - n.opposite
    local function only(count, side)
        if count == 0 then return "" end
        return string.format(" %d %s decided %s only.", count, count == 1 and "is" or "are", side)
    end
    out[#out + 1] = string.format("Of the %d claims-in-a-group decided in both, %d have the same verdict, %d differ by a "
        .. "step (one of the two not established) and %d are opposite (supported in one, contradicted in the other).%s%s",
        n.total, n.same, differ, n.opposite,
        only(n.here_only, "here"), only(n.there_only, "there"))
    out[#out + 1] = ""
    out[#out + 1] = md
    return table.concat(out, "\n")
end

-- Replaces what stands between "<!-- results:begin -->" and "<!-- results:end -->" in `path`
-- (the README) with the study's digest; an error when the markers are missing.
function M.write_readme(study, path)
    local sections = sections_of(study, "--study")
    local text = runinfo.read_file(path) or error("report: cannot read " .. path, 0)
    local b, e = "<!-- results:begin -->\n", "<!-- results:end -->"
    local i, j = text:find(b, 1, true), text:find(e, 1, true)
    if not (i and j and j > i) then error(path .. ": no " .. b:gsub("\n", "") .. " ... " .. e .. " markers", 0) end
    local digest = M.claims_summary(M.decided(study, sections))
    local took = M.timing_sentence(study)
    if took then digest = digest .. "\n" .. took .. "\n" end
    runinfo.write_atomic(path, text:sub(1, i + #b - 1) .. digest .. text:sub(j))
end

function M.main(args)
    local argparse = require "argparse"
    require "cli.args"   -- usage errors exit with status 2
    local p = argparse("report.lua", "Generate docs/results.md from the study's run directories.")
    p:option("--study", "The study's output directory.", "runs/study")
    p:option("--docs", "Where results.md and the figures go.", "docs")
    p:flag("--no-plot", "Tables only.")
    p:option("--note", "A line said first in results.md (e.g. what configuration the runs had).")
    p:option("--readme", "Instead: rewrite the results digest between the markers of this README.")
    p:option("--against", "Another study's output directory: results.md then says, claim by claim and group by "
             .. "group, where its verdicts agree with this study's.")
    p:option("--against-note", "What the other study is (said beside its directory).")
    local a = p:parse(args)
    if a.readme then return M.write_readme(a.study, a.readme) end
    M.results(a.study, a.docs, {plot = not a.no_plot, note = a.note, against = a.against,
                                against_note = a.against_note})
end

return M

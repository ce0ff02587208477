-- Statistics over the seeds of a sweep, from its run directories alone.
--
--   local aggregate = require "harness.aggregate"
--   local res = aggregate{out = "runs/lowdata", metrics = {"specific_final"},
--                         reference = "natural", group_of = function(cell_id) ... end}
--
-- Reads every <out>/<cell id>/seed-<s>/summary.json (written by harness.sweep) through
-- harness/seeds.lua (the seed aggregation it shares with scripts/report.lua), and writes
-- <out>/aggregate.csv and <out>/aggregate.json (atomically), prints a table per metric
-- (quiet = true: not), and returns {rows = {...}, cells = {...}}.
--
-- Options:
--   out        the sweep's directory (required)
--   metrics    metric names to report (default: every numeric metric found, sorted)
--   reference  the reference policy: in each group, the cell whose `policy` field, or the
--              last part of whose id, equals it (a function(cell) -> bool also works);
--              nil: no paired differences
--   group_of   cell id -> group; default: the group the cell declared to sweep.run, else
--              the id up to its last "/" ("b256/natural" -> "b256"; "" without a "/")
--   order      list of cell ids: the order of the rows (default: groups, the reference
--              first in each, then the ids sorted)
--
-- One row per (cell, metric), every field in the CSV and the JSON:
--   n, mean, sd, se, ci_lo, ci_hi      over the cell's seeds; the 95% Student-t interval
--                                      with n - 1 degrees of freedom (util.stats); n = 1:
--                                      sd and the interval are empty
--   diff_n, diff_mean, diff_sd, diff_ci_lo, diff_ci_hi
--                                      the paired difference cell - reference over the seeds
--                                      both have (a seed-by-seed difference, so the part of
--                                      the noise the two runs share, same data order at init,
--                                      cancels); empty for the reference itself
--   ref_n, ref_sd                      the noise floor: the reference cell's sample standard
--                                      deviation across its seeds (n - 1 denominator)
--   ref_gap                            the reference's mean |ref(s_i) - ref(s_j)| over all
--                                      pairs of its seeds i < j: how far apart two runs that
--                                      differ only in the seed land, on average; a
--                                      difference smaller than this is within the noise of a
--                                      single pair of runs. Empty with fewer than 2 seeds.
local runinfo = require "util.runinfo"
local stats = require "util.stats"
local csvlog = require "util.csvlog"
local seeds = require "harness.seeds"

local M = {}

-- The cells of a sweep directory (harness/seeds.collect), its errors prefixed "aggregate:".
local function collect(out, group_of)
    if not runinfo.is_dir(out) then error("aggregate: " .. tostring(out) .. " is not a directory", 0) end
    local ok, col = pcall(seeds.collect, out, group_of)
    if not ok then error("aggregate: " .. tostring(col), 0) end
    return col.cells, col.order
end

local function is_reference(cell, reference)
    if reference == nil then return false end
    if type(reference) == "function" then return reference(cell) and true or false end
    return cell.policy == reference or cell.id:match("([^/]+)$") == reference or cell.id == reference
end

local COLUMNS = {"cell", "group", "metric", "n", "mean", "sd", "se", "ci_lo", "ci_hi",
                 "reference", "diff_n", "diff_mean", "diff_sd", "diff_ci_lo", "diff_ci_hi",
                 "ref_n", "ref_sd", "ref_gap", "seeds"}

local function fmt(v, f) return v == nil and "" or string.format(f or "%.4f", v) end

-- Columns padded by characters, not bytes (a UTF-8 character may be several); the first column is
-- left-aligned, the others right-aligned.
local function format_table(head, body)
    local width = {}
    local function len(v) return utf8.len(v) or #v end
    for j, v in ipairs(head) do width[j] = len(v) end
    for _, r in ipairs(body) do
        for j, v in ipairs(r) do width[j] = math.max(width[j], len(v)) end
    end
    local lines = {}
    local function line(vals)
        local parts = {}
        for j, v in ipairs(vals) do
            local pad = string.rep(" ", width[j] - len(v))
            parts[j] = j == 1 and (v .. pad) or (pad .. v)
        end
        lines[#lines + 1] = table.concat(parts, "  ")
    end
    line(head)
    local rule = {}
    for j = 1, #head do rule[j] = string.rep("-", width[j]) end
    lines[#lines + 1] = table.concat(rule, "  ")
    for _, r in ipairs(body) do line(r) end
    return table.concat(lines, "\n")
end

-- The printed table of one metric; shown[i] = {summary, diff} of rows[i] (util/stats.format:
-- the one way a summary is printed).
local function metric_table(rows, metric, shown)
    local t = {}
    local range = require("harness.cells").METRIC_RANGE[metric]
    for i, r in ipairs(rows) do
        if r.metric == metric then
            local d = shown[i].diff
            d = d and d.n and d.n > 0 and stats.format(d, "%+.4f") or nil
            t[#t + 1] = {r.cell, stats.format(shown[i].summary, "%.4f", range),
                         d or (r.reference == r.cell and "reference" or "-"),
                         r.ref_sd and fmt(r.ref_sd) or (r.ref_n == 1 and "n=1" or "-"),
                         r.ref_gap and fmt(r.ref_gap) or (r.ref_n == 1 and "n=1" or "-")}
        end
    end
    return format_table({"cell", "mean [95% CI]", "minus reference [95% CI]", "ref sd",
                         "ref mean gap"}, t)
end

-- <out>/aggregate.csv (one row per cell and metric) and <out>/aggregate.json (the rows and
-- the cells with their reference), atomically.
local function write(o, rows, metrics, order, cells, ref_of)
    local lines = {csvlog.format_record(COLUMNS, #COLUMNS)}
    for _, r in ipairs(rows) do
        local vals = {}
        for j, col in ipairs(COLUMNS) do vals[j] = r[col] end
        lines[#lines + 1] = csvlog.format_record(vals, #COLUMNS)
    end
    runinfo.write_atomic(o.out .. "/aggregate.csv", table.concat(lines))
    local cell_list = {}
    for _, id in ipairs(order) do
        local c = cells[id]
        if c then
            cell_list[#cell_list + 1] = {id = id, group = c.group, policy = c.policy,
                                         reference = ref_of[c.group] and ref_of[c.group].id or nil}
        end
    end
    runinfo.write_atomic(o.out .. "/aggregate.json", require("util.json").encode({
        metrics = metrics, reference = type(o.reference) == "string" and o.reference or nil,
        cells = cell_list, rows = rows}, {indent = true}) .. "\n")
end

function M.run(o)
    assert(type(o) == "table" and o.out, "aggregate: out is required")
    local cells, ids = collect(o.out, o.group_of)
    if #ids == 0 then error("aggregate: no summary.json under " .. o.out, 0) end

    local have = {}
    for _, c in pairs(cells) do
        for _, m in pairs(c.seeds) do for name in pairs(m) do have[name] = true end end
    end
    local all = {}
    for name in pairs(have) do all[#all + 1] = name end
    table.sort(all)
    local metrics = o.metrics or all
    for _, m in ipairs(metrics) do
        if not have[m] then
            error(string.format("aggregate: no summary under %s has the metric '%s' (metrics: %s)",
                                o.out, tostring(m), table.concat(all, ", ")), 0)
        end
    end

    -- The reference of each group.
    local ref_of = {}
    for _, id in ipairs(ids) do
        local c = cells[id]
        if is_reference(c, o.reference) then
            if ref_of[c.group] then
                error(string.format("aggregate: group '%s' has two reference cells (%s, %s)", c.group,
                                    ref_of[c.group].id, c.id), 0)
            end
            ref_of[c.group] = c
        end
    end

    local order = o.order
    if not order then
        order = {}
        for _, id in ipairs(ids) do order[#order + 1] = id end
        table.sort(order, function(x, y)
            local cx, cy = cells[x], cells[y]
            if cx.group ~= cy.group then return cx.group < cy.group end
            local rx, ry = ref_of[cx.group] == cx, ref_of[cy.group] == cy
            if rx ~= ry then return rx end
            return x < y
        end)
    end

    local rows, shown = {}, {}
    for _, id in ipairs(order) do
        local c = cells[id]
        if c then
            local ref = ref_of[c.group]
            for _, m in ipairs(metrics) do
                local cmp = seeds.compare(c, ref, m)
                local st, d = cmp.summary, cmp.diff or {}
                rows[#rows + 1] = {cell = id, group = c.group, metric = m, n = st.n, mean = st.mean,
                                   sd = st.sd, se = st.se, ci_lo = st.ci_lo, ci_hi = st.ci_hi,
                                   seeds = table.concat(seeds.seed_list(c, m), " "),
                                   reference = ref and ref.id, ref_n = cmp.ref_n, ref_sd = cmp.ref_sd,
                                   ref_gap = cmp.ref_gap, diff_n = d.n, diff_mean = d.mean,
                                   diff_sd = d.sd, diff_ci_lo = d.ci_lo, diff_ci_hi = d.ci_hi}
                shown[#rows] = {summary = st, diff = cmp.diff}
            end
        end
    end

    if o.write ~= false then write(o, rows, metrics, order, cells, ref_of) end

    local text = {}
    for _, m in ipairs(metrics) do
        text[#text + 1] = string.format("%s (95%% Student-t intervals over seeds from 3 seeds on; two seeds show "
                                        .. "both values; differences paired by seed)", m)
        text[#text + 1] = metric_table(rows, m, shown)
        text[#text + 1] = ""
    end
    local printed = table.concat(text, "\n")
    if not o.quiet then print(printed) end
    return {rows = rows, cells = cells, metrics = metrics, text = printed}
end

return setmetatable(M, {__call = function(_, o) return M.run(o) end})

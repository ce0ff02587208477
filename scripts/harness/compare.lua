-- Two run trees made by the same command (a study and its rerun on another build, another
-- day, another machine): is every run they share the same, bit for bit, and how long did each
-- take? Used by scripts/compare_runs.lua.
--
-- A run is a directory holding summary.json (<tree>/<cell>/seed-<s>/). Two runs at the same
-- relative path are the same when their logs (metrics.csv, weights.csv, epochs.csv,
-- domains.csv, where present) hold the same text in every column but `seconds` (wall time),
-- and their summary.json files the same `metrics`. Numbers are compared as the text the run
-- wrote, so "same" means the same bits, not close.
local json = require "util.json"
local rundir = require "rundir"
local runinfo = require "util.runinfo"
local stats = require "util.stats"

local M = {}

M.LOGS = {"metrics.csv", "weights.csv", "epochs.csv", "domains.csv"}

-- Relative paths of the run directories under root, sorted.
local function runs_under(root)
    if not runinfo.is_dir(root) then error("compare: " .. root .. " is not a directory", 0) end
    local base = root:gsub("/+$", "")
    local out = {}
    for _, dir in ipairs(rundir.find(base)) do
        local rel = dir:sub(#base + 2)
        if rel ~= "" then out[#out + 1] = rel end
    end
    return out
end

-- A log's rows without its `seconds` column, as one string per row; nil when absent.
local function log_rows(run, name)
    local header, rows = run:rows(name)
    if not header then return nil end
    local keep = {}
    for j, col in ipairs(header) do
        if col ~= "seconds" then keep[#keep + 1] = j end
    end
    local out = {}
    local function line(rec)
        local parts = {}
        for _, j in ipairs(keep) do parts[#parts + 1] = rec[j] end
        return table.concat(parts, ",")
    end
    out[1] = line(header)
    for r, rec in ipairs(rows) do out[r + 1] = line(rec) end
    return out
end

-- The first difference between two runs, or nil when they are the same; second result true
-- when every difference is in a summary metric named in `except`.
local function difference(a_run, b_run, sa, sb, except)
    for _, name in ipairs(M.LOGS) do
        local ra, rb = log_rows(a_run, name), log_rows(b_run, name)
        if (ra == nil) ~= (rb == nil) then return name .. " is in only one of the two" end
        if ra then
            if #ra ~= #rb then return string.format("%s: %d rows against %d", name, #ra - 1, #rb - 1) end
            for i = 1, #ra do
                if ra[i] ~= rb[i] then
                    return string.format("%s, %s %d: %s against %s", name, i == 1 and "header" or "row",
                                         i - 1, ra[i], rb[i])
                end
            end
        end
    end
    local ma, mb = sa.metrics or {}, sb.metrics or {}
    local keys, seen = {}, {}
    for _, m in ipairs({ma, mb}) do
        for k in pairs(m) do
            if not seen[k] then seen[k], keys[#keys + 1] = true, k end
        end
    end
    table.sort(keys)
    local diffs, excepted = {}, true
    for _, k in ipairs(keys) do
        local va, vb = json.encode(ma[k]), json.encode(mb[k])
        if va ~= vb then
            diffs[#diffs + 1] = string.format("%s %s against %s", k, va, vb)
            excepted = excepted and (except or {})[k] ~= nil
        end
    end
    if #diffs > 0 then return "summary.json metrics: " .. table.concat(diffs, "; "), excepted end
    return nil
end

-- Compares the runs of tree a with those at the same paths under tree b. A `same_as` run
-- (in either tree) is compared through the run it names (rundir.source_dir): a rerun that
-- makes natural once where the committed study made it twice still checks both. Returns
-- {compared, same, different = {{run, why}}, only_a, only_b, aliases (pairs compared through
-- a same_as run), ratio = stats summary of a.seconds / b.seconds over the compared runs
-- that both timed, seconds_a, seconds_b}. opts.except = {metric = why}: runs whose logs are the
-- same and whose summaries differ only in these metrics (a known change, e.g. a sum order
-- fixed after A was made) are counted in `excepted` ({{run, why}}), not in `different`.
function M.trees(a, b, opts)
    local except = (opts or {}).except
    local ra, rb = runs_under(a), runs_under(b)
    local in_b = {}
    for _, r in ipairs(rb) do in_b[r] = true end
    local res = {compared = 0, same = 0, different = {}, excepted = {}, only_a = 0, only_b = 0, seconds_a = 0,
                 seconds_b = 0, aliases = 0, except = except}
    local ratios, in_a = {}, {}
    for _, r in ipairs(ra) do
        in_a[r] = true
        if in_b[r] then
            local sa = rundir.read_summary(a .. "/" .. r)
            local sb = rundir.read_summary(b .. "/" .. r)
            local src_a = rundir.source_dir(a .. "/" .. r, sa)
            local src_b = rundir.source_dir(b .. "/" .. r, sb)
            if sa.same_as or sb.same_as then res.aliases = res.aliases + 1 end
            res.compared = res.compared + 1
            local why, excepted = difference(rundir.open(src_a), rundir.open(src_b), sa, sb, except)
            if why and excepted then
                res.excepted[#res.excepted + 1] = {run = r, why = why}
            elseif why then
                res.different[#res.different + 1] = {run = r, why = why}
            else
                res.same = res.same + 1
            end
            local ta, tb = tonumber(sa.seconds), tonumber(sb.seconds)
            if ta and tb and tb > 0 then
                ratios[#ratios + 1] = ta / tb
                res.seconds_a, res.seconds_b = res.seconds_a + ta, res.seconds_b + tb
            end
        else
            res.only_a = res.only_a + 1
        end
    end
    for _, r in ipairs(rb) do
        if not in_a[r] then res.only_b = res.only_b + 1 end
    end
    res.ratio = stats.summary(ratios)
    table.sort(ratios)
    res.ratio_min, res.ratio_max = ratios[1], ratios[#ratios]
    return res
end

-- The names of an `except` table ({metric = why}), sorted.
function M.except_names(except)
    local names = {}
    for k in pairs(except or {}) do names[#names + 1] = k end
    table.sort(names)
    return names
end

-- The result as markdown.
function M.markdown(a, b, res)
    local lines = {
        string.format("Runs of `%s` (A) against the runs at the same paths under `%s` (B).", a, b),
        "",
        "| runs compared | the same, bit for bit | different | only in A | only in B |",
        "|---:|---:|---:|---:|---:|",
        string.format("| %d | %d | %d | %d | %d |", res.compared, res.same, #res.different + #res.excepted,
                      res.only_a, res.only_b),
        "",
    }
    if #res.excepted > 0 then
        local names, whys = M.except_names(res.except), {}
        for i, k in ipairs(names) do whys[i] = k .. ": " .. res.except[k] end
        lines[#lines + 1] = string.format("%d of the %d different runs have the same logs and differ only in %s "
                                          .. "(%s); %d differ otherwise.", #res.excepted,
                                          #res.different + #res.excepted, table.concat(names, ", "),
                                          table.concat(whys, "; "), #res.different)
        lines[#lines + 1] = ""
    end
    if res.aliases > 0 then
        lines[#lines + 1] = string.format(
            "%d of the runs compared are `same_as` runs in one tree (a cell that computes what another "
            .. "computes, run once): their logs were compared through the run they name.", res.aliases)
        lines[#lines + 1] = ""
    end
    if res.ratio.n and res.ratio.n > 0 then
        lines[#lines + 1] = string.format(
            "Run time, A over B: %.2f on average (%.2f to %.2f over %d runs); %.0f s against %.0f s in all.",
            res.ratio.mean, res.ratio_min, res.ratio_max, res.ratio.n, res.seconds_a, res.seconds_b)
        lines[#lines + 1] = ""
    end
    for _, d in ipairs(res.different) do
        lines[#lines + 1] = string.format("- `%s`: %s", d.run, d.why)
    end
    for _, d in ipairs(res.excepted) do
        lines[#lines + 1] = string.format("- `%s` (only the excepted metrics): %s", d.run, d.why)
    end
    return table.concat(lines, "\n") .. "\n"
end

return M

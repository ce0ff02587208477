-- Claims (harness/descriptor.lua has their fields): the verdict of a paired difference, where
-- a claim is decided in a study, and the tables that say so (results.md's opening, the README's
-- digest, how each effect moves with scale).
local seeds = require "harness.seeds"
local stats = require "util.stats"

local M = {}

-- A summary as every table prints it (util/stats.format).
local function fmt_summary(s) return stats.format(s) end

-- The verdict of a paired difference (x - y) for a claim that x is `better` ("lower" or
-- "higher") than y; with a margin, that x is no worse than y by more than it.
function M.verdict(d, better, margin)
    if not d or not d.n or d.n == 0 then return "no data" end
    if d.n < stats.MIN_INTERVAL_N or not d.ci_lo then
        return string.format("not established (n=%d: no interval)", d.n)
    end
    local lo, hi = d.ci_lo, d.ci_hi
    if better == "higher" then lo, hi = -hi, -lo end   -- as if lower were better
    if margin then
        if hi < margin then return string.format("supported (CI below the %g margin)", margin) end
        if lo > 0 then return "contradicted (CI excludes 0, worse)" end
        return "not established (CI reaches the margin)"
    end
    if hi < 0 then return "supported (CI excludes 0)" end
    if lo > 0 then return "contradicted (CI excludes 0, opposite sign)" end
    return "not established (CI includes 0)"
end

-- The verdict without its reason: "supported", "contradicted", "not established", "no data".
function M.verdict_word(v)
    for _, w in ipairs{"supported", "contradicted", "not established"} do
        if v:sub(1, #w) == w then return w end
    end
    return v
end

-- Every (claim, group) a claim is decided in: the groups holding both its cells (and matching
-- its `where` pattern), in group order. Each: {claim =, group =, d = the paired difference
-- x - y over their common seeds, verdict =}.
function M.decide(groups, by, claims)
    local out = {}
    for _, g in ipairs(groups) do
        local cells = {}
        for _, c in ipairs(by[g]) do cells[c.label] = c end
        for _, cl in ipairs(claims) do
            local x, y = cells[cl.x], cells[cl.y]
            if x and y and (not cl.where or g:find(cl.where)) then
                local d = stats.paired(seeds.values(x, cl.metric), seeds.values(y, cl.y_metric or cl.metric))
                out[#out + 1] = {claim = cl, group = g, d = d, verdict = M.verdict(d, cl.better, cl.margin)}
            end
        end
    end
    return out
end

-- Claims as markdown lines, one per group they are decided in (harness/descriptor.lua has the
-- claim's fields).
function M.claims(groups, by, claims)
    local lines = {}
    for _, r in ipairs(M.decide(groups, by, claims)) do
        local cl = r.claim
        lines[#lines + 1] = string.format("- **%s** %s: %s.%s - %s.%s = %s; %s.", r.group ~= "" and r.group or "all",
            cl.text, cl.x, cl.metric, cl.y, cl.y_metric or cl.metric, fmt_summary(r.d), r.verdict)
    end
    return lines
end


-- "us_legislation/x16/b3" -> "us_legislation/b3", 16; a group without a scale part -> itself, 1.
local function scale_of(group)
    local pre, s, post = group:match("^(.-)/?x(%d+)/(.*)$")
    if not s then return group, 1 end
    return (pre ~= "" and (pre .. "/") or "") .. post, tonumber(s)
end
M.scale_of = scale_of

local function cell_md(text) return (tostring(text):gsub("|", "\\|")) end

-- "`x - y` (metric)"; a claim on two metrics of one cell reads "`x`: metric - y_metric"
-- ("dga_fixed - dga_fixed" would say nothing).
local function comparison_md(cl)
    if cl.y_metric and cl.x == cl.y then return string.format("`%s`: %s - %s", cl.x, cl.metric, cl.y_metric) end
    return string.format("`%s - %s` (%s)", cl.x, cl.y, cl.y_metric and (cl.metric .. " - " .. cl.y_metric) or cl.metric)
end

-- The claims tables (results.md's opening and the README's digest): the paper's claims, each
-- with the sentence it tests, then our own questions; a row per group a claim is decided in.
-- decided: list of {section =, rows = M.decide(...)}.
function M.claims_tables(decided)
    local paper, ours, quotes, qorder = {}, {}, {}, {}
    for _, sec in ipairs(decided) do
        for _, r in ipairs(sec.rows) do
            local cl, d = r.claim, r.d
            local row = string.format("| %s | %s | %s | %s | %d | %s |",
                cell_md(cl.text), cell_md(sec.name .. ": " .. r.group), comparison_md(cl),
                cell_md(fmt_summary(d)), d.n or 0, M.verdict_word(r.verdict))
            if cl.source == "paper" then
                local key = cl.section .. "\0" .. cl.quote
                if not quotes[key] then
                    qorder[#qorder + 1] = key
                    quotes[key] = {n = #qorder, section = cl.section, quote = cl.quote}
                end
                paper[#paper + 1] = row:gsub("^| ", "| [" .. quotes[key].n .. "] ", 1)
            else
                ours[#ours + 1] = row
            end
        end
    end
    local head = "| claim | where | comparison (metric) | effect, 95% CI | seeds | verdict |\n|---|---|---|---|---:|---|"
    local out = {"### The paper's claims", ""}
    if #paper > 0 then
        out[#out + 1] = head
        for _, l in ipairs(paper) do out[#out + 1] = l end
        out[#out + 1] = ""
        for _, key in ipairs(qorder) do
            local q = quotes[key]
            out[#out + 1] = string.format("[%d] Fan, Grangier & Ablin (2024), %s: \"%s\"", q.n, q.section, q.quote)
            out[#out + 1] = ""
        end
    else
        out[#out + 1] = "(none decided by these runs)"
        out[#out + 1] = ""
    end
    out[#out + 1] = "### Our questions (not claims of the paper)"
    out[#out + 1] = ""
    if #ours > 0 then
        out[#out + 1] = head
        for _, l in ipairs(ours) do out[#out + 1] = l end
    else
        out[#out + 1] = "(none decided by these runs)"
    end
    return table.concat(out, "\n") .. "\n"
end

-- The README's digest: a row per claim and tokens per run, saying in which settings (a group
-- without its first part: lowdata's regime, mmlu_dist's level; the targets or sets counted
-- together) it is supported, contradicted or left open, with the range of its effect there;
-- the paper's claims first.
local function setting_of(group)
    local base, scale = scale_of(group)
    return base:match("^[^/]+/(.+)$"), scale
end
M.setting_of = setting_of

-- Settings sort in their natural order: b3, b10, binf; L1, L2, L3.
local function natural_key(text)
    return (text:gsub("inf", "999999999"):gsub("%d+", function(d) return string.format("%09d", d) end))
end

-- "supported 2, not established 1 of 3 (-0.0500 to 0.0100)": the verdicts of a claim's rows
-- and the range of their mean effects.
local function verdict_counts(rows)
    local count, lo, hi = {}, math.huge, -math.huge
    for _, r in ipairs(rows) do
        local w = M.verdict_word(r.verdict)
        count[w] = (count[w] or 0) + 1
        if r.d.mean then lo, hi = math.min(lo, r.d.mean), math.max(hi, r.d.mean) end
    end
    local parts = {}
    for _, w in ipairs{"supported", "contradicted", "not established"} do
        if count[w] then parts[#parts + 1] = string.format("%s %d", w, count[w]) end
    end
    local range = lo > hi and "" or lo == hi and string.format(" (%.4f)", lo)
                  or string.format(" (%.4f to %.4f)", lo, hi)
    return table.concat(parts, ", ") .. " of " .. #rows .. range
end

function M.claims_summary(decided)
    local rows = {paper = {}, ours = {}}
    for _, sec in ipairs(decided) do
        -- claim -> scale -> setting -> rows, each level in its first appearance's order
        local by, order = {}, {}
        for _, r in ipairs(sec.rows) do
            local setting, scale = setting_of(r.group)
            local id = r.claim.id
            if not by[id] then by[id] = {claim = r.claim, at = {}, scales = {}}; order[#order + 1] = id end
            local e = by[id]
            if not e.at[scale] then e.at[scale] = {settings = {}, names = {}, rows = {}}; e.scales[#e.scales + 1] = scale end
            local at = e.at[scale]
            setting = setting or ""
            if not at.settings[setting] then at.settings[setting] = {}; at.names[#at.names + 1] = setting end
            table.insert(at.settings[setting], r)
            table.insert(at.rows, r)
        end
        for _, id in ipairs(order) do
            local e = by[id]
            table.sort(e.scales)
            for _, scale in ipairs(e.scales) do
                local at, nmin, nmax = e.at[scale], math.huge, 0
                for _, r in ipairs(at.rows) do nmin, nmax = math.min(nmin, r.d.n or 0), math.max(nmax, r.d.n or 0) end
                table.sort(at.names, function(a, b) return natural_key(a) < natural_key(b) end)
                local parts = {}
                for _, setting in ipairs(at.names) do
                    local counts = verdict_counts(at.settings[setting])
                    parts[#parts + 1] = setting == "" and counts or (setting .. ": " .. counts)
                end
                local kind = e.claim.source == "paper" and "paper" or "ours"
                rows[kind][#rows[kind] + 1] = string.format("| %s | %s | x%d | %s | %s |", cell_md(e.claim.text),
                    sec.name, scale, table.concat(parts, "<br>"), nmin == nmax and tostring(nmin) or (nmin .. "-" .. nmax))
            end
        end
    end
    local head = "| claim | experiment | tokens per run | verdict in its groups (range of the mean effect x - y) | seeds |\n"
                 .. "|---|---|---|---|---|"
    local out = {"The paper's claims ([docs/results.md](docs/results.md) quotes the sentence each one tests):", "",
                 head}
    for _, l in ipairs(rows.paper) do out[#out + 1] = l end
    out[#out + 1] = ""
    out[#out + 1] = "Our own questions (not claims of the paper):"
    out[#out + 1] = ""
    out[#out + 1] = head
    for _, l in ipairs(rows.ours) do out[#out + 1] = l end
    return table.concat(out, "\n") .. "\n"
end

-- Which side of 0 a difference's interval lies on: 1 above, -1 below, 0 when it holds 0 or
-- has no interval.
local function side(d)
    if not d.n or d.n < stats.MIN_INTERVAL_N or not d.ci_lo then return 0 end
    if d.ci_lo > 0 then return 1 end
    if d.ci_hi < 0 then return -1 end
    return 0
end

-- How an effect moves along its scales (sorted), judged on the intervals, not the means alone:
-- a mean that crosses 0 inside its interval is no change of sign.
function M.scale_trend(ds, scales)
    local sides, pos, neg, zeros = {}, false, false, 0
    for i, d in ipairs(ds) do
        sides[i] = side(d)
        if sides[i] > 0 then pos = true elseif sides[i] < 0 then neg = true else zeros = zeros + 1 end
    end
    if pos and neg then return "changes sign" end
    if zeros == #ds then return "within noise at every scale" end
    if zeros == 0 then
        local up, down, top = true, true, 1
        for i = 2, #ds do
            local a, b = math.abs(ds[i - 1].mean), math.abs(ds[i].mean)
            if b < a then up = false end
            if b > a then down = false end
            if b > math.abs(ds[top].mean) then top = i end
        end
        if up then return "grows" end
        if down then return "shrinks" end
        return string.format("largest at x%d", scales[top])
    end
    -- established at some scales only: from one scale on, up to one, or neither
    local first, last = nil, nil
    for i = 1, #ds do
        if sides[i] ~= 0 then first = first or i; last = i end
    end
    local held = true
    for i = first, last do if sides[i] == 0 then held = false end end
    if held and last == #ds then return string.format("emerges at x%d", scales[first]) end
    if held and first == 1 then return string.format("fades by x%d", scales[last + 1]) end
    local at = {}
    for i = 1, #ds do if sides[i] ~= 0 then at[#at + 1] = "x" .. scales[i] end end
    return "established at " .. table.concat(at, ", ") .. " only"
end

-- How each claim's paired difference moves with the tokens per run: for every claim decided
-- at more than one scale of the same group, its effect at each scale and scale_trend's word.
-- Returns the markdown (nil when no claim has two scales) and the figure's series.
function M.scale_table(decided)
    local by, order = {}, {}
    for _, sec in ipairs(decided) do
        for _, r in ipairs(sec.rows) do
            local base, scale = scale_of(r.group)
            local key = sec.name .. "\0" .. r.claim.id .. "\0" .. base
            if not by[key] then
                by[key] = {claim = r.claim, base = base, section = sec.name, at = {}}
                order[#order + 1] = key
            end
            by[key].at[scale] = r
        end
    end
    local lines, series = {}, {}
    for _, key in ipairs(order) do
        local e = by[key]
        local scales = {}
        for sc in pairs(e.at) do scales[#scales + 1] = sc end
        table.sort(scales)
        if #scales > 1 then
            local ds = {}
            for i, sc in ipairs(scales) do ds[i] = e.at[sc].d end
            local trend = M.scale_trend(ds, scales)
            local cells, points = {}, {}
            for _, sc in ipairs(scales) do
                local d = e.at[sc].d
                cells[#cells + 1] = string.format("x%d: %s", sc, cell_md(fmt_summary(d)))
                local wide = d.n and d.n >= stats.MIN_INTERVAL_N
                points[#points + 1] = {x = sc, y = d.mean or 0, lo = wide and d.ci_lo or nil, hi = wide and d.ci_hi or nil}
            end
            lines[#lines + 1] = string.format("| %s | %s | %s | %s |", cell_md(e.claim.text), cell_md(e.base),
                                              table.concat(cells, "<br>"), trend)
            series[#series + 1] = {name = e.claim.id .. " " .. e.base, points = points, metric = e.claim.metric,
                                   against = e.claim.y}
        end
    end
    if #lines == 0 then return nil end
    return "| claim | where | effect by tokens per run (x1 = the base run) | with scale |\n|---|---|---|---|\n"
           .. table.concat(lines, "\n") .. "\n", series
end

-- The same claims decided in two studies (one design under two configurations, say): group by
-- group, both effects and verdicts. Returns the markdown (nil when no (claim, group) is decided
-- in both) and the counts: total (decided in both), same (the same verdict), opposite
-- (supported in one, contradicted in the other), here_only, there_only.
function M.agreement(here, there)
    local function index(decided)
        local by, order = {}, {}
        for _, sec in ipairs(decided) do
            for _, r in ipairs(sec.rows) do
                local key = sec.name .. "\0" .. r.claim.id .. "\0" .. r.group
                by[key] = {section = sec.name, row = r}
                order[#order + 1] = key
            end
        end
        return by, order
    end
    local a, order = index(here)
    local b, b_order = index(there)
    local n = {total = 0, same = 0, opposite = 0, here_only = 0, there_only = 0}
    local lines = {}
    for _, key in ipairs(order) do
        local x, y = a[key].row, b[key] and b[key].row
        if not y then
            n.here_only = n.here_only + 1
        else
            n.total = n.total + 1
            local vx, vy = M.verdict_word(x.verdict), M.verdict_word(y.verdict)
            local mark = "same"
            if vx == vy then
                n.same = n.same + 1
            elseif (vx == "supported" and vy == "contradicted") or (vx == "contradicted" and vy == "supported") then
                n.opposite = n.opposite + 1
                mark = "**opposite**"
            else
                mark = "differs"
            end
            lines[#lines + 1] = string.format("| %s | %s: %s | %s, %s | %s, %s | %s |", cell_md(x.claim.text),
                a[key].section, x.group, cell_md(fmt_summary(x.d)), vx, cell_md(fmt_summary(y.d)), vy, mark)
        end
    end
    for _, key in ipairs(b_order) do
        if not a[key] then n.there_only = n.there_only + 1 end
    end
    if n.total == 0 then return nil, n end
    return "| claim | where | here: effect, verdict | there: effect, verdict | |\n|---|---|---|---|---|\n"
           .. table.concat(lines, "\n") .. "\n", n
end

-- The scale figure's panels: one per metric and policy compared against, in the order first
-- seen. A gap in nats, a count of spikes and an L1 change share no axis, nor do ten nats
-- against IS and a few hundredths against natural.
function M.scale_panels(series)
    local panels, by_key = {}, {}
    for _, sr in ipairs(series) do
        local key = sr.metric .. "\0" .. (sr.against or "")
        local panel = by_key[key]
        if not panel then
            panel = {title = sr.against and string.format("%s: x - %s", sr.metric, sr.against) or sr.metric,
                     ylabel = "paired difference (x - y)", series = {}}
            by_key[key] = panel
            panels[#panels + 1] = panel
        end
        panel.series[#panel.series + 1] = sr
    end
    return panels
end

return M

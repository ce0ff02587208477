-- The study made again, checked against the committed one: for every experiment both hold,
-- whether the runs both trees hold are the same bit for bit (harness/compare.lua says what
-- "the same" covers), how much faster or slower each run was, and how long the study took.
--
--   dgalua scripts/study.lua --out /tmp/again --docs /tmp/again/docs 2> /tmp/again.log
--   dgalua scripts/reproduction.lua results/study /tmp/again --log /tmp/again.log \
--       [--out docs/reproduction.md]
--
-- --log is what study.lua wrote to stderr: its "== study:" lines give each experiment's command
-- and wall time (setup and store builds included) and the whole command's time. A study made
-- in several sittings (each `study.lua` command resumes where the last stopped) gives one
-- --log per sitting: the times are summed (a stopped sitting counted to its last finished run).
-- Without it only the runs' own times are reported. --a-log does the same for the sittings
-- that made A (the committed study's own time), --quick-log for `study.lua --quick`.
-- Exits non-zero when a run differs or none is shared.
local argparse = require "argparse"
require "cli.args"   -- usage errors exit with status 2
local compare = require "harness.compare"
local runinfo = require "util.runinfo"
local report = require "harness.report"
local progress = require "util.progress"

local M = {}

-- study.lua's "== study:" lines: {commands = {name = cmd}, seconds = {name = s}, total = s,
-- failed = {name = true}, interrupted = {name = true}, ran = {name = true when it ran runs},
-- report = true | false | nil (the log does not say)}. A sitting that was stopped (killed,
-- or its session ended) has no "finished in" line for its last experiment nor an "in all"
-- line: that experiment counts to the elapsed time of its last finished run (the sweep's
-- "run i of n: ..., 1:02:03 elapsed" lines, setup not included: a lower bound), and the
-- sitting's total is the sum of its experiments'.
function M.parse_log(text)
    local res = {commands = {}, seconds = {}, failed = {}, interrupted = {}, ran = {}}
    local pending, current, started, elapsed = nil, nil, {}, {}
    for line in (text .. "\n"):gmatch("([^\n]*)\n") do
        if pending then
            res.commands[pending] = line
            pending = nil
        end
        local name = line:match("^== study: ([%w_]+)$")
        if name then
            pending, current = name, name
            started[#started + 1] = name
        end
        local ran = line:match("^run %d+ of %d+: .-, ([%d:]+) elapsed")
        if ran and current then elapsed[current], res.ran[current] = progress.parse_duration(ran), true end
        local n, how, s = line:match("^== study: ([%w_]+) (%a+) in (%d+) s$")
        if n then
            res.seconds[n] = tonumber(s)
            if how ~= "finished" then res.failed[n] = true end
        end
        local total = line:match("^== study: (%d+) s in all$")
        if total then res.total = tonumber(total) end
        if line:match("^== study: report in %d+ s$") then res.report = true end
        if line == "== study: no report" then res.report = false end
    end
    local sum, stopped = 0, false
    for _, name in ipairs(started) do
        if not res.seconds[name] then
            res.seconds[name], res.interrupted[name], stopped = elapsed[name] or 0, true, true
        end
        sum = sum + res.seconds[name]
    end
    if not res.total and stopped then res.total, res.total_interrupted = sum, true end
    return res
end

-- Several sittings' logs as one: each experiment's seconds and the totals summed, its
-- command the last one given, failed when its last sitting did not finish it; the number of
-- sittings that were stopped before they finished. An experiment that one sitting finished
-- and a later one ran runs of again was made again (its records removed first): only the
-- later making counts, and it is marked `remade`.
function M.merge_logs(logs)
    local res = {commands = {}, seconds = {}, failed = {}, interrupted = {}, remade = {}, sittings = #logs,
                 stopped = 0}
    local finished = {}
    for _, log in ipairs(logs) do
        for name in pairs(log.ran or {}) do
            if finished[name] then
                if res.total then res.total = res.total - res.seconds[name] end
                res.seconds[name], res.remade[name], res.interrupted[name] = 0, true, nil
            end
        end
        for name, cmd in pairs(log.commands) do res.commands[name] = cmd end
        for name, s in pairs(log.seconds) do
            res.seconds[name] = (res.seconds[name] or 0) + s
            res.failed[name] = log.failed[name]
            if (log.interrupted or {})[name] then res.interrupted[name] = true end
            finished[name] = not log.failed[name] and not (log.interrupted or {})[name]
        end
        if log.total then res.total = (res.total or 0) + log.total end
        if log.total_interrupted then res.stopped = res.stopped + 1 end
        if log.report ~= nil then res.report = res.report or log.report end
    end
    return res
end

local function cpu_line()
    local text = runinfo.read_file("/proc/cpuinfo")
    if not text then return nil end
    local model = text:match("model name%s*:%s*([^\n]+)")
    local cores = 0
    for _ in text:gmatch("processor%s*:") do cores = cores + 1 end
    return string.format("%s, %d logical cores, AVX-512 %s", model or "unknown CPU", cores,
                         text:find("avx512f", 1, true) and "yes" or "no")
end

local function stopped_note(log)
    local n = log.stopped or (log.total_interrupted and 1) or 0
    if n == 0 then return "" end
    return string.format(" %d sitting%s stopped before %s finished: %s counted to the end of its last "
                         .. "finished run, so this is a lower bound.", n, n > 1 and "s" or "", n > 1 and "they" or "it",
                         n > 1 and "each is" or "it is")
end

-- Whether the study command's time holds its report, as study.lua's log says (logs written
-- before it did say nothing, and neither does this): the time table's words and the headline's.
local REPORT_WORDS = {[true] = {row = ", report included", ends = "the end of its report"},
                      [false] = {row = ", no report", ends = "its end (it wrote no report)"}}
local function report_words(log)
    if log.report == nil then return {row = "", ends = "its end"} end
    return REPORT_WORDS[log.report]
end

-- "## How long X took": each experiment's command time from X's study log(s), when given, and
-- (with dir) the time with a run going from X's own summary.json files.
local function how_long(out, which, dir, sections, log)
    out[#out + 1] = "## How long " .. which .. " took"
    out[#out + 1] = ""
    if log and next(log.seconds) then
        out[#out + 1] = "Each experiment's command, from the study's log (setup and store build included):"
        out[#out + 1] = ""
        out[#out + 1] = "| experiment | wall seconds | hours |"
        out[#out + 1] = "|---|---:|---:|"
        for _, sec in ipairs(sections) do
            local s = log.seconds[sec.name]
            if s then
                out[#out + 1] = string.format("| %s%s%s%s | %d | %.2f |", sec.name,
                                              log.failed[sec.name] and " (FAILED)" or "",
                                              (log.interrupted or {})[sec.name] and " (a sitting stopped)" or "",
                                              (log.remade or {})[sec.name]
                                                  and " (made again; its first making not counted)" or "",
                                              s, s / 3600)
            end
        end
        if log.total then
            out[#out + 1] = string.format("| **study command%s%s** | %d | %.2f |",
                                          (log.sittings or 1) > 1 and string.format(" (%d sittings)", log.sittings)
                                          or "", report_words(log).row, log.total, log.total / 3600)
        end
        out[#out + 1] = ""
        local note = stopped_note(log)
        if note ~= "" then
            out[#out + 1] = note:sub(2)
            out[#out + 1] = ""
        end
    end
    if not dir then return end
    out[#out + 1] = "From the runs' own start and end times (`summary.json`):"
    out[#out + 1] = ""
    out[#out + 1] = report.timing(dir) or "(no run recorded its times)"
    out[#out + 1] = ""
end

-- Compares every experiment of the study under a with the one under b. Returns the markdown
-- and the totals {compared, same, different, excepted}. except: {metric = why} (compare.trees).
-- opts.a_log: the (merged) logs of the study command(s) that made A, for a "How long A took"
-- section (a committed study made in sittings gives its time here); opts.quick_log: the log
-- of `study.lua --quick`, for the smoke run's time.
function M.document(a, b, log, note, except, opts)
    opts = opts or {}
    local out = {"", ""}
    local intro = "Generated on " .. os.date("!%Y-%m-%d") .. " by `scripts/reproduction.lua` from the run "
                  .. "directories under `" .. a .. "` (A, committed) and `" .. b .. "` (B, made again)"
                  .. (log and " and the log of the study command that made B" or "")
                  .. "; no number here is typed by hand."
    local cpu = cpu_line()
    if cpu then intro = intro .. " Machine that generated it: " .. cpu .. "." end
    out[#out + 1] = intro
    out[#out + 1] = ""
    if note then
        out[#out + 1] = note
        out[#out + 1] = ""
    end
    local total = {compared = 0, same = 0, different = 0, excepted = 0}
    local body, compared = {}, {}
    local sections = report.sections(a)
    for _, sec in ipairs(sections) do
        local da, db = a .. "/" .. sec.name, b .. "/" .. sec.name
        if runinfo.is_dir(da) and runinfo.is_dir(db) then
            compared[#compared + 1] = sec.name
            local res = compare.trees(da, db, {except = except})
            total.compared = total.compared + res.compared
            total.same = total.same + res.same
            total.different = total.different + #res.different
            total.excepted = total.excepted + #res.excepted
            body[#body + 1] = "## " .. sec.name
            body[#body + 1] = ""
            if log and log.commands[sec.name] then
                body[#body + 1] = "`" .. log.commands[sec.name] .. "`"
                body[#body + 1] = ""
            end
            body[#body + 1] = (compare.markdown(da, db, res):gsub("\n+$", ""))
            body[#body + 1] = ""
        end
    end
    -- The headline says what B holds: a check of one experiment is not "the whole study".
    out[1] = "# Reproduction: " .. (#compared == #sections and "the whole study"
                                    or table.concat(compared, ", ") .. string.format(" (%d of the study's %d "
                                       .. "experiments)", #compared, #sections)) .. " made again"
    if total.excepted > 0 then
        local names = compare.except_names(except)
        out[#out + 1] = string.format("**%d of %d runs the same, bit for bit; %d the same but for %s (the "
                                      .. "reason is given below); %d different otherwise.**", total.same,
                                      total.compared, total.excepted, table.concat(names, ", "), total.different)
    else
        out[#out + 1] = string.format("**%d of %d runs the same, bit for bit; %d different.**", total.same,
                                      total.compared, total.different)
    end
    if log and log.total then
        out[#out + 1] = ""
        out[#out + 1] = string.format("**The study command%s took %d s (%.2f h)**, from its start to %s, "
                                      .. "store builds and setup included.%s",
                                      (log.sittings or 1) > 1 and string.format(" (in %d sittings, summed)",
                                                                                log.sittings) or "",
                                      log.total, log.total / 3600,
                                      report_words(log).ends, stopped_note(log))
    end
    out[#out + 1] = ""
    for _, line in ipairs(body) do out[#out + 1] = line end
    how_long(out, "B", b, sections, log)
    if opts.a_log then how_long(out, "A", a, sections, opts.a_log) end
    if opts.quick_log then how_long(out, "`study.lua --quick`", nil, sections, opts.quick_log) end
    return table.concat(out, "\n"), total
end

local function main(args)
    local p = argparse("reproduction.lua", "Check a study, or some of its experiments, made again against the committed one.")
    p:argument("a", "The committed study (results/study).")
    p:argument("b", "The study made again by the same command.")
    p:option("--log", "study.lua's stderr for the run that made b (once per sitting: the times are summed).")
        :count("*")
    p:option("--a-log", "study.lua's stderr for the sitting(s) that made a: adds how long A took.")
        :count("*")
    p:option("--quick-log", "study.lua --quick's stderr: adds how long the smoke run took.")
    p:option("--out", "Also write the markdown to this file.")
    p:option("--note", "A paragraph said after the introduction (what was run, and where).")
    p:option("--except", "METRIC=why: runs whose logs are the same and whose summaries differ only in this "
             .. "metric are counted apart, with the reason (a known change since A was made).")
        :count("*")
    local o = p:parse(args)
    for _, dir in ipairs({o.a, o.b}) do
        if not runinfo.is_dir(dir) then p:error(dir .. " is not a directory") end
    end
    if o.out then dga.check_output(o.out, {a = o.a, b = o.b, ["--log"] = o.log, ["--a-log"] = o.a_log,
                                              ["--quick-log"] = o.quick_log}) end
    local function read_logs(paths)
        if #paths == 0 then return nil end
        local logs = {}
        for _, path in ipairs(paths) do
            local text = runinfo.read_file(path)
            if not text then p:error("cannot read " .. path) end
            logs[#logs + 1] = M.parse_log(text)
        end
        return M.merge_logs(logs)
    end
    local log, a_log = read_logs(o.log), read_logs(o.a_log)
    local quick_log = read_logs({o.quick_log})
    local except
    for _, e in ipairs(o.except) do
        local name, why = e:match("^([%w_]+)=(.+)$")
        if not name then p:error("--except: METRIC=why, got " .. e) end
        except = except or {}
        except[name] = why
    end
    local ok, md, total = pcall(M.document, o.a, o.b, log, o.note, except, {a_log = a_log, quick_log = quick_log})
    if not ok then p:error(tostring(md)) end
    -- nothing to say: an earlier --out stays as it was
    if total.compared == 0 then p:error("no run is in both " .. o.a .. " and " .. o.b .. "; nothing written") end
    io.write(md)
    if o.out then runinfo.write_atomic(o.out, md) end
    if total.different > 0 then os.exit(1) end
end

local modname = ...
if modname == "reproduction" then return M end
main({...})
return M

-- scripts/reproduction.lua: a study made again against the committed one, experiment by
-- experiment; the study log's times; a non-zero exit when a run differs.
local h = require "tests.lua.helpers"
local json = require "util.json"
local reproduction = require "reproduction"

local base
teardown(function() h.rm(base) end)

local function run(dir, o)
    assert(os.execute("mkdir -p " .. h.shell_quote(dir)))
    h.write(dir .. "/metrics.csv", "step,specific_loss,seconds\n0,6.5,0.1\n60," .. (o.loss or "5.25") .. ","
                                   .. o.seconds .. "\n")
    h.write(dir .. "/summary.json", json.encode({seconds = o.seconds, finished = o.finished,
                                                 metrics = {specific_final = 5.25}}))
end

local LOG = table.concat({
    "== study: lowdata",
    "./dgalua experiments/lowdata.lua --out again/lowdata --seeds 1,2,3",
    "run 1 of 63: us_legislation/b3/uniform, seed 1",
    "== study: lowdata finished in 2510 s",
    "== study: recover",
    "./dgalua experiments/recover.lua --out again/recover",
    "== study: recover FAILED in 12 s",
    "wrote again/docs/results.md",
    "== study: report in 40 s",
    "== study: 2600 s in all",
}, "\n") .. "\n"

describe("reproduction", function()
    local a, b
    setup(function()
        base = h.tmpdir()
        a, b = base .. "/a", base .. "/b"
        run(a .. "/lowdata/t/natural/seed-1", {seconds = 100, finished = "2026-11-25T08:00:00Z"})
        run(b .. "/lowdata/t/natural/seed-1", {seconds = 50, finished = "2026-11-25T10:00:50Z"})
        run(a .. "/recover/dga/seed-1", {seconds = 90, finished = "2026-11-25T08:10:00Z"})
        run(b .. "/recover/dga/seed-1", {seconds = 30, finished = "2026-11-25T10:02:00Z"})
        run(a .. "/mmlu_dist/x/seed-1", {seconds = 10})    -- an experiment B did not run
    end)

    it("reads each experiment's command and time and the whole command's time from the log", function()
        local log = reproduction.parse_log(LOG)
        assert.are.equal("./dgalua experiments/lowdata.lua --out again/lowdata --seeds 1,2,3", log.commands.lowdata)
        assert.are.equal(2510, log.seconds.lowdata)
        assert.are.equal(12, log.seconds.recover)
        assert.is_true(log.failed.recover)
        assert.is_nil(log.failed.lowdata)
        assert.are.equal(2600, log.total)
    end)

    it("counts a stopped sitting to its last finished run, and says the sum is a lower bound", function()
        local stopped = table.concat({
            "== study: recover",
            "./dgalua experiments/recover.lua --out again/recover",
            "== study: recover finished in 300 s",
            "== study: lowdata",
            "./dgalua experiments/lowdata.lua --out again/lowdata",
            "lowdata: 222 runs, 2 at a time (launcher process 1); each writes <run dir>/log.txt",
            "run 1 of 222: t/b3/natural, seed 1, 0:41 elapsed, ETA 7:35:10  (again/lowdata/t/b3/natural/seed-1/log.txt)",
            "run 2 of 222: t/b3/is, seed 1, 1:02:03 elapsed, ETA 7:01:00  (again/lowdata/t/b3/is/seed-1/log.txt)",
        }, "\n") .. "\n"
        local log = reproduction.parse_log(stopped)
        assert.are.equal(300, log.seconds.recover)
        assert.is_nil(log.interrupted.recover)
        assert.are.equal(3723, log.seconds.lowdata)
        assert.is_true(log.interrupted.lowdata)
        assert.are.equal(4023, log.total)
        assert.is_true(log.total_interrupted)
        local merged = reproduction.merge_logs({log, reproduction.parse_log(LOG)})
        assert.are.equal(3723 + 2510, merged.seconds.lowdata)
        assert.are.equal(4023 + 2600, merged.total)
        assert.are.equal(1, merged.stopped)
        local md = reproduction.document(a, b, merged)
        h.contains(md, "took 6623 s (1.84 h)**, from its start to the end of its report, store builds and setup "
                       .. "included. 1 sitting stopped before it finished: it is counted to the end of its last finished "
                       .. "run, so this is a lower bound.")
        h.contains(md, "| lowdata (a sitting stopped) | 6233 | 1.73 |")
        -- the same sittings as the ones that made A: a section of their own, after B's
        local with_a = reproduction.document(a, b, nil, nil, nil, {a_log = merged})
        local at = with_a:find("## How long A took\n", 1, true)
        assert.is_truthy(at)
        assert.is_truthy(with_a:find("## How long B took\n", 1, true) < at)
        local a_part = with_a:sub(at)
        h.contains(a_part, "| lowdata (a sitting stopped) | 6233 | 1.73 |")
        h.contains(a_part, "| **study command (2 sittings), report included** | 6623 | 1.84 |")
        h.contains(a_part, "1 sitting stopped before it finished")
        -- A's runs: lowdata 08:00:00 (100 s) and recover 08:10:00 (90 s), mmlu_dist without times
        h.contains(a_part, "| **whole study** | | | 190 (0.05 h) |")
    end)

    it("sums the times of a study made in several sittings", function()
        local second = table.concat({
            "== study: recover",
            "./dgalua experiments/recover.lua --out again/recover",
            "== study: recover finished in 300 s",
            "== study: 310 s in all",
        }, "\n") .. "\n"
        local log = reproduction.merge_logs({reproduction.parse_log(LOG), reproduction.parse_log(second)})
        assert.are.equal(2510, log.seconds.lowdata)
        assert.are.equal(312, log.seconds.recover)
        assert.is_nil(log.failed.recover)     -- its last sitting finished it
        assert.are.equal(2910, log.total)
        assert.are.equal(2, log.sittings)
        local md = reproduction.document(a, b, log)
        h.contains(md, "**The study command (in 2 sittings, summed) took 2910 s (0.81 h)**")
        h.contains(md, "| recover | 312 | 0.09 |")
        if not h.DGALUA then return end
        h.write(base .. "/one.log", LOG)
        h.write(base .. "/two.log", second)
        local rc, out = h.run(h.shell_quote(h.DGALUA) .. " scripts/reproduction.lua " .. h.shell_quote(a) .. " "
                              .. h.shell_quote(b) .. " --log " .. h.shell_quote(base .. "/one.log") .. " --log "
                              .. h.shell_quote(base .. "/two.log"), base .. "/err.txt")
        assert.are.equal(0, rc)
        h.contains(out, "(in 2 sittings, summed) took 2910 s")
    end)

    it("counts the runs that are the same and says how long B took", function()
        local md, total = reproduction.document(a, b, reproduction.parse_log(LOG))
        assert.are.same({compared = 2, same = 2, different = 0, excepted = 0}, total)
        h.contains(md, "**2 of 2 runs the same, bit for bit; 0 different.**")
        -- A also holds mmlu_dist, which B did not run: the headline does not say "the whole study"
        h.contains(md, "# Reproduction: lowdata, recover (2 of the study's 3 experiments) made again\n")
        h.contains(md, "**The study command took 2600 s (0.72 h)**")
        h.contains(md, "| recover (FAILED) | 12 | 0.00 |")
        h.contains(md, "Run time, A over B: 2.00")
        -- B's runs: lowdata 10:00:00-10:00:50, recover 10:01:30-10:02:00: 80 s with a run going
        -- (the 40 s between them are not counted: a study made in sittings skips the hours between)
        h.contains(md, "| **whole study** | | | 80 (0.02 h) |")
        assert.is_nil(md:find("## mmlu_dist", 1, true))
    end)

    it("gives the smoke run's time from its log", function()
        local md = reproduction.document(a, b, nil, nil, nil, {quick_log = reproduction.parse_log(LOG)})
        local at = md:find("## How long `study.lua --quick` took\n", 1, true)
        assert.is_truthy(at)
        local part = md:sub(at)
        h.contains(part, "| **study command, report included** | 2600 | 0.72 |")
        h.contains(part, "| lowdata | 2510 | 0.70 |")
        -- its runs are not kept: no table from run records in its section
        assert.is_nil(part:find("summary.json", 1, true))
    end)

    it("counts only the later making of an experiment made again in a later sitting", function()
        local again = reproduction.parse_log(table.concat({
            "== study: lowdata",
            "./dgalua experiments/lowdata.lua --out again/lowdata",
            "run 1 of 2: t/b3/natural, seed 1, 0:40 elapsed, ETA 0:40  (again/lowdata/t/b3/natural/seed-1/log.txt)",
            "== study: lowdata finished in 1000 s",
            "== study: 1005 s in all",
        }, "\n") .. "\n")
        assert.is_true(again.ran.lowdata)
        local merged = reproduction.merge_logs({reproduction.parse_log(LOG), again})
        assert.are.equal(1000, merged.seconds.lowdata)
        assert.is_true(merged.remade.lowdata)
        assert.are.equal(12, merged.seconds.recover)
        assert.are.equal(2600 - 2510 + 1005, merged.total)
        local md = reproduction.document(a, b, nil, nil, nil, {a_log = merged})
        h.contains(md, "| lowdata (made again; its first making not counted) | 1000 | 0.28 |")
        -- a later sitting that finds every run done runs none: it adds its time, nothing is made again
        local resumed = reproduction.parse_log("== study: lowdata\ncmd\n== study: lowdata finished in 3 s\n"
                                               .. "== study: 4 s in all\n")
        local both = reproduction.merge_logs({reproduction.parse_log(LOG), resumed})
        assert.are.equal(2513, both.seconds.lowdata)
        assert.is_nil(both.remade.lowdata)
        -- a stopped sitting resumed is not a second making either (LOG's first line ran a run)
        local stopped = reproduction.parse_log("== study: lowdata\ncmd\nrun 1 of 9: t/b3/natural, seed 1, 0:10 "
                                               .. "elapsed, ETA 1:00  (x)\n")
        local resumed2 = reproduction.merge_logs({stopped, reproduction.parse_log(LOG)})
        assert.are.equal(10 + 2510, resumed2.seconds.lowdata)
        assert.is_nil(resumed2.remade.lowdata)
    end)

    it("says whether the study command's time holds a report, and only when its log says", function()
        local function sitting(last)
            return reproduction.parse_log(table.concat({"== study: recover", "./dgalua experiments/recover.lua",
                                                        "== study: recover finished in 300 s", last,
                                                        "== study: 301 s in all"}, "\n") .. "\n")
        end
        local none = sitting("== study: no report")
        assert.is_false(none.report)
        local md = reproduction.document(a, b, none, nil, nil, {a_log = none})
        h.contains(md, "took 301 s (0.08 h)**, from its start to its end (it wrote no report), store builds")
        h.contains(md, "| **study command, no report** | 301 | 0.08 |")
        -- a log from before study.lua said so: neither claimed
        local old = sitting("")
        assert.is_nil(old.report)
        md = reproduction.document(a, b, old, nil, nil, {a_log = old})
        h.contains(md, "| **study command** | 301 | 0.08 |")
        h.contains(md, "took 301 s (0.08 h)**, from its start to its end, store builds")
        -- sittings without a report and one with it: the sum holds a report
        local merged = reproduction.merge_logs({none, sitting("== study: report in 1 s")})
        assert.is_true(merged.report)
        assert.is_false(reproduction.merge_logs({none, old}).report)
    end)

    it("calls it the whole study when B holds every experiment of A", function()
        local a1, b1 = base .. "/whole_a", base .. "/whole_b"
        run(a1 .. "/recover/dga/seed-1", {seconds = 90, finished = "2026-11-25T08:10:00Z"})
        run(b1 .. "/recover/dga/seed-1", {seconds = 30, finished = "2026-11-25T10:02:00Z"})
        local md = reproduction.document(a1, b1)
        h.contains(md, "# Reproduction: the whole study made again\n")
    end)

    it("exits non-zero from the command line when a run differs", function()
        if not h.DGALUA then pending("DGALUA not set") return end
        local cmd = h.shell_quote(h.DGALUA) .. " scripts/reproduction.lua " .. h.shell_quote(a) .. " "
                    .. h.shell_quote(b)
        local rc = h.run(cmd .. " --out " .. h.shell_quote(base .. "/r.md"), base .. "/err.txt")
        assert.are.equal(0, rc)
        h.contains(h.read(base .. "/r.md"), "2 of 2 runs the same")
        run(b .. "/recover/dga/seed-1", {seconds = 30, loss = "5.2500001", finished = "2026-11-25T10:02:00Z"})
        local out
        rc, out = h.run(cmd, base .. "/err.txt")
        assert.are_not.equal(0, rc)
        h.contains(out, "1 of 2 runs the same, bit for bit; 1 different")
        h.contains(out, "`dga/seed-1`: metrics.csv, row 2")
        -- a difference only in an excepted summary metric is counted apart, and exits 0
        run(b .. "/recover/dga/seed-1", {seconds = 30, finished = "2026-11-25T10:02:00Z"})
        h.write(b .. "/recover/dga/seed-1/summary.json", json.encode({seconds = 30, finished = "2026-11-25T10:02:00Z",
                                                                   metrics = {specific_final = 5.2500000001}}))
        rc, out = h.run(cmd .. " --except 'specific_final=summed in basis order since'", base .. "/err.txt")
        assert.are.equal(0, rc, out)
        h.contains(out, "**1 of 2 runs the same, bit for bit; 1 the same but for specific_final")
        h.contains(out, "0 different otherwise.**")
        rc = h.run(cmd, base .. "/err.txt")
        assert.are_not.equal(0, rc)
    end)

    it("refuses a missing study, and two with no run in common, without touching an earlier --out", function()
        if not h.DGALUA then pending("DGALUA not set") return end
        local empty = h.tmpdir("empty")
        h.write(base .. "/kept.md", "an earlier check\n")
        local cmd = h.shell_quote(h.DGALUA) .. " scripts/reproduction.lua "
        local rc, out, err = h.run(cmd .. h.shell_quote(a) .. " " .. h.shell_quote(empty .. "/no/such") .. " --out "
                                   .. h.shell_quote(base .. "/kept.md"), base .. "/err.txt")
        assert.are.equal(2, rc, out .. err)
        h.contains(err, empty .. "/no/such is not a directory")
        rc, out, err = h.run(cmd .. h.shell_quote(a) .. " " .. h.shell_quote(empty) .. " --out "
                             .. h.shell_quote(base .. "/kept.md"), base .. "/err.txt")
        assert.are.equal(2, rc, out .. err)
        h.contains(err, "no run is in both " .. a .. " and " .. empty .. "; nothing written")
        assert.are.equal("", out)
        assert.are.equal("an earlier check\n", h.read(base .. "/kept.md"))
        h.rm(empty)
    end)
end)

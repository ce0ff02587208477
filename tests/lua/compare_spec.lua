-- harness.compare and scripts/compare_runs.lua: runs the same but for their wall times count as
-- the same; a changed value, row or metric is named; runs in one tree only are counted.
local h = require "tests.lua.helpers"
local compare = require "harness.compare"
local json = require "util.json"

local base
teardown(function() h.rm(base) end)

-- One run directory: metrics.csv (with a seconds column), weights.csv, summary.json.
local function run(dir, o)
    assert(os.execute("mkdir -p " .. h.shell_quote(dir)))
    h.write(dir .. "/metrics.csv", "step,specific_loss,seconds\n0,6.5,0.1\n60," .. (o.loss or "5.25")
                                   .. "," .. o.seconds .. "\n")
    h.write(dir .. "/weights.csv", "step,w_1,w_2\n0,0.5,0.5\n")
    h.write(dir .. "/summary.json", json.encode({seconds = o.seconds, metrics = {specific_final = o.final or 5.25}}))
end

describe("compare", function()
    local a, b
    setup(function()
        base = h.tmpdir()
        a, b = base .. "/a", base .. "/b"
        run(a .. "/t/natural/seed-1", {seconds = 100})
        run(b .. "/t/natural/seed-1", {seconds = 50})           -- the same but twice as fast
        run(a .. "/t/dga/seed-1", {seconds = 90})
        run(b .. "/t/dga/seed-1", {seconds = 30, loss = "5.2500001"})
        run(a .. "/t/is/seed-1", {seconds = 80})
        run(b .. "/t/is/seed-1", {seconds = 40, final = 5.5})   -- logs equal, summary not
        run(a .. "/t/is/seed-2", {seconds = 80})                -- only in a
    end)

    it("counts the same runs, names the first difference, and the time ratio", function()
        local res = compare.trees(a, b)
        assert.are.equal(3, res.compared)
        assert.are.equal(1, res.same)
        assert.are.equal(2, #res.different)
        assert.are.equal(1, res.only_a)
        assert.are.equal(0, res.only_b)
        assert.are.equal("t/dga/seed-1", res.different[1].run)
        h.contains(res.different[1].why, "metrics.csv, row 2: 60,5.25 against 60,5.2500001")
        assert.are.equal("t/is/seed-1", res.different[2].run)
        h.contains(res.different[2].why, "summary.json metrics: specific_final 5.25 against 5.5")
        -- (90/30 + 80/40 + 100/50) / 3
        assert.is_true(math.abs(res.ratio.mean - 7 / 3) < 1e-12)
        assert.are.equal(2, res.ratio_min)
        assert.are.equal(3, res.ratio_max)
        h.contains(compare.markdown(a, b, res), "| 3 | 1 | 2 | 1 | 0 |")
    end)

    it("counts apart the runs that differ only in a metric known to have changed", function()
        local res = compare.trees(a, b, {except = {specific_final = "summed in another order"}})
        assert.are.equal(1, res.same)
        assert.are.equal(1, #res.different)            -- dga: its metrics.csv differs
        assert.are.equal("t/dga/seed-1", res.different[1].run)
        assert.are.equal(1, #res.excepted)             -- is: only specific_final differs
        assert.are.equal("t/is/seed-1", res.excepted[1].run)
        local md = compare.markdown(a, b, res)
        h.contains(md, "| 3 | 1 | 2 | 1 | 0 |")
        h.contains(md, "1 of the 2 different runs have the same logs and differ only in specific_final "
                       .. "(specific_final: summed in another order); 1 differ otherwise.")
    end)

    it("compares a same_as run through the run it names, beside it in its own tree", function()
        local c, d = base .. "/c2", base .. "/d2"
        run(c .. "/x/natural/seed-1", {seconds = 10})
        run(c .. "/y/natural/seed-1", {seconds = 10})
        run(d .. "/x/natural/seed-1", {seconds = 10})
        -- d's y/natural is an alias whose recorded same_as_dir is where the tree was made
        assert(os.execute("mkdir -p " .. h.shell_quote(d .. "/y/natural/seed-1")))
        h.write(d .. "/y/natural/seed-1/summary.json", json.encode({cell = "y/natural", seed = 1, seconds = 0,
            same_as = "x/natural", same_as_dir = "elsewhere/x/natural/seed-1", metrics = {specific_final = 5.25}}))
        local res = compare.trees(c, d)
        assert.are.equal(2, res.compared)
        assert.are.equal(2, res.same)
        assert.are.equal(1, res.aliases)
        h.contains(compare.markdown(c, d, res), "1 of the runs compared are `same_as` runs")
        -- the alias's source differing is a difference of the alias too
        h.write(d .. "/x/natural/seed-1/weights.csv", "step,w_1,w_2\n0,0.25,0.75\n")
        res = compare.trees(c, d)
        assert.are.equal(0, res.same)
        assert.are.equal("y/natural/seed-1", res.different[2].run)
        h.contains(res.different[2].why, "weights.csv, row 1: 0,0.5,0.5 against 0,0.25,0.75")
    end)

    it("exits non-zero from the command line when a run differs, and zero when none does", function()
        if not h.DGALUA then pending("DGALUA not set") return end
        local rc, out = h.run(h.shell_quote(h.DGALUA) .. " scripts/compare_runs.lua " .. h.shell_quote(a) .. " "
                              .. h.shell_quote(b), base .. "/err.txt")
        assert.are_not.equal(0, rc)
        h.contains(out, "t/dga/seed-1")
        local c = base .. "/c"
        run(c .. "/t/natural/seed-1", {seconds = 70})
        rc, out = h.run(h.shell_quote(h.DGALUA) .. " scripts/compare_runs.lua " .. h.shell_quote(c) .. " "
                        .. h.shell_quote(a) .. " --out " .. h.shell_quote(base .. "/r.md"), base .. "/err.txt")
        assert.are.equal(0, rc)
        h.contains(h.read(base .. "/r.md"), "| 1 | 1 | 0 | 0 | 3 |")
        h.contains(out, "Run time, A over B: 0.70")
    end)
end)

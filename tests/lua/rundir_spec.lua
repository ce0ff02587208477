-- The run-directory module: its reader on a run the trainer wrote, summary.json, and the one
-- seed aggregation (harness/seeds.lua) that harness/aggregate.lua and scripts/report.lua share.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua"
package.path = here .. "/?.lua;" .. package.path
local trainer = require "trainer"
local rundir = require "rundir"
local seeds = require "harness.seeds"
local json = require "util.json"
local runinfo = require "util.runinfo"
local fixture = require "trainer_fixture"
local h = require "tests.lua.helpers"

describe("rundir.open: a run the trainer wrote, read back", function()
    local base, dir
    teardown(function() h.rm(base) end)
    setup(function()
        base = h.tmpdir()
        dir = base .. "/run"
        -- domain 3 gets most of the mass and is capped at one epoch: an events.log line
        trainer.run(fixture.config(dir, {epoch_cap = 1, policy = {name = "importance"},
                                         is_histogram = dga.tensor{0.1, 0.1, 0.8}}), {quiet = true})
    end)

    it("gives every file through one reader", function()
        local r = rundir.open(dir)
        local cfg = r:config()
        assert.are.equal("tiny", cfg.name)
        assert.are.equal("int32", cfg.specific.train:dtype())           -- tensors loaded from data/
        assert.are.same({tensor_file = "data/specific.train.npy"}, r:config{tensors = false}.specific.train)
        local m = r:metrics()
        assert.are.equal(24, m[#m].step)
        assert.are.equal(7, #m)                                          -- steps 0, 4, ..., 24
        assert.are.equal(1, r:weights()[1].domain)
        assert.are.equal("random", r:domain_names()[2])
        local capped = 0
        for _, e in ipairs(r:epochs()) do if e.step == 24 then capped = capped + e.capped end end
        assert.are.equal(1, capped)
        assert.are.equal(1, #r:events())
        h.contains(r:events()[1], "reached the epoch cap")
        assert.are.same({}, r:alignments())                              -- importance never aligns
        assert.are.same({}, r:policy_log())
        assert.is_nil(r:summary())
        assert.is_nil(r:log_text())
        assert.are.equal(dir .. "/ckpt-00000024.safetensors", r:latest_checkpoint())
        assert.are.equal(24, r:checkpoints()[1].step)
    end)

    it("gives the last evaluation, and nothing for another step", function()
        local r = rundir.open(dir)
        local row = r:metrics()[7]
        local ev = r:last_eval(24)
        assert.are.equal(row.specific_loss, ev.specific)
        assert.are.equal(row.generic_loss, ev.generic)
        assert.are.same({row.basis_1_loss, row.basis_2_loss}, ev.basis)
        assert.are.equal((row.basis_1_loss + row.basis_2_loss) / 2, ev.basis_mean)
        assert.is_nil(r:last_eval(20))
        assert.is_nil(rundir.open(dir .. "/nothing"):last_eval())
    end)
end)

describe("summary.json and the seed aggregation", function()
    local made = {}
    teardown(function() for _, d in ipairs(made) do h.rm(d) end end)
    local function tmp()
        made[#made + 1] = h.tmpdir()
        return made[#made]
    end
    local function put(root, cell, seed, metrics)
        local d = string.format("%s/%s/seed-%d", root, cell, seed)
        runinfo.mkdir_p(d)
        rundir.write_summary(d, {cell = cell, seed = seed, metrics = metrics})
        return d
    end

    it("writes NaN and infinities as strings and reads them back as numbers", function()
        local root = tmp()
        local d = put(root, "g/x", 1, {loss = 0 / 0, big = math.huge, small = -math.huge, n = 3})
        h.contains(h.read(d .. "/summary.json"), '"loss": "nan"')
        local s = rundir.open(d):summary()
        assert.is_true(rundir.number(s.metrics.loss) ~= rundir.number(s.metrics.loss))
        assert.are.equal(math.huge, rundir.number(s.metrics.big))
        assert.are.equal(-math.huge, rundir.number(s.metrics.small))
        assert.are.same({d}, rundir.find(root))
        runinfo.mkdir_p(root .. "/g/y/seed-1")
        h.write(root .. "/g/y/seed-1/summary.json", '{"cell": "g/y", "metrics": {}}')
        h.raises("g/y/seed-1/summary.json: not a sweep summary (needs cell, seed and metrics)",
                 rundir.read_summary, root .. "/g/y/seed-1", true)
    end)

    it("collects cells over seeds and compares them with the reference, a diverged seed kept", function()
        local root = tmp()
        for seed, v in ipairs{6.0, 6.2, 6.4} do put(root, "g/natural", seed, {loss = v}) end
        for seed, v in ipairs{5.5, 5.9, 0 / 0} do put(root, "g/dga", seed, {loss = v}) end
        local col = seeds.collect(root)
        assert.are.same({"g/dga", "g/natural"}, col.order)              -- names sorted
        local dga_cell, nat = col.cells["g/dga"], col.cells["g/natural"]
        assert.are.equal("g", dga_cell.group)
        assert.are.equal("dga", dga_cell.label)
        local r = seeds.compare(dga_cell, nat, "loss")
        assert.are.equal(3, r.summary.n)
        assert.is_true(r.summary.mean ~= r.summary.mean)                 -- the NaN shows in the mean
        assert.are.equal(3, r.ref_n)
        assert.is_true(math.abs(r.ref_sd - 0.2) < 1e-12)
        assert.is_true(math.abs(r.ref_gap - (0.2 + 0.4 + 0.2) / 3) < 1e-12)
        local agg = require("harness.aggregate"){out = root, reference = "natural", quiet = true}
        local report = require "harness.report"
        local _, by = report.groups(report.collect(root))
        local md = report.group_table(by.g, {"loss"}, "natural")
        -- both read the same numbers: aggregate's row for g/dga and report's table
        for _, row in ipairs(agg.rows) do
            if row.cell == "g/natural" then
                h.contains(md, string.format("%.4f / %.4f", row.ref_sd, row.ref_gap))
            end
        end
        assert.truthy(md:find("| dga | 3 | %-?nan"), md)
        local j = json.read_file(root .. "/aggregate.json")
        assert.are.equal("nan", j.rows[2].mean)
    end)
end)

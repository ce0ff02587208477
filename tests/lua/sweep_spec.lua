-- harness.sweep, cli.overrides and harness.aggregate: --set checks, policy lists, finished
-- pairs never recomputed (in process, after a killed sweep, and through --jobs children), a
-- 2-seed x 2-policy sweep through the real trainer, and aggregation from run directories.
local h = require "tests.lua.helpers"
local sweep = require "harness.sweep"
local overrides = require "cli.overrides"
local aggregate = require "harness.aggregate"
local json = require "util.json"
local csvlog = require "util.csvlog"
local argparse = require "argparse"
local exp = require "harness.experiment"

local shell_quote, contains = h.shell_quote, h.contains
local DGALUA = h.DGALUA
local SCRIPT = "tests/lua/sweep_script.lua"

local base
local function tmp(name)
    base = base or h.tmpdir()
    return base .. "/" .. name
end
teardown(function() h.rm(base) end)

local function parser()
    local p = argparse("t", "test")
    exp.add_common_options(p, {out = "runs/t"})
    sweep.add_options(p)
    return p
end

local function parse(argv)
    local ok, a = parser():pparse(argv)
    assert(ok, tostring(a))
    return a
end

-- The message of a usage error raised by fn.
local function usage_err(fn, ...)
    local ok, e = pcall(fn, ...)
    assert.is_false(ok, "expected an error")
    return tostring(e)
end

local function lines_of(path)
    local out = {}
    for line in (h.read(path) or ""):gmatch("[^\n]+") do out[#out + 1] = line end
    return out
end

-- Runs the sweep script; returns exit code, stdout, stderr.
local function script(args)
    return h.run(shell_quote(DGALUA) .. " " .. SCRIPT .. " --threads 1 " .. args, tmp("stderr.txt"))
end

describe("--set overrides", function()
    local function cfg()
        return {run_dir = "/tmp/x", steps = 10, model = {layers = 1}, optimizer = {lr = 1e-3},
                policy = {name = "dga", beta = 0.5}}
    end

    it("sets fields by dotted path, with numbers, booleans and strings", function()
        local c = overrides.apply(cfg(), {"optimizer.lr=3e-3", "T_r=50", "model.layers=2",
                                         "model.width=64", "align.method=jvp", "steps=1e2",
                                         "policy.beta=0.1", "policy.eta=2", "align.lr_scale=true"})
        assert.are.equal(3e-3, c.optimizer.lr)
        assert.are.equal(50, c.T_r)
        assert.are.equal(2, c.model.layers)
        assert.are.equal(64, c.model.width)
        assert.are.equal("jvp", c.align.method)
        assert.are.equal(100, c.steps)
        assert.are.equal("integer", math.type(c.steps))
        assert.are.equal(0.1, c.policy.beta)
        assert.are.equal(2, c.policy.eta)
        assert.is_true(c.align.lr_scale)
    end)

    it("refuses an unknown key and lists the close matches", function()
        local e = usage_err(overrides.apply, cfg(), {"optimizer.lrr=3e-3"})
        contains(e, "--set optimizer.lrr=3e-3: unknown key 'optimizer.lrr'")
        contains(e, "close matches: optimizer.lr")
        e = usage_err(overrides.apply, cfg(), {"lr=1"})
        contains(e, "close matches: optimizer.lr")
        e = usage_err(overrides.apply, cfg(), {"policy.betta=0.1"})
        contains(e, "policy.beta")
        e = usage_err(overrides.apply, cfg(), {"zzzzzzzzzz=1"})
        contains(e, "known keys: ")
        contains(e, "optimizer.lr")
    end)

    it("refuses a value of the wrong type, naming the key and the value", function()
        contains(usage_err(overrides.apply, cfg(), {"steps=abc"}),
                 "--set steps=abc: 'steps' expects an integer, got the string 'abc'")
        contains(usage_err(overrides.apply, cfg(), {"steps=1.5"}), "'steps' expects an integer")
        contains(usage_err(overrides.apply, cfg(), {"optimizer.lr=fast"}), "'optimizer.lr' expects a number")
        contains(usage_err(overrides.apply, cfg(), {"align.method=backprop"}),
                 "'align.method' expects \"exact\", \"fd\" or \"jvp\"")
        contains(usage_err(overrides.apply, cfg(), {"align.lr_scale=1"}), "expects true or false")
        contains(usage_err(overrides.apply, cfg(), {"model=2"}),
                 "'model' is a group of settings; set one of its fields: model.heads, model.layers")
        contains(usage_err(overrides.apply, cfg(), {"policy.beta=2"}), "beta")
        local ok, e = overrides.parse("steps")
        assert.is_nil(ok)
        contains(e, "expected key=value")
        ok, e = overrides.parse("steps=")
        assert.is_nil(ok)
        contains(e, "no value")
        assert.are.equal("3", overrides.parse("name='3'").value)
    end)

    it("checks nothing before applying: one bad override leaves the config unchanged", function()
        local c = cfg()
        pcall(overrides.apply, c, {"T_r=7", "steps=x"})
        assert.is_nil(c.T_r)
    end)

    it("applies a policy option only to the policies that take it", function()
        local c = {run_dir = "/tmp/x", policy = {name = "uniform"}}
        overrides.apply(c, {"policy.beta=0.1"})
        assert.is_nil(c.policy.beta)
        local d = overrides.apply({run_dir = "/tmp/x", policy = {name = "dga"}}, {"policy.beta=0.1"})
        assert.are.equal(0.1, d.policy.beta)
    end)

    it("knows the experiment's declared fields and the cfg's own", function()
        contains(usage_err(overrides.apply, cfg(), {"spec_train=5"}), "unknown key 'spec_train'")
        local c = overrides.apply(cfg(), {"spec_train=5"}, {"spec_train"})
        assert.are.equal(5, c.spec_train)
        c = overrides.apply({run_dir = "/x", budget_tokens = 256}, {"budget_tokens=1024"})
        assert.are.equal(1024, c.budget_tokens)
    end)

    it("in a sweep, refuses the seed and the run directory", function()
        local a = parse{"--set", "seed=4"}
        contains(usage_err(sweep.overrides, a, cfg()), "use --seeds")
        a = parse{"--set", "run_dir=/tmp/y"}
        contains(usage_err(sweep.overrides, a, cfg()), "use --out")
    end)
end)

describe("sweep options", function()
    it("parses seeds, the data seed and jobs, with documented defaults", function()
        local a = parse{}
        assert.are.same({1}, a.seeds)
        assert.are.equal(1, a.seed)
        assert.are.equal(1, a.data_seed)
        assert.are.equal(1, a.jobs)
        assert.are.same({}, a.policy)
        assert.are.same({}, a.set)
        a = parse{"--seeds", "1,3-5", "--data-seed", "7", "--jobs", "2"}
        assert.are.same({1, 3, 4, 5}, a.seeds)
        assert.are.equal(7, a.data_seed)
        assert.are.equal(2, a.jobs)
        assert.are.same({9}, parse{"--seed", "9"}.seeds)
        local help = parser():get_help()
        contains(help, "--data-seed")
        contains(help, "Default: 1.")
        contains(help, "--seeds")
        assert.is_nil(help:find("(default: 1)", 1, true))   -- said once, in the text
    end)

    it("refuses --seed with --seeds, a repeated seed and a bad --set", function()
        local ok, e = parser():pparse{"--seed", "1", "--seeds", "2"}
        assert.is_false(ok)
        contains(e, "can not be used together")
        ok, e = parser():pparse{"--seeds", "2,2"}
        assert.is_false(ok)
        contains(e, "seed 2 is given twice")
        for _, bad in ipairs{"x", "5-3", "1-99999999999999999999", "1.5"} do
            ok, e = parser():pparse{"--seeds", bad}
            assert.is_false(ok)
            contains(e, "'" .. bad .. "' is not a seed")
        end
        ok, e = sweep.parse_seeds("-1")
        assert.is_nil(ok)
        contains(e, "'-1' is not a seed")
        ok, e = parser():pparse{"--set", "novalue"}
        assert.is_false(ok)
        contains(e, "expected key=value")
    end)
end)

describe("sweep.policies", function()
    local defaults = {{name = "natural"}, {name = "dga", beta = 1, label = "dga_noema"},
                      {name = "dga", beta = 0.1, label = "dga_ema"}}

    it("gives the experiment's list without --policy", function()
        local list = sweep.policies(parse{}, defaults)
        assert.are.same({"natural", "dga_noema", "dga_ema"}, {list[1].label, list[2].label, list[3].label})
        assert.are.same({name = "dga", beta = 0.1}, sweep.policy_config(list[3]))
    end)

    it("refuses two policies with one run name", function()
        contains(usage_err(sweep.policies, parse{"--policy", "dga_ema", "--policy", "dga_ema"}, defaults),
                 "two policies would share the run name 'dga_ema'")
    end)

    it("replaces it with --policy: labels of the list, or registry names", function()
        local list = sweep.policies(parse{"--policy", "dga_ema", "--policy", "uniform"}, defaults)
        assert.are.equal(2, #list)
        assert.are.same({name = "dga", beta = 0.1, label = "dga_ema"}, list[1])
        assert.are.same({name = "uniform", label = "uniform"}, list[2])
        local e = usage_err(sweep.policies, parse{"--policy", "nosuch"}, defaults)
        contains(e, "--policy nosuch")
        contains(e, "dga_noema")
    end)

    it("names a policy file from its declared name, never its path", function()
        local path = tmp("odd-file.name.lua")
        h.write(path, 'local policies = require "policies"\n'
                      .. 'return policies.fixed("my_uniform", function(ctx) return policies.uniform(ctx) end)\n')
        local list = sweep.policies(parse{"--policy", path}, defaults)
        assert.are.equal("my_uniform", list[1].label)
        assert.are.equal(path, list[1].name)
        local bad = tmp("noname.lua")
        h.write(bad, "return {new = function() return {} end}\n")
        contains(usage_err(sweep.policies, parse{"--policy", bad}, defaults), "declares no name")
    end)
end)

describe("sweep.run in process", function()
    local function cells()
        return {{id = "g/uniform", group = "g", policy = "uniform", k = 1},
                {id = "g/dga", group = "g", policy = "dga", k = 2}}
    end

    it("skips finished pairs, refuses another command's, reruns with --overwrite", function()
        local out = tmp("inproc")
        local calls = {}
        local function run_cell(cell, seed, dir, topts)
            calls[#calls + 1] = cell.id .. " " .. seed
            assert.is_true(dir == out .. "/" .. cell.id .. "/seed-" .. seed)
            return {loss = seed + cell.k / 10, note = "x", weights = {0.25, 0.75}}
        end
        local argv = {"--seeds", "1,2", "--steps", "5"}
        local a = parse{"--seeds", "1,2"}
        local res = sweep.run{name = "t", out = out, args = a, cells = cells(), run_cell = run_cell,
                              argv = argv, quiet = true}
        assert.are.equal(4, #calls)
        assert.are.equal(4, #res)
        assert.are.same({"g/uniform 1", "g/dga 1", "g/uniform 2", "g/dga 2"}, calls)
        local s = json.read_file(out .. "/g/dga/seed-2/summary.json")
        assert.are.equal("g/dga", s.cell)
        assert.are.equal(2, s.seed)
        assert.are.equal(1, s.data_seed)
        assert.are.equal(2.2, s.metrics.loss)
        assert.are.equal(0.75, s.metrics.weights_2)
        assert.are.equal("dga", s.fields.policy)
        assert.are.equal("--seeds 1,2 --steps 5", s.command)
        assert.are.same(argv, s.argv)

        -- Again, with one more seed: only the new seed runs.
        calls = {}
        res = sweep.run{name = "t", out = out, args = parse{"--seeds", "1-3"}, cells = cells(),
                        run_cell = run_cell, argv = {"--seeds", "1-3", "--steps", "5"}, quiet = true}
        assert.are.same({"g/uniform 3", "g/dga 3"}, calls)
        assert.are.equal(6, #res)

        -- Another configuration in the same --out is refused, naming both commands.
        local e = usage_err(sweep.run, {name = "t", out = out, args = a, cells = cells(),
                                        run_cell = run_cell, argv = {"--steps", "6"}, quiet = true})
        contains(e, "finished under another command")
        contains(e, "--steps 5")
        contains(e, "--overwrite")

        -- So is a cell whose definition changed (here: its policy options).
        local changed = cells()
        changed[2].spec = {name = "dga", beta = 0.5}
        e = usage_err(sweep.run, {name = "t", out = out, args = a, cells = changed,
                                  run_cell = run_cell, argv = argv, quiet = true})
        contains(e, "finished with another definition of cell g/dga")
        contains(e, '"beta":0.5')

        calls = {}
        sweep.run{name = "t", out = out, args = parse{"--seeds", "1", "--overwrite"}, cells = cells(),
                  run_cell = run_cell, argv = {"--steps", "6"}, quiet = true}
        assert.are.equal(2, #calls)
    end)

    it("goes on after a failed cell and then raises, naming it; the rerun does only it", function()
        local out = tmp("inproc_fail")
        local calls = {}
        local fail = true
        local function run_cell(cell, seed)
            calls[#calls + 1] = cell.id .. " " .. seed
            if fail and cell.id == "g/uniform" and seed == 1 then error("boom") end
            return {loss = seed}
        end
        local a = parse{"--seeds", "1,2"}
        local e = usage_err(sweep.run, {name = "t", out = out, args = a, cells = cells(),
                                        run_cell = run_cell, argv = {}, quiet = true})
        contains(e, "1 of 4 runs failed: g/uniform seed 1")
        contains(e, "g/uniform seed 1: ")
        contains(e, "boom")
        assert.are.equal(4, #calls)
        assert.is_false(h.exists(out .. "/g/uniform/seed-1/summary.json"))
        fail, calls = false, {}
        sweep.run{name = "t", out = out, args = a, cells = cells(), run_cell = run_cell, argv = {},
                  quiet = true}
        assert.are.same({"g/uniform 1"}, calls)
    end)

    it("calls prepare once before the first pair, and not when everything is finished", function()
        local out, log = tmp("prep"), {}
        local function o()
            return {name = "t", out = out, args = parse{"--seeds", "1,2"}, cells = cells(), argv = {},
                    quiet = true, prepare = function() log[#log + 1] = "prepare" end,
                    run_cell = function(cell, seed) log[#log + 1] = cell.id .. seed; return {x = 1} end}
        end
        sweep.run(o())
        assert.are.same({"prepare", "g/uniform1", "g/dga1", "g/uniform2", "g/dga2"}, log)
        sweep.run(o())
        assert.are.equal(5, #log)
    end)

    it("weighs the runs left by their cost in the ETA", function()
        -- a fake clock: each run takes 10 s per unit of cost; g/dga costs 3
        local runinfo = require "util.runinfo"
        local clock, lines = 1000, {}
        local real_now = runinfo.now
        runinfo.now = function() return clock end
        local ok, err = pcall(sweep.run, {name = "t", out = tmp("cost"), args = parse{"--seeds", "1,2"},
                                          cells = cells(), argv = {},
                                          say = function(line) lines[#lines + 1] = line end,
                                          cost = function(cell) return cell.id == "g/dga" and 3 or 1 end,
                                          run_cell = function(cell)
                                              clock = clock + (cell.id == "g/dga" and 30 or 10)
                                              return {x = 1}
                                          end})
        runinfo.now = real_now
        assert(ok, err)
        local progress = {}
        for _, l in ipairs(lines) do progress[#progress + 1] = l:match("^run %d of 4: .-ETA [%d:]+") end
        -- 10 s for 1 unit, 7 left: 70 s; 40 s for 4, 4 left: 40 s; 50 s for 5, 3 left: 30 s
        assert.are.same({"run 1 of 4: g/uniform, seed 1, 0:10 elapsed, ETA 1:10",
                         "run 2 of 4: g/dga, seed 1, 0:40 elapsed, ETA 0:40",
                         "run 3 of 4: g/uniform, seed 2, 0:50 elapsed, ETA 0:30",
                         "run 4 of 4: g/dga, seed 2, 1:20 elapsed, ETA 0:00"}, progress)
        local e = usage_err(sweep.run, {name = "t", out = tmp("cost_bad"), args = parse{"--seeds", "1"},
                                        cells = cells(), argv = {}, quiet = true, cost = function() return 0 end,
                                        run_cell = function() return {x = 1} end})
        contains(e, "cost of cell g/uniform is 0, expected a positive number")
    end)

    it("stops at once on an interrupt (Ctrl-C) instead of going on to the next pair", function()
        local calls = 0
        local e = usage_err(sweep.run, {name = "t", out = tmp("intr"), args = parse{"--seeds", "1,2"},
                                        cells = cells(), argv = {}, quiet = true,
                                        run_cell = function()
                                            calls = calls + 1
                                            error("interrupted (in a forward pass)")
                                        end})
        contains(e, "interrupted")
        assert.are.equal(1, calls)
    end)

    it("refuses a second sweep on the same --out while the first runs, naming it", function()
        local out = tmp("locked")
        require("util.runinfo").mkdir_p(out)
        local calls = 0
        local function o()
            return {name = "t", out = out, args = parse{"--seeds", "1"}, cells = cells(), argv = {},
                    quiet = true, run_cell = function() calls = calls + 1; return {x = 1} end}
        end
        local held = dga.lock(out)
        local e = usage_err(sweep.run, o())
        contains(e, "another sweep is running on " .. out)
        contains(e, "locked by process")
        assert.are.equal(0, calls)
        held:release()
        sweep.run(o())
        assert.are.equal(2, calls)
        -- Released when the sweep returns, and after it fails too.
        local again = dga.lock(out)
        again:release()
        local failing = o()
        failing.args = parse{"--seeds", "2"}
        failing.run_cell = function() error("boom") end
        usage_err(sweep.run, failing)
        dga.lock(out):release()
    end)

    it("checks --set before any run when the experiment declares its keys", function()
        local calls = 0
        local o = {name = "t", out = tmp("known"), args = parse{"--set", "spec_trian=3"},
                   cells = cells(), argv = {}, quiet = true, known = {"spec_train"},
                   run_cell = function() calls = calls + 1; return {} end}
        contains(usage_err(sweep.run, o), "close matches: spec_train")
        assert.are.equal(0, calls)
    end)

    it("refuses bad cell lists", function()
        local function run(cs)
            return usage_err(sweep.run, {out = tmp("bad"), args = parse{}, cells = cs,
                                         run_cell = function() return {} end, quiet = true})
        end
        contains(run({{id = "a"}, {id = "a"}}), "two cells have the id 'a'")
        contains(run({{id = "../up"}}), "not a relative directory name")
        contains(run({{id = "/abs"}}), "not a relative directory name")
        contains(run({{}}), "cell 1 has no string id")
        contains(usage_err(sweep.run, {out = tmp("bad2"), args = parse{}, cells = {{id = "a"}},
                                       run_cell = function() return 5 end, quiet = true}),
                 "run_cell returned number")
    end)
end)

describe("aggregate", function()
    local out
    setup(function()
        out = tmp("agg")
        local cells = {{id = "b1/natural", group = "b1", policy = "natural"},
                       {id = "b1/dga", group = "b1", policy = "dga"},
                       {id = "b2/natural", group = "b2", policy = "natural"},
                       {id = "b2/dga", group = "b2", policy = "dga"}}
        -- natural: 1, 2, 4 on seeds 1..3; dga: natural + 0.5, 1.0, 0.0 (seed 3 missing in b2)
        local vals = {natural = {1, 2, 4}, dga = {1.5, 3.0, 4.0}}
        sweep.run{name = "agg", out = out, args = parse{"--seeds", "1-3"}, cells = cells, argv = {},
                  quiet = true,
                  run_cell = function(cell, seed)
                      return {loss = vals[cell.policy][seed], other = seed}
                  end}
        os.remove(out .. "/b2/dga/seed-3/summary.json")
    end)

    it("computes mean, interval, paired differences and the noise floor", function()
        local res = aggregate{out = out, metrics = {"loss"}, reference = "natural", quiet = true}
        local by = {}
        for _, r in ipairs(res.rows) do by[r.cell] = r end
        local n1 = by["b1/natural"]
        assert.are.equal(3, n1.n)
        assert.are.equal(7 / 3, n1.mean)
        local sd = math.sqrt(((1 - 7 / 3) ^ 2 + (2 - 7 / 3) ^ 2 + (4 - 7 / 3) ^ 2) / 2)
        assert.is_true(math.abs(n1.sd - sd) < 1e-12)
        assert.is_nil(n1.diff_n)
        assert.is_true(math.abs(n1.ref_gap - 2) < 1e-12)       -- |1-2|, |1-4|, |2-4| -> 6/3
        local d1 = by["b1/dga"]
        assert.are.equal(3, d1.diff_n)
        assert.is_true(math.abs(d1.diff_mean - 0.5) < 1e-12)   -- 0.5, 1.0, 0.0
        assert.is_true(math.abs(d1.diff_sd - 0.5) < 1e-12)
        local half = 4.30265272974946 * 0.5 / math.sqrt(3)
        assert.is_true(math.abs(d1.diff_ci_hi - (0.5 + half)) < 1e-9)
        assert.is_true(math.abs(d1.ref_sd - sd) < 1e-12)
        -- b2/dga has seeds 1 and 2 only: paired over those two.
        local d2 = by["b2/dga"]
        assert.are.equal(2, d2.n)
        assert.are.equal(2, d2.diff_n)
        assert.is_true(math.abs(d2.diff_mean - 0.75) < 1e-12)
        -- The reference comes first in each group.
        assert.are.same({"b1/natural", "b1/dga", "b2/natural", "b2/dga"},
                        {res.rows[1].cell, res.rows[2].cell, res.rows[3].cell, res.rows[4].cell})
    end)

    it("writes aggregate.csv and aggregate.json from the run directories alone", function()
        local res = aggregate{out = out, reference = "natural", quiet = true}
        assert.are.same({"loss", "other"}, res.metrics)
        local recs, header = csvlog.read_records(out .. "/aggregate.csv")
        assert.are.equal("cell", header[1])
        assert.are.equal(8, #recs)
        local j = json.read_file(out .. "/aggregate.json")
        assert.are.equal(8, #j.rows)
        assert.are.equal("natural", j.reference)
        contains(res.text, "minus reference")
        contains(res.text, "reference")
    end)

    it("shows n=1 for a single seed and refuses two references in a group", function()
        local one = tmp("agg1")
        sweep.run{name = "one", out = one, args = parse{}, argv = {}, quiet = true,
                  cells = {{id = "natural", policy = "natural"}, {id = "dga", policy = "dga"}},
                  run_cell = function() return {loss = 3} end}
        local res = aggregate{out = one, reference = "natural", quiet = true}
        contains(res.text, "3.0000 (n=1)")
        contains(res.text, "+0.0000 (n=1)")
        contains(res.text, "n=1")
        contains(usage_err(aggregate, {out = out, reference = "natural", quiet = true,
                                       group_of = function() return "all" end}),
                 "two reference cells")
        contains(usage_err(aggregate, {out = tmp("empty_agg_missing"), quiet = true}), "not a directory")
        contains(usage_err(aggregate, {out = out, metrics = {"los"}, quiet = true}),
                 "no summary under " .. out .. " has the metric 'los' (metrics: loss, other)")
        h.write(out .. "/b1/dga/seed-1/summary.json", '{"cell": "b1/dga", "seed": 1')
        contains(usage_err(aggregate, {out = out, quiet = true}), "b1/dga/seed-1/summary.json: line 1")
    end)
end)

describe("scripts/run.lua", function()
    before_each(function()
        if not DGALUA then pending("DGALUA is not set (run through tests/run)") end
    end)

    -- Runs scripts/run.lua; returns exit code, stdout, stderr.
    local function runlua(args)
        return h.run(shell_quote(DGALUA) .. " scripts/run.lua " .. args, tmp("stderr.txt"))
    end

    it("trains the example config with --set, and refuses a bad key", function()
        local out = tmp("runlua")
        local code, stdout, err = runlua("experiments/configs/example.lua --threads 1 --quiet --out "
                                         .. out .. " --set steps=20 --set policy.beta=1")
        assert.are.equal(0, code, err)
        contains(stdout, "step 20")
        local recs = csvlog.read_records(out .. "/metrics.csv")
        assert.are.equal(20, recs[#recs].step)
        contains(h.read(out .. "/config.lua"), "beta = 1")
        local code2, _, err2 = runlua("experiments/configs/example.lua --out " .. out .. "x --set model.layer=2")
        assert.are_not.equal(0, code2)
        contains(err2, "unknown key 'model.layer' (close matches: model.layers")
        local code3, _, err3 = runlua(tmp("nosuch.lua"))
        assert.are_not.equal(0, code3)
        contains(err3, "nosuch.lua")
    end)

    it("refuses a misspelt key in the config file, naming the file, before training", function()
        local cfgfile, out = tmp("misspelt.lua"), tmp("misspelt_run")
        h.write(cfgfile, 'local c = dofile("experiments/configs/example.lua")\nc.checkpiont_every = 20\nreturn c\n')
        local code, _, err = runlua(cfgfile .. " --out " .. out)
        assert.are.equal(2, code)
        contains(err, cfgfile .. ": unknown key 'checkpiont_every' (close matches: checkpoint_every)")
        assert.is_false(h.exists(out .. "/metrics.csv"))
    end)
end)

describe("sweep script", function()
    before_each(function()
        if not DGALUA then pending("DGALUA is not set (run through tests/run)") end
    end)

    it("resumes a killed sweep without recomputing a finished pair", function()
        local out, log = tmp("killed"), tmp("killed.log")
        local code = script("--out " .. out .. " --log " .. log .. " --seeds 1,2 --die-at 3")
        assert.are.equal(9, code)
        assert.are.equal(3, #lines_of(log))
        local code2, _, err = script("--out " .. out .. " --log " .. log .. " --seeds 1,2")
        assert.are.equal(0, code2, err)
        contains(err, "2 of 8 runs finished already")
        local l = lines_of(log)
        -- 3 calls the first time (the third killed), 6 the second: the 2 finished pairs
        -- are not run again, the killed one is.
        assert.are.equal(9, #l)
        local count = {}
        for _, line in ipairs(l) do
            local key = line:match("^(%S+ %d+)")
            count[key] = (count[key] or 0) + 1
        end
        assert.are.equal(1, count["g1/uniform 1"])
        assert.are.equal(1, count["g2/uniform 1"])
        assert.are.equal(2, count[l[3]:match("^(%S+ %d+)")])
        local code3, _, err3 = script("--out " .. out .. " --log " .. log .. " --seeds 1,2")
        assert.are.equal(0, code3)
        assert.are.equal(9, #lines_of(log))
        contains(err3, "8 of 8 runs finished already")
    end)

    it("runs children with --jobs, reports a failed one with its log and exits non-zero", function()
        local out, log = tmp("jobs"), tmp("jobs.log")
        local code, _, err = script("--out " .. out .. " --log " .. log .. " --seeds 1,2 --jobs 2 --fail g2/dga")
        assert.are_not.equal(0, code)
        contains(err, "g2/dga, seed 1 FAILED")
        contains(err, "the cell g2/dga was told to fail")       -- the tail of its log.txt
        contains(err, "2 of 8 runs failed")
        contains(h.read(out .. "/g2/dga/seed-2/log.txt"), "told to fail")
        assert.are.equal(8, #lines_of(log))
        for _, id in ipairs{"g1/uniform", "g2/uniform", "g1/dga"} do
            for seed = 1, 2 do
                assert.is_true(h.exists(out .. "/" .. id .. "/seed-" .. seed .. "/summary.json"))
                assert.is_true(h.exists(out .. "/" .. id .. "/seed-" .. seed .. "/log.txt"))
            end
        end
        -- The rerun (children again) runs only the two failed pairs.
        local code2, _, err2 = script("--out " .. out .. " --log " .. log .. " --seeds 1,2 --jobs 2")
        assert.are.equal(0, code2, err2)
        local l = lines_of(log)
        assert.are.equal(10, #l)
        local rerun = {l[9], l[10]}
        table.sort(rerun)
        assert.are.same({"g2/dga 1 fresh", "g2/dga 2 fresh"}, rerun)
        contains(err2, "run 2 of 2")
        assert.is_true(h.exists(out .. "/aggregate.csv"))
    end)

    it("sweeps 2 seeds x 2 policies through the real trainer, reproducibly", function()
        local out, log = tmp("train"), tmp("train.log")
        local code, _, err = script("--out " .. out .. " --log " .. log .. " --train --seeds 1,2")
        assert.are.equal(0, code, err)
        local m = {}
        for _, id in ipairs{"g1/uniform", "g1/dga"} do
            for seed = 1, 2 do
                local s = json.read_file(out .. "/" .. id .. "/seed-" .. seed .. "/summary.json")
                assert.are.equal(8, s.metrics.step)
                assert.is_true(s.metrics.specific_final > 0 and s.metrics.specific_final < 10)
                assert.is_nil(s.metrics.model)                 -- a userdata, left out
                assert.is_number(s.metrics.basis_1)            -- a list of numbers, flattened
                m[id .. seed] = s.metrics.specific_final
            end
        end
        -- Seeds change the run; the same seed in two groups (same config) gives the same bits.
        assert.are_not.equal(m["g1/uniform1"], m["g1/uniform2"])
        local s2 = json.read_file(out .. "/g2/uniform/seed-1/summary.json")
        contains(s2.command, "sweep_script.lua --threads 1 --out " .. out)   -- a command line to paste
        assert.are.equal(m["g1/uniform1"], s2.metrics.specific_final)
        local recs = csvlog.read_records(out .. "/aggregate.csv")
        assert.is_true(#recs >= 8)
    end)

    it("resumes an interrupted pair from its checkpoint, to the same result", function()
        local out, log = tmp("ckpt"), tmp("ckpt.log")
        -- A partial run: the trainer stopped at step 4 with a checkpoint, no summary.json.
        local code = script("--out " .. out .. " --log " .. log .. " --train --seeds 1 --policy dga --stop-at 4")
        assert.are.equal(9, code)
        assert.is_true(h.exists(out .. "/g1/dga/seed-1/latest"))
        assert.is_false(h.exists(out .. "/g1/dga/seed-1/summary.json"))
        local code2, _, err = script("--out " .. out .. " --log " .. log .. " --train --seeds 1 --policy dga")
        assert.are.equal(0, code2, err)
        local l = lines_of(log)
        assert.are.same({"g1/dga 1 fresh", "g1/dga 1 resume", "g2/dga 1 fresh"}, l)
        local a = json.read_file(out .. "/g1/dga/seed-1/summary.json")
        local b = json.read_file(out .. "/g2/dga/seed-1/summary.json")
        assert.are.equal(b.metrics.specific_final, a.metrics.specific_final)
        assert.are.equal(b.metrics.generic_final, a.metrics.generic_final)
    end)

    it("gives the final losses of a pair killed after its last checkpoint", function()
        local out, log = tmp("ckpt_end"), tmp("ckpt_end.log")
        local code, _, err = script("--out " .. out .. " --log " .. log .. " --train --seeds 1 --policy dga")
        assert.are.equal(0, code, err)
        local path = out .. "/g1/dga/seed-1/summary.json"
        local before = json.read_file(path)
        os.remove(path)
        code, _, err = script("--out " .. out .. " --log " .. log .. " --train --seeds 1 --policy dga")
        assert.are.equal(0, code, err)
        assert.are.equal("g1/dga 1 resume", lines_of(log)[3])
        local after = json.read_file(path)
        assert.is_number(after.metrics.specific_final)
        assert.are.equal(before.metrics.specific_final, after.metrics.specific_final)
        assert.are.equal(before.metrics.generic_final, after.metrics.generic_final)
        assert.are.equal(before.metrics.basis_2, after.metrics.basis_2)
    end)

    it("names a --policy FILE's run directory from its declared name", function()
        local out, log = tmp("pfile"), tmp("pfile.log")
        local path = tmp("some-dir-name.lua")
        h.write(path, 'local policies = require "policies"\n'
                      .. 'return policies.fixed("flat", function(ctx) return policies.uniform(ctx) end)\n')
        local code, _, err = script("--out " .. out .. " --log " .. log .. " --train --seeds 1 --policy " .. path)
        assert.are.equal(0, code, err)
        assert.is_true(h.exists(out .. "/g1/flat/seed-1/summary.json"))
        assert.is_false(h.exists(out .. "/g1/some-dir-name"))
    end)

    it("gives options to one policy with --policy NAME:key=value, in a directory named for them", function()
        local out, log = tmp("popt"), tmp("popt.log")
        local code, _, err = script("--out " .. out .. " --log " .. log .. " --train --seeds 1 --policy dga "
                                    .. "--policy dga:eta=5 --policy dga:beta=1,eta=2 --set policy.eta=3")
        assert.are.equal(0, code, err)
        -- the --set reaches the plain dga cell; the options given to one policy win there
        contains(h.read(out .. "/g1/dga/seed-1/config.lua"), "eta = 3,")
        contains(h.read(out .. "/g1/dga_eta5/seed-1/config.lua"), "eta = 5,")
        local both = h.read(out .. "/g1/dga_beta1_eta2/seed-1/config.lua")
        contains(both, "eta = 2,")
        contains(both, "beta = 1,")
        contains(err, "--set policy.eta=3: not applied to dga_eta5, dga_beta1_eta2 (its --policy option wins)")
        -- what the cell records is what ran
        local sj = json.decode(h.read(out .. "/g1/dga_eta5/seed-1/summary.json"))
        assert.are.equal(5, json.decode(sj.cell_text).spec.eta)
        code, _, err = script("--out " .. tmp("popt2") .. " --log " .. log .. " --seeds 1 --policy dga:etaa=5")
        assert.are_not.equal(0, code)
        contains(err, "--policy dga:etaa=5: policy 'dga': unknown option 'etaa' (known: beta, eta")
        assert.is_nil(err:find("dga.lua:", 1, true))
    end)

    it("refuses --set policy.KEY that no policy of the sweep knows, before any run, naming them", function()
        local out, log = tmp("pset"), tmp("pset.log")
        local code, _, err = script("--out " .. out .. " --log " .. log .. " --train --seeds 1 --set policy.tau=2")
        assert.are_not.equal(0, code)
        contains(err, "--set policy.tau=2: no policy of this sweep has the option 'tau' (uniform, dga)")
        assert.are.equal(0, #lines_of(log))
        code, _, err = script("--out " .. out .. " --log " .. log .. " --train --seeds 1 --set policy.beta=1")
        assert.are.equal(0, code, err)
        contains(err, "--set policy.beta=1: applied to dga only (uniform has no option 'beta')")
    end)

    it("applies --set to every run, and stops at once on a bad one", function()
        local out, log = tmp("set"), tmp("set.log")
        local code, _, err = script("--out " .. out .. " --log " .. log
                                    .. " --train --seeds 1 --set optimizer.lr=0.01 --set policy.beta=1")
        assert.are.equal(0, code, err)
        local cfg = h.read(out .. "/g1/dga/seed-1/config.lua")
        contains(cfg, "lr = 0.01")
        contains(cfg, "beta = 1")
        assert.is_nil(h.read(out .. "/g1/uniform/seed-1/config.lua"):find("beta = ", 1, true))
        local out2, log2 = tmp("set2"), tmp("set2.log")
        code, _, err = script("--out " .. out2 .. " --log " .. log2 .. " --train --seeds 1,2 --set optimizer.lrr=1")
        assert.are_not.equal(0, code)
        contains(err, "unknown key 'optimizer.lrr' (close matches: optimizer.lr")
        -- refused before any run trains
        assert.are.equal(0, #lines_of(log2))
        code, _, err = script("--out " .. out2 .. " --log " .. log2 .. " --train --seeds 1 --set steps=abc")
        assert.are_not.equal(0, code)
        contains(err, "'steps' expects an integer, got the string 'abc'")
    end)
end)

-- Experiment descriptors (scripts/harness/descriptor.lua): an experiment written as one file
-- outside the repository runs as a script, joins the study and appears in the generated
-- report, with no edit anywhere else.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua"
package.path = here .. "/?.lua;" .. package.path
local h = require "helpers"
local descriptor = require "harness.descriptor"

local function abs(p)
    if p:sub(1, 1) == "/" then return p end
    return require("lfs").currentdir() .. "/" .. p
end

-- A toy experiment on the trainer fixture's synthetic domains (no corpus): uniform against
-- DGA, 8 steps, with one claim.
local function toy_source(tests_dir)
    return string.format([[
package.path = %q .. "/?.lua;" .. package.path
local C = require "harness.cells"
local fixture = require "trainer_fixture"
return require("harness.descriptor").define({
    name = "toy", order = 9, title = "A toy experiment (toy.lua)", about = "Uniform against DGA on three tiny domains.",
    study = {args = {"--quick"}},
    preset = function(a) return {steps = a.quick and 8 or 16} end,
    setup = function(x) io.open(x.a.out .. ".setup", "a"):close() return {} end,
    cells = function(x)
        local out = {}
        for _, spec in ipairs(C.policies(x.a, {{name = "uniform"}, {name = "dga", beta = 0.5, eta = 1}})) do
            out[#out + 1] = {id = "toy/" .. C.label(spec), group = "toy", policy = spec}
        end
        return out
    end,
    run_cell = function(x, cell, seed, dir, topts)
        local cfg = fixture.config(dir, {seed = seed, steps = x.steps, checkpoint_every = 0,
                                         policy = C.policy_config(cell.policy)})
        return C.train(cfg, seed, dir, x.a, topts)
    end,
    cell_names = "toy/<policy>: the fixture's three domains under each policy.",
    report = {reference = "uniform", metrics = {"specific_final", "l1_mean"}, intro = "The toy's own intro line."},
    claims = {{id = "toy_dga_moves", source = "ours", x = "dga", y = "uniform", metric = "l1_mean",
               better = "higher", text = "DGA moves its weights more than uniform"}},
}, ...)
]], tests_dir)
end

describe("experiment descriptors", function()
    it("checks a descriptor's fields and its claims, naming what is wrong", function()
        local ok, err = pcall(descriptor.check, {name = "x", cells = print, run_cell = print, celss = 1}, "x.lua")
        assert.is_false(ok)
        h.contains(err, "x.lua: unknown field 'celss'")
        ok, err = pcall(descriptor.check, {name = "x", cells = print}, "x.lua")
        assert.is_false(ok)
        h.contains(err, "x.lua: a descriptor needs run_cell")
        ok, err = pcall(descriptor.check, {name = "x", cells = print, run_cell = print,
                                           claims = {{id = "c", source = "paper", x = "a", y = "b", metric = "m",
                                                      better = "lower", text = "t"}}}, "x.lua")
        assert.is_false(ok)
        h.contains(err, "a paper claim quotes its sentence (quote) and names its section (section)")
    end)

    it("loads every experiment of the repository without running it", function()
        local list = descriptor.list("experiments")
        local names = {}
        for _, d in ipairs(list) do names[#names + 1] = d.name end
        assert.are.same({"lowdata", "mmlu_dist", "recover", "quickstart"}, names)
    end)

    it("plans lowdata's second edition as the study runs it: seeds, regimes, zoo and scales", function()
        local C = require "harness.cells"
        local d = descriptor.load("experiments/lowdata.lua")
        local p = C.parser("lowdata.lua", "", "runs/lowdata")
        d.options(p)
        local x = {a = C.parse(p, {"--key-seeds", "1-5", "--seeds", "1,2,3"})}
        x.preset = d.preset(x.a)
        local by, runs, work = {}, 0, 0
        for _, cell in ipairs(d.cells(x)) do
            by[cell.id] = cell
            runs = runs + (cell.seeds and #cell.seeds or 3)
            work = work + (cell.seeds and #cell.seeds or 3) * d.cost(x, cell)
        end
        -- key cells of the base scale on seeds 1-5, the rest (the scale axis too) on --seeds
        assert.are.same({1, 2, 3, 4, 5}, by["pubmed_bmc_fulltext/b3/dga_ema_fixed"].seeds)
        assert.is_nil(by["us_legislation/b3/is"].seeds)
        assert.is_nil(by["us_legislation/x16/b3/natural"].seeds)
        assert.is_nil(by["us_legislation/x4/binf/dga_fixed"].seeds)
        -- every regime on the first target; the first budget and no limit on the others
        assert.is_truthy(by["us_legislation/b10/dga_fixed"])
        assert.is_nil(by["code_python/b10/dga_fixed"])
        assert.is_truthy(by["code_python/binf/dga_fixed"])
        -- uniform only without a limit; the zoo on the first target; no adaptive eta at scale
        assert.is_truthy(by["code_python/binf/uniform"])
        assert.is_nil(by["code_python/b3/uniform"])
        assert.is_truthy(by["us_legislation/binf/doremi"])
        assert.is_nil(by["pubmed_bmc_fulltext/b3/odm"])
        assert.is_nil(by["us_legislation/x16/b3/dga_ema_std"])
        assert.are.equal(222, runs)
        -- the ETA's weights: 16 base runs for a 16x run, 2 for DoReMi (its reference first); in
        -- all 660 base runs' worth of tokens (docs/study.md), 384 of them in the 16x runs
        assert.are.equal(16, d.cost(x, by["us_legislation/x16/b3/natural"]))
        assert.are.equal(2, d.cost(x, by["us_legislation/binf/doremi"]))
        assert.are.equal(660, work)
    end)

    it("runs one written elsewhere under --quick, and the study and the report take it in", function()
        if not h.DGALUA then pending("DGALUA is not set (run through tests/run)") return end
        local dir, study, docs = h.tmpdir("toy"), h.tmpdir("study"), h.tmpdir("docs")
        h.write(dir .. "/toy.lua", toy_source(abs(here)))
        local code, stdout, stderr = h.run(string.format("%s %s/toy.lua --quick --seeds 1,2 --threads 1 --no-plot --out %s",
                                                   h.shell_quote(h.DGALUA), dir, h.shell_quote(study .. "/toy")),
                                     dir .. "/err.txt")
        assert.are.equal(0, code, stdout .. stderr)
        h.contains(stdout, "| dga | 2 |")
        -- its data was made (once) before the runs; a command mistake is refused before any
        assert.is_truthy(h.read(study .. "/toy.setup"))
        local bad = h.tmpdir("bad")
        for _, mistake in ipairs({"--set policy.tau=1", "--cell toy/nosuch"}) do
            code, stdout, stderr = h.run(string.format("%s %s/toy.lua --quick --seeds 1 --out %s %s",
                                                       h.shell_quote(h.DGALUA), dir, h.shell_quote(bad .. "/toy"),
                                                       mistake), dir .. "/err.txt")
            assert.are.equal(2, code, mistake .. ": " .. stdout .. stderr)
            assert.is_nil(h.read(bad .. "/toy.setup"), mistake .. " made the data first")
        end
        h.rm(bad)
        local notes = h.read(study .. "/toy/notes.md")
        h.contains(notes, "toy/<policy>: the fixture's three domains under each policy.")
        h.contains(notes, "| l1_mean | mean L1 change of the sampling weights per update")
        h.contains(notes, "Seeds per cell: 2 cells with 2 seeds.")
        -- the report finds the descriptor beside the runs and gives its section and claim
        require("harness.report").results(study, docs, {plot = false, quiet = true})
        local md = h.read(docs .. "/results.md")
        h.contains(md, "## A toy experiment (toy.lua)")
        h.contains(md, "The toy's own intro line.")
        h.contains(md, "DGA moves its weights more than uniform: dga.l1_mean - uniform.l1_mean = ")
        -- the study runs every descriptor of its experiments directory, this one included
        local s2 = h.tmpdir("study2")
        -- --mmlu goes to every experiment; one that reads no MMLU takes it and ignores it
        code, stdout, stderr = h.run(string.format("%s scripts/study.lua --experiments %s --out %s --seeds 1 --jobs 1 "
                                                   .. "--no-report --mmlu %s/no-mmlu-here", h.shell_quote(h.DGALUA),
                                                   dir, s2, dir),
                                     dir .. "/err2.txt")
        assert.are.equal(0, code, stdout .. stderr)
        h.contains(stderr, "'--mmlu' '" .. dir .. "/no-mmlu-here'")
        h.contains(stderr, "== study: toy finished")
        -- the log says the study's time holds no report (scripts/reproduction.lua reads it)
        h.contains(stderr, "== study: no report\n")
        assert.is_truthy(h.read(s2 .. "/toy/toy/dga/seed-1/summary.json"))
        for _, d in ipairs{dir, study, docs, s2} do h.rm(d) end
    end)

    it("the README's results digest is what the report makes of the committed records", function()
        local copy = h.tmpdir("readme") .. "/README.md"
        local readme = h.read("README.md")
        h.write(copy, readme)
        require("harness.report").write_readme("results/study", copy)
        assert.are.equal(readme, h.read(copy), "README.md's digest is stale: ./dgalua scripts/report.lua "
                         .. "--study results/study --readme README.md")
    end)

    it("compares the committed study's verdicts with another study's (--against), and refuses a missing one", function()
        local report = require "harness.report"
        local md = report.agreement_md("results/study", report.sections("results/study"), "results/study", "itself")
        local total = tonumber(md:match("Of the (%d+) claims%-in%-a%-group decided in both"))
        assert.is_truthy(total and total > 40, md:sub(1, 300))
        h.contains(md, string.format("%d have the same verdict, 0 differ by a step (one of the two not established) "
                                     .. "and 0 are opposite", total))
        h.contains(md, "Here: `results/study`; there: `results/study` (itself).")
        local ok, err = pcall(report.agreement_md, "results/study", report.sections("results/study"), "no/such/study")
        assert.is_false(ok)
        h.contains(tostring(err), "--against no/such/study is not a directory")
    end)

    it("refuses a --study that holds no experiment's runs and leaves the written report as it was", function()
        local docs, empty = h.tmpdir("keep"), h.tmpdir("empty")
        h.write(docs .. "/results.md", "an earlier report\n")
        h.write(docs .. "/lowdata_curves_x.png", "a figure")
        local report = require "harness.report"
        for _, study in ipairs({empty, empty .. "/no/such"}) do
            local ok, err = pcall(report.results, study, docs, {plot = false, quiet = true})
            assert.is_false(ok)
            assert.is_true(require("util.errors").is(err) and err.usage, tostring(err))
            h.contains(tostring(err), "report: --study " .. study)
            h.contains(tostring(err), "nothing written")
            ok, err = pcall(report.write_readme, study, docs .. "/results.md")
            assert.is_false(ok)
            h.contains(tostring(err), "nothing written")
        end
        local ok, err = pcall(report.results, "results/study", docs, {plot = false, quiet = true, against = empty})
        assert.is_false(ok)
        h.contains(tostring(err), "report: --against " .. empty .. " holds no experiment's runs")
        assert.are.equal("an earlier report\n", h.read(docs .. "/results.md"))
        assert.are.equal("a figure", h.read(docs .. "/lowdata_curves_x.png"))
        if h.DGALUA then
            local code, _, stderr = h.run(string.format("%s scripts/report.lua --study %s --docs %s",
                                          h.shell_quote(h.DGALUA), h.shell_quote(empty), h.shell_quote(docs)),
                                          empty .. "/err.txt")
            assert.are.equal(2, code, stderr)
            h.contains(stderr, "holds no experiment's runs")
            assert.are.equal("an earlier report\n", h.read(docs .. "/results.md"))
        end
        h.rm(docs)
        h.rm(empty)
    end)

    it("reports a repository experiment with today's descriptor, not the copy its runs name", function()
        local study, other = h.tmpdir("stale"), h.tmpdir("checkout")
        -- runs made from another checkout, whose descriptor has an older title
        local old = h.read("experiments/quickstart.lua"):gsub('title = "[^"]*"', 'title = "an older title"', 1)
        h.write(other .. "/quickstart.lua", old)
        assert(os.execute("mkdir -p " .. h.shell_quote(study .. "/quickstart/t/uniform/seed-1")))
        h.write(study .. "/quickstart/experiment.json", require("util.json").encode(
            {name = "quickstart", descriptor = other .. "/quickstart.lua"}))
        h.write(study .. "/quickstart/t/uniform/seed-1/summary.json", require("util.json").encode(
            {cell = "t/uniform", seed = 1, metrics = {specific_final = 1}}))
        local secs = require("harness.report").sections(study)
        assert.are.equal(1, #secs)
        assert.are.equal(descriptor.load("experiments/quickstart.lua").title, secs[1].title)
        h.rm(study)
        h.rm(other)
    end)

    it("runs a cell's own seeds, and a same_as cell from its source without training it", function()
        if not h.DGALUA then pending("DGALUA is not set (run through tests/run)") return end
        local dir, out = h.tmpdir("toy2"), h.tmpdir("toy2out")
        local src = toy_source(abs(here))
            :gsub('out%[#out %+ 1%] = {id = "toy/" %.%. C%.label%(spec%), group = "toy", policy = spec}',
                  'out[#out + 1] = {id = "toy/" .. C.label(spec), group = "toy", policy = spec, '
                  .. 'seeds = spec.name == "uniform" and {1, 2, 3} or nil}')
            :gsub("        return out\n    end,", '        out[#out + 1] = {id = "other/uniform", group = "other", '
                  .. 'policy = {name = "uniform", label = "uniform"}, same_as = "toy/uniform"}\n        return out\n    end,', 1)
        h.write(dir .. "/toy.lua", src)
        local code, stdout, stderr = h.run(string.format("%s %s/toy.lua --quick --seeds 1 --threads 1 --no-plot --out %s",
                                                   h.shell_quote(h.DGALUA), dir, h.shell_quote(out)), dir .. "/err.txt")
        assert.are.equal(0, code, stdout .. stderr)
        h.contains(stderr, "3 of 7 runs are another cell's run (same_as), copied when it finishes")
        assert.is_nil(stderr:find("finished already", 1, true), stderr)
        local rundir = require "rundir"
        for sd = 1, 3 do
            assert.is_truthy(h.read(string.format("%s/toy/uniform/seed-%d/summary.json", out, sd)))
            local copy = rundir.read_summary(string.format("%s/other/uniform/seed-%d", out, sd))
            local orig = rundir.read_summary(string.format("%s/toy/uniform/seed-%d", out, sd))
            assert.are.equal("toy/uniform", copy.same_as)
            assert.are.equal(orig.metrics.specific_final, copy.metrics.specific_final)
            assert.are.equal("other", copy.group)
            -- nothing trained there
            assert.is_nil(io.open(string.format("%s/other/uniform/seed-%d/metrics.csv", out, sd)))
        end
        assert.is_truthy(h.read(out .. "/toy/dga/seed-1/summary.json"))
        assert.is_nil(io.open(out .. "/toy/dga/seed-2/summary.json"))
        -- the same command again: everything finished, nothing runs
        code, stdout, stderr = h.run(string.format("%s %s/toy.lua --quick --seeds 1 --threads 1 --no-plot --out %s",
                                             h.shell_quote(h.DGALUA), dir, h.shell_quote(out)), dir .. "/err.txt")
        assert.are.equal(0, code, stdout .. stderr)
        h.contains(stderr, "7 of 7 runs finished already")
        -- a moved tree: the copies' curves are read from their source beside them, not from
        -- the directory recorded when they were made
        local moved = out .. "_moved"
        assert(os.rename(out, moved))
        local col = require("harness.seeds").collect(moved)
        assert.are.equal(moved .. "/toy/uniform/seed-2", col.cells["other/uniform"].dirs[2])
        h.rm(dir)
        h.rm(moved)
    end)
    it("refuses a finished run made under another preset (an edited experiment, the same --out)", function()
        if not h.DGALUA then pending("DGALUA is not set (run through tests/run)") return end
        local dir, out = h.tmpdir("toy3"), h.tmpdir("toy3out")
        local src = toy_source(abs(here))
        local function run()
            return h.run(string.format("%s %s/toy.lua --quick --seeds 1 --threads 1 --no-plot --policy uniform --out %s",
                                       h.shell_quote(h.DGALUA), dir, h.shell_quote(out)), dir .. "/err.txt")
        end
        h.write(dir .. "/toy.lua", src)
        local code, stdout, stderr = run()
        assert.are.equal(0, code, stdout .. stderr)
        local sj = require("util.json").decode(h.read(out .. "/toy/uniform/seed-1/summary.json"))
        assert.are.equal(8, require("util.json").decode(sj.cell_text).preset.steps)
        -- the same preset: finished, nothing runs
        code, stdout, stderr = run()
        assert.are.equal(0, code, stdout .. stderr)
        h.contains(stderr, "1 of 1 runs finished already")
        -- the preset edited (its command unchanged): refused, naming both definitions
        local edited = src:gsub("a%.quick and 8 or 16", "a.quick and 9 or 16")
        assert.are_not.equal(src, edited)
        h.write(dir .. "/toy.lua", edited)
        code, stdout, stderr = run()
        assert.are_not.equal(0, code, stdout)
        h.contains(stderr, "finished with another definition of cell toy/uniform")
        h.contains(stderr, '"steps":8')
        h.contains(stderr, '"steps":9')
        h.rm(dir)
        h.rm(out)
    end)
end)


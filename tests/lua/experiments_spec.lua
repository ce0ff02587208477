-- The study: DGA's fixed step and what it logs, the metrics the experiments derive from a run
-- directory (loss spikes), the report's statistics and verdicts, and every experiment's
-- --quick run on the real data path (release pass only: under the sanitizers they would take
-- most of the suite's time; tests/run sets DGA_SANITIZED there).
local dga = dga or require "dga"
local h = require "tests.lua.helpers"
local policies = require "policies"

local DATA = os.getenv("DGA_SHARED_DATA") or "../shared/data"
local C = require "harness.cells"

local function close(a, b, tol) return math.abs(a - b) <= (tol or 1e-6) end

local function ctx_with(a)
    local ctx = {k = #a, sizes = dga.tensor({100, 100, 100}, "float32"), budget = {100, 100, 100},
                 step = 0, history = {}, logged = {}}
    function ctx.log(x, y)
        local f = (x == ctx) and y or x
        for key, v in pairs(f) do ctx.logged[key] = v end
    end
    function ctx.align() return {align = dga.tensor(a), target_norm = 1} end
    return ctx
end

describe("dga with a fixed step", function()
    it("logs the effective eta and the L1 change of the weights and of alpha", function()
        local p = policies.get("dga", {eta = 2, beta = 0.5, floor = 0})
        local ctx = ctx_with({1, 0, -1})
        local w0 = p:init(ctx)
        local w = p:update(ctx, 10)
        assert.are.equal(2, ctx.logged.eta)
        local l1 = 0
        for i = 1, 3 do l1 = l1 + math.abs(w[i] - w0[i]) end
        assert.is_true(close(ctx.logged.l1_change, l1, 1e-6))
        -- beta = 0.5: the EMA moves half as far as alpha
        assert.is_true(close(ctx.logged.alpha_l1_change, 2 * l1, 1e-5))
        assert.is_true(l1 > 0.1)
        -- the step does not adapt: alignments 10x smaller move the weights far less
        local q = policies.get("dga", {eta = 2, beta = 0.5, floor = 0})
        local ctx2 = ctx_with({0.1, 0, -0.1})
        q:init(ctx2)
        q:update(ctx2, 10)
        assert.are.equal(2, ctx2.logged.eta)
        assert.is_true(ctx2.logged.l1_change < l1 / 5)
    end)

    it("the adaptive step logs the eta it chose", function()
        local p = policies.get("dga", {beta = 1, target_change = 0.5, floor = 0})
        local ctx = ctx_with({0.3, 0.1, -0.1})
        p:init(ctx)
        p:update(ctx, 10)
        assert.is_true(close(ctx.logged.eta, 0.5 / ctx.logged.std_a, 1e-4))
    end)

    it("non-finite alignments are an error naming the step, not NaN weights", function()
        local p = policies.get("dga", {eta = 1, beta = 1})
        local ctx = ctx_with({0 / 0, 0, 1})
        ctx.step = 40
        p:init(ctx)
        local err = h.raises("non-finite alignments", function() p:update(ctx, 40) end)
        h.contains(err, "step 40")
    end)
end)

describe("experiment metrics", function()
    it("counts a spike when the loss rises by more than tau of its running minimum", function()
        -- rises: +0.05 (below 1% of 6.0), +0.5 (above), +0.02 (below)
        assert.are.equal(1, C.count_spikes({7.0, 6.0, 6.05, 5.9, 6.4, 6.42}, 0.01))
        assert.are.equal(0, C.count_spikes({7.0, 6.5, 6.0}, 0.01))
        assert.are.equal(2, C.count_spikes({6.0, 6.2, 6.1, 6.4}, 0.01))
    end)

    it("reads final, best, gap, spikes, L1 change and epochs from a run directory", function()
        local dir = h.tmpdir()
        h.write(dir .. "/metrics.csv", "step,specific_loss,generic_loss,basis_1_loss,basis_2_loss\n"
                .. "0,7.0,7.1,7,8\n10,6.0,6.5,6,7\n20,6.3,6.4,5,6\n")
        h.write(dir .. "/alignments.csv", "step,domain,align,eta,l1_change\n10,1,0.1,2,0.4\n10,2,0.2,2,0.4\n"
                .. "20,1,0.1,2,0.2\n20,2,0.1,2,0.2\n")
        h.write(dir .. "/epochs.csv", "step,domain,epochs,drawn,capped\n20,1,3,30,0\n20,2,7,70,0\n20,3,0,0,0\n")
        -- the applied weights: L1 changes 0.4 (step 10) and 0.5 (step 20: domain 2 fell below the
        -- sparse threshold and is absent, so it counts as 0; domain 3 appears)
        h.write(dir .. "/weights.csv", "step,domain,weight\n0,1,0.5\n0,2,0.5\n10,1,0.7\n10,2,0.3\n"
                .. "20,1,0.8\n20,3,0.1\n")
        local m = C.metrics(dir)
        h.rm(dir)
        assert.are.equal(6.3, m.specific_final)
        assert.are.equal(6.0, m.specific_best)
        assert.is_true(close(m.specific_gap, 0.3))
        assert.are.equal(1, m.spikes)
        assert.are.equal(6.4, m.generic_final)
        assert.is_true(close(m.basis_mean, 5.5))
        assert.are.equal(2, m.updates)
        assert.is_true(close(m.l1_mean, (0.4 + (0.1 + 0.3 + 0.1)) / 2))
        assert.are.equal(2, m.eta_mean)
        assert.are.equal(7, m.epochs_max)
        assert.are.equal(5, m.epochs_mean)
    end)

    it("sums the basis losses in basis order, so basis_mean is the same bits in every process", function()
        -- 1 + 1e-16 rounds to 1 ten times over in basis order; the ten small ones first would
        -- give 1 + 1e-15, a different double
        local dir = h.tmpdir()
        local names, values = {"step"}, {"0"}
        for i = 1, 11 do
            names[#names + 1] = "basis_" .. i .. "_loss"
            values[#values + 1] = i == 1 and "1" or "1e-16"
        end
        h.write(dir .. "/metrics.csv", table.concat(names, ",") .. "\n" .. table.concat(values, ",") .. "\n")
        local m = C.metrics(dir)
        h.rm(dir)
        assert.are.equal(1 / 11, m.basis_mean)
    end)
end)

describe("report", function()
    local report = require "harness.report"
    local json = require "util.json"

    local function put(dir, cell, seed, metrics)
        local d = string.format("%s/%s/seed-%d", dir, cell, seed)
        assert(os.execute("mkdir -p " .. h.shell_quote(d)))
        h.write(d .. "/summary.json", json.encode({cell = cell, seed = seed, metrics = metrics}))
    end

    it("judges how an effect moves with scale on its intervals, not its means alone", function()
        local claims = require "harness.claims"
        local function d(mean, lo, hi) return {n = 3, mean = mean, ci_lo = lo, ci_hi = hi} end
        local sc = {1, 4, 16}
        local function trend(a, b, c) return claims.scale_trend({a, b, c}, sc) end
        assert.are.equal("grows", trend(d(1, .5, 1.5), d(2, 1.5, 2.5), d(3, 2.5, 3.5)))
        assert.are.equal("shrinks", trend(d(-3, -4, -2), d(-2, -3, -1), d(-1, -1.5, -.5)))
        assert.are.equal("largest at x4", trend(d(.2, .1, .3), d(.5, .1, .9), d(.19, .01, .3)))
        -- a mean that crosses 0 inside its interval is not a change of sign ...
        assert.are.equal("emerges at x4", trend(d(.2, -2.6, 3), d(-2.7, -4.1, -1.2), d(-6.3, -12, -.1)))
        -- ... one whose intervals lie on both sides of 0 is
        assert.are.equal("changes sign", trend(d(-.09, -.13, -.05), d(-.07, -.26, .13), d(.19, .17, .21)))
        assert.are.equal("fades by x16", trend(d(.2, .1, .3), d(.5, .1, .9), d(.19, -.06, .43)))
        assert.are.equal("established at x1, x16 only", trend(d(1, .5, 1.5), d(.1, -1, 1), d(1, .5, 1.5)))
        assert.are.equal("within noise at every scale", trend(d(0, 0, 0), {n = 2, mean = 5}, d(.1, -1, 1)))
    end)

    it("says how a claim's effect moves with the tokens per run, and draws it", function()
        local claims = require "harness.claims"
        local cl = {id = "ema_vs_is", text = "EMA below IS", x = "dga_ema", y = "is", metric = "specific_final",
                    better = "lower"}
        local once = {id = "once", text = "only at x1", x = "a", y = "b", metric = "m", better = "lower"}
        local function row(group, d, claim)
            claim = claim or cl
            return {claim = claim, group = group, d = d, verdict = claims.verdict(d, claim.better)}
        end
        local decided = {{name = "lowdata", rows = {
            row("t/b3", {n = 3, mean = -0.2, ci_lo = -0.3, ci_hi = -0.1}),
            row("t/x4/b3", {n = 3, mean = -0.05, ci_lo = -0.1, ci_hi = 0.01}),
            row("t/x16/b3", {n = 2, mean = 0.1}),
            row("t/binf", {n = 3, mean = 0.01, ci_lo = -0.02, ci_hi = 0.04}),
            row("t/x4/binf", {n = 3, mean = 0.02, ci_lo = -0.02, ci_hi = 0.06}),
            row("t/b3", {n = 3, mean = 1, ci_lo = 0.5, ci_hi = 1.5}, once),
        }}}
        local md, series = claims.scale_table(decided)
        assert.are.equal("t/b3", (claims.scale_of("t/x16/b3")))
        assert.are.equal(16, select(2, claims.scale_of("t/x16/b3")))
        -- one row per claim and group seen at two scales or more, scales in order
        h.contains(md, "| EMA below IS | t/b3 | x1: ")
        h.contains(md, "<br>x4: ")
        h.contains(md, "<br>x16: ")
        -- below 0 at x1, its interval holding 0 from x4 on (and no interval with two seeds)
        h.contains(md, "| fades by x4 |")
        h.contains(md, "| t/binf | x1: ")
        h.contains(md, "| within noise at every scale |")
        assert.is_nil(md:find("only at x1", 1, true))
        assert.are.equal(2, #series)
        local xs = {}
        for _, p in ipairs(series[1].points) do xs[#xs + 1] = p.x end
        assert.are.same({1, 4, 16}, xs)
        -- two seeds: a point without an interval
        assert.is_nil(series[1].points[3].lo)
        assert.are.equal(-0.3, series[1].points[1].lo)
        assert.is_nil(claims.scale_table({{name = "lowdata", rows = {decided[1].rows[6]}}}))
        -- the figure: a panel per metric and policy compared against (a gap in nats and a count
        -- share no axis, nor do ten nats against IS and hundredths against natural)
        assert.are.equal("specific_final", series[1].metric)
        local spikes = {name = "fewer_spikes t/b3", metric = "spikes", against = "dga", points = series[1].points}
        local vs_natural = {name = "below_natural t/b3", metric = "specific_final", against = "natural",
                            points = series[1].points}
        local panels = claims.scale_panels({series[1], spikes, series[2], vs_natural})
        local titles = {}
        for i, p in ipairs(panels) do titles[i] = p.title .. ":" .. #p.series end
        assert.are.same({"specific_final: x - is:2", "spikes: x - dga:1", "specific_final: x - natural:1"}, titles)
        local dir = h.tmpdir("scalefig")
        local f = require("plot").errorbar_panels(dir, "scale", panels, {logx = true})
        local gp = h.read(f.gp)
        h.contains(gp, "set multiplot layout 2,2")
        h.contains(gp, "size 1000,680")     -- two rows of panels: taller than one plot
        assert.is_truthy(#h.read(f.png) > 1000)
        h.rm(dir)
    end)

    it("says where two studies' verdicts on the same claims agree, group by group", function()
        local claims = require "harness.claims"
        local below = {id = "below", text = "a below b", x = "a", y = "b", metric = "m", better = "lower"}
        local function row(group, mean, lo, hi)
            local d = {n = 3, mean = mean, ci_lo = lo, ci_hi = hi}
            return {claim = below, group = group, d = d, verdict = claims.verdict(d, "lower")}
        end
        local here = {{name = "e", rows = {row("g1", -0.3, -0.4, -0.2), row("g2", -0.3, -0.4, -0.2),
                                           row("g3", 0.3, 0.2, 0.4), row("g4", -0.1, -0.2, 0.1)}}}
        local there = {{name = "e", rows = {row("g1", -0.5, -0.6, -0.4), row("g2", 0.05, -0.1, 0.2),
                                            row("g3", -0.3, -0.4, -0.2), row("g5", 1, 0.5, 1.5)}}}
        local md, n = claims.agreement(here, there)
        assert.are.same({total = 3, same = 1, opposite = 1, here_only = 1, there_only = 1}, n)
        h.contains(md, "| a below b | e: g1 | -0.3000 [-0.4000, -0.2000], supported | -0.5000 [-0.6000, -0.4000], supported | same |")
        h.contains(md, "| a below b | e: g2 | -0.3000 [-0.4000, -0.2000], supported | "
                       .. "0.0500 [-0.1000, 0.2000], not established | differs |")
        h.contains(md, "| e: g3 | 0.3000 [0.2000, 0.4000], contradicted | -0.3000 [-0.4000, -0.2000], supported | **opposite** |")
        assert.is_nil(md:find("g4", 1, true))
        -- another experiment's group of the same name is another claim-in-a-group
        local other = {{name = "f", rows = here[1].rows}}
        local none, m = claims.agreement(here, other)
        assert.is_nil(none)
        assert.are.equal(4, m.here_only)
    end)

    it("names each claim's comparison: two cells, or two metrics of one cell", function()
        local claims = require "harness.claims"
        local function decided(cl)
            return {{name = "e", rows = {{claim = cl, group = "g", d = {n = 3, mean = -0.3, ci_lo = -0.4, ci_hi = -0.2},
                                          verdict = claims.verdict({n = 3, mean = -0.3, ci_lo = -0.4, ci_hi = -0.2},
                                                                   "lower")}}}}
        end
        local two_cells = claims.claims_tables(decided{text = "a below b", x = "a", y = "b", metric = "m",
                                                       better = "lower", source = "ours"})
        h.contains(two_cells, "| a below b | e: g | `a - b` (m) | -0.3000 [-0.4000, -0.2000] | 3 | supported |")
        local one_cell = claims.claims_tables(decided{text = "a nearer p", x = "a", y = "a", metric = "tv_p",
                                                      y_metric = "tv_n", better = "lower", source = "ours"})
        h.contains(one_cell, "| a nearer p | e: g | `a`: tv_p - tv_n | ")
        assert.is_nil(one_cell:find("a - a", 1, true))
    end)

    it("digests each claim per tokens per run, its verdicts per setting (targets counted together)", function()
        local claims = require "harness.claims"
        local cl = {id = "c", text = "x below y", x = "x", y = "y", metric = "m", better = "lower", source = "paper",
                    section = "Abstract", quote = "q"}
        local function row(group, mean, lo, hi)
            local d = {n = 3, mean = mean, ci_lo = lo, ci_hi = hi}
            return {claim = cl, group = group, d = d, verdict = claims.verdict(d, "lower")}
        end
        -- groups arrive in the report's (alphabetical) order
        local md = claims.claims_summary{{name = "lowdata", rows = {
            row("t/b10", -0.2, -0.3, -0.1), row("t/b3", -0.1, -0.2, 0.05), row("t/binf", 0.3, 0.2, 0.4),
            row("t/x16/b3", -0.4, -0.5, -0.3), row("t/x4/b3", 0.01, -0.1, 0.1), row("u/b3", -0.3, -0.4, -0.2),
        }}}
        local x1 = md:find("| x below y | lowdata | x1 | b3: supported 1, not established 1 of 2 (-0.3000 to -0.1000)"
                           .. "<br>b10: supported 1 of 1 (-0.2000)<br>binf: contradicted 1 of 1 (0.3000) | 3 |", 1, true)
        local x4 = md:find("| x below y | lowdata | x4 | b3: not established 1 of 1 (0.0100) | 3 |", 1, true)
        local x16 = md:find("| x below y | lowdata | x16 | b3: supported 1 of 1 (-0.4000) | 3 |", 1, true)
        assert.is_truthy(x1 and x4 and x16, md)
        assert.is_true(x1 < x4 and x4 < x16)
        assert.are.equal("b3", (claims.setting_of("t/x16/b3")))
        assert.is_nil((claims.setting_of("mix")))
    end)

    it("gives verdicts from the paired interval", function()
        assert.matches("^supported", report.verdict({n = 3, mean = -1, ci_lo = -2, ci_hi = -0.5}, "lower"))
        assert.matches("^contradicted", report.verdict({n = 3, mean = 1, ci_lo = 0.5, ci_hi = 2}, "lower"))
        assert.matches("^not established", report.verdict({n = 3, mean = -1, ci_lo = -2, ci_hi = 0.5}, "lower"))
        assert.matches("^supported", report.verdict({n = 3, mean = 1, ci_lo = 0.5, ci_hi = 2}, "higher"))
        assert.matches("^not established %(n=1: no interval%)", report.verdict({n = 1, mean = -1}, "lower"))
        -- two seeds: no interval is printed or used, whatever the t interval would say
        assert.matches("^not established %(n=2", report.verdict({n = 2, mean = -1, ci_lo = -2, ci_hi = -0.5}, "lower"))
        -- a non-inferiority claim: x no worse than y by more than the margin
        assert.matches("^supported", report.verdict({n = 3, mean = 0.01, ci_lo = -0.01, ci_hi = 0.015}, "lower", 0.02))
        assert.matches("^not established", report.verdict({n = 3, mean = 0.01, ci_lo = -0.01, ci_hi = 0.03}, "lower", 0.02))
        assert.matches("^contradicted", report.verdict({n = 3, mean = 0.1, ci_lo = 0.05, ci_hi = 0.15}, "lower", 0.02))
    end)

    it("tables cells over seeds with paired differences and the reference's noise floor", function()
        local dir = h.tmpdir()
        -- natural: 6.0, 6.2, 6.4 (sd 0.2, mean pair gap (0.2 + 0.4 + 0.2) / 3); dga lower by
        -- exactly 0.1 on every seed: the paired interval collapses to -0.1
        for s, v in ipairs{6.0, 6.2, 6.4} do
            put(dir, "t/b3/natural", s, {specific_final = v})
            put(dir, "t/b3/dga", s, {specific_final = v - 0.1})
        end
        local r = report.experiment("toy", dir, {plot = false, quiet = true, reference = "natural",
            metrics = {"specific_final"},
            claims = {{x = "dga", y = "natural", metric = "specific_final", better = "lower", text = "dga wins"}}})
        local md = h.read(dir .. "/table.md")
        h.rm(dir)
        assert.are.equal(r.md, md)
        h.contains(md, "| natural | 3 | 6.2000 [")
        h.contains(md, "| 0.2000 / 0.2667 |")
        h.contains(md, "| dga | 3 | 6.1000 [")
        h.contains(md, "-0.1000 [-0.1000, -0.1000]")
        h.contains(md, "supported (CI excludes 0)")
    end)

    it("writes results.md from the run directories alone", function()
        local study, docs = h.tmpdir(), h.tmpdir()
        for s, v in ipairs{1.0, 1.5} do
            put(study .. "/quickstart", "t/uniform", s, {specific_final = v})
            put(study .. "/quickstart", "t/dga_ema_fixed", s, {specific_final = v + 1})
        end
        -- a figure an earlier report wrote for an experiment not run now goes; other files stay
        h.write(docs .. "/recover_curves_old.png", "png")
        h.write(docs .. "/model.md", "kept")
        report.results(study, docs, {plot = false, quiet = true, note = "A smoke run."})
        local md = h.read(docs .. "/results.md")
        assert.is_nil(io.open(docs .. "/recover_curves_old.png"))
        assert.are.equal("kept", h.read(docs .. "/model.md"))
        h.rm(study)
        h.rm(docs)
        assert.truthy(md:find("^# Results of the study\n\n%*%*A smoke run%.%*%*\n"), md:sub(1, 80))
        h.contains(md, "## Quickstart")
        -- two seeds show their two values, not an interval
        h.contains(md, "| uniform | 2 | 1.0000, 1.5000 (n=2) |")
        h.contains(md, "| dga_ema_fixed | 2 | 2.0000, 2.5000 (n=2) |")
    end)

    it("says how long the study took from the runs' own start and end times", function()
        local study = h.tmpdir()
        local function run(exp, cell, seed, finished, seconds)
            local d = string.format("%s/%s/%s/seed-%d", study, exp, cell, seed)
            assert(os.execute("mkdir -p " .. h.shell_quote(d)))
            h.write(d .. "/summary.json", json.encode({cell = cell, seed = seed, finished = finished,
                                                       seconds = seconds, metrics = {x = 1}}))
        end
        -- lowdata: two runs side by side, 10:00:00-10:01:40 and 10:00:30-10:02:00 -> 120 s with a
        -- run going; recover 10:05:00-10:06:00 -> 180 s in the whole study (not the 3 minutes
        -- between them, as between two sittings); a same_as copy adds nothing
        run("lowdata", "t/a", 1, "2026-11-25T10:01:40Z", 100)
        run("lowdata", "t/b", 1, "2026-11-25T10:02:00Z", 90)
        run("recover", "m/a", 1, "2026-11-25T10:06:00Z", 60)
        run("recover", "m/b", 1, "not a time", 60)   -- ignored: no usable end time
        local d = study .. "/recover/n/a/seed-1"
        assert(os.execute("mkdir -p " .. h.shell_quote(d)))
        h.write(d .. "/summary.json", json.encode({cell = "n/a", seed = 1, finished = "2026-11-25T10:06:00Z",
                                                   seconds = 0, same_as = "m/a", metrics = {x = 1}}))
        local md = report.timing(study)
        local sentence = report.timing_sentence(study)
        -- a run that started in the second another ended (finished is to the second) is not a third at once
        run("recover", "m/c", 1, "2026-11-25T10:02:30Z", 50.4)     -- from 10:01:39.6, beside t/b
        assert.are.equal(2, report.timings(study).at_once)
        run("recover", "m/d", 1, "2026-11-25T10:01:50Z", 60)     -- 10:00:50-10:01:50: three at once
        assert.are.equal(3, report.timings(study).at_once)
        h.rm(study)
        h.contains(sentence, "The 3 runs of these records took 0.05 hours with a run going (lowdata 0.03 h, "
                             .. "recover 0.02 h), from their own start and end times (up to 2 at a time)")
        h.contains(md, "| lowdata | 2 | 190 | 120 (0.03 h) |")
        h.contains(md, "| recover | 1 | 60 | 60 (0.02 h) |")
        h.contains(md, "| **whole study** | | | 180 (0.05 h) |")
        assert.is_nil(md:find("mmlu_dist", 1, true))
        local empty = h.tmpdir()
        assert.is_nil(report.timing(empty))
        h.rm(empty)
    end)
end)

-- The --quick runs, through the dgalua executable, on the shared data: each must finish,
-- write a summary.json per cell, pass the leakage check on its data path, and print its table.
describe("experiments --quick", function()
    local DGALUA = h.DGALUA
    local function skip_reason()
        if os.getenv("DGA_SANITIZED") then return "sanitizer pass: the release pass runs the experiments" end
        if not DGALUA then return "DGALUA is not set (run through tests/run)" end
        if not h.exists(DATA .. "/corpus/us_legislation") then return "no corpus under " .. DATA end
        return nil
    end
    local tmp
    setup(function() if not skip_reason() then tmp = h.tmpdir("cache") end end)
    teardown(function() h.rm(tmp) end)

    local function count_summaries(dir)
        local p = io.popen("find " .. h.shell_quote(dir) .. " -name summary.json | wc -l")
        local n = tonumber(p:read("a"))
        p:close()
        return n
    end

    local function run(name, cells, extra)
        local reason = skip_reason()
        if reason then pending(reason) return end
        local out = tmp .. "/" .. name
        local cmd = string.format("%s experiments/%s.lua --quick --jobs 2 --threads 1 --no-plot --out %s "
                                  .. "--cache %s --corpus %s %s", h.shell_quote(DGALUA), name,
                                  h.shell_quote(out), h.shell_quote(tmp .. "/cache"),
                                  h.shell_quote(DATA .. "/corpus"), extra or "")
        local code, stdout, stderr = h.run(cmd, tmp .. "/" .. name .. ".err")
        assert.are.equal(0, code, stdout .. stderr)
        h.contains(stderr, "leakage check:")
        assert.are.equal(cells, count_summaries(out))
        assert.is_truthy(h.read(out .. "/table.md"))
        return out, stdout, stderr
    end

    it("lowdata", function()
        -- a budget (b3) and no limit (binf): natural, IS, DGA, DGA + EMA (fixed, adaptive), and
        -- uniform only without a limit, where it differs from natural
        local out, stdout = run("lowdata", 11)
        h.contains(stdout, "| natural | 1 |")
        h.contains(stdout, "dga_ema_fixed")
        assert.is_truthy(h.read(out .. "/us_legislation/binf/uniform/seed-1/summary.json"))
        assert.is_nil(io.open(out .. "/us_legislation/b3/uniform/seed-1/summary.json"))
    end)

    it("recover", function()
        local out = run("recover", 6)
        local notes = h.read(out .. "/notes.md")
        h.contains(notes, "Best static mixture")
        -- the best grid point is always among those that cannot be told from it
        local best = notes:match("Best static mixture of the grid %b(): w = ([%d.]+)")
        local ties = notes:match("cannot be told from the best one's %b(): w = ([%d., ]+)%.")
        assert.is_string(best)
        assert.is_string(ties)
        h.contains(ties, best)
    end)

    it("mmlu_dist", function()
        local out = run("mmlu_dist", 15, "--mmlu " .. h.shell_quote(DATA .. "/mmlu"))
        local notes = h.read(out .. "/notes.md")
        h.contains(notes, "levels 8,8,8 give k =")
        -- the runs within a random guesser's interval, counted again from the summaries
        local half = 100 * 1.96 * math.sqrt(0.25 * 0.75 / 60)
        local within, total = 0, 0
        local f = io.popen("find " .. h.shell_quote(out) .. " -name summary.json")
        for path in f:lines() do
            local acc = require("util.json").decode(h.read(path)).metrics.accuracy
            total = total + 1
            if math.abs(acc - 25) <= half then within = within + 1 end
        end
        f:close()
        assert.are.equal(15, total)
        h.contains(notes, string.format("random guesser's 95%% interval (25 ± %.1f%% over 60 questions) in %d of 15 runs",
                                        half, within))
        -- "at chance" means that interval only: runs outside it are never called at chance
        if within < total then assert.is_nil(notes:lower():find("at chance in every run", 1, true), notes) end
        -- every run also writes its MMLU scores in lm-evaluation-harness's shape
        local p = io.popen("find " .. h.shell_quote(out) .. " -name mmlu_results.json | wc -l")
        assert.are.equal(15, tonumber(p:read("a")))
        p:close()
        local any = io.popen("find " .. h.shell_quote(out) .. " -name mmlu_results.json | head -1"):read("l")
        local doc = require("util.json").decode(h.read(any))
        assert.is_number(doc.results.mmlu["acc,none"])
        assert.is_number(doc.results.mmlu_stem["acc,none"])
    end)

    it("quickstart", function()
        run("quickstart", 3)
    end)
end)

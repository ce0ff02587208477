-- scripts/plot.lua's weight figures: the legend lists the stacked areas in the order they
-- are stacked (top band first), and a domain's label says what its percentage is.
local h = require "tests.lua.helpers"
local plot = require "plot"

describe("plot.weights_figure", function()
    local dir
    setup(function() dir = h.tmpdir("run") end)
    teardown(function() h.rm(dir) end)

    it("keys the legend in stack order, with labels that say what the percentage is", function()
        local run = dir .. "/run"
        h.write(run .. "/metrics.csv", "step,specific_loss\n0,5\n10,4\n20,3\n")
        -- domain 2 has the largest mean weight, then 1, then 3 (shown as "other" with top = 2)
        h.write(run .. "/weights.csv", "step,domain,weight\n0,1,0.3\n0,2,0.5\n0,3,0.2\n" ..
                                      "10,1,0.35\n10,2,0.45\n10,3,0.2\n")
        h.write(run .. "/domains.csv", "domain,name,size,available\n1,1:latex 83%,10,10\n" ..
                                      "2,2:code_python 95%,10,10\n3,3:pubmed 40%,10,10\n")
        local f = plot.weights_figure(plot.read_run(run), dir .. "/plots", {top = 2})
        local gp = assert(h.read(f.gp))
        local titles = {}
        for t in gp:match("\nplot (.-)\nunset output"):gmatch('title "([^"]*)"') do titles[#titles + 1] = t end
        assert.are.same({"other", "1: latex (83% of its sequences)", "2: code_python (95% of its sequences)"},
                        titles)
        -- the bands themselves are unchanged: the largest domain is the bottom one, from 0
        assert.truthy(gp:find("using 1:(0):2 with filledcurves", 1, true))
        assert.are.equal("plain name", plot.domain_label("plain name"))
    end)
end)

describe("plot.distinct_names", function()
    it("tells runs that share a name apart by their directories, and says so naming both", function()
        local said = {}
        local runs = {{name = "dga", dir = "runs/a/us/dga/seed-1"}, {name = "dga", dir = "runs/a/pub/dga/seed-1"},
                      {name = "natural", dir = "runs/a/us/natural/seed-1"}}
        plot.distinct_names(runs, function(msg) said[#said + 1] = msg end)
        assert.are.equal("dga [us/dga/seed-1]", runs[1].name)
        assert.are.equal("dga [pub/dga/seed-1]", runs[2].name)
        assert.are.equal("natural", runs[3].name)
        assert.are.equal(1, #said)
        assert.truthy(said[1]:find("runs/a/us/dga/seed-1, runs/a/pub/dga/seed-1", 1, true), said[1])
    end)
end)

describe("harness.figures: the paired differences", function()
    it("keep 0 in view when every difference has one sign, so the zero line is drawn", function()
        local json, seeds = require "util.json", require "harness.seeds"
        local root = h.tmpdir("diffs")
        for _, label in ipairs({"ref", "x"}) do
            for seed = 1, 3 do
                local run = string.format("%s/g/%s/seed-%d", root, label, seed)
                assert(os.execute("mkdir -p " .. h.shell_quote(run)))
                h.write(run .. "/metrics.csv", "step,specific_loss\n0,5\n10,4\n")
                local final = label == "ref" and 4 or 3.5 + 0.01 * seed   -- x - ref: about -0.48
                h.write(run .. "/summary.json", json.encode({cell = "g/" .. label, seed = seed, group = "g",
                                                             metrics = {specific_final = final}}))
            end
        end
        local made = require("harness.figures").figures(seeds.collect(root), root .. "/plots",
                                                        {metric = "specific_final", reference = "ref"})
        local gp
        for _, f in ipairs(made) do if f.gp:match("differences_g%.gp$") then gp = h.read(f.gp) end end
        assert.is_truthy(gp, "no differences figure")
        local lo, hi = gp:match("set yrange %[([^:]+):([^%]]+)%]")
        assert.is_truthy(lo, gp)
        assert.is_true(tonumber(lo) < -0.48 and tonumber(hi) > 0, lo .. ":" .. hi)
        -- the scale figure's panels too: autoscaled, but never past 0
        local f = plot.errorbar_panels(root .. "/plots", "scale", {{title = "gap", series = {{name = "is",
            points = {{x = 1, y = 5, lo = 4.5, hi = 5.5}, {x = 4, y = 8, lo = 7.9, hi = 8.1}}}}}}, {logx = true})
        h.contains(h.read(f.gp), "set yrange [*<0:0<*]")
        h.rm(root)
    end)
end)

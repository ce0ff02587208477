-- Training-loss signals in ctx (trainer/losses.lua, the mixture space's train_losses) and the
-- loss-based policies run through the real trainer: odm, doge (both targets), doremi.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua"
package.path = here .. "/?.lua;" .. package.path
local dga = dga or require "dga"
local trainer = require "trainer"
local losses = require "trainer.losses"
local csvlog = require "util.csvlog"
local runinfo = require "util.runinfo"
local fixture = require "trainer_fixture"

local function close(a, b, tol) return math.abs(a - b) <= (tol or 1e-6) end

local base
local h = require "tests.lua.helpers"
local rmtree, rows_without_seconds = h.rmtree, h.rows_without_seconds

describe("training-loss accumulators", function()
    it("sum and count each sequence under its leaf domain", function()
        local acc = losses.new(3)
        acc:add(dga.tensor({1, 3, 1}, "int32"), dga.tensor({2.0, 5.0, 4.0}))
        acc:add(dga.tensor({3}, "int32"), dga.tensor({1.0}))
        assert.are.same({6, 0, 6}, acc.sum:totable())
        assert.are.same({2, 0, 2}, acc.count:totable())
        acc:reset_interval()
        acc:add(dga.tensor({2}, "int32"), dga.tensor({7.0}))
        assert.are.same({0, 7, 0}, acc.sum:totable())
        assert.are.same({6, 7, 6}, acc.total_sum:totable())
        assert.are.same({2, 1, 2}, acc.total_count:totable())
        local copy = losses.new(3)
        copy:restore(acc:tensors())
        assert.are.same(acc.total_sum:totable(), copy.total_sum:totable())
        assert.has_error(function() losses.new(4):restore(acc:tensors()) end,
                         "checkpoint: train_loss.sum has 3 entries, the data has 4 domains")
    end)
end)

describe("loss-based policies in the trainer", function()
    setup(function()
        base = os.tmpname()
        os.remove(base)
        runinfo.mkdir_p(base)
    end)
    teardown(function()
        package.loaded["policies.capture"] = nil
        rmtree(base)
    end)

    it("hand every update the losses of the sequences drawn since the last one", function()
        local seen = {}
        package.loaded["policies.capture"] = {new = function()
            return {name = "capture", init = function(_, ctx) return dga.tensor({1, 1, 1}):normalize_() end,
                    update = function(_, ctx, step)
                        seen[#seen + 1] = {step = step, loss = ctx.train_loss:totable(),
                                           count = ctx.train_count:totable(),
                                           mean = ctx.train_loss_mean:totable(),
                                           total = ctx.train_count:sum()}
                        return dga.tensor({1, 1, 1}):normalize_()
                    end}
        end}
        trainer.run(fixture.config(base .. "/capture", {policy = {name = "capture"}}), {quiet = true})
        assert.are.equal(5, #seen)   -- T_r = 4 over 24 steps: updates at 4, 8, ..., 20
        for _, s in ipairs(seen) do
            assert.are.equal(4 * 4, s.total)   -- T_r steps of batch 4
            for d = 1, 3 do
                if s.count[d] > 0 then
                    assert.is_true(s.loss[d] > 0 and s.loss[d] < 2 * math.log(32), "loss " .. s.loss[d])
                else
                    assert.are.equal(0, s.loss[d])
                end
            end
        end
        -- the run-long mean at the first update is the interval's mean
        for d = 1, 3 do assert.is_true(close(seen[1].mean[d], seen[1].loss[d], 1e-5)) end
    end)

    it("odm moves weight with the losses and resumes bit-identically mid-interval", function()
        local over = {policy = {name = "odm", smoothing = 0.5}, T_r = 5}
        local full = trainer.run(fixture.config(base .. "/odm", over), {quiet = true})
        assert.is_true(close(full.weights:sum(), 1, 1e-5))
        local dir = base .. "/odm_split"
        trainer.run(fixture.config(dir, over), {quiet = true, stop_at = 12})   -- between updates 10 and 15
        trainer.run(fixture.config(dir, over), {quiet = true, resume = true})
        for _, f in ipairs{"metrics.csv", "weights.csv", "epochs.csv"} do   -- odm makes no alignment round
            local a, b = rows_without_seconds(base .. "/odm/" .. f), rows_without_seconds(dir .. "/" .. f)
            assert.are.same(a, b, f)
        end
    end)

    it("doge runs against the specific set and against the training mixture", function()
        for _, target in ipairs{"specific", "mixture"} do
            local s = trainer.run(fixture.config(base .. "/doge_" .. target,
                                                 {policy = {name = "doge", target = target, mu = 0.001}}),
                                  {quiet = true})
            assert.is_true(close(s.weights:sum(), 1, 1e-5))
            local _, rows = csvlog.read(base .. "/doge_" .. target .. "/alignments.csv")
            assert.is_true(#rows > 0)
        end
    end)

    it("doremi scores against a reference checkpoint", function()
        local ref_dir = base .. "/reference"
        trainer.run(fixture.config(ref_dir, {policy = {name = "natural"}}), {quiet = true})
        local ref = trainer.latest_checkpoint(ref_dir)
        local s = trainer.run(fixture.config(base .. "/doremi", {policy = {name = "doremi", reference = ref}}),
                              {quiet = true})
        assert.is_true(close(s.weights:sum(), 1, 1e-5))
    end)
end)

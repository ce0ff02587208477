-- Argument checks of the bindings that the hardening pass added: each bad input is an error
-- that names it, raised where it enters rather than later (a batch of 0 used to fail only
-- in the model's forward, a matrix was taken as a histogram in row order).
local dga = require "dga"

local h = require "tests.lua.helpers"
local raises = h.raises

describe("input checks", function()
    it("clip_grad needs a max_norm > 0", function()
        local m = dga.gpt{layers = 1, width = 8, heads = 2, context = 4, vocab = 10, batch = 2}
        for _, bad in ipairs{-1, 0, 0 / 0} do
            raises("max_norm must be a number > 0, got ", m.clip_grad, m, bad)
        end
        assert.are.equal(0, m:clip_grad(1.0))   -- fresh gradients are zero
        assert.are.equal(0, m:clip_grad(math.huge))
    end)

    it("a draw is a batch: 0 sequences is an error naming the count", function()
        local smp = dga.sampler({3, 4}, {seed = 1})
        raises("count must be a batch size in [1, 2^31), got 0", smp.draw, smp, 0)
        raises("count must be a batch size in [1, 2^31), got 0", smp.draw_from, smp, 1, 0)
        local P = dga.basis(2, {{1, 1}})
        raises("count must be a batch size in [1, 2^31), got 0", P.draw, P, 1, 0, smp)
        local d = smp:draw(1)
        assert.are.equal(1, #d)
        raises("option 'batch' must be an integer >= 1, got 0", dga.gpt,
               {layers = 1, width = 8, heads = 2, context = 4, vocab = 10, batch = 0})
    end)

    it("histograms and weights must be 1-D", function()
        local square = dga.tensor({{1, 2}, {3, 4}})
        raises("column 2 is a 2-D tensor, expected a 1-D vector", dga.basis, 4,
               {dga.tensor({1, 2, 3, 4}), square})
        local smp = dga.sampler({1, 1, 1, 1})
        raises("weights is a 2-D tensor, expected a 1-D vector", smp.set_weights, smp, square)
        local P = dga.basis(4, {{1, 2, 3, 4}})
        raises("alpha is a 2-D tensor, expected a 1-D vector", P.mix, P, dga.tensor({{1}}))
        smp:set_weights({1, 2, 3, 4})
        assert.are.equal(4, P:mix({1}):numel())
    end)

    it("messages give the value that was refused", function()
        raises("option 'seed' must be an integer, got 1.5", dga.sampler, {1, 2}, {seed = 1.5})
        raises("option 'epoch_cap' must be an integer >= 0, got -1", dga.sampler, {1, 2}, {epoch_cap = -1})
        raises("k must be in [1, 2^31), got 0", dga.basis, 0, {{1}})
        raises("vocabulary size must be in [1, 2^31), got 0", dga.shard_write, "/tmp/never-written.bin", {1}, 0)
        local m = dga.gpt{layers = 1, width = 8, heads = 2, context = 4, vocab = 10, batch = 2}
        local x = dga.tensor({{1, 2, 3, 4}}, "int32")
        raises("batch must be in [0, 2] (0: the model's max batch), got 3", dga.eval_loss, m, x, x, 3)
        raises('option \'method\' must be one of "exact", "fd", "jvp", got "jvq"', dga.align, m, x, x, {{x, x}}, {method = "jvq"})
        raises("option 'fd_eps' must be a number > 0, got 0", dga.align, m, x, x, {{x, x}}, {method = "fd", fd_eps = 0})
    end)
end)

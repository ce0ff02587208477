-- ODM, DoGE and DoReMi: each update rule pinned on a hand-computed two-component example
-- (the expected numbers were worked out from the formulas at the top of each policy file,
-- independently of the code), plus their use of the ctx signals.
local dga = dga or require "dga"
local policies = require "policies"

local function close(a, b, tol) return math.abs(a - b) <= (tol or 1e-6) end

local h = require "tests.lua.helpers"

local function ctx_of(sizes, extra)
    local ctx = h.policy_ctx(sizes, extra)
    ctx.lr = ctx.lr or 1e-3
    return ctx
end

describe("odm (EXP3 on training losses)", function()
    it("follows the smoothed importance-weighted reward and the eps schedule", function()
        local p = policies.get("odm", {smoothing = 0.5})
        local w = p:init(ctx_of({3, 3}))
        assert.is_true(close(w[1], 0.5) and close(w[2], 0.5))
        -- step 8: losses 2 and 4, both drawn: R = {2, 4}, eps = sqrt(ln 2 / 16)
        w = p:step(dga.tensor({2, 4}), dga.tensor({1, 1}), 8)
        assert.is_true(close(p.eps, 0.2081386528))
        assert.is_true(close(w[1], 0.3651258639) and close(w[2], 0.6348741361))
        -- step 16: only component 1 drawn (loss 3): its reward moves, component 2's stays 4
        w = p:step(dga.tensor({3, 99}), dga.tensor({1, 0}), 16)
        assert.is_true(close(p.reward[1], 5.1081724092, 1e-5) and close(p.reward[2], 4))
        assert.is_true(close(w[1], 0.5405105769) and close(w[2], 0.4594894231))
    end)

    it("reads ctx.train_loss and ctx.train_count, and keeps empty components at 0", function()
        local p = policies.get("odm")
        local ctx = ctx_of({4, 0, 4})
        p:init(ctx)
        ctx.train_loss, ctx.train_count = dga.tensor({5, 0, 1}), dga.tensor({2, 0, 2})
        local w = p:update(ctx, 400)
        assert.are.equal(0, w[2])
        assert.is_true(w[1] > w[3])
        assert.is_true(close(w:sum(), 1, 1e-5))
        assert.is_not_nil(ctx.logged.eps)
        ctx.train_loss = nil
        assert.has_error(function() p:update(ctx, 440) end,
                         "policy 'odm': ctx.train_loss is missing (the trainer provides per-component training losses)")
    end)

    it("restores its state", function()
        local p = policies.get("odm", {smoothing = 0.5})
        p:init(ctx_of({3, 3}))
        p:step(dga.tensor({2, 4}), dga.tensor({1, 1}), 8)
        local q = policies.get("odm", {smoothing = 0.5})
        q:init(ctx_of({3, 3}))
        q:set_state(p:state())
        local a = p:step(dga.tensor({3, 1}), dga.tensor({1, 1}), 16)
        local b = q:step(dga.tensor({3, 1}), dga.tensor({1, 1}), 16)
        assert.are.same(a:totable(), b:totable())
    end)
end)

describe("doge (generalisation estimation)", function()
    it("normalises by the mean gradient norm, clamps, and steps by 1/mu", function()
        local p = policies.get("doge")   -- mu = 0.01, w_min = 0, w_max = 5
        p:init(ctx_of({2, 2}))
        -- W = lr * dot / mean|g| = 1e-3 * {2, -1} / 2 -> {1e-3, -5e-4} -> clamped {1e-3, 0}
        local w = p:step(dga.tensor({2, -1}), dga.tensor({1, 3}), 1e-3)
        assert.is_true(close(w[1], 0.5249791875) and close(w[2], 0.4750208125))
        assert.is_true(close(p.average[1], 0.5124895937))
    end)

    it("clamps at lr * w_max", function()
        local p = policies.get("doge", {w_max = 1})
        p:init(ctx_of({2, 2}))
        -- W_1 = 1e-3 * 100 / 1 = 0.1, clamped to 1e-3: the same step as a dot of 2 above
        local w = p:step(dga.tensor({100, 0}), dga.tensor({1, 1}), 1e-3)
        assert.is_true(close(w[1], 0.5249791875))
    end)

    it("takes the dot products from ctx:align()", function()
        local p = policies.get("doge")
        local ctx = ctx_of({2, 2})
        p:init(ctx)
        function ctx.align(_, o)
            assert.is_nil(o)
            return {dot = dga.tensor({2, -1}), grad_norm = dga.tensor({1, 3}),
                    align = dga.tensor({0, 0})}
        end
        local w = p:update(ctx, 100)
        assert.is_true(close(w[1], 0.5249791875))
        assert.has_error(function() policies.get("doge", {target = "elsewhere"}) end,
                         "policy 'doge': target = elsewhere, expected \"specific\" or \"mixture\"")
    end)
end)

describe("doremi (excess loss against a reference)", function()
    it("exponentiates the excess loss and smooths towards uniform", function()
        local p = policies.get("doremi", {reference = "unused", smoothing = 0.1})
        p.ref = {}   -- no checkpoint needed for the rule itself
        p:init(ctx_of({2, 2}))
        local w = p:step(dga.tensor({1, 0}))
        assert.is_true(close(w[1], 0.7079527208) and close(w[2], 0.2920472792))
    end)

    it("clips the excess per sequence and weighs it by tokens", function()
        local doremi = require "policies.doremi"
        assert.is_true(close(doremi.excess({10, 4}, {8, 6}, {5, 5}), 0.2))
    end)

    it("scores probe batches with the model and the reference", function()
        local model = dga.gpt{layers = 1, width = 16, heads = 2, context = 8, vocab = 32, batch = 4, seed = 3}
        local p = policies.get("doremi", {reference = "unused", batch = 4})
        p.ref = model      -- the model as its own reference: no excess anywhere
        local ctx = ctx_of({5, 5}, {model = model})
        local rng = dga.rng(1)
        function ctx.probe(_, j, n)
            local x, y = dga.zeros(n, 8, "int32"), dga.zeros(n, 8, "int32")
            for i = 1, n * 8 do x[i] = rng:below(32); y[i] = rng:below(32) end
            return x, y
        end
        p:init(ctx)
        local w = p:update(ctx, 10)
        assert.is_true(close(w[1], 0.5) and close(w[2], 0.5))
        assert.are.equal(0, ctx.logged.mean_excess)
        assert.has_error(function() policies.get("doremi") end,
                         "policy 'doremi': option reference (a checkpoint path) is required")
    end)
end)

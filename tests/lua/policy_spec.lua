-- The mixing policies (scripts/policies): fixed baselines, the DGA update, distribution
-- reweighting, the registry, and the sign of a DGA update on two synthetic domains.
local dga = dga or require "dga"
local policies = require "policies"

local function close(a, b, tol) return math.abs(a - b) <= (tol or 1e-6) end

local ctx_of = require("tests.lua.helpers").policy_ctx

describe("fixed policies", function()
    it("uniform sums to 1 and skips domains without data", function()
        local w = policies.get("uniform"):init(ctx_of({5, 0, 7, 9}))
        assert.is_true(close(w:sum(), 1))
        assert.are.equal(0, w[2])
        assert.is_true(close(w[1], 1 / 3) and close(w[3], 1 / 3) and close(w[4], 1 / 3))
        assert.is_true(policies.get("uniform").fixed)
    end)

    it("natural is proportional to the available sequences", function()
        local ctx = ctx_of({10, 30, 60})
        local p = policies.get("natural")
        local w = p:init(ctx)
        for i, s in ipairs{10, 30, 60} do assert.is_true(close(w[i], s / 100)) end
        ctx.budget = {10, 30, 20}   -- token-limited: only the budget exists
        w = p:init(ctx)
        assert.is_true(close(w[3], 20 / 60))
        assert.is_true(close(p:update(ctx, 100)[3], 20 / 60))
    end)

    it("importance returns the IS histogram", function()
        local h = dga.tensor({0, 0.25, 0.75, 0})
        local w = policies.get("importance"):init(ctx_of({1, 1, 1, 1}, {is_histogram = h}))
        assert.are.same(h:totable(), w:totable())
        assert.error_matches(function() policies.get("importance"):init(ctx_of({1, 1})) end,
                             "policy 'importance': ctx.is_histogram is missing", 1, true)
        assert.error_matches(function()
            policies.get("importance"):init(ctx_of({1, 1}, {is_histogram = dga.tensor{1, 0, 0}}))
        end, "is_histogram has 3 entries, expected ctx.k = 2", 1, true)
    end)
end)

describe("registry", function()
    it("names unknown policies and options", function()
        local ok, err = pcall(policies.get, "nosuch")
        assert.is_false(ok)
        assert.matches("unknown policy 'nosuch'", err, 1, true)
        ok, err = pcall(policies.get, "dga", {betta = 0.2})
        assert.is_false(ok)
        assert.matches("unknown option 'betta'", err, 1, true)
        ok, err = pcall(policies.get, "dga", {eta_mode = "fixed"})
        assert.is_false(ok)
        assert.matches("needs a number eta", err, 1, true)
        for _, bad in ipairs({0, -1, math.huge, 0 / 0}) do
            ok, err = pcall(policies.get, "dga", {eta = bad})
            assert.is_false(ok)
            assert.matches("eta = " .. tostring(bad) .. ", expected a finite number > 0", err, 1, true)
            ok, err = pcall(policies.get, "dga_dist", {eta = bad})
            assert.is_false(ok)
            assert.matches("policy 'dga_dist'", err, 1, true)
        end
        assert.are.equal("dga", policies.get("dga", {name = "dga"}).name)
    end)
end)

describe("dga", function()
    local function ctx_with(a, norm)
        local ctx = ctx_of({100, 100, 100})
        function ctx.align() return {align = dga.tensor(a), target_norm = norm or 2} end
        return ctx
    end

    it("moves weight along +eta a and averages with the EMA", function()
        local p = policies.get("dga", {eta = 1.0, beta = 0.25, floor = 0})
        local ctx = ctx_with({1, 0, -1})
        local w0 = p:init(ctx)
        assert.is_true(close(w0[1], 1 / 3))
        local w = p:update(ctx, 100)
        -- alpha = softmax(log(1/3) + a) = e^a / sum e^a
        local z = math.exp(1) + 1 + math.exp(-1)
        local alpha = {math.exp(1) / z, 1 / z, math.exp(-1) / z}
        for i = 1, 3 do
            assert.is_true(close(p.alpha[i], alpha[i]))
            assert.is_true(close(w[i], 0.75 / 3 + 0.25 * alpha[i]))
        end
        assert.is_true(w[1] > w[2] and w[2] > w[3])
        assert.is_true(close(w:sum(), 1))
        assert.is_true(close(ctx.logged.g_spe_sq, 4))
        assert.is_true(close(ctx.logged.mean_abs_a, 2 / 3))
        assert.is_true(close(ctx.logged.std_a, math.sqrt(2 / 3)))
        -- a second update compounds from alpha, not from the EMA
        local w2 = p:update(ctx, 200)
        local z2 = math.exp(2) + 1 + math.exp(-2)
        assert.is_true(close(p.alpha[1], math.exp(2) / z2))
        assert.is_true(close(w2[1], 0.75 * w[1] + 0.25 * math.exp(2) / z2))
    end)

    it("beta = 1 is DGA without EMA; eta from std(a) sets the log-weight spread", function()
        local p = policies.get("dga", {beta = 1, target_change = 0.5, floor = 0})
        local ctx = ctx_with({3e-4, 1e-4, -1e-4})   -- tiny alignments: eta adapts
        p:init(ctx)
        local w = p:update(ctx, 100)
        assert.are.same(p.alpha:totable(), w:totable())
        local sd = ctx.logged.std_a
        assert.is_true(close(ctx.logged.eta, 0.5 / sd, 1e-6 / sd))
        -- log(w1 / w3) = eta (a1 - a3)
        assert.is_true(close(math.log(w[1] / w[3]), 0.5 / sd * 4e-4, 1e-4))
    end)

    it("the floor keeps every domain above floor / k at large k", function()
        local k = 262144
        local sizes = {}
        for i = 1, k do sizes[i] = 1 end
        local a = dga.zeros(k)
        a[1] = 1e6   -- a huge step: everything else would underflow to exactly 0
        local ctx = ctx_of(sizes)
        function ctx.align() return {align = a, target_norm = 1} end
        local p = policies.get("dga", {eta = 1, beta = 1})
        p:init(ctx)
        local w = p:update(ctx, 100)
        assert.is_true(w:min() >= 1e-6 / k * 0.999)
        assert.is_true(close(w:sum(), 1, 1e-4))
        assert.is_true(w[1] > 0.99)
    end)

    it("starts from uniform, natural or given weights", function()
        local ctx = ctx_of({10, 30, 60})
        local w = policies.get("dga", {init = "natural"}):init(ctx)
        assert.is_true(close(w[3], 0.6))
        w = policies.get("dga", {init = {1, 1, 2}}):init(ctx)
        assert.is_true(close(w[3], 0.5))
        assert.error_matches(function() policies.get("dga", {init = {1, 1}}):init(ctx) end,
                             "policies: init has 2 weights, expected ctx.k = 3", 1, true)
    end)

    it("state round-trips", function()
        local p = policies.get("dga", {eta = 1})
        local ctx = ctx_with({1, 0, -1})
        p:init(ctx)
        p:update(ctx, 100)
        local st = p:state()
        local q = policies.get("dga", {eta = 1})
        q:init(ctx)
        q:set_state(st)
        assert.are.same(p:update(ctx, 200):totable(), q:update(ctx, 200):totable())
    end)
end)

describe("dga_dist", function()
    it("weighs the N bases; the training mixture is P alpha", function()
        local P = dga.basis(4, {dga.tensor({1, 1, 0, 0}), dga.tensor({0, 0, 1, 3})})
        local ctx = ctx_of({10, 20}, {basis = P, n_leaves = 4})
        function ctx.align() return {align = dga.tensor({0.5, -0.5}), target_norm = 1} end
        local p = policies.get("dga_dist", {eta = 2, beta = 0.5, floor = 0})
        local w0 = p:init(ctx)
        assert.are.equal(2, #w0)
        local w = p:update(ctx, 100)
        assert.is_true(w[1] > w[2])
        local mix = p:mixture(ctx)
        local expect = {w[1] * 0.5, w[1] * 0.5, w[2] * 0.25, w[2] * 0.75}
        for i = 1, 4 do assert.is_true(close(mix[i], expect[i])) end
        local bad = ctx_of({10, 20})
        assert.error_matches(function() p:init(bad) end,
                             "policy 'dga_dist': ctx.basis (the k x N histograms) is missing", 1, true)
    end)
end)

-- Two synthetic domains: 1 = counting in [0, 16), 2 = counting by two in [16, 32).
describe("a DGA update on two synthetic domains", function()
    local V, T, B = 32, 8, 8
    local rng = dga.rng(11)
    local function batch(domain)
        local x, y = {}, {}
        for b = 1, B do
            local s = rng:below(16)
            x[b], y[b] = {}, {}
            for t = 1, T do
                local function tok(u) return domain == 1 and (s + u) % 16 or 16 + (s + 2 * u) % 16 end
                x[b][t], y[b][t] = tok(t - 1), tok(t)
            end
        end
        return dga.tensor(x, "int32"), dga.tensor(y, "int32")
    end

    local model = dga.gpt{layers = 1, width = 16, heads = 2, context = T, vocab = V, batch = B, seed = 2}
    local opt = dga.adamw(model, {lr = 3e-3})
    for step = 1, 20 do   -- a few steps on the 50/50 mix
        local x, y = batch(step % 2 + 1)
        model:zero_grad()
        model:forward(x, y)
        model:backward()
        opt:step()
    end

    local function update_towards(target)
        local ctx = ctx_of({100, 100})
        function ctx.align()
            local tx, ty = batch(target)
            local b1x, b1y = batch(1)
            local b2x, b2y = batch(2)
            return dga.align(model, tx, ty, {{b1x, b1y}, {b2x, b2y}})
        end
        local p = policies.get("dga", {beta = 1})
        local w0 = p:init(ctx)
        local w = p:update(ctx, 100)
        model:zero_grad()
        return w[target] - w0[target]
    end

    it("moves weight to domain 1 when the specific set is from domain 1", function()
        assert.is_true(update_towards(1) > 0.05)
    end)

    it("moves weight to domain 2 when the specific set is from domain 2", function()
        assert.is_true(update_towards(2) > 0.05)
    end)
end)

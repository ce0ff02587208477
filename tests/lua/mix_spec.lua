-- dga.sampler, dga.basis, dga.align, dga.eval_loss from Lua.
local dga = dga or require "dga"

local function counts(t, k)
    local c = {}
    for i = 1, k do c[i] = 0 end
    for i = 1, #t do c[t[i]] = c[t[i]] + 1 end
    return c
end

describe("dga.sampler", function()
    it("draws 1-based domains and indices in proportion to the weights", function()
        local smp = dga.sampler({1000, 1000, 1000}, {seed = 3})
        smp:set_weights({0.6, 0.3, 0.1})
        local n = 30000
        local d, i = smp:draw(n)
        assert.are.equal(n, #d)
        assert.are.equal(n, #i)
        assert.are.equal(1, d:min())
        assert.are.equal(3, d:max())
        assert.is_true(i:min() >= 1 and i:max() <= 1000)
        local c = counts(d, 3)
        local chi2 = 0
        for j, w in ipairs{0.6, 0.3, 0.1} do chi2 = chi2 + (c[j] - n * w) ^ 2 / (n * w) end
        assert.is_true(chi2 < 13.82)   -- 2 degrees of freedom, p = 0.001
        local drawn = smp:drawn()
        for j = 1, 3 do assert.are.equal(c[j], drawn[j]) end
        local w = smp:weights()
        assert.is_true(math.abs(w[1] - 0.6) < 1e-6)
    end)

    it("respects budgets and epoch caps and reports capped domains", function()
        local smp = dga.sampler(dga.tensor({10, 4}, "int32"), {seed = 1, budget = {3, 10}, epoch_cap = 2})
        assert.are.same({3, 4}, smp:available():totable())
        smp:set_weights({1, 1})
        local d, i = smp:draw(14)   -- 2 epochs of 3 + 2 epochs of 4: everything
        for t = 1, 14 do
            if d[t] == 1 then assert.is_true(i[t] <= 3) end
        end
        assert.are.same({2, 2}, smp:epochs():totable())
        assert.are.equal(2, #smp:capped())
        local ok, err = pcall(smp.draw, smp, 1)
        assert.is_false(ok)
        assert.matches("every domain reached its epoch cap", err)
    end)

    it("restores its state exactly", function()
        local smp = dga.sampler({5, 7, 9}, {seed = 4, epoch_cap = 3})
        smp:set_weights({0.2, 0.3, 0.5})
        smp:draw(10)
        local st = smp:state()
        assert.are.equal("string", type(st))
        local d1, i1 = smp:draw(20)
        local p1 = smp:draw_from(2, 4)
        local other = dga.sampler({5, 7, 9}, {seed = 4, epoch_cap = 3})
        other:set_state(st)
        local d2, i2 = other:draw(20)
        local p2 = other:draw_from(2, 4)
        assert.are.same(d1:totable(), d2:totable())
        assert.are.same(i1:totable(), i2:totable())
        assert.are.same(p1:totable(), p2:totable())
        local wrong = dga.sampler({5, 7}, {seed = 4, epoch_cap = 3})
        local ok, err = pcall(wrong.set_state, wrong, st)
        assert.is_false(ok)
        assert.matches("k = 3", err)
    end)

    it("rejects bad weights and options with clear messages", function()
        local smp = dga.sampler({5, 0, 5})
        local cases = {
            {{1, 0, -1}, "expected >= 0"},
            {{1, 0}, "expected k = 3"},
            {{0, 0, 0}, "sum to zero"},
            {{1, 1, 1}, "no available sequence"},
            {{0 / 0, 0, 1}, "finite"},
        }
        for _, c in ipairs(cases) do
            local ok, err = pcall(smp.set_weights, smp, c[1])
            assert.is_false(ok)
            assert.matches(c[2], err, 1, true)
        end
        local ok, err = pcall(dga.sampler, {1, 2}, {epochcap = 1})
        assert.is_false(ok)
        assert.matches("unknown option 'epochcap'", err, 1, true)
        ok, err = pcall(dga.sampler, {1, -2})
        assert.is_false(ok)
        assert.matches("sizes[2]", err, 1, true)
        -- an option's value is not an argument: the error names the options table (#2)
        ok, err = pcall(dga.sampler, {1, 2}, {budget = {1, "x"}})
        assert.is_false(ok)
        assert.matches("bad argument #2 to 'dga.sampler' (budget[2] is x", err, 1, true)
        ok, err = pcall(dga.sampler, {1, 2}, {epoch_cap = -1})
        assert.is_false(ok)
        assert.matches("bad argument #2 to 'dga.sampler' (option 'epoch_cap' must be an integer >= 0, got -1)",
                       err, 1, true)
        ok, err = pcall(smp.draw_from, smp, 4, 1)
        assert.is_false(ok)
        assert.matches("outside [1, 3]", err, 1, true)
        assert.matches("dga.sampler%(k=3", tostring(smp))
    end)

    it("probe draws are distinct and leave training counters alone", function()
        local smp = dga.sampler({100, 30})
        local idx = smp:draw_from(2, 30)
        local seen = {}
        for t = 1, #idx do
            assert.is_nil(seen[idx[t]])
            seen[idx[t]] = true
        end
        assert.are.same({0, 0}, smp:drawn():totable())
    end)
end)

describe("dga.basis", function()
    it("mixes P alpha and draws from one column", function()
        local c1, c2 = dga.tensor({2, 2, 0, 0}), dga.tensor({0, 1, 1, 2})
        local P = dga.basis(4, {c1, c2})
        assert.are.equal(4, P:k())
        assert.are.equal(2, P:n())
        assert.are.equal(5, P:nnz())
        local w = P:mix({0.25, 0.75})
        local expect = {0.25 * 0.5, 0.25 * 0.5 + 0.75 * 0.25, 0.75 * 0.25, 0.75 * 0.5}
        for i = 1, 4 do assert.is_true(math.abs(w[i] - expect[i]) < 1e-6) end
        local smp = dga.sampler({10, 10, 10, 10})
        local d, i = P:draw(1, 200, smp)
        for t = 1, 200 do
            assert.is_true(d[t] == 1 or d[t] == 2)
            assert.is_true(i[t] >= 1 and i[t] <= 10)
        end
        assert.is_true(math.abs(P:column(2)[4] - 0.5) < 1e-7)
        local ok, err = pcall(P.mix, P, {1, -1})
        assert.is_false(ok)
        assert.matches("expected finite and >= 0", err, 1, true)
        ok, err = pcall(dga.basis, 4, {dga.tensor({0, 0, 0, 0})})
        assert.is_false(ok)
        assert.matches("sums to zero", err, 1, true)
    end)
end)

-- A tiny model and token batches: domain 1 counts in [0, 16), domain 2 counts by two in [16, 32).
local V, T = 32, 8
local function batch(domain, B, rng)
    local x, y = {}, {}
    for b = 1, B do
        local s = rng:below(16)
        local seq = {}
        for t = 0, T do
            seq[t + 1] = domain == 1 and (s + t) % 16 or 16 + (s + 2 * t) % 16
        end
        x[b], y[b] = {}, {}
        for t = 1, T do
            x[b][t], y[b][t] = seq[t], seq[t + 1]
        end
    end
    return dga.tensor(x, "int32"), dga.tensor(y, "int32")
end

describe("dga.align", function()
    local model = dga.gpt{layers = 1, width = 16, heads = 2, context = T, vocab = V, batch = 4, seed = 1}
    local rng = dga.rng(5)
    local tx, ty = batch(1, 4, rng)
    local batches = {}
    for d = 1, 3 do
        local x, y = batch((d - 1) % 2 + 1, 4, rng)
        batches[d] = d == 2 and {inputs = x, targets = y} or {x, y}
    end
    local function grad(x, y)
        model:zero_grad()
        local l = model:forward(x, y)
        model:backward()
        return model:grads(), l
    end

    it("equals the dot product of separately computed gradients", function()
        local gt, lt = grad(tx, ty)
        local r = dga.align(model, tx, ty, batches)
        assert.are.equal("exact", r.method)
        assert.are.equal(3, r.k)
        assert.is_true(math.abs(r.target_loss - lt) < 1e-5)
        assert.is_true(math.abs(r.target_norm - gt:norm()) < 1e-4 * gt:norm())
        for d = 1, 3 do
            local b = batches[d]
            local g, l = grad(b[1] or b.inputs, b[2] or b.targets)
            local expect = g:dot(gt)
            assert.is_true(math.abs(r.align[d] - expect) <= 1e-4 * math.abs(expect) + 1e-7)
            assert.are.equal(r.align[d], r.dot[d])   -- raw inner products: no normalisation
            assert.is_true(math.abs(r.loss[d] - l) < 1e-5)
            assert.is_true(math.abs(r.grad_norm[d] - g:norm()) < 1e-4 * g:norm())
        end
    end)

    it("method fd agrees with exact and leaves the parameters alone", function()
        local before = model:params()
        local e = dga.align(model, tx, ty, batches)
        local f = dga.align(model, tx, ty, batches, {method = "fd", fd_eps = 1e-3})
        assert.are.equal("fd", f.method)
        assert.are.same(before:totable(), model:params():totable())
        local amax = 0
        for d = 1, 3 do amax = math.max(amax, math.abs(e.align[d])) end
        for d = 1, 3 do assert.is_true(math.abs(f.align[d] - e.align[d]) <= 2e-2 * amax) end
    end)

    it("method jvp equals exact (forward-mode differentiation)", function()
        local before = model:params()
        local e = dga.align(model, tx, ty, batches)
        local j = dga.align(model, tx, ty, batches, {method = "jvp"})
        assert.are.equal("jvp", j.method)
        assert.are.same(before:totable(), model:params():totable())
        for d = 1, 3 do
            assert.is_true(math.abs(e.align[d]) > 0)
            -- exact to float rounding: relative error < 1e-4 (measured ~1e-7)
            assert.is_true(math.abs(j.align[d] - e.align[d]) <= 1e-4 * math.abs(e.align[d]))
            assert.is_true(math.abs(j.loss[d] - e.loss[d]) <= 1e-5 * e.loss[d])
            assert.is_true(j.grad_norm[d] ~= j.grad_norm[d])   -- NaN: not computed
        end
        local ok, err = pcall(dga.align, model, tx, ty, batches, {method = "forward"})
        assert.is_false(ok)
        assert.matches("bad argument #5 to 'dga.align' (option 'method' must be one of "
                       .. [["exact", "fd", "jvp", got "forward")]], err, 1, true)
    end)

    it("rejects bad arguments", function()
        -- normalisation is the policy's business now: the old options are unknown
        local ok, err = pcall(dga.align, model, tx, ty, batches, {normalize = "none"})
        assert.is_false(ok)
        assert.matches("bad argument #5 to 'dga.align' (unknown option 'normalize' (expected method, fd_eps))",
                       err, 1, true)
        ok, err = pcall(dga.align, model, tx, ty, batches, {lr = 1e-3})
        assert.is_false(ok)
        assert.matches("unknown option 'lr'", err, 1, true)
        ok, err = pcall(dga.align, model, tx, ty, batches, {fd_eps = -1})
        assert.is_false(ok)
        assert.matches("option 'fd_eps' must be a number > 0, got -1", err, 1, true)
        ok, err = pcall(dga.align, model, tx, ty, {})
        assert.is_false(ok)
        assert.matches("batches must be a non-empty list", err, 1, true)
        ok, err = pcall(dga.align, model, tx, ty, {{tx}})
        assert.is_false(ok)
        assert.matches("batches[1]", err, 1, true)
        -- entries of the batches list are named inside argument #4, never by a stack slot
        ok, err = pcall(dga.align, model, tx, ty, {{tx, ty}, {{{1, "a"}}, ty}})
        assert.is_false(ok)
        assert.matches("bad argument #4 to 'dga.align' (batches[2] inputs: entry [1,2] is a string",
                       err, 1, true)
        ok, err = pcall(dga.align, model, tx, {{1, 2.5}}, batches)
        assert.is_false(ok)
        assert.matches("bad argument #3 to 'dga.align' (entry [1,2] is 2.5", err, 1, true)
        local bad = tx:clone()
        bad[3] = V + 1
        ok, err = pcall(dga.align, model, tx, ty, {{tx, ty}, {bad, ty}})
        assert.is_false(ok)
        assert.matches("domain batch #2", err, 1, true)
    end)

    it("eval_loss is the token-mean loss of m:eval", function()
        local mean = model:eval(tx, ty)
        assert.is_true(math.abs(dga.eval_loss(model, tx, ty, 2) - mean) < 1e-5)
    end)
end)

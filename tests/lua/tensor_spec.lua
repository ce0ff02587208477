-- dga.tensor and dga.rng: every method, and clear errors for bad input.
local dga = require "dga"

local function close_to(a, b, tol) return math.abs(a - b) <= (tol or 1e-6) * math.max(1, math.abs(b)) end

local err_of = require("tests.lua.helpers").err_of

describe("dga.tensor construction", function()
    it("builds from nested tables with shape and dtype", function()
        local t = dga.tensor{{1, 2, 3}, {4, 5, 6}}
        assert.same({2, 3}, t:shape())
        assert.equal(6, t:numel())
        assert.equal(6, #t)
        assert.equal("float32", t:dtype())
        assert.same({{1, 2, 3}, {4, 5, 6}}, t:totable())
        local i = dga.tensor({{{1}, {2}}, {{3}, {4}}}, "int32")
        assert.same({2, 2, 1}, i:shape())
        assert.equal("int32", i:dtype())
        assert.equal(math.type(i[1]), "integer")
        local e = dga.tensor{}
        assert.same({0}, e:shape())
    end)

    it("copies, never aliases, a tensor argument", function()
        local a = dga.vec{1, 2}
        local b = dga.tensor(a)
        b[1] = 9
        assert.equal(1, a[1])
        local c = dga.tensor(a, "int32")
        assert.equal("int32", c:dtype())
        assert.same({1, 2}, c:totable())
    end)

    it("zeros, vec, full, arange", function()
        local z = dga.zeros(2, 3, 4, "int32")
        assert.same({2, 3, 4}, z:shape())
        assert.equal(0, z:sum())
        assert.same({0, 0, 0}, dga.vec(3):totable())
        assert.same({1.5, 1.5, 1.5}, dga.vec(3, 1.5):totable())
        assert.matches("fill value goes with a length", err_of(dga.vec, {1, 2}, 3))
        assert.same({0.5, 1.5}, dga.vec{0.5, 1.5}:totable())
        assert.same({2.5, 2.5}, dga.full(2, 2.5):totable())
        local a = dga.arange(5)
        assert.equal("int32", a:dtype())
        assert.same({0, 1, 2, 3, 4}, a:totable())
    end)

    it("rejects bad input with messages naming the problem", function()
        assert.matches("ragged table: row %[2%] has 1 entries, expected 2",
                       err_of(dga.tensor, {{1, 2}, {3}}))
        assert.matches("entry %[2%] is a string, expected a number", err_of(dga.tensor, {1, "x"}))
        assert.matches("expected an int32 integer", err_of(dga.tensor, {1.5}, "int32"))
        assert.matches("invalid option 'float64'", err_of(dga.tensor, {1}, "float64"))
        assert.matches("nested deeper than 4", err_of(dga.tensor, {{{{{1}}}}}))
        assert.matches("dga.tensor or table", err_of(dga.tensor, 42))
        assert.matches("at most 4 dimensions", err_of(dga.zeros, 1, 1, 1, 1, 1))
        assert.matches("dimension must be >= 0", err_of(dga.zeros, -1))
        assert.matches("flat table", err_of(dga.vec, {{1}, {2}}))
        assert.matches("not an int32 value", err_of(dga.full, 2, 0.5, "int32"))
    end)
end)

describe("dga.tensor access", function()
    it("indexes flat and by coordinates, 1-based", function()
        local t = dga.tensor{{1, 2, 3}, {4, 5, 6}}
        assert.equal(5, t[5])
        assert.equal(4, t:at(2, 1))
        t[6] = 60
        assert.equal(60, t:at(2, 3))
        assert.matches("index 7 outside %[1, 6%]", err_of(function() return t[7] end))
        assert.matches("index 0 outside %[1, 6%]", err_of(function() t[0] = 1 end))
        assert.matches("index 3 outside %[1, 2%] %(dimension 1%)", err_of(t.at, t, 3, 1))
        assert.matches("2 indices for a 1%-D", err_of(function() return dga.vec(2):at(1, 1) end))
        assert.matches("only integer indices", err_of(function() t.foo = 1 end))
        assert.matches("not an int32 value", err_of(function() dga.arange(3)[1] = 0.5 end))
        assert.is_nil(t.no_such_method)
    end)

    it("reshape and narrow are views sharing data", function()
        local a = dga.arange(12)
        local r = a:reshape(3, 4)
        assert.same({3, 4}, r:shape())
        assert.same({2, 6}, a:reshape{2, -1}:shape())
        r[1] = 100
        assert.equal(100, a[1])
        local n = r:narrow(2, 2)
        assert.same({2, 4}, n:shape())
        assert.same({{4, 5, 6, 7}, {8, 9, 10, 11}}, n:totable())
        n:fill_(-1)
        assert.equal(-1, a[5])
        assert.equal(8, a[9] + 9)   -- a[9] is -1: inside the view
        assert.matches("tensor has 12", err_of(a.reshape, a, 5, 2))
        assert.matches("rows %[3, 4%] outside %[1, 3%]", err_of(r.narrow, r, 3, 2))
        -- the view stays valid after the base is closed
        local v = dga.vec{1, 2, 3}:narrow(2, 2)
        collectgarbage()
        assert.same({2, 3}, v:totable())
    end)

    it("clone is a deep copy; float/int convert", function()
        local a = dga.vec{1, 2}
        local c = a:clone()
        c[1] = 5
        assert.equal(1, a[1])
        assert.equal("int32", a:int():dtype())
        assert.equal("float32", dga.arange(2):float():dtype())
        assert.matches("not an int32 value", err_of(dga.vec{0.5}.int, dga.vec{0.5}))
    end)

    it("close, __close and use after close", function()
        local t = dga.vec(3)
        t:close()
        t:close()   -- idempotent
        assert.matches("closed", tostring(t))
        assert.matches("attempt to use a closed dga.tensor", err_of(t.sum, t))
        local escaped
        do
            local c <close> = dga.vec{1}
            escaped = c
        end
        assert.matches("closed", err_of(function() return #escaped end))
    end)

    it("__tostring lays rows out as NumPy does, with dtype and shape", function()
        assert.equal("dga.tensor([[1, 2, 3],\n            [4, 5, 6]], float32[2x3])",
                     tostring(dga.tensor{{1, 2, 3}, {4, 5, 6}}))
        assert.equal("dga.tensor([0.5, 0.25], float32[2])", tostring(dga.vec{0.5, 0.25}))
        assert.equal("dga.tensor([0, 1, 2, ..., 97, 98, 99], int32[100])", tostring(dga.arange(100)))
        -- past 64 elements, long dimensions keep three entries at each end
        local big = tostring(dga.arange(80):reshape(10, 8))
        assert.equal(table.concat({
            "dga.tensor([[0, 1, 2, ..., 5, 6, 7],",
            "            [8, 9, 10, ..., 13, 14, 15],",
            "            [16, 17, 18, ..., 21, 22, 23],",
            "            ...,",
            "            [56, 57, 58, ..., 61, 62, 63],",
            "            [64, 65, 66, ..., 69, 70, 71],",
            "            [72, 73, 74, ..., 77, 78, 79]], int32[10x8])"}, "\n"), big)
        local cube = tostring(dga.arange(8):reshape(2, 2, 2))
        assert.equal("dga.tensor([[[0, 1],\n             [2, 3]],\n\n            [[4, 5],\n             [6, 7]]], int32[2x2x2])", cube)
        assert.equal("dga.tensor([], float32[0])", tostring(dga.vec(0)))
    end)
end)

describe("dga.tensor math", function()
    it("new-tensor ops with tensors, tables and numbers", function()
        local a, b = dga.vec{1, 2, 4}, dga.vec{2, 2, 8}
        assert.same({3, 4, 12}, a:add(b):totable())
        assert.same({-1, 0, -4}, a:sub(b):totable())
        assert.same({2, 4, 32}, a:mul(b):totable())
        assert.same({0.5, 1, 0.5}, a:div(b):totable())
        assert.same({2, 4, 8}, a:scale(2):totable())
        assert.same({2, 3, 5}, a:add(1):totable())
        assert.same({2, 3, 5}, a:add{1, 1, 1}:totable())
        assert.same({1, 2, 4}, a:totable())   -- untouched
        assert.same({3, 4, 12}, (a + b):totable())
        assert.same({0, -1, -3}, (1 - a):totable())
        assert.same({2, 4, 8}, (2 * a):totable())
        assert.same({4, 2, 1}, (4 / a):totable())
        assert.same({0.5, 1, 2}, (a / 2):totable())
        assert.same({-1, -2, -4}, (-a):totable())
        assert.same({3, 4, 12}, (a + {2, 2, 8}):totable())
        local e = a:exp()
        assert.is_true(close_to(e[3], math.exp(4)))
        assert.is_true(close_to(e:log()[2], 2))
        local n = a:normalize()
        assert.is_true(close_to(n:sum(), 1))
        assert.is_true(close_to(n[3], 4 / 7))
    end)

    it("in-place ops return self", function()
        local a = dga.vec{1, 2, 4}
        assert.equal(a, a:add_(1))
        assert.same({2, 3, 5}, a:totable())
        a:mul_{2, 1, 0.5}
        assert.same({4, 3, 2.5}, a:totable())
        a:sub_(1):div_(0.5)
        assert.same({6, 4, 3}, a:totable())
        a:scale_(0.5)
        assert.same({3, 2, 1.5}, a:totable())
        a:fill_(1):copy_{1, 2, 3}
        assert.same({1, 2, 3}, a:totable())
        a:log_():exp_()
        assert.is_true(close_to(a[3], 3))
        a:normalize_()
        assert.is_true(close_to(a:sum(), 1))
        local i = dga.arange(3)
        i:add_(dga.arange(3)):mul_(2)
        assert.same({0, 4, 8}, i:totable())
    end)

    it("reductions accumulate in double", function()
        local a = dga.vec{3, -1, 7, 7, 2}
        assert.equal(18, a:sum())
        assert.is_true(close_to(a:mean(), 3.6))
        assert.is_true(close_to(a:std(), math.sqrt((0.36 + 21.16 + 11.56 + 11.56 + 2.56) / 5)))
        assert.equal(-1, a:min())
        assert.equal(7, a:max())
        assert.equal(3, a:argmax())
        assert.equal(112, a:dot(a))
        assert.is_true(close_to(a:norm(), math.sqrt(112)))
        assert.equal(45, dga.arange(10):sum())
        assert.equal("integer", math.type(dga.arange(10):sum()))
        -- 2^24 + n ones: a float accumulator would stay at 2^24
        local big = dga.full(262144, 1)
        big[1] = 16777216
        assert.equal(16777216 + 262143, big:sum())
    end)

    it("errors for bad operands", function()
        local a = dga.vec{1, 2, 3}
        assert.matches("shape mismatch: float32%[3%] vs float32%[2%]", err_of(a.add, a, dga.vec{1, 2}))
        assert.matches("shape mismatch", err_of(function() return a + dga.vec{1} end))
        assert.matches("shape mismatch", err_of(a.dot, a, {1, 2}))
        assert.matches("dga.tensor or table", err_of(a.mul, a, "x"))
        assert.matches("entry 1 is %-1", err_of(dga.vec{-1, 1}.log, dga.vec{-1, 1}))
        assert.matches("sum to 0", err_of(dga.vec(2).normalize, dga.vec(2)))
        assert.matches("expected finite and >= 0", err_of(dga.vec{1, -1}.normalize_, dga.vec{1, -1}))
        local i = dga.arange(3)
        assert.matches("needs a float32 tensor", err_of(i.exp_, i))
        assert.matches("needs a float32 tensor", err_of(i.log, i))
        assert.matches("needs a float32 tensor", err_of(i.scale_, i, 2))
        assert.matches("needs a float32 tensor", err_of(i.normalize, i))
        assert.matches("int32 division", err_of(i.div_, i, 2))
        assert.matches("not an int32 value", err_of(i.add_, i, 0.5))
        assert.matches("overflow", err_of(i.mul_, i, math.tointeger(2 ^ 30)))
        assert.matches("the tensor is empty", err_of(dga.vec(0).max, dga.vec(0)))
        assert.matches("the tensor is empty", err_of(dga.vec(0).argmax, dga.vec(0)))
    end)

    it("check_distribution accepts probability vectors only", function()
        assert.is_true(dga.check_distribution(dga.vec{0.25, 0.75}))
        assert.is_true(dga.check_distribution({0.5, 0.5 + 5e-5}))
        assert.matches("weights: not a probability vector: entries sum to 1.1",
                       err_of(dga.check_distribution, dga.vec{0.5, 0.6}, "weights"))
        assert.matches("entry 2 is %-0.5", err_of(dga.check_distribution, {1.5, -0.5}))
        assert.matches("empty", err_of(dga.check_distribution, dga.vec(0)))
        assert.is_true(dga.check_distribution(dga.arange(2)))   -- int32 converts: {0, 1}
    end)

    it("handles 262,144 entries in C", function()
        local k = 262144
        local w = dga.full(k, 1):normalize()
        assert.is_true(close_to(w:sum(), 1))
        local a = dga.vec(k):add_(0.5):exp_()
        local w2 = (w * a):normalize_()
        assert.is_true(dga.check_distribution(w2))
        assert.equal(1, w2:argmax())
    end)
end)

describe("dga.rng", function()
    it("is deterministic per seed and restorable", function()
        local a, b = dga.rng(42), dga.rng(42)
        assert.equal(a:uniform(), b:uniform())
        local s = a:state()
        assert.equal(32, #s)
        local x = {a:uniform(), a:normal(), a:below(10)}
        a:set_state(s)
        assert.same(x, {a:uniform(), a:normal(), a:below(10)})
        assert.are_not.equal(dga.rng(1):uniform(), dga.rng(2):uniform())
    end)

    it("draws in range", function()
        local r = dga.rng(3)
        local seen = {}
        for _ = 1, 200 do
            local u = r:uniform()
            assert.is_true(u >= 0 and u < 1)
            local k = r:below(5)
            assert.is_true(k >= 0 and k < 5 and math.type(k) == "integer")
            seen[k] = true
        end
        for k = 0, 4 do assert.is_true(seen[k]) end
    end)

    it("shuffles a list in place, the same as Fisher-Yates over below()", function()
        local t = {}
        for i = 1, 50 do t[i] = i * 10 end
        local got = dga.rng(9):shuffle(t)
        assert.equal(t, got)
        local want, r = {}, dga.rng(9)
        for i = 1, 50 do want[i] = i * 10 end
        for i = 50, 2, -1 do
            local j = 1 + r:below(i)
            want[i], want[j] = want[j], want[i]
        end
        assert.same(want, t)
        table.sort(t)
        for i = 1, 50 do assert.equal(i * 10, t[i]) end
        assert.same({}, dga.rng(1):shuffle({}))
        assert.matches("table expected", err_of(dga.rng(1).shuffle, dga.rng(1), 3))
    end)

    it("rejects bad states and ranges", function()
        local r = dga.rng(1)
        assert.matches("32 bytes, got 3", err_of(r.set_state, r, "abc"))
        assert.matches("all zeros", err_of(r.set_state, r, string.rep("\0", 32)))
        assert.matches("n must be > 0", err_of(r.below, r, 0))
        assert.matches("dga.rng", tostring(r))
    end)
end)

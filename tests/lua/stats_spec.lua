-- util.stats against hand-computed values, and the JSON files of the sweep (util.json).
local stats = require "util.stats"
local json = require "util.json"
local h = require "tests.lua.helpers"

local function near(expected, got, tol)
    assert(got ~= nil, "expected a number, got nil")
    assert(math.abs(expected - got) <= (tol or 1e-9),
           string.format("expected %.12g, got %.12g", expected, got))
end

describe("stats", function()
    it("t quantiles match the published table of t_{0.975, df}", function()
        -- NIST/SEMATECH e-Handbook of Statistical Methods, section 1.3.6.7.2 (upper critical
        -- values of the t distribution), the 0.975 column, 3 decimals.
        local table_975 = {[1] = 12.706, [2] = 4.303, [3] = 3.182, [4] = 2.776, [5] = 2.571,
                           [6] = 2.447, [7] = 2.365, [8] = 2.306, [9] = 2.262, [10] = 2.228,
                           [15] = 2.131, [20] = 2.086, [25] = 2.060, [30] = 2.042, [40] = 2.021,
                           [60] = 2.000, [100] = 1.984}
        for df, t in pairs(table_975) do near(t, stats.t_quantile(0.95, df), 5e-4) end
        -- More digits where they are well known: df = 1 is tan(0.475 pi); df = 2 is
        -- sqrt(2) * 0.95 / sqrt(1 - 0.95^2) (the closed form of the df = 2 distribution).
        near(math.tan(0.475 * math.pi), stats.t_quantile(0.95, 1), 1e-9)
        near(math.sqrt(2) * 0.95 / math.sqrt(1 - 0.95 ^ 2), stats.t_quantile(0.95, 2), 1e-9)
        -- Large df tends to the normal quantile.
        near(1.959964, stats.t_quantile(0.95, 100000), 1e-6)
        assert.is_true(stats.t_quantile(0.95, 10000) > stats.t_quantile(0.95, 100000))
    end)

    it("the t distribution function has its closed forms for df = 1 and 2", function()
        near(0.5, stats.t_two_sided(1, 1), 1e-12)            -- (2/pi) atan(1)
        near(1 / math.sqrt(3), stats.t_two_sided(1, 2), 1e-12) -- t / sqrt(2 + t^2)
        assert.are.equal(0, stats.t_two_sided(0, 5))
        -- monotone in t
        local prev = 0
        for t = 0.25, 10, 0.25 do
            local p = stats.t_two_sided(t, 7)
            assert.is_true(p > prev and p < 1)
            prev = p
        end
    end)

    it("summarises n = 2 by hand: {1, 3}", function()
        local s = stats.summary{1, 3}
        assert.are.equal(2, s.n)
        near(2, s.mean)
        near(math.sqrt(2), s.sd)                 -- ((1-2)^2 + (3-2)^2) / 1 = 2
        near(1, s.se)                            -- sqrt(2) / sqrt(2)
        near(2 - 12.7062047361747, s.ci_lo, 1e-9)
        near(2 + 12.7062047361747, s.ci_hi, 1e-9)
    end)

    it("summarises n = 3 by hand: {1, 2, 6}", function()
        local s = stats.summary{1, 2, 6}
        near(3, s.mean)
        near(math.sqrt(7), s.sd)                 -- (4 + 1 + 9) / 2 = 7
        near(math.sqrt(7 / 3), s.se)
        local half = 4.30265272974946 * math.sqrt(7 / 3)   -- 6.5724...
        near(3 - half, s.ci_lo, 1e-9)
        near(3 + half, s.ci_hi, 1e-9)
        near(6.572410607728, s.ci_hi - s.mean, 1e-9)
    end)

    it("summarises n = 5 by hand: {2, 4, 4, 5, 5}", function()
        local s = stats.summary{2, 4, 4, 5, 5}
        near(4, s.mean)
        near(math.sqrt(1.5), s.sd)               -- (4 + 0 + 0 + 1 + 1) / 4
        near(math.sqrt(0.3), s.se)
        near(2.77644510519779 * math.sqrt(0.3), s.ci_hi - s.mean, 1e-9)   -- 1.52072
        near(1.520722, s.ci_hi - s.mean, 1e-6)
    end)

    it("gives no interval for one value, and the table says n=1", function()
        local s = stats.summary{5.25}
        assert.are.equal(1, s.n)
        near(5.25, s.mean)
        assert.is_nil(s.sd)
        assert.is_nil(s.ci_lo)
        assert.is_nil(s.ci_hi)
        assert.are.equal("5.2500 (n=1)", stats.format(s))
        assert.are.equal(0, stats.summary{}.n)
        assert.are.equal("-", stats.format(stats.summary{}))
        -- from 3 values on, the mean and its interval; two values are shown themselves, and
        -- an interval is clipped to the metric's range when it has one
        assert.are.equal("3.0000 [-3.5724, 9.5724]", stats.format(stats.summary{1, 2, 6}))
        assert.are.equal("1.0000, 2.0000 (n=2)", stats.format(stats.summary{1, 2}))
        assert.are.equal("3.0000 [0.0000, 9.5724]", stats.format(stats.summary{1, 2, 6}, nil, {0}))
        -- a bound that decides a verdict by its sign is never shown as 0
        local s0 = {n = 3, mean = 0.1372, ci_lo = 3.2e-5, ci_hi = 0.2743}
        assert.are.equal("0.1372 [3.2e-05, 0.2743]", stats.format(s0))
        s0.ci_lo = -3.2e-5
        assert.are.equal("0.1372 [-3.2e-05, 0.2743]", stats.format(s0))
    end)

    it("pairs differences over the seeds both sides have", function()
        local x = {[1] = 5.0, [2] = 6.0, [3] = 7.5}
        local y = {[1] = 4.0, [3] = 7.0, [4] = 1.0}
        local d = stats.paired(x, y)
        assert.are.same({1, 3}, d.seeds)
        assert.are.same({1.0, 0.5}, d.diffs)
        near(0.75, d.mean)
        near(math.sqrt(0.125), d.sd)              -- ((0.25)^2 * 2) / 1
        near(0.25, d.se)
        near(0.75 + 12.7062047361747 * 0.25, d.ci_hi, 1e-9)
        -- Pairing removes what the two share: a constant shift has zero spread.
        local p = stats.paired({10, 20, 30}, {9, 19, 29})
        near(1, p.mean)
        near(0, p.sd)
        -- No common seed: n = 0.
        assert.are.equal(0, stats.paired({[1] = 1}, {[2] = 2}).n)
    end)

    it("reads a map keyed by seeds with gaps whole", function()
        local s = stats.summary{[1] = 1, [3] = 3}
        assert.are.equal(2, s.n)
        near(2, s.mean)
        local m = {}
        m[10], m[2], m[7] = 6, 1, 2
        near(3, stats.summary(m).mean)
        near(math.sqrt(7), stats.summary(m).sd)
        near(10 / 3, stats.mean_pair_gap(m))    -- |1-2|, |1-6|, |2-6| = 1, 5, 4
    end)

    it("measures the mean gap between two seeds", function()
        near(2, stats.mean_pair_gap{1, 2, 4})     -- |1-2|, |1-4|, |2-4| = 1, 3, 2
        assert.is_nil(stats.mean_pair_gap{3})
    end)

    it("refuses values that are not numbers", function()
        h.raises("value 2 is a string", stats.summary, {1, "x"})
        h.raises("not a number", stats.paired, {[1] = 1}, {[1] = "y"})
    end)
end)

describe("json", function()
    it("round-trips summaries, NaN and infinities included", function()
        local t = {cell = "b256/dga", seed = 2, metrics = {loss = 5.123456789012345, diverged = 0 / 0,
                   big = math.huge, neg = -math.huge, n = 3}, list = {1, 2.5, "a\"b\n"},
                   empty = {}, flag = true}
        local back = json.decode(json.encode(t, {indent = true}))
        assert.are.equal("b256/dga", back.cell)
        assert.are.equal(2, back.seed)
        assert.are.equal(5.123456789012345, back.metrics.loss)
        assert.is_true(json.number(back.metrics.diverged) ~= json.number(back.metrics.diverged))
        assert.are.equal(math.huge, json.number(back.metrics.big))
        assert.are.equal(-math.huge, json.number(back.metrics.neg))
        assert.are.same({1, 2.5, "a\"b\n"}, back.list)
        assert.is_true(back.flag)
        -- The same table always gives the same text (sorted keys).
        assert.are.equal(json.encode(t), json.encode(back))
    end)

    it("names the source and the line of a malformed text", function()
        h.raises("summary.json: line 2", json.decode, '{"a": 1,\n "b" 2}', "summary.json")
        h.raises("trailing characters", json.decode, '{} x', "f")
        h.raises("unterminated string", json.decode, '{"a', "f")
    end)
end)

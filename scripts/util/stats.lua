-- Statistics over seeds: mean, spread and a Student-t confidence interval, and paired
-- differences between two policies run on the same seeds.
--
--   local stats = require "util.stats"
--   local s = stats.summary{5.21, 5.25, 5.19}   -- {n=3, mean=, sd=, se=, ci_lo=, ci_hi=, t=}
--   local d = stats.paired({[1]=5.2, [2]=5.3}, {[1]=5.4, [2]=5.4})   -- x - y on common seeds
--   stats.format(s, "%.4f")                      -- "5.2167 ± 0.0745 (n=3)", or "5.2100 (n=1)"
--
-- The interval is mean ± t_{0.975, n-1} * sd / sqrt(n), sd with the n - 1 denominator: the
-- 95% interval for the mean when the seed-to-seed values are roughly normal. With n = 1
-- there is no spread to measure, and sd, se and the interval are nil.
local M = {}

-- P(|T| <= t) for Student's t with an integer number of degrees of freedom df >= 1, by the
-- finite sums of Abramowitz & Stegun, Handbook of Mathematical Functions, 26.7.3 (df odd)
-- and 26.7.4 (df even), with theta = atan(t / sqrt(df)). No special function is needed,
-- so the result is exact to rounding for every df.
function M.t_two_sided(t, df)
    if t <= 0 then return 0 end
    local theta = math.atan(t / math.sqrt(df))
    local c2, s = math.cos(theta) ^ 2, math.sin(theta)
    if df % 2 == 0 then
        -- sin(theta) * (1 + c2/2 + 1*3 c2^2/(2*4) + ... up to the c2^((df-2)/2) term)
        local term, sum = 1, 1
        for j = 1, (df - 2) // 2 do
            term = term * c2 * (2 * j - 1) / (2 * j)
            sum = sum + term
        end
        return s * sum
    else
        -- (2/pi) (theta + sin cos (1 + 2/3 c2 + 2*4/(3*5) c2^2 + ... up to c2^((df-3)/2)))
        if df == 1 then return 2 / math.pi * theta end
        local term, sum = 1, 1
        for j = 1, (df - 3) // 2 do
            term = term * c2 * (2 * j) / (2 * j + 1)
            sum = sum + term
        end
        return 2 / math.pi * (theta + s * math.cos(theta) * sum)
    end
end

-- Beyond this many degrees of freedom the t quantile is the normal one to 4 significant
-- digits (t_{0.975, 10000} = 1.96020), and the finite sums grow long.
local DF_NORMAL = 10000
local Z975 = 1.959963984540054   -- the 0.975 quantile of the standard normal

-- The two-sided quantile: t such that P(|T| <= t) = level (level 0.95 gives t_{0.975, df}),
-- by bisection on the exact distribution function above.
function M.t_quantile(level, df)
    assert(level > 0 and level < 1, "stats.t_quantile: level must be in (0, 1)")
    df = math.tointeger(df) or error("stats.t_quantile: df must be an integer", 2)
    assert(df >= 1, "stats.t_quantile: df must be >= 1")
    if df > DF_NORMAL and level == 0.95 then return Z975 end
    local lo, hi = 0, 1
    while M.t_two_sided(hi, df) < level do hi = hi * 2 end
    for _ = 1, 200 do
        local mid = 0.5 * (lo + hi)
        if mid == lo or mid == hi then break end
        if M.t_two_sided(mid, df) < level then lo = mid else hi = mid end
    end
    return 0.5 * (lo + hi)
end

-- The values of a list, or of a map keyed by seed, in key order (numbers numerically). A map
-- with gaps (seeds 1 and 3) is read whole: the length operator would see only part of it.
local function values(xs)
    local keys = {}
    for key in pairs(xs) do keys[#keys + 1] = key end
    table.sort(keys, function(a, b)
        if type(a) == "number" and type(b) == "number" then return a < b end
        return tostring(a) < tostring(b)
    end)
    local out = {}
    for i, key in ipairs(keys) do
        local v = xs[key]
        if type(v) ~= "number" then
            error(string.format("stats: value %d is a %s, expected a number", i, type(v)), 3)
        end
        out[i] = v
    end
    return out
end

-- {n, mean, sd, se, ci_lo, ci_hi, t}: the 95% Student-t interval with n - 1 degrees of
-- freedom; n = 1 gives the mean alone; n = 0 gives {n = 0}.
function M.summary(xs)
    local v = values(xs)
    local n = #v
    if n == 0 then return {n = 0} end
    local sum = 0
    for i = 1, n do sum = sum + v[i] end
    local mean = sum / n
    if n == 1 then return {n = 1, mean = mean, values = v} end
    local ss = 0
    for i = 1, n do ss = ss + (v[i] - mean) ^ 2 end
    local sd = math.sqrt(ss / (n - 1))
    local se = sd / math.sqrt(n)
    local t = M.t_quantile(0.95, n - 1)
    return {n = n, mean = mean, sd = sd, se = se, t = t, values = v,
            ci_lo = mean - t * se, ci_hi = mean + t * se}
end

-- Keys common to two maps, sorted (numbers numerically).
local function common_keys(xs, ys)
    local keys = {}
    for key, x in pairs(xs) do
        if ys[key] ~= nil and x ~= nil then keys[#keys + 1] = key end
    end
    table.sort(keys, function(a, b)
        if type(a) == "number" and type(b) == "number" then return a < b end
        return tostring(a) < tostring(b)
    end)
    return keys
end

-- The paired difference x - y over the keys (seeds) both hold, as a summary, plus
-- `seeds` (the common keys) and `diffs` (in that order). Lists pair by position.
function M.paired(xs, ys)
    local keys = common_keys(xs, ys)
    local diffs = {}
    for i, key in ipairs(keys) do
        local x, y = xs[key], ys[key]
        if type(x) ~= "number" or type(y) ~= "number" then
            error(string.format("stats.paired: value for %s is not a number", tostring(key)), 2)
        end
        diffs[i] = x - y
    end
    local s = M.summary(diffs)
    s.seeds, s.diffs = keys, diffs
    return s
end

-- Mean |x_i - x_j| over the pairs i < j (nil with fewer than 2 values): how far apart two
-- seeds of the same configuration land, on average.
function M.mean_pair_gap(xs)
    local v = values(xs)
    local n = #v
    if n < 2 then return nil end
    local sum, pairs_n = 0, 0
    for i = 1, n - 1 do
        for j = i + 1, n do
            sum, pairs_n = sum + math.abs(v[i] - v[j]), pairs_n + 1
        end
    end
    return sum / pairs_n
end

-- The fewest values an interval is printed for: from two points, a t interval (t = 12.7) says
-- little more than the two values themselves, which are printed instead.
M.MIN_INTERVAL_N = 3

-- A verdict is read from which side of 0 a bound lies on, so a bound that is not 0 is never
-- printed as one: below the format's resolution it is given in two significant digits.
local function format_bound(fmt, x)
    local text = string.format(fmt, x)
    if x ~= 0 and tonumber(text) == 0 then return string.format("%.1e", x) end
    return text
end

-- The one way a summary is printed (tables, aggregate, notes): n = 0 "-"; n = 1 "v (n=1)";
-- n = 2 "a, b (n=2)" (the two values); n >= 3 "mean [lo, hi]", the interval clipped to the
-- metric's range when it has one (range = {lo, hi}, either may be nil: a count cannot go
-- below 0, a share above 1). fmt formats the numbers (default "%.4f").
function M.format(s, fmt, range)
    fmt = fmt or "%.4f"
    if not s or not s.n or s.n == 0 then return "-" end
    if s.n == 1 then return string.format(fmt .. " (n=1)", s.mean) end
    if s.n < M.MIN_INTERVAL_N or not s.ci_lo then
        local v = s.values or {}
        if #v == s.n then
            local parts = {}
            for i, x in ipairs(v) do parts[i] = string.format(fmt, x) end
            return table.concat(parts, ", ") .. string.format(" (n=%d)", s.n)
        end
        return string.format(fmt .. " (n=%d)", s.mean, s.n)
    end
    local lo, hi = s.ci_lo, s.ci_hi
    if range then
        if range[1] and lo < range[1] then lo = range[1] end
        if range[2] and hi > range[2] then hi = range[2] end
    end
    return string.format(fmt, s.mean) .. " [" .. format_bound(fmt, lo) .. ", " .. format_bound(fmt, hi) .. "]"
end

return M

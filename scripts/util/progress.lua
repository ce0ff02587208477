-- A progress line for training loops: step, loss, learning rate, tokens/s, elapsed, ETA.
--
--   local progress = require "util.progress"
--   local p = progress.new{total = 1000, label = "train"}
--   p:start(0)                                   -- optional: the step we resume from
--   p:update(step, {loss = 3.21, lr = 1e-3, tokens = B * T})   -- tokens: this step's tokens
--   p:finish()
--
-- Output goes to opts.out (default io.stderr, so stdout stays free for results). On a
-- terminal the line is rewritten in place every `every` steps (default 1). Elsewhere (a log
-- file, a pipe) a refresh per step would bury the results, so of those steps a line is
-- written only at milestones: the first, the last step, one whose extra fields changed (a
-- new evaluation), one a tenth of `total` after the last line (opts.milestone_every
-- overrides), and p:milestone().
-- Extra numeric fields of the update table are shown after the standard ones as
-- "name value". Timing uses a monotonic clock from lua-system when present (os.time
-- otherwise); nothing else depends on it.
local M = {}

local ok_sys, sys = pcall(require, "system")
local function now()
    if ok_sys and sys.monotime then return sys.monotime() end
    return os.time()
end
M.now = now

-- "1:02:03" / "2:03"
function M.format_duration(s)
    if s ~= s or s == math.huge or s < 0 then return "?" end
    s = math.floor(s + 0.5)
    local h, m = s // 3600, (s % 3600) // 60
    if h > 0 then return string.format("%d:%02d:%02d", h, m, s % 60) end
    return string.format("%d:%02d", m, s % 60)
end

-- The inverse: "1:02:03" or "2:03" -> seconds (a sweep's progress lines, read back from a log).
function M.parse_duration(text)
    local total = 0
    for part in text:gmatch("%d+") do total = total * 60 + tonumber(part) end
    return total
end

-- 950 -> "950", 12345 -> "12.3k", 4.2e6 -> "4.20M"
function M.format_rate(x)
    if x ~= x or x == math.huge then return "?" end
    if x >= 1e6 then return string.format("%.2fM", x / 1e6) end
    if x >= 1e4 then return string.format("%.1fk", x / 1e3) end
    return string.format("%.0f", x)
end

local Progress = {}
Progress.__index = Progress

local function stderr_is_tty()
    if dga and dga.isatty then return dga.isatty(2) end
    return os.execute("[ -t 2 ] 2>/dev/null") == true
end
M.stderr_is_tty = stderr_is_tty

function M.new(opts)
    opts = opts or {}
    local self = setmetatable({
        total = opts.total,
        label = opts.label,
        out = opts.out or io.stderr,
        every = math.max(1, math.floor(opts.every or 1)),
        t0 = now(),
        first = 0,
        tokens = 0,
        last_len = 0,
    }, Progress)
    if opts.overwrite ~= nil then
        self.overwrite = opts.overwrite
    else
        self.overwrite = self.out == io.stderr and stderr_is_tty()
    end
    local default_mark = self.total and math.max(1, math.ceil(self.total / 10)) or 100 * self.every
    self.milestone_every = math.max(1, math.floor(opts.milestone_every or default_mark))
    return self
end

-- Marks the step training starts from (a resumed run starts at its checkpoint's step).
function Progress:start(step)
    self.first = step or 0
    self.t0 = now()
    self.tokens = 0
end

local standard = {loss = true, lr = true, tokens = true}

-- The line for `step` (without printing it).
function Progress:line(step, fields)
    fields = fields or {}
    local elapsed = now() - self.t0
    local done = step - self.first
    local parts = {}
    local head = self.label and (self.label .. " ") or ""
    if self.total then
        head = head .. string.format("step %d/%d", step, self.total)
    else
        head = head .. string.format("step %d", step)
    end
    parts[#parts + 1] = head
    if fields.loss then parts[#parts + 1] = string.format("loss %.4f", fields.loss) end
    if fields.lr then parts[#parts + 1] = string.format("lr %.2e", fields.lr) end
    local extra = {}
    for k, v in pairs(fields) do
        if not standard[k] and type(v) == "number" then extra[#extra + 1] = k end
    end
    table.sort(extra)
    for _, k in ipairs(extra) do parts[#parts + 1] = string.format("%s %.4g", k, fields[k]) end
    if elapsed > 0 and self.tokens > 0 then
        parts[#parts + 1] = M.format_rate(self.tokens / elapsed) .. " tok/s"
    end
    parts[#parts + 1] = "elapsed " .. M.format_duration(elapsed)
    if self.total and done > 0 then
        parts[#parts + 1] = "ETA " .. M.format_duration(elapsed / done * (self.total - step))
    end
    return table.concat(parts, " | ")
end

-- The extra fields as one comparable string: a change means a new evaluation came in.
local function extras_key(fields)
    local keys = {}
    for k, v in pairs(fields) do
        if not standard[k] and type(v) == "number" then keys[#keys + 1] = k end
    end
    table.sort(keys)
    for i, k in ipairs(keys) do keys[i] = k .. "=" .. string.format("%.17g", fields[k]) end
    return table.concat(keys, ",")
end

function Progress:write_line(step, fields)
    local line = self:line(step, fields)
    if self.overwrite then
        local pad = math.max(0, self.last_len - #line)
        self.out:write("\r", line, string.rep(" ", pad))
        self.last_len = #line
    else
        self.out:write(line, "\n")
    end
    self.out:flush()
end

function Progress:update(step, fields)
    fields = fields or {}
    self.tokens = self.tokens + (fields.tokens or 0)
    self.step = step
    local last = self.total and step >= self.total
    if (step - self.first) % self.every ~= 0 and not last then return end
    if self.overwrite then return self:write_line(step, fields) end
    local key = extras_key(fields)
    local due = last or self.printed == nil or key ~= self.printed_key
        or step - self.printed >= self.milestone_every
    if not due then return end
    self.printed, self.printed_key = step, key
    self:write_line(step, fields)
end

-- A line now, whatever the output (an evaluation or a checkpoint the caller wants on record).
function Progress:milestone(step, fields)
    if not self.overwrite then
        self.printed, self.printed_key = step, extras_key(fields or {})
    end
    self:write_line(step, fields or {})
end

-- Ends an in-place line with a newline.
function Progress:finish()
    if self.overwrite and self.last_len > 0 then
        self.out:write("\n")
        self.out:flush()
        self.last_len = 0
    end
end

-- Seconds since start (or creation).
function Progress:elapsed() return now() - self.t0 end

return M

-- Learning-rate schedules: linear warmup, then cosine / linear decay to min_lr, or constant.
--
--   local schedule = require "trainer.schedule"
--   local lr_at = schedule.make{kind = "cosine", lr = 1e-3, warmup = 100, total = 5000,
--                               min_lr = 1e-4}
--   opt:step(lr_at(step))          -- steps are 1-based
--
-- Warmup ramps linearly from lr/warmup (step 1) to lr (step = warmup), as nanoGPT does, so
-- the first update is never taken at lr = 0. After warmup the progress p runs from 0 (step
-- warmup) to 1 (step total) and is clamped there: steps past `total` stay at min_lr.
local M = {}

M.kinds = {cosine = true, linear = true, constant = true}

local function check_number(opts, key, lo, default)
    local v = opts[key]
    if v == nil then v = default end
    if type(v) ~= "number" or v ~= v or v < lo or v == math.huge then
        error(string.format("schedule: %s must be a finite number >= %g, got %s", key, lo,
                            tostring(v)), 3)
    end
    return v
end

-- Returns a function step -> learning rate.
function M.make(opts)
    opts = opts or {}
    local kind = opts.kind or "cosine"
    if not M.kinds[kind] then
        error(string.format("schedule: kind must be cosine, linear or constant, got %s",
                            tostring(kind)), 2)
    end
    local lr = check_number(opts, "lr", 0)
    local warmup = math.floor(check_number(opts, "warmup", 0, 0))
    local min_lr = check_number(opts, "min_lr", 0, lr * 0.1)
    local total = kind == "constant" and (opts.total or 0) or check_number(opts, "total", 1)
    if min_lr > lr then
        error(string.format("schedule: min_lr %g is above lr %g", min_lr, lr), 2)
    end
    return function(step)
        if warmup > 0 and step <= warmup then return lr * step / warmup end
        if kind == "constant" then return lr end
        local span = math.max(1, total - warmup)
        local p = math.min(1, math.max(0, (step - warmup) / span))
        if kind == "linear" then return lr - (lr - min_lr) * p end
        return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * p))
    end
end

return M

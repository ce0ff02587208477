-- The trainer's configuration: the defaults and the checks made before anything is built,
-- both from the one description of every key in trainer/schema.lua.
local schema = require "trainer.schema"

local M = {}

M.defaults = schema.defaults()

local function fill_defaults(cfg, defaults)
    for key, val in pairs(defaults) do
        if cfg[key] == nil then
            if type(val) == "table" then
                cfg[key] = fill_defaults({}, val)
            else
                cfg[key] = val
            end
        elseif type(val) == "table" and type(cfg[key]) == "table" then
            fill_defaults(cfg[key], val)
        end
    end
    return cfg
end

-- Checks cfg's keys and values against the schema without filling anything in.
function M.check_keys(cfg) schema.check(cfg, "trainer", 2) end

-- Fills the defaults into cfg (in place) and checks it; errors are raised at `level`.
function M.prepare(cfg, level)
    level = (level or 1) + 1
    if type(cfg) ~= "table" then error("trainer: expected a configuration table, got " .. type(cfg), level) end
    if type(cfg.run_dir) ~= "string" then
        error("trainer: cfg.run_dir (the run directory) is required", level)
    end
    -- Every key and value is checked before any data or model is built, not at step 1.
    schema.check(cfg, "trainer", level)
    cfg = fill_defaults(cfg, M.defaults)
    -- The schedule's horizon is part of the recorded config: extending a run later with more
    -- steps does not silently reshape the learning-rate curve of the steps already done.
    cfg.schedule.total = cfg.schedule.total or cfg.steps
    if cfg.checkpoint_every > 0 and cfg.checkpoint_every % cfg.eval_every ~= 0 then
        error("trainer: checkpoint_every must be a multiple of eval_every (train_loss is a mean "
              .. "since the last metrics row, and a checkpoint must not cut an interval)", level)
    end
    local ac = cfg.align
    if ac.normalize ~= "none" and ac.method ~= "exact" then
        error(string.format('trainer: align.normalize = "%s" needs per-domain gradient norms, which '
                            .. 'align.method = "%s" does not compute (use normalize = "none" or '
                            .. 'method = "exact")', ac.normalize, tostring(ac.method)), level)
    end
    if cfg.budget and cfg.budget_tokens then
        error("trainer: give budget (sequences) or budget_tokens, not both", level)
    end
    return cfg
end

-- The learning rate at a step (trainer.schedule, the shared implementation).
function M.lr_schedule(cfg)
    local schedule = require "trainer.schedule"
    local s = cfg.schedule
    return schedule.make{
        kind = s.kind, lr = cfg.optimizer.lr, warmup = s.warmup or 0,
        total = s.total or cfg.steps, min_lr = s.min_lr or cfg.optimizer.lr * 0.1,
    }
end

return M

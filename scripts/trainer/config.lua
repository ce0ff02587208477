-- The trainer's configuration: defaults and the checks made before anything is built.
-- The keys are described at the top of scripts/trainer.lua.
local M = {}

M.defaults = {
    name = "run",
    seed = 1,
    steps = 200,
    batch = 8,
    T_r = 100,
    eval_every = 50,
    checkpoint_every = 0,
    eval_batch = 16,
    eval_max = 256,           -- at most this many held-out sequences per evaluated set
    align_batch = nil,        -- default: batch
    heldout_per_domain = 4,
    generic_max = 256,
    sparse_k = 2048,
    model = {layers = 2, width = 64, heads = 4},
    optimizer = {lr = 1e-3, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8,
                 decay = "matrices", clip = 1.0},
    schedule = {kind = "cosine", warmup = 0},
    policy = {name = "uniform"},
    align = {normalize = "none", method = "exact", lr_scale = false, fd_eps = 1e-3},
    progress = true,
    data_parallel = true,     -- under mpirun: train one model over the ranks (trainer/data_parallel.lua)
    check_replicas = false,   -- compare the ranks' parameters at every metrics row
    overlap_allreduce = true, -- sum each block's gradient over the ranks as backward ends it
}

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

local NORMALIZE = {none = true, cosine = true, mean_norm = true}

-- Fills the defaults into cfg (in place) and checks it; errors are raised at `level`.
function M.prepare(cfg, level)
    level = (level or 1) + 1
    cfg = fill_defaults(cfg, M.defaults)
    -- The schedule's horizon is part of the recorded config: extending a run later with more
    -- steps does not silently reshape the learning-rate curve of the steps already done.
    cfg.schedule.total = cfg.schedule.total or cfg.steps
    if type(cfg.run_dir) ~= "string" then
        error("trainer: cfg.run_dir (the run directory) is required", level)
    end
    -- Sizes and periods are checked here, before any data or model is built, not at step 1.
    for _, key in ipairs{"steps", "batch", "T_r", "eval_every", "eval_batch", "align_batch"} do
        local v = cfg[key]
        if v ~= nil and (math.type(v) ~= "integer" or v < 1) then
            error(string.format("trainer: cfg.%s = %s, expected an integer >= 1", key, tostring(v)), level)
        end
    end
    if cfg.checkpoint_every > 0 and cfg.checkpoint_every % cfg.eval_every ~= 0 then
        error("trainer: checkpoint_every must be a multiple of eval_every (train_loss is a mean "
              .. "since the last metrics row, and a checkpoint must not cut an interval)", level)
    end
    local ac = cfg.align
    if not NORMALIZE[ac.normalize] then
        error(string.format('trainer: align.normalize = %s, expected "none", "cosine" or "mean_norm"',
                            tostring(ac.normalize)), level)
    end
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

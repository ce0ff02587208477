-- Mixing policies: the registry and the contract between policies and the trainer.
--
--   local policies = require "policies"
--   local p = policies.get("dga", {beta = 0.1, target_change = 0.5})  -- a new policy object
--   local w = p:init(ctx)                 -- float32 tensor of ctx.k weights summing to 1
--   w = p:update(ctx, step)               -- called by the trainer every T_r steps
--
-- A policy is a Lua object with
--   name                 its registry name
--   fixed                true when update would return the same weights (the trainer may
--                        skip calling it: uniform, natural, importance)
--   init(ctx)            -> weights over ctx.k components (dga.tensor float32, sums to 1)
--   update(ctx, step)    -> weights; may call ctx:align() and ctx.log{...}
--   state()              -> {tensors = {name = tensor}, values = {name = number|string}}
--   set_state(st)        restores what state() returned (checkpoint resume)
--   probes(ctx)          optional: the probe batches of an alignment round, one per
--                        component: a list of ctx.k entries, each {inputs, targets}
--                        (int32 B x T tensors) or false (no data: alignment 0). Without it
--                        ctx:align() uses ctx:probes(). A policy that aligns against other
--                        data defines this and needs no change to the trainer.
-- The returned tensor belongs to the caller (policies return copies).
--
-- A new policy is one file scripts/policies/<name>.lua returning a table with
-- new(opts) -> object; policies.get("<name>") finds it (no C, no registration). A path
-- ending in ".lua" also works: policies.get("my/policy.lua", opts).
--
-- ctx, built by the trainer (scripts/trainer/run.lua, Run:make_ctx / refresh_ctx):
--   ctx.k             number of mixture components the policy weighs: k domains, or N basis
--                     distributions in distribution mode (ctx.basis set)
--   ctx.n_leaves      k leaf domains (equals ctx.k outside distribution mode)
--   ctx.sizes         float32 ctx.k: sequences per component (dist mode: the histogram-
--                     weighted number of available sequences of each basis)
--   ctx.budget        list of ctx.n_leaves available sequences per leaf domain
--                     (min(size, budget)); 0 means the domain has no data
--   ctx.epochs        float32 ctx.k: epochs started per component (dist mode: histogram-
--                     weighted mean over leaves)
--   ctx.step          the current step (0 at init)
--   ctx.T_r           steps between updates
--   ctx.lr            the current learning rate
--   ctx.history       list of the weight tensors applied so far (oldest first)
--   ctx.is_histogram  float32 ctx.n_leaves: the IS histogram (importance policy)
--   ctx.basis         dga.basis P (k x N) in distribution mode, else nil; the training
--                     mixture over leaves is then P:mix(weights)
--   ctx.names         component names (optional)
--   ctx.options       the policy's configuration table
--   ctx:align()       one alignment round at the current parameters: ctx:target(), and
--                     the policy's probes(ctx) or else ctx:probes(); returns {align=, dot=, loss=,
--                     grad_norm= (float32 ctx.k), target_norm=, target_loss=}; components
--                     without data get align = 0. align is the raw <g_i, g_t> unless the
--                     trainer's `align` config normalises it (cosine, mean_norm, lr scaling);
--                     dot (float32 ctx.k) always holds the raw products.
--                     ctx:align{target = "mixture"}: the target batch is drawn from the
--                     current training mixture instead of the specific set (DoGE's
--                     universal-generalisation signal).
--   ctx:probes([n])   the mixture space's probe batches: for component j, n sequences
--                     (default: the align batch) drawn from domain j, or from p_j in
--                     distribution mode; false where there is no data. They come from the
--                     sampler's probe generator and are not training draws.
--   ctx:probe(j, [n]) the same for component j alone, as inputs, targets (nil without data)
--   ctx:target([n])   a fresh target batch {inputs, targets} from the specific training set
--   ctx.model         the model being trained (read it; a policy must not step it)
--   ctx.train_loss    float32 ctx.k: the mean training loss of each component's sequences
--                     drawn since the last update (0 where none was drawn); computed by the
--                     training forward itself (model:seq_losses()), no extra pass. In
--                     distribution mode: histogram-weighted over the leaves.
--   ctx.train_count   float32 ctx.k: how many sequences that mean is over
--   ctx.train_loss_mean  float32 ctx.k: the same mean since the start of the run
--   ctx.log(fields)   values to record for this update (also callable as ctx:log(fields)): each
--                     name = number|string|boolean becomes a row of the run's policy.csv
--                     (scripts/rundir/init.lua), whether or not the policy aligned
local M = {}

M.builtin = {"uniform", "natural", "importance", "dga", "dga_dist", "odm", "doge", "doremi"}

-- The policy module for `name` (a table with new(opts)).
function M.module(name)
    if type(name) ~= "string" or name == "" then
        error("policies: policy name must be a non-empty string, got " .. tostring(name), 3)
    end
    local mod
    if name:match("%.lua$") then
        local chunk, err = loadfile(name)
        if not chunk then error("policies: cannot load policy file " .. name .. ": " .. err, 3) end
        mod = chunk()
    else
        if not name:match("^[%w_]+$") then
            error("policies: bad policy name '" .. name .. "' (letters, digits, _)", 3)
        end
        local ok, res = pcall(require, "policies." .. name)
        if not ok then
            if tostring(res):find("module 'policies." .. name .. "' not found", 1, true) then
                error("policies: unknown policy '" .. name .. "' (built in: " ..
                      table.concat(M.builtin, ", ") .. "; or scripts/policies/" .. name ..
                      ".lua)", 3)
            end
            error(res, 0)
        end
        mod = res
    end
    if type(mod) ~= "table" or type(mod.new) ~= "function" then
        error("policies: policy '" .. name .. "' must return a table with new(opts)", 3)
    end
    return mod
end

-- A new policy object. opts: the policy's options ("name" is ignored).
function M.get(name, opts)
    local o = {}
    for key, v in pairs(opts or {}) do
        if key ~= "name" then o[key] = v end
    end
    return M.module(name).new(o)
end

-- ---- helpers shared by the policies ------------------------------------------------------

-- Copies `defaults`, overridden by `opts`; unknown keys are an error naming the policy.
function M.options(policy, defaults, opts)
    local o = {}
    for key, v in pairs(defaults) do o[key] = v end
    for key, v in pairs(opts or {}) do
        if defaults[key] == nil and key ~= "name" then
            local known = {}
            for k2 in pairs(defaults) do known[#known + 1] = k2 end
            table.sort(known)
            error(string.format("policy '%s': unknown option '%s' (%s)", policy, key,
                                #known > 0 and "known: " .. table.concat(known, ", ")
                                    or "it takes no options"), 3)
        end
        o[key] = v
    end
    return o
end

-- float32 ctx.k: 1 where the component has data, 0 where it has none.
function M.has_data(ctx)
    local k = ctx.k
    local m = dga.zeros(k)
    local leaf = not ctx.basis and ctx.budget
    for i = 1, k do
        local n = leaf and leaf[i] or ctx.sizes[i]
        m[i] = n > 0 and 1 or 0
    end
    return m
end

-- float32 ctx.k: available sequences per component (budget applied).
function M.available(ctx)
    local k = ctx.k
    if ctx.basis or not ctx.budget then return ctx.sizes:clone() end
    local t = dga.zeros(k)
    for i = 1, k do t[i] = ctx.budget[i] end
    return t
end

-- Uniform over the components that have data (the sampler refuses weight on empty ones).
function M.uniform(ctx)
    return M.has_data(ctx):normalize_()
end

-- A starting distribution: "uniform" | "natural" | a tensor/table of ctx.k weights.
function M.initial(ctx, init)
    if init == nil or init == "uniform" then return M.uniform(ctx) end
    if init == "natural" then return M.available(ctx):normalize_() end
    local t = type(init) == "table" and dga.tensor(init, "float32") or init:clone()
    if #t ~= ctx.k then
        error(string.format("policies: init has %d weights, expected ctx.k = %d", #t, ctx.k), 3)
    end
    return t:normalize_()
end

-- The policy module of weights fixed for the run (uniform, natural, importance):
-- weights(ctx) computes them once at init; update returns copies; there is no state.
function M.fixed(name, weights)
    local P = {}
    P.__index = P
    function P.new(opts)
        M.options(name, {}, opts)
        return setmetatable({name = name, fixed = true}, P)
    end
    function P:init(ctx)
        self.weights = weights(ctx)
        return self.weights:clone()
    end
    function P:update(ctx, step) return self.weights:clone() end
    function P:state() return {tensors = {}, values = {}} end
    function P:set_state(st) end
    return P
end

return M

-- odm: Online Data Mixing as a multi-armed bandit (Albalak, Pan, Raffel & Wang, 2023,
-- "Efficient Online Data Mixing For Language Model Pre-Training"): EXP3 over the
-- components, rewarded with the training loss they give, which the trainer has already
-- computed. No extra forward or backward pass.
--
-- At every update (every T_r steps), with K components that have data and t = ctx.step:
--   for each component i drawn since the last update (ctx.train_count[i] > 0):
--       R_i <- smoothing * R_i + (1 - smoothing) * L_i / pi_i      (smoothed, importance-weighted)
--   eps_t = min(1 / K, sqrt(ln K / (K t)))
--   pi_i  = (1 - K eps_t) * exp(eps_prev R_i) / sum_j exp(eps_prev R_j) + eps_t
-- where L_i = ctx.train_loss[i] is the mean training loss of component i's sequences since the
-- last update, and pi_i is the weight it was drawn with. eps_prev is the eps of the previous
-- update (1 / K at the first).
--
-- The paper updates after every step, with t the step count. Here t is also the step count, so
-- eps decays on the paper's time scale whatever T_r is (T_r = 1 is the paper's setting). A
-- large K keeps eps at 1 / K, and so the weights uniform, for about K ln K steps: that is
-- EXP3's exploration phase, not a bug.
--
-- Options: smoothing = 0.9 (our default; the paper leaves it a hyper-parameter), init ignored
-- (EXP3 starts uniform).
-- Logged (ctx.log): eps, max_weight, mean_reward.
local policies = require "policies"

local M = {}
M.__index = M

M.defaults = {smoothing = 0.9}

function M.new(opts)
    local o = policies.options("odm", M.defaults, opts)
    if type(o.smoothing) ~= "number" or not (o.smoothing >= 0 and o.smoothing < 1) then
        error(string.format("policy 'odm': smoothing = %s, expected 0 <= smoothing < 1",
                            tostring(o.smoothing)), 2)
    end
    return setmetatable({name = "odm", opts = o}, M)
end

function M:init(ctx)
    self.mask = policies.has_data(ctx)
    self.reward = dga.zeros(ctx.k)
    self.pi = policies.uniform(ctx)
    self.eps = 1 / self.mask:sum()
    return self.pi:clone()
end

-- One EXP3 step from the per-component mean losses `loss` and draw counts `count` (float32
-- ctx.k) at step t. Returns the new weights; exposed for the tests.
function M:step(loss, count, t)
    local mask, reward, pi = self.mask, self.reward, self.pi
    local K = mask:sum()
    local s = self.opts.smoothing
    for i = 1, #pi do
        if mask[i] > 0 and count[i] > 0 then
            reward[i] = s * reward[i] + (1 - s) * loss[i] / pi[i]
        end
    end
    local eps_prev = self.eps
    local eps = math.min(1 / K, math.sqrt(math.log(K) / (K * math.max(t, 1))))
    -- softmax of eps_prev * R over the components with data, shifted by its max
    local top = -math.huge
    for i = 1, #pi do
        if mask[i] > 0 then top = math.max(top, eps_prev * reward[i]) end
    end
    local z = 0
    for i = 1, #pi do
        if mask[i] > 0 then z = z + math.exp(eps_prev * reward[i] - top) end
    end
    local new = dga.zeros(#pi)
    for i = 1, #pi do
        if mask[i] > 0 then
            new[i] = (1 - K * eps) * math.exp(eps_prev * reward[i] - top) / z + eps
        end
    end
    self.pi = new:normalize_()   -- exact in real arithmetic; float32 rounding only
    self.eps = eps
    return self.pi:clone()
end

function M:update(ctx, step)
    if not ctx.train_loss then
        error("policy 'odm': ctx.train_loss is missing (the trainer provides per-component training losses)", 2)
    end
    local w = self:step(ctx.train_loss, ctx.train_count, step)
    if ctx.log then
        local n, sum = 0, 0
        for i = 1, #self.reward do
            if self.mask[i] > 0 then n, sum = n + 1, sum + self.reward[i] end
        end
        ctx.log{eps = self.eps, max_weight = w:max(), mean_reward = sum / n}
    end
    return w
end

function M:state()
    return {tensors = {reward = self.reward, pi = self.pi, mask = self.mask},
            values = {eps = self.eps}}
end

function M:set_state(st)
    local t, v = st.tensors or {}, st.values or {}
    if not (t.reward and t.pi and t.mask and v.eps) then
        error("policy 'odm': state lacks reward / pi / mask / eps", 2)
    end
    self.reward, self.pi, self.mask, self.eps = t.reward:clone(), t.pi:clone(), t.mask:clone(), v.eps
end

return M

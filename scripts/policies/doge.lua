-- doge: DoGE's generalisation-estimation update (Fan, Pagliardini & Jaggi, 2024, "DoGE:
-- Domain Reweighting with Generalization Estimation"), run online.
--
-- At every update, at the current parameters (ctx:align() gives the per-component gradient
-- dot products with a target gradient, and the per-component gradient norms):
--   W_i   = lr * <g_i, g_target> / mean_j |g_j|          (the generalisation estimate)
--   W_i   = clamp(W_i, lr * w_min, lr * w_max)
--   alpha = softmax(log alpha + W / mu)
--   alpha = (1 - smoothing) alpha + smoothing / K
-- DoGE trains its proxy with alpha and keeps the running average of alpha as the weights it
-- hands on; here alpha is the training mixture, and the average is logged (avg_max_weight)
-- and kept in the state (`average`).
--
-- target = "specific" (default): g_target is the specific set's gradient: DoGE's
-- out-of-domain setting, and the same signal DGA uses (dga.lua differs in its step: no
-- 1/mean|g| normalisation or clamp, an EMA, and eta instead of 1/mu).
-- target = "mixture": g_target is the gradient of a batch drawn from the current training
-- mixture: DoGE's universal-generalisation setting. DoGE sums <g_i, g_j> over the other
-- domains j with equal weight; the mixture batch weighs them by the current alpha and does not
-- leave g_i out. We say so rather than hide it.
--
-- Defaults follow DoGE's published configuration: mu = 0.01, w_min = 0, w_max = 5,
-- smoothing = 0.
local policies = require "policies"

local M = {}
M.__index = M

M.defaults = {mu = 0.01, w_min = 0, w_max = 5, smoothing = 0, target = "specific",
              init = "uniform"}

function M.new(opts)
    local o = policies.options("doge", M.defaults, opts)
    if type(o.mu) ~= "number" or not (o.mu > 0) then
        error(string.format("policy 'doge': mu = %s, expected > 0", tostring(o.mu)), 2)
    end
    if type(o.w_min) ~= "number" or type(o.w_max) ~= "number" or not (o.w_min <= o.w_max) then
        error("policy 'doge': expected numbers w_min <= w_max", 2)
    end
    if type(o.smoothing) ~= "number" or not (o.smoothing >= 0 and o.smoothing < 1) then
        error(string.format("policy 'doge': smoothing = %s, expected 0 <= smoothing < 1",
                            tostring(o.smoothing)), 2)
    end
    if o.target ~= "specific" and o.target ~= "mixture" then
        error(string.format("policy 'doge': target = %s, expected \"specific\" or \"mixture\"",
                            tostring(o.target)), 2)
    end
    return setmetatable({name = "doge", opts = o}, M)
end

function M:init(ctx)
    self.mask = policies.has_data(ctx)
    self.alpha = policies.initial(ctx, self.opts.init)
    self.average = self.alpha:clone()
    self.updates = 0
    return self.alpha:clone()
end

-- One DoGE step from dot products `dot` and gradient norms `norm` (float32 ctx.k) at learning
-- rate lr. Returns the new weights; exposed for the tests.
function M:step(dot, norm, lr)
    local o, mask, alpha = self.opts, self.mask, self.alpha
    local n, norm_sum = 0, 0
    for i = 1, #alpha do
        if mask[i] > 0 then n, norm_sum = n + 1, norm_sum + norm[i] end
    end
    local mean_norm = norm_sum / n
    local logits, top = {}, -math.huge
    for i = 1, #alpha do
        if mask[i] > 0 then
            local w = lr * dot[i] / (mean_norm + 1e-6)
            w = math.max(lr * o.w_min, math.min(lr * o.w_max, w))
            logits[i] = math.log(alpha[i]) + w / o.mu
            top = math.max(top, logits[i])
        end
    end
    local new = dga.zeros(#alpha)
    for i = 1, #alpha do
        if mask[i] > 0 then new[i] = math.exp(logits[i] - top) end
    end
    new:normalize_()
    if o.smoothing > 0 then
        for i = 1, #alpha do
            if mask[i] > 0 then new[i] = (1 - o.smoothing) * new[i] + o.smoothing / n end
        end
    end
    self.alpha = new
    self.updates = self.updates + 1
    -- running mean of alpha over the updates (and the initial weights)
    self.average = self.average:scale(self.updates / (self.updates + 1))
                       :add_(new:scale(1 / (self.updates + 1)))
    return new:clone()
end

function M:update(ctx, step)
    local r = self.opts.target == "mixture" and ctx:align{target = "mixture"} or ctx:align()
    local w = self:step(r.dot, r.grad_norm, ctx.lr)
    if ctx.log then ctx.log{max_weight = w:max(), avg_max_weight = self.average:max()} end
    return w
end

function M:state()
    return {tensors = {alpha = self.alpha, average = self.average, mask = self.mask},
            values = {updates = self.updates}}
end

function M:set_state(st)
    local t, v = st.tensors or {}, st.values or {}
    if not (t.alpha and t.average and t.mask and v.updates) then
        error("policy 'doge': state lacks alpha / average / mask / updates", 2)
    end
    self.alpha, self.average, self.mask = t.alpha:clone(), t.average:clone(), t.mask:clone()
    self.updates = v.updates
end

return M

-- dga: Dynamic Gradient Alignment (Fan, Grangier & Ablin, 2024).
--
-- Every T_r steps (the trainer calls update then), at the current parameters:
--   a_i   = < grad l(theta, x_i), grad l'(theta, z) >     (ctx:align(): x_i from domain i,
--                                                            z from the specific set)
--   alpha <- normalize(alpha * exp(eta * a))                (mirror descent on the simplex)
--   ema   <- (1 - beta) ema + beta alpha                    (training samples from ema)
-- The sign is +eta a: the paper's Algorithm 1 prints exp(-eta a), but its derivation
-- (df/dalpha_i = -rho a_i) and DoGE both give +eta a -- domains whose gradient points
-- along the target gradient gain weight.
--
-- Options (defaults): beta = 0.1 (1 = DGA without EMA); eta_mode = "std" sets
-- eta = target_change / std_i(a) each update (target_change = 0.5: the log-weights move by
-- about half a unit per update, whatever the scale of a); eta_mode = "fixed" uses `eta`
-- (setting eta alone implies "fixed"); init = "uniform" | "natural" | k weights;
-- floor = 1e-6: after each step alpha <- (1 - floor) alpha + floor * uniform, so no weight
-- underflows to an exact 0 (at k = 262,144, exp of a large negative log-weight does) and
-- every domain can come back; each domain keeps at least floor / k.
--
-- Logged at each update (ctx.log): g_spe_sq = |g_spe|^2, mean_abs_a, std_a, eta (the step
-- size this update used: the constant in "fixed" mode, target_change / std(a) in "std"),
-- max_weight (of alpha), entropy (of alpha, nats), l1_change = sum_i |w_i - w_i'| of the
-- returned (sampling) weights and alpha_l1_change of alpha. The experiments report the mean
-- l1_change per update: with eta fixed, how far the mixture moves is the effect under study,
-- while the "std" mode pins the log-weight move to target_change whatever the alignments say.
--
-- A fixed eta multiplies the raw alignments, whose scale is |g|^2 (it falls as training
-- proceeds), so one eta fits one model size and normalisation: experiments calibrate it once
-- (scripts/calibrate_eta.lua). Non-finite alignments are an error naming the update,
-- never NaN weights.
local policies = require "policies"

local M = {}
M.__index = M

M.defaults = {beta = 0.1, eta_mode = "std", eta = false, target_change = 0.5,
              floor = 1e-6, init = "uniform"}

-- Checked options, shared with dga_dist.
function M.options(name, opts)
    local o = policies.options(name, M.defaults, opts)
    if opts and opts.eta and opts.eta_mode == nil then o.eta_mode = "fixed" end
    if o.eta_mode ~= "std" and o.eta_mode ~= "fixed" then
        error(string.format("policy '%s': eta_mode = %s, expected \"std\" or \"fixed\"", name, tostring(o.eta_mode)), 3)
    end
    if o.eta_mode == "fixed" and type(o.eta) ~= "number" then
        error(string.format("policy '%s': eta_mode = \"fixed\" needs a number eta", name), 3)
    end
    -- eta <= 0 would step away from the target's gradient (or not at all): a typo, not DGA.
    if o.eta and not (type(o.eta) == "number" and o.eta > 0 and o.eta < math.huge) then
        error(string.format("policy '%s': eta = %s, expected a finite number > 0", name, tostring(o.eta)), 3)
    end
    if type(o.beta) ~= "number" or not (o.beta > 0 and o.beta <= 1) then
        error(string.format("policy '%s': beta = %s, expected 0 < beta <= 1", name, tostring(o.beta)), 3)
    end
    if type(o.target_change) ~= "number" or not (o.target_change > 0) then
        error(string.format("policy '%s': target_change = %s, expected > 0", name, tostring(o.target_change)), 3)
    end
    if type(o.floor) ~= "number" or not (o.floor >= 0 and o.floor < 1) then
        error(string.format("policy '%s': floor = %s, expected 0 <= floor < 1", name, tostring(o.floor)), 3)
    end
    return o
end

function M.new(opts)
    return setmetatable({name = "dga", opts = M.options("dga", opts)}, M)
end

-- The step size, mean |a_i| and std_i(a) over the components that have data (`mask` > 0;
-- components without data carry a = 0 and would only shrink the spread).
function M.step_size(o, a, mask)
    local n, sum, sum_abs = 0, 0, 0
    for i = 1, #a do
        if mask[i] > 0 then n, sum, sum_abs = n + 1, sum + a[i], sum_abs + math.abs(a[i]) end
    end
    local mean, ss = sum / n, 0
    for i = 1, #a do
        if mask[i] > 0 then ss = ss + (a[i] - mean) ^ 2 end
    end
    local sd = math.sqrt(ss / n)
    local eta = o.eta
    if o.eta_mode == "std" then eta = sd > 0 and o.target_change / sd or 0 end
    return eta, sum_abs / n, sd
end

-- One mirror-descent step in log space (subtracting the max keeps exp finite), then the
-- floor towards `uniform` (the uniform distribution over the components that have data).
function M.mirror_step(alpha, a, eta, floor, uniform)
    local logits = alpha:log() + a:scale(eta)
    local new = (logits - logits:max()):exp_():normalize_()
    if floor > 0 then new = new:scale_(1 - floor):add_(uniform:scale(floor)) end
    return new
end

local function l1(x, y)
    local s = 0
    for i = 1, #x do s = s + math.abs(x[i] - y[i]) end
    return s
end

local function entropy(p)
    local h = 0
    for i = 1, #p do
        local x = p[i]
        if x > 0 then h = h - x * math.log(x) end
    end
    return h
end

function M:init(ctx)
    self.uniform = policies.uniform(ctx)
    self.alpha = policies.initial(ctx, self.opts.init)
    self.ema = self.alpha:clone()
    return self.ema:clone()
end

-- The update on alignments r (from ctx:align()): shared with dga_dist.
function M:apply(ctx, r)
    local o = self.opts
    local a = r.align
    if #a ~= #self.alpha then
        error(string.format("policy '%s': %d alignments for %d weights", self.name, #a, #self.alpha), 2)
    end
    local eta, mean_abs, sd = M.step_size(o, a, self.uniform)
    if not (mean_abs == mean_abs and mean_abs < math.huge and eta == eta and math.abs(eta) < math.huge) then
        error(string.format("policy '%s': step %s: non-finite alignments or step size (mean |a| = %s, "
                            .. "eta = %s)", self.name, tostring(ctx.step), tostring(mean_abs),
                            tostring(eta)), 2)
    end
    local old_alpha, old_ema = self.alpha, self.ema
    self.alpha = M.mirror_step(self.alpha, a, eta, o.floor, self.uniform)
    -- renormalised so float32 rounding cannot drift the sum over thousands of updates
    self.ema = self.ema:scale(1 - o.beta):add_(self.alpha:scale(o.beta)):normalize_()
    if ctx.log then
        ctx.log{g_spe_sq = r.target_norm * r.target_norm, mean_abs_a = mean_abs, std_a = sd,
                eta = eta, max_weight = self.alpha:max(), entropy = entropy(self.alpha),
                l1_change = l1(self.ema, old_ema), alpha_l1_change = l1(self.alpha, old_alpha)}
    end
    return self.ema:clone()
end

function M:update(ctx, step)
    return self:apply(ctx, ctx:align())
end

function M:state()
    return {tensors = {alpha = self.alpha, ema = self.ema}, values = {}}
end

function M:set_state(st)
    local t = st.tensors or {}
    if not (t.alpha and t.ema) then error("policy '" .. self.name .. "': state lacks alpha / ema", 2) end
    self.alpha, self.ema = t.alpha:clone(), t.ema:clone()
end

return M

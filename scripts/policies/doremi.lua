-- doremi: DoReMi's excess-loss reweighting (Xie et al., 2023, "DoReMi: Optimizing Data
-- Mixtures Speeds Up Language Model Pretraining"), run online against a reference model.
--
-- At every update, for each component i with data, a probe batch B_i from that component
-- (ctx:probe(i, n); probes are not training draws) is scored by the model being trained and
-- by the reference checkpoint:
--   lambda_i = sum_{x in B_i} max(0, nll(x) - nll_ref(x)) / tokens(B_i)   (excess loss)
--   alpha'   = alpha * exp(eta * lambda)            (exponentiated gradient ascent, normalised)
--   alpha    = (1 - smoothing) alpha' + smoothing / K
-- DoReMi clips each token's excess loss at 0. model:eval returns a sum per sequence, so the clip
-- here is per sequence: a sequence counts only when the model is worse than the reference on it
-- as a whole. That is a coarser clip than the paper's; the update is otherwise the same.
--
-- Options: reference = path to a dgalua checkpoint (a .safetensors file) of a model trained on
-- the natural mixture (the "reference model" of DoReMi) with the same tokenizer and context;
-- eta = 1, smoothing = 1e-3 (DoReMi's values); batch = probe sequences per component
-- (default 8).
-- Cost: two forward passes per component, no backward (DGA: a forward and a backward).
local policies = require "policies"

local M = {}
M.__index = M

M.defaults = {reference = false, eta = 1, smoothing = 1e-3, batch = 8, init = "uniform"}

function M.new(opts)
    local o = policies.options("doremi", M.defaults, opts)
    if type(o.reference) ~= "string" and type(o.reference) ~= "userdata" then
        error("policy 'doremi': option reference (a checkpoint path) is required", 2)
    end
    if type(o.eta) ~= "number" or not (o.eta > 0) then
        error(string.format("policy 'doremi': eta = %s, expected > 0", tostring(o.eta)), 2)
    end
    if type(o.smoothing) ~= "number" or not (o.smoothing >= 0 and o.smoothing < 1) then
        error(string.format("policy 'doremi': smoothing = %s, expected 0 <= smoothing < 1",
                            tostring(o.smoothing)), 2)
    end
    if math.type(o.batch) ~= "integer" or o.batch < 1 then
        error(string.format("policy 'doremi': batch = %s, expected an integer >= 1", tostring(o.batch)), 2)
    end
    return setmetatable({name = "doremi", opts = o}, M)
end

-- The reference model: a model object (tests) or loaded from the checkpoint path.
local function reference_model(ref)
    if type(ref) ~= "string" then return ref end
    local ck = dga.load_checkpoint(ref)
    return ck.model
end

function M:init(ctx)
    self.mask = policies.has_data(ctx)
    self.alpha = policies.initial(ctx, self.opts.init)
    self.ref = self.ref or reference_model(self.opts.reference)
    return self.alpha:clone()
end

-- One DoReMi step from per-component excess losses `lambda` (float32 ctx.k). Exposed for the
-- tests.
function M:step(lambda)
    local o, mask, alpha = self.opts, self.mask, self.alpha
    local n = mask:sum()
    local top = -math.huge
    for i = 1, #alpha do
        if mask[i] > 0 then top = math.max(top, math.log(alpha[i]) + o.eta * lambda[i]) end
    end
    local new = dga.zeros(#alpha)
    for i = 1, #alpha do
        if mask[i] > 0 then new[i] = math.exp(math.log(alpha[i]) + o.eta * lambda[i] - top) end
    end
    new:normalize_()
    for i = 1, #alpha do
        if mask[i] > 0 then new[i] = (1 - o.smoothing) * new[i] + o.smoothing / n end
    end
    self.alpha = new
    return new:clone()
end

-- Excess loss of one probe batch: per-sequence clipped, token-weighted.
function M.excess(nll, nll_ref, count)
    local sum, tokens = 0, 0
    for b = 1, #nll do
        sum = sum + math.max(0, nll[b] - nll_ref[b])
        tokens = tokens + count[b]
    end
    return tokens > 0 and sum / tokens or 0
end

function M:update(ctx, step)
    if not (ctx.probe and ctx.model) then
        error("policy 'doremi': ctx:probe and ctx.model are missing (the trainer provides them)", 2)
    end
    local lambda = dga.zeros(#self.alpha)
    for i = 1, #self.alpha do
        if self.mask[i] > 0 then
            local inputs, targets = ctx:probe(i, self.opts.batch)
            local _, nll, count = ctx.model:eval(inputs, targets)
            local _, nll_ref = self.ref:eval(inputs, targets)
            lambda[i] = M.excess(nll, nll_ref, count)
        end
    end
    local w = self:step(lambda)
    if ctx.log then ctx.log{max_weight = w:max(), mean_excess = lambda:sum() / self.mask:sum()} end
    return w
end

function M:state()
    return {tensors = {alpha = self.alpha, mask = self.mask}, values = {}}
end

function M:set_state(st)
    local t = st.tensors or {}
    if not (t.alpha and t.mask) then error("policy 'doremi': state lacks alpha / mask", 2) end
    self.alpha, self.mask = t.alpha:clone(), t.mask:clone()
end

return M

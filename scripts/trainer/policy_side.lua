-- The policy's side of a training run, as methods of Run (trainer/run.lua): the ctx a policy
-- sees (the contract is in scripts/policies/init.lua), an alignment round, and the calls to
-- init and update with their result checked once, here.
local sources = require "trainer.sources"
local align = require "trainer.align"

local Run = {}

-- The ctx handed to policies (contract: scripts/policies/init.lua).
function Run:make_ctx()
    local run, space = self, self.space
    local ctx = {
        k = self.K, n_leaves = self.src.k, sizes = space.sizes, budget = self.budget,
        step = 0, T_r = self.cfg.T_r, history = {}, is_histogram = self.cfg.is_histogram,
        options = self.cfg.policy, basis = space.basis, names = self.names,
        lr = self.cfg.optimizer.lr, epochs = dga.zeros(self.K), pending_log = {},
    }
    function ctx.log(a, b)
        local fields = (a == ctx) and b or a
        for key, v in pairs(fields) do ctx.pending_log[key] = v end
    end
    ctx.model = self.model
    function ctx.probe(_, j, n) return space:probe(j, n or run.align_batch) end
    function ctx.probes(_, n) return space:probes(n or run.align_batch) end
    function ctx.target(_, n) return {sources.random_rows(run.data.spec_train, n or run.align_batch, run.rng)} end
    function ctx.align(_, o) return run:align_round(o) end
    self.ctx = ctx
end

function Run:refresh_ctx(step)
    local ctx, tl = self.ctx, self.train_losses
    ctx.step = step
    ctx.lr = self.lr_at(math.max(step, 1))
    ctx.epochs = self.space:epochs()
    ctx.train_loss, ctx.train_count = self.space:train_losses(tl.sum, tl.count)
    ctx.train_loss_mean = self.space:train_losses(tl.total_sum, tl.total_count)
end

-- One alignment round at the current parameters: a fresh target batch, and one probe batch
-- per component, the policy's own (policy:probes(ctx)) or the space's. Probes come from the
-- sampler's probe generator and do not count as training draws. o.target = "mixture" takes
-- the target batch from the current training mixture instead of the specific set.
function Run:align_round(o)
    local ctx = self.ctx
    local target
    if o and o.target == "mixture" then
        target = {self.space:mixture_probe(self.weights, self.align_batch, self.rng)}
    elseif o and o.target ~= nil then
        error(string.format("ctx:align: target = %s, expected \"mixture\" or none (the specific set)",
                            tostring(o.target)), 3)
    else
        target = ctx:target()
    end
    local probes = self.policy.probes and self.policy:probes(ctx) or ctx:probes()
    self.last_align = align.round(self.model, target, probes, self.K, self.cfg.align, ctx.lr,
                                  self.dp.size > 1 and self.dp or nil)
    return self.last_align
end

-- A policy's failure as one line: the policy, its file, the phase (init / update at step N)
-- and what was wrong (util/errors: the sweep stops, dgalua prints no traceback).
function Run:policy_error(phase, step, what)
    local name = self.cfg.policy.name
    local file = name:match("%.lua$") and name
                 or package.searchpath("policies." .. name, package.path) or ("policies/" .. name .. ".lua")
    return require("util.errors").user(string.format("policy '%s' (%s), %s: %s", self.policy.name or name, file,
        phase == "init" and "init" or ("update at step " .. step), what))
end

-- Calls the policy's init (step 0) or update; returns its weights, checked once here: a
-- float32 tensor of K finite, non-negative weights summing to 1.
function Run:policy_weights(phase, step)
    local ok, w = pcall(self.policy[phase], self.policy, self.ctx, step)
    if not ok then
        if require("util.errors").is(w) then error(w, 0) end
        local msg = tostring(w)
        if msg:find("interrupted", 1, true) then error(w, 0) end
        -- a message the policy raised itself ("policy 'x': ...") needs neither its position
        -- nor its own prefix again; a runtime error keeps its file and line
        msg = msg:gsub("^[^\n]-%.lua:%d+: policy '[^']*': ", "")
        error(self:policy_error(phase, step, msg), 0)
    end
    local what
    if not sources.is_tensor(w) then
        what = string.format("returned %s, expected a float32 tensor of %d weights (dga.tensor{...})",
                             type(w) == "table" and "a plain Lua table" or ("a " .. type(w)), self.K)
    elseif w:dtype() ~= "float32" then
        what = string.format("returned a %s tensor, expected float32", w:dtype())
    elseif #w ~= self.K then
        what = string.format("returned %d weights, expected %d", #w, self.K)
    else
        local okd, err = pcall(dga.check_distribution, w, "its weights")
        if not okd then what = tostring(err) end
    end
    if what then error(self:policy_error(phase, step, what), 0) end
    return w
end

return Run

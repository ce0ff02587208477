-- A training run: what it is built from, and the loop (train).
--
-- Every step draws a batch from the mixture sampler (the data's gather does the copy in C)
-- and runs forward / backward / clip / AdamW with the scheduled lr. Every T_r steps the
-- policy updates the weights (it may call ctx:align()); every eval_every steps the held-out
-- sets are evaluated and a metrics row is written; checkpoints are taken at metrics rows.
-- Under mpirun the ranks train one model data-parallel (trainer/data_parallel.lua): each computes
-- its rows of the global batch and its share of an alignment round's probes, and only rank 0
-- writes (the run directory, logs, checkpoints, progress). The held-out sets are evaluated
-- in whole batches split over the ranks, with the one-rank values.
local config = require "trainer.config"
local sources = require "trainer.sources"
local space_of = require "trainer.space"
local checkpoint = require "trainer.checkpoint"
local rundir = require "rundir"
local losses = require "trainer.losses"
local data_parallel = require "trainer.data_parallel"
local runinfo = require "util.runinfo"
local stats = require "util.stats"

local M = {}

local Run = {}
Run.__index = Run
M.Run = Run

-- A run from cfg (filled with the defaults and checked). opts: resume, overwrite (start
-- afresh in a directory that holds a run), quiet, independent (under mpirun, this rank
-- trains alone: a sweep's pair when the ranks share the pairs), stop_at (stop
-- cleanly at that metrics step, with a checkpoint), hooks = {after_step = fn(step, run),
-- before_pointer = fn(step, run)} (called after each step, and between writing a checkpoint
-- and pointing "latest" at it: the crash tests end the process there).
function M.new(cfg, opts)
    opts = opts or {}
    cfg = config.prepare(cfg, 2)
    if cfg.threads and dga.set_threads then dga.set_threads(cfg.threads) end

    local dp = data_parallel.new(cfg, opts)
    dp:check_batch(cfg.batch, cfg.name)
    if dp.rank ~= 0 then
        local o = {}
        for key, v in pairs(opts) do o[key] = v end
        o.quiet = true
        opts = o
    end
    local self = setmetatable({cfg = cfg, opts = opts, hooks = opts.hooks or {}, dp = dp,
                               writer = dp.rank == 0}, Run)
    self.dir = cfg.run_dir
    if self.writer then runinfo.mkdir_p(self.dir) end
    if cfg.store and cfg.store.dir and cfg.store.dir:sub(1, 1) ~= "/" then
        cfg.store.dir = require("lfs").currentdir() .. "/" .. cfg.store.dir
    end

    local data = sources.prepare(cfg)
    self.data, self.src, self.budget = data, data.src, data.budget
    self.generic_heldout = data.generic_heldout

    local mc = cfg.model
    if mc.context ~= nil and mc.context ~= self.src.seq_len - 1 then
        error(string.format("trainer: cfg.model.context = %s, but the data's sequences of %d tokens give %d",
                            tostring(mc.context), self.src.seq_len, self.src.seq_len - 1), 2)
    end
    mc.context = self.src.seq_len - 1
    mc.vocab = mc.vocab or self.src.vocab
    self.align_batch = cfg.align_batch or cfg.batch
    self.model = dga.gpt{layers = mc.layers, width = mc.width, heads = mc.heads, precision = mc.precision,
                         context = mc.context, vocab = mc.vocab,
                         batch = math.max(cfg.batch, self.align_batch, cfg.eval_batch),
                         seed = cfg.seed}
    -- the run records the precision that runs (bf16 falls back to fp32 where the CPU has no
    -- bf16 matmul, and says so): a resume then runs what the run ran
    if self.model.precision then mc.precision = self.model:precision() end
    local oc = cfg.optimizer
    self.opt = dga.adamw(self.model, {lr = oc.lr, beta1 = oc.beta1, beta2 = oc.beta2,
                                      eps = oc.eps, weight_decay = oc.weight_decay,
                                      decay = oc.decay})
    self.clip = cfg.clip or oc.clip
    self.lr_at = config.lr_schedule(cfg)

    -- The sampler makes the training draws and the probes; the trainer's own generator
    -- draws the target batches from the specific set. Counts go to the sampler as Lua
    -- integers (exact).
    self.sampler = dga.sampler(self.src.sizes, {seed = cfg.seed + 1, budget = self.budget,
                                              epoch_cap = cfg.epoch_cap})
    self.rng = dga.rng(cfg.seed + 2)
    self.space = space_of.new(cfg, data, self.sampler)
    self.train_losses = losses.new(self.src.k)
    self.K, self.names = self.space.K, self.space.names

    self.policy = require("policies").get(cfg.policy.name, cfg.policy)
    -- The run records the options the policy runs with, its defaults filled in (config.lua,
    -- the summary), not only those it was given.
    if type(self.policy.opts) == "table" then
        local resolved = {name = cfg.policy.name}
        for key, v in pairs(self.policy.opts) do resolved[key] = v end
        cfg.policy = resolved
    end
    self:make_ctx()
    return self
end

-- The policy's side of a run (its ctx, alignment rounds, calls and result check):
-- trainer/policy_side.lua, methods of Run.
for name, fn in pairs(require "trainer.policy_side") do Run[name] = fn end

-- The held-out losses: {specific=, generic=, basis = {[j] = loss}}. With `announce` (the
-- final evaluation), a long one says on stderr which set it has evaluated.
function Run:evaluate(announce)
    local b, data = self.cfg.eval_batch, self.data
    local sets = {{"specific", data.spec_heldout}}
    if data.generic_heldout then sets[#sets + 1] = {"generic", data.generic_heldout} end
    for j in ipairs(data.basis) do
        if data.basis_eval[j] then sets[#sets + 1] = {j, data.basis_eval[j]} end
    end
    local total = 0
    for _, set in ipairs(sets) do total = total + set[2]:shape()[1] end
    local say = announce and not self.opts.quiet and self.cfg.progress
                and total >= (self.cfg.eval_progress_min or 2048)
    local out = {basis = {}}
    for i, set in ipairs(sets) do
        local key, seqs = set[1], set[2]
        local loss = self.dp:eval_seqs(self.model, seqs, b)
        if type(key) == "number" then out.basis[key] = loss else out[key] = loss end
        if say then
            local what = type(key) == "number" and ("basis " .. key .. " (" .. self.data.basis[key].name .. ")")
                         or key
            io.stderr:write(string.format("%s: final evaluation %d/%d: %s, %d sequences: loss %.4f\n",
                                          self.cfg.name, i, #sets, what, seqs:shape()[1], loss))
        end
    end
    return out
end

-- Sets the sampling mixture from checked weights over K components.
function Run:apply_weights(w)
    self.weights = w:clone()
    self.sampler:set_weights(self.space:mix(w))
end

function Run:elapsed() return self.elapsed_before + (runinfo.now() - self.t_start) end

function Run:save_checkpoint(step)
    if not self.writer then return end
    local name = rundir.ckpt_name(step)
    checkpoint.save(self.dir .. "/" .. name, {
        step = step, name = self.cfg.name, policy_name = self.cfg.policy.name,
        elapsed = self:elapsed(), model = self.model, optimizer = self.opt,
        weights = self.weights, policy = self.policy, history = self.ctx.history,
        sampler = self.sampler, rng = self.rng, train_losses = self.train_losses,
        ranks = self.dp.size})
    if self.hooks.before_pointer then self.hooks.before_pointer(step, self) end
    rundir.commit(self.dir, name)
end

function Run:load_checkpoint(path)
    local ck = checkpoint.load(path, {model = self.model, optimizer = self.opt, policy = self.policy,
                                      train_losses = self.train_losses})
    self.ctx.history = ck.history
    self.weights = ck.weights
    self.sampler:set_weights(self.space:mix(self.weights))
    local oks, err = pcall(self.sampler.set_state, self.sampler, ck.sampler)
    if not oks then
        local what = self.cfg.store and ("the store " .. tostring(self.cfg.store.dir)) or "the run's domains"
        error(string.format("resume: %s: %s changed since the run started (%s)", path, what, tostring(err)), 0)
    end
    self.rng:set_state(ck.rng)
    self.elapsed_before = ck.elapsed
    -- The state does not depend on the rank count (trainer/data_parallel.lua), so a run may resume on
    -- a different one; only the reduction order, and so the last bits of the losses, change.
    -- Said even with quiet (which silences progress, not this): by rank 0 only.
    if ck.ranks ~= self.dp.size and self.writer then
        io.stderr:write(string.format("%s: %s was written by %d rank%s, resuming on %d: the state does "
                                      .. "not depend on the rank count, but the losses may differ in "
                                      .. "the last bits from a run that never stopped\n",
                                      self.cfg.name, path, ck.ranks, ck.ranks == 1 and "" or "s",
                                      self.dp.size))
    end
    return ck.step
end

-- A fresh run: the config, the logs, the initial weights and the step-0 metrics row.
function Run:start_fresh()
    local held
    if self.writer and rundir.holds_run(self.dir) and not self.opts.overwrite then
        held = string.format("trainer: %s already holds a run (a checkpoint or metrics.csv): resume it "
                             .. "(opts.resume, scripts/trainer.lua --resume) or set opts.overwrite "
                             .. "(--overwrite) to replace it", self.dir)
    end
    self.dp:agree_error(held)
    if self.writer then
        rundir.remove_tmp(self.dir)
        rundir.clear_checkpoints(self.dir)
        rundir.save_config(self.dir, self.cfg)
        self.logs = rundir.open_logs(self.dir, self.data.basis, "w")
    else
        self.logs = rundir.null_logs()
    end
    self:refresh_ctx(0)
    self:apply_weights(self:policy_weights("init", 0))
    self.ctx.history[#self.ctx.history + 1] = self.weights:clone()
    self.logs:weight_rows(0, self.space:logged_weights(self.weights))
    self.logs:policy_fields(0, self.ctx.pending_log, self.cfg.policy.name)   -- logged by init
    self:write_metrics(0, 0, nil, nil, nil, self:evaluate())
    return 0
end

-- A resumed run: the last complete checkpoint, the logs cut back to its step.
function Run:start_resume()
    -- Rank 0 chooses the checkpoint; the others read the same file (a shared file system).
    local path = self.writer and rundir.latest_checkpoint(self.dir) or nil
    if self.dp.size > 1 then
        self.dp:agree_error(self.writer and not path and ("resume: no complete checkpoint in " .. self.dir)
                              or nil)
        path = self.dp:from_root(path)
    end
    if not path then error("resume: no complete checkpoint in " .. self.dir, 3) end
    if self.writer then rundir.remove_tmp(self.dir) end
    self:policy_weights("init", 0)
    local start = self:load_checkpoint(path)
    self.step = start
    if self.writer then
        rundir.truncate_logs(self.dir, start)
        self.logs = rundir.open_logs(self.dir, self.data.basis, "a")
    else
        self.logs = rundir.null_logs()
    end
    if not self.opts.quiet then
        io.stderr:write(string.format("%s: resuming from %s (step %d)\n", self.cfg.name, path, start))
    end
    return start
end

-- The policy's update at `step`: new weights, and the alignment round it made, if any.
function Run:update_policy(step)
    local ctx = self.ctx
    self:refresh_ctx(step)
    self.last_align = nil
    for key in pairs(ctx.pending_log) do ctx.pending_log[key] = nil end
    self:apply_weights(self:policy_weights("update", step))
    self.dp:check_weights(step, self.weights)
    self.train_losses:reset_interval()
    ctx.history[#ctx.history + 1] = self.weights:clone()
    self.logs:weight_rows(step, self.space:logged_weights(self.weights))
    if self.last_align then self.logs:alignment(step, self.last_align, self.K) end
    self.logs:policy_fields(step, ctx.pending_log, self.cfg.policy.name)
end

function Run:write_metrics(step, tokens, lr, train_loss, grad_norm, ev)
    self.logs:metric({step = step, tokens = tokens, lr = lr, train_loss = train_loss,
                      grad_norm = grad_norm, seconds = self:elapsed()}, ev)
end

local function progress_line(cfg, total)
    local progress = require "util.progress"
    return progress.new{total = total, label = cfg.name,
                        every = cfg.progress_every or math.max(1, total // 100)}
end

-- The batch's gradients (this rank's rows under data parallelism, summed over the ranks);
-- returns the batch's mean loss.
function Run:gradients(domains, indices, first, rows)
    local model = self.model
    model:zero_grad()
    if self.dp.size == 1 then
        local loss = model:forward(self.src.gather(domains, indices))
        self.train_losses:add(domains, model:seq_losses())
        model:backward()
        return loss
    end
    model:forward(self.src.gather(domains:narrow(first, rows), indices:narrow(first, rows)))
    local loss, seq = self.dp:backward_step(model, rows, self.cfg.batch)
    self.train_losses:add(domains, seq)
    return loss
end

function Run:train()
    local cfg = self.cfg
    self.t_start = runinfo.now()
    self.elapsed_before = 0
    self.step = 0
    -- One writer per run directory: a second process fails here, naming this one's pid. The
    -- directory itself is locked, so no lock file exists that a user could delete as stale.
    if self.writer then self.lock = dga.lock(self.dir) end
    -- On an error the logs are closed and the lock released at once, without raising again
    -- over the error.
    local _ <close> = setmetatable({}, {__close = function(_, err)
        if err then
            if self.prog then self.prog:finish() end   -- the error starts on a line of its own
            self:close(true)
        end
    end})
    local start = self.opts.resume and self:start_resume() or self:start_fresh()
    if start >= cfg.steps then return self:finished(start) end
    self.logs:domains(self.space:domain_rows())

    local tokens_per_step = cfg.batch * (self.src.seq_len - 1)
    local prog = (cfg.progress and not self.opts.quiet) and progress_line(cfg, cfg.steps) or nil
    self.prog = prog
    if prog and prog.start then prog:start(start) end
    local sum_loss, sum_norm, n_acc, last = 0, 0, 0, {}
    local model, opt, sampler, dp = self.model, self.opt, self.sampler, self.dp
    local first, rows = dp:rows(cfg.batch)
    for step = start + 1, cfg.steps do
        local lr = self.lr_at(step)
        local ok, domains, indices = pcall(sampler.draw, sampler, cfg.batch)
        if not ok then
            error(string.format("%s: step %d: %s", cfg.name, step, tostring(domains)), 0)
        end
        if cfg.epoch_cap and cfg.epoch_cap > 0 then self:report_capped(step) end
        local loss = self:gradients(domains, indices, first, rows)
        local norm = self.clip and self.clip > 0 and model:clip_grad(self.clip) or model:grad_norm()
        opt:step(lr)
        sum_loss, sum_norm, n_acc = sum_loss + loss, sum_norm + norm, n_acc + 1
        self.step = step
        last.loss = loss

        -- A fixed policy (uniform, natural, importance) would return the same weights.
        if step % cfg.T_r == 0 and step < cfg.steps and not self.policy.fixed then
            self:update_policy(step)
        end

        local stop = false
        if step % cfg.eval_every == 0 or step == cfg.steps then
            local ev = self:evaluate(step == cfg.steps)
            self:write_metrics(step, step * tokens_per_step, lr, sum_loss / n_acc, sum_norm / n_acc, ev)
            self.logs:epoch_rows(step, sampler, self.src.k, cfg.sparse_k)
            last.eval = ev
            sum_loss, sum_norm, n_acc = 0, 0, 0
            dp:check_replicas(model, step, self.weights)
            local ce = cfg.checkpoint_every
            stop = self.opts.stop_at == step
            if step == cfg.steps or stop or (ce > 0 and step % ce == 0) then
                self:save_checkpoint(step)
            end
        end
        if self.hooks.after_step then self.hooks.after_step(step, self) end
        if stop then break end
        if prog then
            prog:update(step, {loss = loss, lr = lr, tokens = tokens_per_step,
                               spe = last.eval and last.eval.specific,
                               gen = last.eval and last.eval.generic})
        end
    end
    if prog and prog.finish then prog:finish() end
    self:close()
    return self:summary(last)
end

-- A resumed run with nothing left to train (its checkpoint is at or past cfg.steps): its
-- summary from the checkpoint and the last metrics row, which say where it is.
function Run:finished(step)
    self:close()
    self.step = step
    local ev = rundir.open(self.dir):last_eval(step) or {basis = {}}
    local s = self:summary({eval = ev})
    s.note = string.format("%s: the run is already at step %d (asked for %d): nothing to train",
                           self.cfg.name, step, self.cfg.steps)
    if not self.opts.quiet then io.stderr:write(s.note, "\n") end
    return s
end

function Run:summary(last)
    local ev = last.eval or {}
    -- stats.summary sums ev.basis (keyed by basis index, with gaps) in index order: the same
    -- bits in every process, which pairs' order is not
    local basis_mean = stats.summary(ev.basis or {}).mean
    return {name = self.cfg.name, policy = self.cfg.policy.name, policy_options = self.cfg.policy,
            run_dir = self.dir,
            step = self.step,
            specific_loss = ev.specific, generic_loss = ev.generic, basis_loss = basis_mean,
            basis = ev.basis, weights = self.weights, model = self.model,
            epochs = self.sampler:epochs(), drawn = self.sampler:drawn(),
            seconds = self:elapsed()}
end

-- Says (on stderr, and in events.log of the run) when domains reach the epoch cap: from then
-- on they are out of the mixture and the other weights are renormalised.
function Run:report_capped(step)
    local n = self.sampler:num_capped()
    self.n_capped = self.n_capped or 0
    if n <= self.n_capped then return end
    local all = self.sampler:capped()
    local names = {}
    for i = self.n_capped + 1, n do names[#names + 1] = self.space:leaf_name(all[i]) end
    local msg = string.format("%s: step %d: domain%s %s reached the epoch cap (%d) and left the "
                              .. "mixture; the other weights are renormalised (%d of %d capped)",
                              self.cfg.name, step, #names > 1 and "s" or "", table.concat(names, ", "),
                              self.cfg.epoch_cap, n, self.src.k)
    if not self.opts.quiet then io.stderr:write(msg, "\n") end
    self.logs:event(msg)
    self.n_capped = n
end

function Run:close(quiet)
    local ok, err = true, nil
    if self.logs then ok, err = pcall(self.logs.close, self.logs, quiet) end
    if self.lock then self.lock:release() end
    if not ok then error(err, 0) end
end

function M.run(cfg, opts)
    return M.new(cfg, opts):train()
end

-- Continues the run in `dir` from its last checkpoint (its own config and data);
-- `over` may change steps (the schedule keeps the total recorded in the config).
function M.resume(dir, over, opts)
    local cfg = rundir.load_config(dir)
    for key, v in pairs(over or {}) do cfg[key] = v end
    opts = opts or {}
    opts.resume = true
    return M.run(cfg, opts)
end

return M

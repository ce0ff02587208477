-- The training loop of an online data-mixing run (issue 4).
--
--   local trainer = require "trainer"
--   local summary = trainer.run(cfg)                    -- a fresh run
--   local summary = trainer.run(cfg, {resume = true})   -- continue cfg.run_dir's last checkpoint
--   local summary = trainer.resume(run_dir)             -- the same from the run directory alone
--   dgalua scripts/trainer.lua --resume RUN_DIR [--steps N] [--quiet]     (command line)
--
-- Every step draws a batch from the mixture sampler with the current weights (the store's
-- gather does the copy in C), runs forward / backward / clip / AdamW with the scheduled lr.
-- Every T_r steps it calls policy:update(ctx, step) (a policy may call ctx:align()). Every
-- eval_every steps it measures the specific held-out loss, the generic held-out loss and one
-- loss per basis set. The run directory gets:
--   metrics.csv     step,tokens,lr,train_loss,grad_norm,specific_loss,generic_loss,
--                   basis_<j>_loss...,seconds   (train_loss, grad_norm: means since last row)
--   weights.csv     step,domain,weight  (long form; the sampling weights, or the distribution
--                   weights over the N bases in distribution mode; for k > sparse_k only
--                   the entries above weights_min, default 1e-3 / k: a thousandth of the
--                   uniform share, so DGA's floor weights are not written k times a round)
--   alignments.csv  step,domain,align,loss,grad_norm,target_loss,target_norm + the fields the
--                   policy passes to ctx.log (g_spe_sq, mean_abs_a, std_a, ...)
--   epochs.csv      step,domain,epochs,drawn,capped (at every metrics row; k > sparse_k: only
--                   domains drawn from; capped = 1 once a domain reached cfg.epoch_cap)
--   domains.csv     domain,name,size,available
--   config.lua      the full configuration; tensors in it (specific set, held-out sets,
--                   histograms, tensor domains) are saved as data/<path>.npy and referenced
--                   as {tensor_file = "data/<path>.npy"}, so a run directory resumes alone
--   ckpt-<step>.safetensors + latest   checkpoints: model, AdamW moments, sampler state,
--                   policy state, rng state, history; "latest" names the last complete one.
-- Only `seconds` differs between an interrupted-and-resumed run and an uninterrupted one
-- (same seed, same thread count): resume truncates the CSVs to the checkpoint's step (a
-- torn last line included) and appends. Checkpoints: ckpt-<step>.safetensors is written
-- atomically by the core (tmp + fsync + rename), then "latest" is replaced atomically, then
-- older checkpoints are removed; a resume reads "latest" (or the newest complete
-- ckpt-*.safetensors when the pointer is missing) and ignores *.tmp.* files.
-- Test hooks (opts): stop_at = step (stop cleanly there, with a checkpoint; must be a
-- metrics step), die_after_step / die_before_pointer = step (os.exit without cleanup, for
-- the crash tests).
--
-- Configuration (defaults in M.defaults):
--   run_dir, name, seed, steps, batch, T_r, eval_every, checkpoint_every (multiple of
--   eval_every; 0 = only at the end), eval_batch, align_batch, clip, threads
--   model     {layers, width, heads}     (context = seq_len - 1 and vocab come from the data)
--   optimizer {lr, weight_decay, beta1, beta2, eps, decay, clip}
--   schedule  {kind = "cosine"|"linear"|"constant", warmup, total (default steps), min_lr}
--   data:  store = {dir=, level=} (a domain store)  OR  domains = {int32 [n_i, L], ...}
--          domain_names (optional list), budget (sequences: a number or a list per domain)
--          or budget_tokens (the same in tokens, rounded down to whole sequences), epoch_cap
--          generic_heldout = int32 [m, L] (optional; otherwise `heldout_per_domain` sequences
--          from the end of domains are held out of training, up to generic_max)
--   specific  {train = int32 [n, L], heldout = int32 [m, L]}
--   basis     list of {name=, heldout = int32 [m, L], histogram = float32 k (dist mode)}
--   dist      true: distribution reweighting over the basis histograms (P = their columns)
--   policy    {name = "uniform"|"natural"|"importance"|"dga"|"dga_dist"|..., <options>}
--   is_histogram  float32 k (the importance policy's histogram; ctx.is_histogram)
--   align     {normalize = "none"|"cosine"|"mean_norm", method = "exact"|"fd"|"jvp", fd_eps,
--             lr_scale = false (true: alignments times the current lr)}
local dga = dga or require "dga"
local csvlog = require "dgalib.csvlog"
local runinfo = require "dgalib.runinfo"

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
}

-- ---------------------------------------------------------------------------------------
-- helpers

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

local function is_tensor(v)
    if type(v) ~= "userdata" then return false end
    local mt = getmetatable(v)
    return type(mt) == "table" and mt.__name == "dga.tensor"
end
M.is_tensor = is_tensor

local function check_seqs(t, what, L)
    if not is_tensor(t) then error(what .. ": expected an int32 tensor of sequences [n, L]", 3) end
    local shape = t:shape()
    if #shape ~= 2 or t:dtype() ~= "int32" then
        error(string.format("%s: expected an int32 tensor [n, L], got %s %s", what, t:dtype(),
                            table.concat(shape, "x")), 3)
    end
    if L and shape[2] ~= L then
        error(string.format("%s: sequences of %d tokens, the data has %d", what, shape[2], L), 3)
    end
    if shape[1] < 1 then error(what .. ": no sequences", 3) end
    return shape[1], shape[2]
end

-- Copies tokens [first, first + T) of the flat view `flat` into row b of out (B x T).
local function put_row(out, b, flat, first, T)
    out:narrow(b, 1):copy_(flat:narrow(first, T):reshape(1, T))
end

-- inputs/targets (B x (L-1)) from the rows `rows` (list of 1-based row numbers) of seqs.
local function rows_to_io(seqs, rows)
    local shape = seqs:shape()
    local n, L = shape[1], shape[2]
    local flat = seqs:reshape(n * L)
    local B, T = #rows, L - 1
    local inputs = dga.zeros(B, T, "int32")
    local targets = dga.zeros(B, T, "int32")
    for b, r in ipairs(rows) do
        local base = (r - 1) * L
        put_row(inputs, b, flat, base + 1, T)
        put_row(targets, b, flat, base + 2, T)
    end
    return inputs, targets
end
M.rows_to_io = rows_to_io

-- The first `n` rows of seqs (a view) when it has more.
local function head(seqs, n)
    local rows = seqs:shape()[1]
    if n and rows > n then return seqs:narrow(1, n) end
    return seqs
end

-- Mean next-token loss of a set of sequences at the current parameters.
local function eval_seqs(model, seqs, batch)
    if dga.eval_loss_seqs then return dga.eval_loss_seqs(model, seqs, batch) end
    local n = seqs:shape()[1]
    local total, count = 0, 0
    for first = 1, n, batch do
        local rows = {}
        for r = first, math.min(n, first + batch - 1) do rows[#rows + 1] = r end
        local inputs, targets = rows_to_io(seqs, rows)
        local _, nll, cnt = model:eval(inputs, targets)
        for b = 1, #rows do
            total = total + nll[b]
            count = count + cnt[b]
        end
    end
    return count > 0 and total / count or 0
end
M.eval_seqs = eval_seqs

-- ---------------------------------------------------------------------------------------
-- data sources: a domain store, or a list of int32 [n_i, L] tensors (tests, small runs)

local function store_source(cfg)
    local s = dga.store_open(cfg.store.dir)
    local level = cfg.store.level or 1
    local k = s:k(level)
    local sizes = s:domain_sizes(level)
    local src = {kind = "store", store = s, level = level, k = k, seq_len = s:seq_len()}
    src.sizes = {}
    for d = 1, k do src.sizes[d] = math.tointeger(sizes[d]) or math.floor(sizes[d]) end
    function src.gather(domains, indices) return s:gather(level, domains, indices) end
    function src.sequence(d, i) return s:sequence(level, d, i) end
    src.vocab = s:vocab_size()
    -- Domain names for logs and figures: the number and the corpus directory most of the
    -- domain's sequences came from, e.g. "12:latex 83%".
    src.names = {}
    local ok, names, counts = pcall(s.sources, s, level)
    for d = 1, k do
        local best, total, top = 0, 0, nil
        if ok then
            for j = 1, #names do
                local c = counts:at(d, j)
                total = total + c
                if c > best then best, top = c, names[j] end
            end
        end
        src.names[d] = top and string.format("%d:%s %d%%", d, top, math.floor(100 * best / total + 0.5))
                       or tostring(d)
    end
    return src
end

local function tensor_source(cfg)
    local doms = cfg.domains
    local src = {kind = "tensors", k = #doms, sizes = {}}
    for d, t in ipairs(doms) do
        local n, L = check_seqs(t, "domains[" .. d .. "]", src.seq_len)
        src.seq_len = L
        src.sizes[d] = n
    end
    local vmax = 0
    for _, t in ipairs(doms) do vmax = math.max(vmax, t:max()) end
    src.vocab = cfg.model.vocab or (math.tointeger(vmax) + 1)
    local flats = {}
    for d, t in ipairs(doms) do flats[d] = t:reshape(src.sizes[d] * src.seq_len) end
    function src.gather(domains, indices)
        local B, L = #domains, src.seq_len
        local T = L - 1
        local inputs = dga.zeros(B, T, "int32")
        local targets = dga.zeros(B, T, "int32")
        for b = 1, B do
            local flat = flats[domains[b]]
            local base = (indices[b] - 1) * L
            put_row(inputs, b, flat, base + 1, T)
            put_row(targets, b, flat, base + 2, T)
        end
        return inputs, targets
    end
    function src.sequence(d, i)
        local L = src.seq_len
        local out = dga.zeros(L, "int32")
        local t = doms[d]
        for j = 1, L do out[j] = t[(i - 1) * L + j] end
        return out
    end
    return src
end

-- Generic held-out set: sequences taken from the ends of the domains, never more than a
-- quarter of a domain; those sequences are excluded from sampling (budget). Domains are
-- visited in a fixed shuffled order, so a cap on the total (large k) still spreads the set
-- over the whole corpus instead of the first domains.
local function holdout_generic(src, per_domain, max_total)
    local k, L = src.k, src.seq_len
    local taken, order = {}, {}
    for d = 1, k do taken[d], order[d] = 0, d end
    dga.rng(20240520):shuffle(order)
    local picks = {}
    local room = true
    for _ = 1, per_domain do
        if not room or #picks >= max_total then break end
        room = false
        for _, d in ipairs(order) do
            if #picks >= max_total then break end
            if (taken[d] + 1) * 4 <= src.sizes[d] then
                taken[d] = taken[d] + 1
                picks[#picks + 1] = {d, src.sizes[d] - taken[d] + 1}
                room = true
            end
        end
    end
    if #picks == 0 then return nil, taken end
    local out = dga.zeros(#picks, L, "int32")
    for r, p in ipairs(picks) do
        local seq = src.sequence(p[1], p[2])
        local o = (r - 1) * L
        for j = 1, L do out[o + j] = seq[j] end
    end
    return out, taken
end

-- ---------------------------------------------------------------------------------------
-- learning-rate schedule (dgalib.schedule, the shared implementation)

local function make_lr(cfg)
    local schedule = require "dgalib.schedule"
    local s = cfg.schedule
    local opts = {
        kind = s.kind, lr = cfg.optimizer.lr, warmup = s.warmup or 0,
        total = s.total or cfg.steps, min_lr = s.min_lr or cfg.optimizer.lr * 0.1,
    }
    return schedule.make(opts)
end

-- ---------------------------------------------------------------------------------------
-- checkpoints

local CKPT_PATTERN = "^ckpt%-(%d+)%.safetensors$"

local function ckpt_name(step) return string.format("ckpt-%08d.safetensors", step) end

-- Complete checkpoints in the run dir, newest first. *.tmp.* files (a save interrupted by a
-- crash) never match the pattern.
local function list_checkpoints(dir)
    local out = {}
    for _, name in ipairs(runinfo.list(dir)) do
        local s = name:match(CKPT_PATTERN)
        if s then out[#out + 1] = {step = tonumber(s), name = name} end
    end
    table.sort(out, function(a, b) return a.step > b.step end)
    return out
end
M.list_checkpoints = list_checkpoints

-- The checkpoint to resume from: the one "latest" names when it exists, else the newest
-- complete one.
function M.latest_checkpoint(dir)
    local pointer = runinfo.read_file(dir .. "/latest")
    if pointer then
        local name = pointer:match("^%s*(%S+)")
        if name and name:match(CKPT_PATTERN) and runinfo.is_file(dir .. "/" .. name) then
            return dir .. "/" .. name
        end
    end
    local all = list_checkpoints(dir)
    if all[1] then return dir .. "/" .. all[1].name end
    return nil
end

-- ---------------------------------------------------------------------------------------
-- policy state: the policy object's tensors and plain values (or its own state()/set_state())

local function policy_state(policy)
    if policy.state and type(policy.state) == "function" then return policy:state() end
    local tensors, values = {}, {}
    for key, v in pairs(policy) do
        if type(key) == "string" then
            if is_tensor(v) then
                tensors[key] = v
            elseif type(v) == "number" or type(v) == "string" or type(v) == "boolean" then
                values[key] = v
            end
        end
    end
    return {tensors = tensors, values = values}
end

local function policy_restore(policy, st)
    if policy.set_state and type(policy.set_state) == "function" then
        return policy:set_state(st)
    end
    for key, t in pairs(st.tensors or {}) do policy[key] = t end
    for key, v in pairs(st.values or {}) do policy[key] = v end
end

-- Values in meta are strings: type-tagged so a restore gives back the same Lua value.
local function tag(v)
    if type(v) == "number" then
        if math.type(v) == "integer" then return "i:" .. string.format("%d", v) end
        return "f:" .. string.format("%a", v)
    elseif type(v) == "boolean" then
        return "b:" .. tostring(v)
    end
    return "s:" .. v
end

local function untag(s)
    local t, rest = s:sub(1, 2), s:sub(3)
    if t == "i:" then return math.tointeger(tonumber(rest)) end
    if t == "f:" then return tonumber(rest) end
    if t == "b:" then return rest == "true" end
    return rest
end

-- ---------------------------------------------------------------------------------------
-- the run

local Run = {}
Run.__index = Run

function M.new(cfg, opts)
    opts = opts or {}
    cfg = fill_defaults(cfg, M.defaults)
    -- The schedule's horizon is part of the recorded config: extending a run later with more
    -- steps does not silently reshape the learning-rate curve of the steps already done.
    cfg.schedule.total = cfg.schedule.total or cfg.steps
    assert(type(cfg.run_dir) == "string", "trainer: cfg.run_dir (the run directory) is required")
    assert(cfg.steps >= 1, "trainer: cfg.steps must be >= 1")
    assert(cfg.T_r >= 1, "trainer: cfg.T_r must be >= 1")
    assert(cfg.eval_every >= 1, "trainer: cfg.eval_every must be >= 1")
    if cfg.checkpoint_every > 0 and cfg.checkpoint_every % cfg.eval_every ~= 0 then
        error("trainer: checkpoint_every must be a multiple of eval_every (train_loss is a mean "
              .. "since the last metrics row, and a checkpoint must not cut an interval)", 2)
    end
    if cfg.threads and dga.set_threads then dga.set_threads(cfg.threads) end

    local self = setmetatable({cfg = cfg, opts = opts}, Run)
    self.dir = cfg.run_dir
    runinfo.mkdir_p(self.dir)
    if cfg.store and cfg.store.dir and cfg.store.dir:sub(1, 1) ~= "/" then
        cfg.store.dir = require("lfs").currentdir() .. "/" .. cfg.store.dir
    end

    -- data
    local src
    if cfg.store then
        src = store_source(cfg)
    elseif cfg.domains then
        src = tensor_source(cfg)
    else
        error("trainer: give cfg.store = {dir=, level=} or cfg.domains = {int32 [n, L], ...}", 2)
    end
    self.src = src
    local L = src.seq_len
    local spec = cfg.specific or {}
    check_seqs(spec.train, "specific.train", L)
    check_seqs(spec.heldout, "specific.heldout", L)
    self.spec_train = spec.train
    self.spec_heldout = head(spec.heldout, cfg.eval_max)

    -- budget: per domain, minus the generic held-out sequences. budget_tokens is the paper's
    -- unit ("the first N tokens of each domain"), rounded down to whole sequences of L tokens.
    if cfg.budget and cfg.budget_tokens then
        error("trainer: give budget (sequences) or budget_tokens, not both", 2)
    end
    local function budget_of(d)
        local b = cfg.budget or cfg.budget_tokens
        if type(b) == "table" then b = b[d] end
        if b and cfg.budget_tokens then b = b // L end
        return b
    end
    local budget = {}
    for d = 1, src.k do
        local b = budget_of(d)
        budget[d] = b and math.min(b, src.sizes[d]) or src.sizes[d]
    end
    if cfg.generic_heldout then
        check_seqs(cfg.generic_heldout, "generic_heldout", L)
        self.generic_heldout = head(cfg.generic_heldout, cfg.eval_max)
    elseif cfg.heldout_per_domain > 0 then
        local held, taken = holdout_generic(src, cfg.heldout_per_domain, cfg.generic_max)
        self.generic_heldout = held
        for d = 1, src.k do budget[d] = math.min(budget[d], src.sizes[d] - taken[d]) end
    end
    self.budget = budget

    -- basis sets (per-basis held-out losses; histograms for distribution mode)
    self.basis = cfg.basis or {}
    self.basis_eval = {}
    for j, b in ipairs(self.basis) do
        if b.heldout then
            check_seqs(b.heldout, "basis[" .. j .. "].heldout", L)
            self.basis_eval[j] = head(b.heldout, cfg.eval_max)
        end
    end

    -- model and optimizer
    local mc = cfg.model
    mc.context = L - 1
    mc.vocab = mc.vocab or src.vocab
    self.align_batch = cfg.align_batch or cfg.batch
    self.model = dga.gpt{layers = mc.layers, width = mc.width, heads = mc.heads,
                         context = mc.context, vocab = mc.vocab,
                         batch = math.max(cfg.batch, self.align_batch, cfg.eval_batch),
                         seed = cfg.seed}
    local oc = cfg.optimizer
    self.opt = dga.adamw(self.model, {lr = oc.lr, beta1 = oc.beta1, beta2 = oc.beta2,
                                      eps = oc.eps, weight_decay = oc.weight_decay,
                                      decay = oc.decay})
    self.clip = cfg.clip or oc.clip
    self.lr_at = make_lr(cfg)

    -- sampler (training draws + alignment probes) and the trainer's own generator (target
    -- batches from the specific set)
    -- counts go to the sampler as Lua integers (exact); the policy sees float32 sizes.
    self.sizes = dga.tensor(src.sizes, "float32")
    self.sampler = dga.sampler(src.sizes, {seed = cfg.seed + 1, budget = budget,
                                         epoch_cap = cfg.epoch_cap})
    self.rng = dga.rng(cfg.seed + 2)

    -- distribution mode: P (k x N) from the basis histograms
    if cfg.dist then
        local cols = {}
        for j, b in ipairs(self.basis) do
            if not b.histogram then error("trainer: dist mode needs basis[" .. j .. "].histogram", 2) end
            cols[j] = b.histogram
        end
        self.P = dga.basis(src.k, cols)
        self.K = #cols
    else
        self.K = src.k
    end

    self.names = {}
    for d = 1, self.K do
        local name = (cfg.dist and self.basis[d].name) or (cfg.domain_names and cfg.domain_names[d])
                     or (src.names and src.names[d])
        self.names[d] = name or tostring(d)
    end

    -- policy
    local policies = require "policies"
    self.policy = policies.get(cfg.policy.name, cfg.policy)
    self:make_ctx()
    return self
end

-- The ctx handed to policies (contract: scripts/policies/init.lua).
function Run:make_ctx()
    local run = self
    local ctx = {
        k = self.K,                    -- number of mixture components the policy weighs
        n_leaves = self.src.k,
        sizes = self.cfg.dist and nil or self.sizes,
        budget = self.budget,
        step = 0,
        T_r = self.cfg.T_r,
        history = {},
        is_histogram = self.cfg.is_histogram,
        options = self.cfg.policy,
        basis = self.P,
        names = self.names,
        lr = self.cfg.optimizer.lr,
    }
    if self.cfg.dist then
        -- A basis' "size": its histogram-weighted number of available sequences.
        local s = dga.zeros(self.K)
        for j, b in ipairs(self.basis) do s[j] = b.histogram:dot(dga.tensor(self.budget, "float32")) end
        ctx.sizes = s
    end
    ctx.epochs = dga.zeros(self.K)
    ctx.pending_log = {}
    function ctx.log(a, b)
        local fields = (a == ctx) and b or a
        for key, v in pairs(fields) do ctx.pending_log[key] = v end
    end
    function ctx.align(_) return run:align_round() end
    self.ctx = ctx
end

-- Per-domain epochs as seen by the policy (in dist mode: histogram-weighted over leaves).
function Run:refresh_ctx(step)
    local ctx = self.ctx
    ctx.step = step
    ctx.lr = self.lr_at(math.max(step, 1))
    local ep = self.sampler:epochs()
    if self.cfg.dist then
        local e = dga.zeros(self.K)
        local ep_f = dga.zeros(self.src.k)
        for d = 1, self.src.k do ep_f[d] = ep[d] end
        for j, b in ipairs(self.basis) do e[j] = b.histogram:dot(ep_f) / b.histogram:sum() end
        ctx.epochs = e
    else
        local e = dga.zeros(self.K)
        for d = 1, self.K do e[d] = ep[d] end
        ctx.epochs = e
    end
end

-- A fresh target batch from the specific training set.
function Run:target_batch(n)
    local total = self.spec_train:shape()[1]
    local rows = {}
    for b = 1, n do rows[b] = self.rng:below(total) + 1 end
    return rows_to_io(self.spec_train, rows)
end

-- One alignment round at the current parameters: a target batch, one batch per domain
-- (or per basis distribution). Probes come from the sampler's probe generator and do not
-- count as training draws.
function Run:align_round()
    local n = self.align_batch
    local tin, ttg = self:target_batch(n)
    local batches = {}
    for j = 1, self.K do
        local domains, indices
        if self.P then
            domains, indices = self.P:draw(j, n, self.sampler)
        else
            local avail = self.budget[j]
            if avail > 0 then
                indices = self.sampler:draw_from(j, n)
                local ids = {}
                for b = 1, n do ids[b] = j end
                domains = dga.tensor(ids, "int32")
            end
        end
        if indices then
            local inputs, targets = self.src.gather(domains, indices)
            batches[j] = {inputs, targets}
        else
            batches[j] = false
        end
    end
    -- Domains without data (budget 0) get no probe: align = 0 for them.
    local present, map = {}, {}
    for j = 1, self.K do
        if batches[j] then
            present[#present + 1] = batches[j]
            map[#present] = j
        end
    end
    local ac = self.cfg.align
    local opts = {normalize = ac.normalize, method = ac.method, fd_eps = ac.fd_eps}
    if ac.lr_scale then opts.lr = self.ctx.lr end
    local r = dga.align(self.model, tin, ttg, present, opts)
    self.model:zero_grad()
    if #present ~= self.K then
        local full = {align = dga.zeros(self.K), loss = dga.zeros(self.K),
                      grad_norm = dga.zeros(self.K), target_norm = r.target_norm,
                      target_loss = r.target_loss}
        for i, j in pairs(map) do
            full.align[j] = r.align[i]
            full.loss[j] = r.loss[i]
            full.grad_norm[j] = r.grad_norm[i]
        end
        r = full
    end
    self.last_align = r
    return r
end

-- ---------------------------------------------------------------------------------------
-- logs

local METRIC_BASE = {"step", "tokens", "lr", "train_loss", "grad_norm", "specific_loss",
                     "generic_loss"}
local ALIGN_BASE = {"step", "domain", "align", "loss", "grad_norm", "target_loss", "target_norm"}

function Run:metric_columns()
    local cols = {}
    for _, c in ipairs(METRIC_BASE) do cols[#cols + 1] = c end
    for j = 1, #self.basis do
        if self.basis[j].heldout then cols[#cols + 1] = string.format("basis_%d_loss", j) end
    end
    cols[#cols + 1] = "seconds"
    return cols
end

function Run:open_logs(mode)
    local d = self.dir
    self.metrics = csvlog.open(d .. "/metrics.csv", self:metric_columns(), mode)
    self.weights_log = csvlog.open(d .. "/weights.csv", {"step", "domain", "weight"}, mode)
    self.epochs_log = csvlog.open(d .. "/epochs.csv", {"step", "domain", "epochs", "drawn", "capped"},
                                  mode)
    -- alignments.csv: its extra columns are the policy's log fields, known at the first
    -- update; an existing file (resume) fixes them.
    local header = csvlog.read(d .. "/alignments.csv")
    if mode == "a" and header and #header > 0 then
        self.align_log = csvlog.open(d .. "/alignments.csv", header, "a")
    elseif mode ~= "a" then
        os.remove(d .. "/alignments.csv")
    end
end

function Run:write_domains()
    local out = {csvlog.format_record{"domain", "name", "size", "available"}}
    for d = 1, self.K do
        local size, avail
        if self.cfg.dist then
            size, avail = self.ctx.sizes[d], self.ctx.sizes[d]
        else
            size, avail = self.src.sizes[d], self.budget[d]
        end
        out[#out + 1] = csvlog.format_record{d, self.names[d], size, avail}
    end
    runinfo.write_atomic(self.dir .. "/domains.csv", table.concat(out))
end

function Run:log_weights(step, w)
    local sparse = (not self.cfg.dist) and self.K > self.cfg.sparse_k
    local min_w = self.cfg.weights_min or 1e-3 / self.K
    local vals = w:totable()
    for d = 1, #vals do
        if not sparse or vals[d] > min_w then self.weights_log:write_list{step, d, vals[d]} end
    end
    self.weights_log:flush()
end

function Run:log_alignment(step, r, fields)
    local keys = {}
    for key in pairs(fields) do keys[#keys + 1] = key end
    table.sort(keys)
    if not self.align_log then
        local cols = {}
        for _, c in ipairs(ALIGN_BASE) do cols[#cols + 1] = c end
        for _, key in ipairs(keys) do cols[#cols + 1] = key end
        self.align_log = csvlog.open(self.dir .. "/alignments.csv", cols, "w")
    end
    local known = self.align_log.columns
    local rec = {}
    for d = 1, self.K do
        for key in pairs(rec) do rec[key] = nil end
        rec.step, rec.domain = step, d
        rec.align, rec.loss, rec.grad_norm = r.align[d], r.loss[d], r.grad_norm[d]
        rec.target_loss, rec.target_norm = r.target_loss, r.target_norm
        local row = {}
        for j, c in ipairs(known) do
            local v = rec[c]
            if v == nil then v = fields[c] end
            if type(v) == "userdata" then v = nil end
            row[j] = v
        end
        self.align_log:write_list(row)
    end
    self.align_log:flush()
end

function Run:log_epochs(step)
    local ep, dr = self.sampler:epochs(), self.sampler:drawn()
    local capped = {}
    for _, d in ipairs(self.sampler:capped():totable()) do capped[d] = 1 end
    local sparse = self.src.k > self.cfg.sparse_k
    for d = 1, self.src.k do
        local e, n = ep[d], dr[d]
        if not sparse or n > 0 then
            self.epochs_log:write_list{step, d, math.tointeger(e) or e, math.tointeger(n) or n,
                                       capped[d] or 0}
        end
    end
    self.epochs_log:flush()
end

function Run:evaluate()
    local b = self.cfg.eval_batch
    local out = {specific = eval_seqs(self.model, self.spec_heldout, b)}
    if self.generic_heldout then out.generic = eval_seqs(self.model, self.generic_heldout, b) end
    out.basis = {}
    for j in ipairs(self.basis) do
        local seqs = self.basis_eval[j]
        if seqs then out.basis[j] = eval_seqs(self.model, seqs, b) end
    end
    return out
end

-- ---------------------------------------------------------------------------------------
-- weights

-- Sets the sampling mixture from a policy's output (over K components).
function Run:apply_weights(w)
    if not is_tensor(w) then w = dga.tensor(w, "float32") end
    if #w ~= self.K then
        error(string.format("policy '%s' returned %d weights, expected %d", self.cfg.policy.name,
                            #w, self.K), 2)
    end
    dga.check_distribution(w, "policy weights")
    self.weights = w:clone()
    if self.P then
        self.sampler:set_weights(self.P:mix(w))
    else
        self.sampler:set_weights(w)
    end
end

-- ---------------------------------------------------------------------------------------
-- checkpoint save / load

function Run:save_checkpoint(step)
    local tensors = {weights = self.weights}
    local meta = {step = step, name = self.cfg.name, policy = self.cfg.policy.name,
                  elapsed = self.elapsed_before + (runinfo.now() - self.t_start),
                  history = #self.ctx.history}
    local st = policy_state(self.policy)
    for key, t in pairs(st.tensors or {}) do tensors["policy." .. key] = t end
    for key, v in pairs(st.values or {}) do meta["policy." .. key] = tag(v) end
    for i, h in ipairs(self.ctx.history) do
        if is_tensor(h) then tensors["history." .. i] = h end
    end
    local name = ckpt_name(step)
    dga.save_checkpoint(self.dir .. "/" .. name, {
        model = self.model, optimizer = self.opt, tensors = tensors,
        blobs = {sampler = self.sampler:state(), rng = self.rng:state()},
        meta = meta,
    })
    if self.opts.die_before_pointer == step then os.exit(9, false) end
    runinfo.write_atomic(self.dir .. "/latest", name .. "\n")
    for _, c in ipairs(list_checkpoints(self.dir)) do
        if c.name ~= name then os.remove(self.dir .. "/" .. c.name) end
    end
end

function Run:load_checkpoint(path)
    local ck = dga.load_checkpoint(path, {model = self.model, optimizer = self.opt})
    local step = math.tointeger(tonumber(ck.meta.step))
    if not step then error(path .. ": no step in the checkpoint metadata", 2) end
    local st = {tensors = {}, values = {}}
    for name, t in pairs(ck.tensors or {}) do
        local key = name:match("^policy%.(.+)$")
        if key then st.tensors[key] = t end
    end
    for name, v in pairs(ck.meta) do
        local key = name:match("^policy%.(.+)$")
        if key then st.values[key] = untag(v) end
    end
    policy_restore(self.policy, st)
    local nh = math.tointeger(tonumber(ck.meta.history or 0)) or 0
    local hist = {}
    for i = 1, nh do hist[i] = ck.tensors["history." .. i] end
    self.ctx.history = hist
    self.weights = ck.tensors.weights
    if self.P then
        self.sampler:set_weights(self.P:mix(self.weights))
    else
        self.sampler:set_weights(self.weights)
    end
    self.sampler:set_state(ck.blobs.sampler)
    self.rng:set_state(ck.blobs.rng)
    self.elapsed_before = tonumber(ck.meta.elapsed) or 0
    return step
end

-- ---------------------------------------------------------------------------------------
-- the loop

local function progress_line(cfg, total)
    local progress = require "dgalib.progress"
    return progress.new{total = total, label = cfg.name,
                        every = cfg.progress_every or math.max(1, total // 100)}
end

function Run:train()
    local cfg = self.cfg
    local dir = self.dir
    self.t_start = runinfo.now()
    self.elapsed_before = 0

    local start = 0
    self.step = 0
    if self.opts.resume then
        local path = M.latest_checkpoint(dir)
        if not path then error("resume: no complete checkpoint in " .. dir, 2) end
        -- Leftovers of a save interrupted by a crash.
        for _, name in ipairs(runinfo.list(dir)) do
            if name:match("%.tmp%.%d+$") then os.remove(dir .. "/" .. name) end
        end
        self.policy_init_weights = self.policy:init(self.ctx)
        start = self:load_checkpoint(path)
        self.step = start
        for _, f in ipairs{"metrics.csv", "weights.csv", "alignments.csv", "epochs.csv"} do
            local csv = dir .. "/" .. f
            -- A log created after the checkpoint (alignments.csv appears at the first policy
            -- update) may hold only a header torn by the crash: truncate_after keeps such a
            -- file as it is, so drop it and let open_logs write a fresh header.
            local text = runinfo.read_file(csv)
            if text and not text:find("\n", 1, true) then
                os.remove(csv)
            else
                csvlog.truncate_after(csv, "step", start)
            end
        end
        self:open_logs("a")
        if not self.opts.quiet then
            io.stderr:write(string.format("%s: resuming from %s (step %d)\n", cfg.name, path, start))
        end
    else
        for _, c in ipairs(list_checkpoints(dir)) do os.remove(dir .. "/" .. c.name) end
        os.remove(dir .. "/latest")
        M.save_run_config(dir, cfg)
        self:open_logs("w")
        self:refresh_ctx(0)
        self:apply_weights(self.policy:init(self.ctx))
        self.ctx.history[#self.ctx.history + 1] = self.weights:clone()
        self:log_weights(0, self.weights)
        local ev = self:evaluate()
        self:write_metrics(0, 0, nil, nil, nil, ev)
    end
    self:write_domains()

    local T = self.src.seq_len - 1
    local tokens_per_step = cfg.batch * T
    local prog = (cfg.progress and not self.opts.quiet) and progress_line(cfg, cfg.steps) or nil
    if prog and prog.start then prog:start(start) end
    local sum_loss, sum_norm, n_acc = 0, 0, 0
    local last = {}
    local model, opt, sampler = self.model, self.opt, self.sampler
    for step = start + 1, cfg.steps do
        local lr = self.lr_at(step)
        local ok, domains, indices = pcall(sampler.draw, sampler, cfg.batch)
        if not ok then
            error(string.format("%s: step %d: %s", cfg.name, step, tostring(domains)), 0)
        end
        if cfg.epoch_cap and cfg.epoch_cap > 0 then self:report_capped(step) end
        local inputs, targets = self.src.gather(domains, indices)
        model:zero_grad()
        local loss = model:forward(inputs, targets)
        model:backward()
        local norm = self.clip and self.clip > 0 and model:clip_grad(self.clip) or model:grad_norm()
        opt:step(lr)
        sum_loss, sum_norm, n_acc = sum_loss + loss, sum_norm + norm, n_acc + 1
        self.step = step
        last.loss = loss

        -- A fixed policy (uniform, natural, importance) would return the same weights.
        if step % cfg.T_r == 0 and step < cfg.steps and not self.policy.fixed then
            self:refresh_ctx(step)
            self.last_align = nil
            for key in pairs(self.ctx.pending_log) do self.ctx.pending_log[key] = nil end
            local w = self.policy:update(self.ctx, step)
            self:apply_weights(w)
            self.ctx.history[#self.ctx.history + 1] = self.weights:clone()
            self:log_weights(step, self.weights)
            if self.last_align then self:log_alignment(step, self.last_align, self.ctx.pending_log) end
        end

        if step % cfg.eval_every == 0 or step == cfg.steps then
            local ev = self:evaluate()
            self:write_metrics(step, step * tokens_per_step, lr, sum_loss / n_acc, sum_norm / n_acc, ev)
            self:log_epochs(step)
            last.eval = ev
            sum_loss, sum_norm, n_acc = 0, 0, 0
            local ce = cfg.checkpoint_every
            local stop = self.opts.stop_at == step
            if step == cfg.steps or stop or (ce > 0 and step % ce == 0) then
                self:save_checkpoint(step)
            end
            if self.opts.die_after_step == step then os.exit(9, false) end
            if stop then break end
        end
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

function Run:write_metrics(step, tokens, lr, train_loss, grad_norm, ev)
    local rec = {step = step, tokens = tokens, lr = lr, train_loss = train_loss,
                 grad_norm = grad_norm, specific_loss = ev.specific, generic_loss = ev.generic,
                 seconds = self.elapsed_before + (runinfo.now() - self.t_start)}
    for j, v in pairs(ev.basis) do rec[string.format("basis_%d_loss", j)] = v end
    self.metrics:write(rec)
    self.metrics:flush()
end

function Run:summary(last)
    local ev = last.eval or {}
    local basis_mean
    local n, s = 0, 0
    for _, v in pairs(ev.basis or {}) do n, s = n + 1, s + v end
    if n > 0 then basis_mean = s / n end
    return {name = self.cfg.name, policy = self.cfg.policy.name, run_dir = self.dir,
            step = self.step,
            specific_loss = ev.specific, generic_loss = ev.generic, basis_loss = basis_mean,
            basis = ev.basis, weights = self.weights, model = self.model,
            epochs = self.sampler:epochs(), drawn = self.sampler:drawn(),
            seconds = self.elapsed_before + (runinfo.now() - self.t_start)}
end

-- Says (on stderr, and in events.log of the run) when domains reach the epoch cap: from then
-- on they are out of the mixture and the other weights are renormalised.
function Run:report_capped(step)
    local n = self.sampler:num_capped()
    self.n_capped = self.n_capped or 0
    if n <= self.n_capped then return end
    local all = self.sampler:capped()
    local names = {}
    for i = self.n_capped + 1, n do
        local d = all[i]
        local name = not self.cfg.dist and self.names[d] or (self.src.names and self.src.names[d])
        names[#names + 1] = name or tostring(d)
    end
    local msg = string.format("%s: step %d: domain%s %s reached the epoch cap (%d) and left the "
                              .. "mixture; the other weights are renormalised (%d of %d capped)",
                              self.cfg.name, step, #names > 1 and "s" or "", table.concat(names, ", "),
                              self.cfg.epoch_cap, n, self.src.k)
    if not self.opts.quiet then io.stderr:write(msg, "\n") end
    local f = io.open(self.dir .. "/events.log", "a")
    if f then f:write(msg, "\n"); f:close() end
    self.n_capped = n
end

function Run:close()
    for _, key in ipairs{"metrics", "weights_log", "epochs_log", "align_log"} do
        if self[key] then self[key]:close() end
    end
end

function M.run(cfg, opts)
    local run = M.new(cfg, opts)
    return run:train()
end

-- ---------------------------------------------------------------------------------------
-- the run directory holds everything a resume needs: config.lua plus the tensors of the
-- configuration (specific set, held-out sets, histograms, tensor domains) as NumPy files
-- under data/; config.lua refers to them as {tensor_file = "data/<path>.npy"}.

-- Tensors inside the config, with their dotted paths ("specific.train", "basis.2.heldout").
local function collect_tensors(v, path, out, seen)
    if is_tensor(v) then
        out[#out + 1] = {path = path, tensor = v}
    elseif type(v) == "table" and not seen[v] then
        seen[v] = true
        for key, val in pairs(v) do
            if type(key) == "string" or math.type(key) == "integer" then
                collect_tensors(val, path == "" and tostring(key) or (path .. "." .. tostring(key)),
                                out, seen)
            end
        end
    end
    return out
end

-- A copy of the config where each tensor is replaced by its file reference.
local function with_file_refs(v, files, seen)
    if is_tensor(v) then return {tensor_file = files[v]} end
    if type(v) ~= "table" then return v end
    if seen[v] then return seen[v] end
    local out = {}
    seen[v] = out
    for key, val in pairs(v) do out[key] = with_file_refs(val, files, seen) end
    return out
end

function M.save_run_config(dir, cfg)
    local files = {}
    local list = collect_tensors(cfg, "", {}, {})
    if #list > 0 then runinfo.mkdir_p(dir .. "/data") end
    for _, e in ipairs(list) do
        if not files[e.tensor] then
            local rel = "data/" .. e.path:gsub("[^%w%-_.]", "_") .. ".npy"
            local t = e.tensor
            if t:dtype() == "int32" or t:dtype() == "float32" then
                dga.npy_save(dir .. "/" .. rel, t:clone())
            end
            files[e.tensor] = rel
        end
    end
    runinfo.write_config(dir .. "/config.lua", with_file_refs(cfg, files, {}))
end

-- The configuration of a run directory, its tensors loaded back from data/.
function M.load_run_config(dir)
    local cfg = runinfo.read_config(dir .. "/config.lua")
    local cache = {}
    local function walk(v)
        if type(v) ~= "table" then return v end
        if v.tensor_file then
            if not cache[v.tensor_file] then cache[v.tensor_file] = dga.npy_load(dir .. "/" .. v.tensor_file) end
            return cache[v.tensor_file]
        end
        for key, val in pairs(v) do v[key] = walk(val) end
        return v
    end
    cfg = walk(cfg)
    cfg.run_dir = dir
    return cfg
end

-- Continues the run in `dir` from its last checkpoint (its own config and data);
-- `over` may change steps (the schedule keeps the total recorded in the config).
function M.resume(dir, over, opts)
    local cfg = M.load_run_config(dir)
    for key, v in pairs(over or {}) do cfg[key] = v end
    opts = opts or {}
    opts.resume = true
    return M.run(cfg, opts)
end

local function main(args)
    local argparse = require "argparse"
    local p = argparse("trainer.lua", "Continue a training run from its last checkpoint.")
    p:option("--resume", "The run directory (config.lua, data/, ckpt-*.safetensors, latest).")
        :count(1)
    p:option("--steps", "Train up to this many steps (default: the configured number).")
        :convert(math.tointeger)
    p:option("--threads", "OpenBLAS threads."):convert(math.tointeger)
    p:flag("--quiet", "No progress line.")
    local a = p:parse(args)
    if a.threads and dga.set_threads then dga.set_threads(a.threads) end
    local s = M.resume(a.resume, {steps = a.steps}, {quiet = a.quiet})
    print(string.format("%s: step %d, specific loss %.4f, generic loss %s", s.name,
                        s.step or -1, s.specific_loss or 0 / 0,
                        s.generic_loss and string.format("%.4f", s.generic_loss) or "-"))
end

local modname = ...
if modname ~= "trainer" and type(arg) == "table" and arg[0] and arg[0]:match("trainer%.lua$") then
    main({...})
end

return M

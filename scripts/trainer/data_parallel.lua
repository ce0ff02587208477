-- Data parallelism for the trainer: which rank this process is, its rows of the global batch,
-- and the collectives a step needs. One rank (a dgalua without MPI, a job of one process, or
-- a cell of a sweep spread over ranks) takes none of these paths, so a one-rank run is the
-- same, bit for bit, as before data parallelism existed.
--
-- The scheme (README, "Scaling out"):
--   - cfg.batch is the global batch. Every rank draws the whole global batch from the same
--     sampler state (same seed), so the sampler stays identical on every rank, and keeps its
--     own contiguous rows: rank r of R keeps rows floor(r B / R) + 1 .. floor((r + 1) B / R).
--     No sequence is drawn twice in a step, a checkpoint holds one sampler state, and the
--     state is independent of R. Drawing B indices instead of B / R costs microseconds.
--     When R does not divide B the shares differ by one row; each rank scales its gradient
--     by rows / B before the sum, so the result is the global batch's mean gradient.
--   - The gradients are summed over ranks into the flat buffer with the same bits on every
--     rank, so clip and AdamW give the same parameters everywhere. By default the sum
--     overlaps the backward (m:backward_allreduce, core/dp.h): each block's range of the
--     gradient starts its reduction to rank 0 as soon as the backward has finished it, and
--     rank 0's sums are broadcast at the end. cfg.overlap_allreduce = false (or
--     DGA_OVERLAP_ALLREDUCE=0) runs the backward and then one collective over the buffer
--     (m:allreduce_grads): the same bits at two ranks, possibly not the last bits at more.
--     The per-sequence losses are gathered, so the logged loss and the per-domain training
--     losses are the global ones.
--   - DGA_DATA_PARALLEL=0 (or cfg.data_parallel = false) makes every rank a one-rank run of
--     its own; so does the trainer option independent = true, which a sweep gives each run
--     when the ranks share its pairs (scripts/harness/exec/mpi_split.lua).
--   - The held-out sets are evaluated in whole batches split over the ranks (D:eval_seqs),
--     with the one-rank value on every rank.
--   - cfg.check_replicas (or DGA_CHECK_REPLICAS=1) compares a checksum of the parameters and
--     the mixture weights over the ranks at every metrics row and fails on every rank on a
--     mismatch.
local M = {}

local D = {}
D.__index = D

local function env_flag(name)
    local v = os.getenv(name)
    if v == nil or v == "" then return nil end
    return not (v == "0" or v == "false" or v == "no")
end

-- The ranks of a run of cfg; opts (the trainer's options): independent = true, this rank
-- trains a run of its own.
function M.new(cfg, opts)
    local self = setmetatable({rank = 0, size = 1}, D)
    local dp = env_flag("DGA_DATA_PARALLEL")
    if dp == nil then dp = cfg.data_parallel ~= false end
    if opts and opts.independent then dp = false end
    if dp and dga.size and dga.size() > 1 then
        self.rank, self.size = dga.rank(), dga.size()
    end
    local check = env_flag("DGA_CHECK_REPLICAS")
    if check == nil then check = cfg.check_replicas and true or false end
    self.check = check and self.size > 1
    local overlap = env_flag("DGA_OVERLAP_ALLREDUCE")
    if overlap == nil then overlap = cfg.overlap_allreduce ~= false end
    self.overlap = overlap
    return self
end

-- This rank's rows of a global batch of B: first row (1-based) and count.
function D:rows(B)
    local lo = (self.rank * B) // self.size
    local hi = ((self.rank + 1) * B) // self.size
    return lo + 1, hi - lo
end

-- Checks that every rank gets at least one row of the global batch.
function D:check_batch(B, name)
    if self.size > 1 and B < self.size then
        error(string.format("%s: batch = %d is smaller than the %d ranks: every rank needs at least "
                            .. "one row of the global batch", name, B, self.size), 0)
    end
end

-- rank 0's string on every rank (nil stays nil: an empty string travels).
function D:from_root(s)
    if self.size == 1 then return s end
    local got = dga.bcast(self.rank == 0 and (s or "\0") or nil, 0)
    if got == "\0" then return nil end
    return got
end

-- Raises `msg` (decided on rank 0) on every rank, so that no rank waits in a collective for
-- one that has stopped.
function D:agree_error(msg)
    msg = self:from_root(msg)
    if msg then error(msg, 0) end
end

-- After forward on this rank's n rows of a global batch of B: the backward, with the global
-- mean gradient in the model's buffer (the reduction overlapped with the backward unless
-- self.overlap is false), and the global batch's mean loss from every rank's per-sequence
-- losses. Returns the loss and the gathered per-sequence losses (float32 B, in global row
-- order).
function D:backward_step(model, n, B)
    if self.overlap then
        model:backward_allreduce(n / B)
    else
        model:backward()
        model:allreduce_grads(n / B)
    end
    local all = dga.allgather(model:seq_losses())
    local sum = 0
    for i = 1, B do sum = sum + all[i] end
    return sum / B, all
end

-- The held-out loss of seqs (N x L int32) in batches of `batch`, the work split over the
-- ranks: each evaluates a contiguous run of whole batches (so its rows' values are those of
-- a one-rank evaluation), the per-row loss sums and counts travel from every rank to every
-- other (one broadcast per rank, as doubles), and every rank sums them in row order: the
-- value of dga.eval_loss_seqs on one rank, bit for bit, in about 1/R of its time.
function D:eval_seqs(model, seqs, batch)
    if self.size == 1 then return dga.eval_loss_seqs(model, seqs, batch) end
    local n = seqs:shape()[1]
    local b = batch or 0
    if b == 0 then b = model:config().batch end   -- as on one rank; a negative one raises there
    local nb = (n + b - 1) // b
    local lo = math.min(n, (self.rank * nb) // self.size * b)
    local hi = math.min(n, ((self.rank + 1) * nb) // self.size * b)
    local mine, failed = "", nil
    if hi > lo then
        local ok, nll, cnt = pcall(dga.eval_row_losses, model, seqs:narrow(lo + 1, hi - lo), b)
        if ok then
            local parts = {}
            for i = 1, #nll do parts[i] = string.pack("<dj", nll[i], cnt[i]) end
            mine = table.concat(parts)
        else
            failed = string.format("%s (rows %d-%d of %d, counted from the first of those, "
                                   .. "evaluated on rank %d)", tostring(nll), lo + 1, hi, n, self.rank)
        end
    end
    -- An error in one rank's rows (a token id out of range) is raised on every rank, with
    -- the first failing rank's message, instead of leaving the others in a broadcast.
    local flags = dga.allgather(dga.tensor({failed and 1 or 0}))
    for r = 1, #flags do
        if flags[r] ~= 0 then error(dga.bcast(failed, r - 1), 0) end
    end
    local total, count = 0.0, 0
    for r = 0, self.size - 1 do
        local got = dga.bcast(r == self.rank and mine or nil, r)
        local pos = 1
        while pos <= #got do
            local l, c
            l, c, pos = string.unpack("<dj", got, pos)
            total, count = total + l, count + c
        end
    end
    return count > 0 and total / count or 0.0
end

-- Fails on every rank, naming the ranks, when their parameters or their mixture weights
-- (what the policy decided, so a policy that is not deterministic across ranks) differ.
local function weights_key(w)
    local parts = {}
    for i = 1, #w do parts[i] = string.format("%a", w[i]) end
    return table.concat(parts, ",")
end

-- The cheap check made at every policy update under data parallelism, whatever
-- check_replicas says: one number per rank (sum of i * w_i, in index order) gathered and
-- compared, so a policy that decides differently on one rank stops the run at that update
-- instead of training different mixtures unnoticed.
function D:check_weights(step, weights)
    if self.size == 1 then return end
    local sum = 0
    for i = 1, #weights do sum = sum + i * weights[i] end
    local mine = string.format("%a", sum)
    local differs = dga.allgather(dga.tensor({mine ~= self:from_root(mine) and 1 or 0}))
    for r = 2, #differs do
        if differs[r] ~= 0 then
            error(string.format("trainer: step %d: the mixture weights of rank %d differ from rank 0's: the "
                                .. "policy decided differently on the ranks (it must be deterministic given "
                                .. "its inputs)", step, r - 1), 0)
        end
    end
end

function D:check_replicas(model, step, weights)
    if not self.check then return end
    local params, mix = model:checksum(), weights_key(weights)
    local root_params, root_mix = self:from_root(params), self:from_root(mix)
    local code = params ~= root_params and 1 or (mix ~= root_mix and 2 or 0)
    local codes = dga.allgather(dga.tensor({code}))
    local found, params_differ = {}, false
    for r = 1, #codes do
        if codes[r] ~= 0 then
            found[#found + 1] = string.format("the %s of rank %d",
                                              codes[r] == 1 and "parameters" or "mixture weights", r - 1)
            params_differ = params_differ or codes[r] == 1
        end
    end
    if #found > 0 then
        local sums = params_differ and string.format(" (parameter checksum %s on rank %d, %s on rank 0)",
                                                     params, self.rank, root_params) or ""
        error(string.format("check_replicas: step %d: %s differ from rank 0's%s", step,
                            table.concat(found, ", "), sums), 0)
    end
end

-- The K-component alignment round split over the ranks: every rank has the same target batch
-- and the same list of probe batches (drawn from the same streams), computes the alignments of
-- its contiguous share, and the shares are gathered in order. The target gradient is computed
-- on every rank (one batch's forward and backward more per rank than an even split of the
-- round would cost; it saves a collective of the full gradient). Returns what dga.align
-- returns for the whole list.
function D:align(model, target, present, opts)
    local n = #present
    if self.size == 1 then return dga.align(model, target[1], target[2], present, opts) end
    local lo = (self.rank * n) // self.size + 1
    local hi = ((self.rank + 1) * n) // self.size
    local mine = {}
    for i = lo, hi do mine[#mine + 1] = present[i] end
    -- A rank without a probe (k < R) still computes the target's norm and loss from one
    -- batch, and sends nothing.
    local r = dga.align(model, target[1], target[2], #mine > 0 and mine or {present[1]}, opts)
    local m = #mine
    local send = dga.zeros(3 * m)
    for i = 1, m do
        send[i], send[m + i], send[2 * m + i] = r.dot[i], r.loss[i], r.grad_norm[i]
    end
    local all, counts = dga.allgather(send)
    local out = {dot = dga.zeros(n), loss = dga.zeros(n), grad_norm = dga.zeros(n),
                 target_norm = r.target_norm, target_loss = r.target_loss, method = r.method, k = n}
    local base, j = 0, 0
    for q = 1, #counts do
        local c = counts[q] // 3
        for i = 1, c do
            j = j + 1
            out.dot[j], out.loss[j], out.grad_norm[j] = all[base + i], all[base + c + i], all[base + 2 * c + i]
        end
        base = base + counts[q]
    end
    out.align = out.dot:clone()
    return out
end

return M

-- The writing side of the run directory's logs (the format: scripts/rundir/init.lua):
-- metrics.csv, weights.csv, alignments.csv, epochs.csv, policy.csv, and the rewritten-whole
-- domains.csv and appended events.log. Rows are appended and flushed one at a time; a resume
-- first cuts every log back to the checkpoint's step (truncate_to).
local csvlog = require "util.csvlog"
local runinfo = require "util.runinfo"

local M = {}

M.FILES = {"metrics.csv", "weights.csv", "alignments.csv", "epochs.csv", "policy.csv"}

local METRIC_BASE = {"step", "tokens", "lr", "train_loss", "grad_norm", "specific_loss",
                     "generic_loss"}
M.ALIGN_COLUMNS = {"step", "domain", "align", "loss", "grad_norm", "target_loss", "target_norm"}
M.POLICY_COLUMNS = {"step", "key", "value"}

local Logs = {}
Logs.__index = Logs

-- The metrics columns: one basis_<j>_loss per basis set with a held-out set.
function M.metric_columns(basis)
    local cols = {}
    for _, c in ipairs(METRIC_BASE) do cols[#cols + 1] = c end
    for j = 1, #basis do
        if basis[j].heldout then cols[#cols + 1] = string.format("basis_%d_loss", j) end
    end
    cols[#cols + 1] = "seconds"
    return cols
end

-- Drops every row after `step` (and a torn last row) from the logs of dir, before a resume
-- appends to them.
function M.truncate_to(dir, step)
    for _, f in ipairs(M.FILES) do
        local csv = dir .. "/" .. f
        -- A log created after the checkpoint (alignments.csv appears at the first policy
        -- update) may hold only a header torn by the crash: truncate_after keeps such a
        -- file as it is, so drop it and let open write a fresh header.
        local text = runinfo.read_file(csv)
        if text and not text:find("\n", 1, true) then
            os.remove(csv)
        else
            csvlog.truncate_after(csv, "step", step)
        end
    end
end

-- Opens the logs of dir: mode "w" starts them afresh, "a" appends (resume).
function M.open(dir, basis, mode)
    local self = setmetatable({dir = dir}, Logs)
    self.metrics = csvlog.open(dir .. "/metrics.csv", M.metric_columns(basis), mode)
    self.weights = csvlog.open(dir .. "/weights.csv", {"step", "domain", "weight"}, mode)
    self.epochs = csvlog.open(dir .. "/epochs.csv", {"step", "domain", "epochs", "drawn", "capped"},
                              mode)
    self.policy = csvlog.open(dir .. "/policy.csv", M.POLICY_COLUMNS, mode)
    -- alignments.csv appears at the first alignment round (a policy that never aligns has
    -- none); a resume appends to the one there is, under its header: one written before
    -- policy.csv existed holds the policy's fields after the alignment columns, left empty
    -- from then on.
    local header = mode == "a" and csvlog.read(dir .. "/alignments.csv")
    if header and #header > 0 then
        self.align = csvlog.open(dir .. "/alignments.csv", header, "a")
    elseif mode ~= "a" then
        os.remove(dir .. "/alignments.csv")
    end
    return self
end

-- rec: step, tokens, lr, train_loss, grad_norm, seconds, and the evaluation `ev`
-- {specific=, generic=, basis = {[j] = loss}}.
function Logs:metric(rec, ev)
    rec.specific_loss, rec.generic_loss = ev.specific, ev.generic
    for j, v in pairs(ev.basis) do rec[string.format("basis_%d_loss", j)] = v end
    self.metrics:write(rec)
    self.metrics:flush()
end

-- pairs: list of {component, weight}.
function Logs:weight_rows(step, pairs_)
    for _, p in ipairs(pairs_) do self.weights:write_list{step, p[1], p[2]} end
    self.weights:flush()
end

-- One row per component of an alignment round r.
function Logs:alignment(step, r, K)
    if not self.align then
        self.align = csvlog.open(self.dir .. "/alignments.csv", M.ALIGN_COLUMNS, "w")
    end
    for d = 1, K do
        self.align:write{step = step, domain = d, align = r.align[d], loss = r.loss[d],
                         grad_norm = r.grad_norm[d], target_loss = r.target_loss,
                         target_norm = r.target_norm}
    end
    self.align:flush()
end

-- The policy.csv rows of the fields a policy passed to ctx.log during its update at `step`:
-- one per field, keys sorted. A value is a number, a string or a boolean; anything else is an
-- error naming the field (a value that cannot be written must not vanish).
function M.policy_rows(step, fields, policy_name)
    local keys = {}
    for key in pairs(fields) do keys[#keys + 1] = key end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    local rows = {}
    for i, key in ipairs(keys) do
        local v, t = fields[key], type(fields[key])
        if type(key) ~= "string" or (t ~= "number" and t ~= "string" and t ~= "boolean") then
            error(string.format("policy '%s': ctx.log field %s is a %s: policy.csv takes numbers, "
                                .. "strings and booleans keyed by name", tostring(policy_name),
                                tostring(key), t), 0)
        end
        rows[i] = {step, key, v}
    end
    return rows
end

function Logs:policy_fields(step, fields, policy_name)
    for _, row in ipairs(M.policy_rows(step, fields, policy_name)) do self.policy:write_list(row) end
    self.policy:flush()
end

-- Epochs and draws per leaf domain; beyond sparse_k leaves only those drawn from.
function Logs:epoch_rows(step, sampler, k, sparse_k)
    local ep, dr = sampler:epochs(), sampler:drawn()
    local capped = {}
    for _, d in ipairs(sampler:capped():totable()) do capped[d] = 1 end
    local sparse = k > sparse_k
    for d = 1, k do
        local e, n = ep[d], dr[d]
        if not sparse or n > 0 then
            self.epochs:write_list{step, d, math.tointeger(e) or e, math.tointeger(n) or n,
                                   capped[d] or 0}
        end
    end
    self.epochs:flush()
end

-- domains.csv, rewritten whole: rows of {component, name, size, available}.
function Logs:domains(rows)
    local out = {csvlog.format_record{"domain", "name", "size", "available"}}
    for _, row in ipairs(rows) do out[#out + 1] = csvlog.format_record(row) end
    runinfo.write_atomic(self.dir .. "/domains.csv", table.concat(out))
end

-- A line in events.log (things that happen once: a domain leaving the mixture).
function Logs:event(msg)
    local path = self.dir .. "/events.log"
    local f, err = io.open(path, "a")
    local ok = f and f:write(msg, "\n")
    if f then
        local closed, cerr = f:close()
        ok, err = ok and closed, err or cerr
    end
    if not ok then error(string.format("%s: cannot write: %s", path, tostring(err)), 2) end
end

-- The logs of a rank that does not write (data parallelism: rank 0 writes): every method
-- does nothing, but policy fields that cannot be written raise here as on rank 0.
function M.null()
    local function nothing() end
    local function check(_, step, fields, name) M.policy_rows(step, fields, name) end
    return setmetatable({policy_fields = check}, {__index = function() return nothing end})
end

-- Closes every log; a failed final write is an error unless `quiet` (after another error).
function Logs:close(quiet)
    for _, key in ipairs{"metrics", "weights", "epochs", "policy", "align"} do
        if self[key] then self[key]:close(quiet) end
    end
end

return M

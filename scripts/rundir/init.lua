-- The run directory: one module that writes it (the trainer, the sweep) and reads it back
-- (aggregate, report, compare, reproduction, plot, the experiments' metrics, resume).
--
--   local rundir = require "rundir"
--   local r = rundir.open("runs/quickstart/dga/seed-1")
--   r:metrics()        -- metrics.csv rows as records {step=, specific_loss=, ...}
--   r:policy_log()     -- the policy's ctx.log fields: {{step = 4, eps = 0.2, ...}, ...}
--   r:summary()        -- summary.json, or nil
--   for _, dir in ipairs(rundir.find("runs/lowdata")) do ... end   -- every run with a summary
--
-- Files (CSV: RFC 4180, CRLF, numbers written with %.9g, util/csvlog.lua):
--   config.lua      the full configuration; tensors in it are data/<path>.npy, referenced as
--                   {tensor_file = "data/<path>.npy"} (rundir/config.lua)
--   metrics.csv     step,tokens,lr,train_loss,grad_norm,specific_loss,generic_loss,
--                   basis_<j>_loss...,seconds (every eval_every steps; train_loss and
--                   grad_norm are means since the last row; a basis column per basis set with
--                   a held-out set)
--   weights.csv     step,domain,weight (long form: the sampling weights at step 0 and at each
--                   update, or the weights over the bases in distribution mode; for
--                   k > sparse_k only the entries above weights_min)
--   alignments.csv  step,domain,align,loss,grad_norm,target_loss,target_norm: one row per
--                   component of each alignment round (absent when the policy never aligns)
--   policy.csv      step,key,value: every field the policy passed to ctx.log at its update
--                   at `step`, one row per field (long form, so a key first logged at a later
--                   update needs no new column), whether or not the policy aligned
--   epochs.csv      step,domain,epochs,drawn,capped (at every metrics row; k > sparse_k: only
--                   domains drawn from; capped = 1 once a domain reached the epoch cap)
--   domains.csv     domain,name,size,available (rewritten whole)
--   events.log      one line per event (a domain reaching the epoch cap)
--   ckpt-<step>.safetensors, latest   checkpoints (rundir/checkpoints.lua)
--   summary.json    the sweep's record of a finished (cell, seed): cell, group, seed,
--                   metrics, fields, command, seconds, finished, ...
--   log.txt         the output of a run that ran as a child process (sweep --jobs)
-- Rows are appended as the run goes; a resume cuts every CSV log back to its checkpoint's
-- step (rundir/logs.lua). Ranks that do not write (data parallelism) get rundir.null_logs().
--
-- Older run directories (before policy.csv) hold the policy's fields as extra columns of
-- alignments.csv, repeated on each component's row; policy_log() reads them from there too
-- (policy.csv wins for a step both hold).
--
-- JSON (summary.json, aggregate.json, mmlu_results.json) is written by util/json.lua alone:
-- keys sorted, so the same table gives the same bytes. The NaN convention: JSON has no NaN
-- or infinity, and a diverged run's loss is a result worth keeping, so NaN, inf and -inf are
-- written as the strings "nan", "inf" and "-inf" and read back as numbers by json.number
-- (rundir.number); a missing value is null. The CSV logs write the same three words.
local csvlog = require "util.csvlog"
local json = require "util.json"
local runinfo = require "util.runinfo"
local stats = require "util.stats"

local M = {}

-- The writing side, and the checkpoints.
local checkpoints = require "rundir.checkpoints"
local config = require "rundir.config"
local logs = require "rundir.logs"
M.open_logs, M.truncate_logs, M.null_logs = logs.open, logs.truncate_to, logs.null
M.metric_columns = logs.metric_columns
M.save_config, M.load_config = config.save_config, config.load_config
for _, name in ipairs{"ckpt_name", "list_checkpoints", "latest_checkpoint", "commit",
                      "clear_checkpoints", "remove_tmp", "holds_run"} do
    M[name] = checkpoints[name]
end

M.number = json.number

-- ---- summary.json --------------------------------------------------------------------

-- Writes dir/summary.json atomically.
function M.write_summary(dir, summary)
    runinfo.write_atomic(dir .. "/summary.json", json.encode(summary, {indent = true}) .. "\n")
end

-- The summary.json at `path` (a file, or a run directory holding one). With `strict`, a
-- summary without cell (string), seed (integer) and metrics (table) is an error naming the
-- file.
function M.read_summary(path, strict)
    if runinfo.is_dir(path) then path = path .. "/summary.json" end
    local s = json.read_file(path)
    if strict and (type(s) ~= "table" or type(s.cell) ~= "string" or type(s.metrics) ~= "table"
                   or math.type(s.seed) ~= "integer") then
        error(path .. ": not a sweep summary (needs cell, seed and metrics)", 0)
    end
    return s
end

-- The directory whose logs hold the run summarised by `s` (read from dir/summary.json): dir
-- itself, or for a `same_as` run (a cell that computes what another cell computes) that
-- cell's run of the same seed, found beside dir so that a study tree can be moved or renamed
-- (the recorded same_as_dir is where it was made).
function M.source_dir(dir, s)
    if type(s) ~= "table" or type(s.same_as) ~= "string" then return dir end
    local own = "/" .. tostring(s.cell) .. "/seed-" .. tostring(s.seed)
    if dir:sub(-#own) == own then
        return dir:sub(1, -#own - 1) .. "/" .. s.same_as .. "/seed-" .. tostring(s.seed)
    end
    return s.same_as_dir or dir
end

-- Whether dir holds any part of a run: its config, a metrics log or a checkpoint.
function M.started(dir)
    return runinfo.exists(dir .. "/config.lua") or checkpoints.holds_run(dir)
end

-- The run directories under root that hold a summary.json, depth first, names sorted (not
-- looking into plots/ and data/). A missing root gives {}.
function M.find(root)
    local out = {}
    for _, path in ipairs(runinfo.find_summaries(root)) do
        out[#out + 1] = path:gsub("/?summary%.json$", "")
    end
    return out
end

-- ---- reading one run -----------------------------------------------------------------

local Reader = {}
Reader.__index = Reader

-- A reader of the run directory dir (nothing is read until asked).
function M.open(dir)
    return setmetatable({dir = dir}, Reader)
end

function Reader:path(name) return self.dir .. "/" .. name end
function Reader:has(name) return runinfo.exists(self:path(name)) end

-- The configuration (opts.tensors = false: without loading the tensors of data/).
function Reader:config(opts) return config.load_config(self.dir, opts) end

-- The rows of a CSV log as records (numbers converted), and its header; {} when absent.
function Reader:records(name)
    local recs, header = csvlog.read_records(self:path(name))
    return recs or {}, header
end

-- The rows of a CSV log as the text it holds: header, rows (lists of strings); nil when absent.
function Reader:rows(name)
    if not runinfo.is_file(self:path(name)) then return nil end
    return csvlog.read(self:path(name))
end

function Reader:metrics() return self:records("metrics.csv") end
function Reader:weights() return self:records("weights.csv") end
function Reader:alignments() return self:records("alignments.csv") end
function Reader:epochs() return self:records("epochs.csv") end
function Reader:domains() return self:records("domains.csv") end

-- Component -> name, from domains.csv.
function Reader:domain_names()
    local out = {}
    for _, r in ipairs(self:domains()) do out[r.domain] = tostring(r.name) end
    return out
end

-- The lines of events.log ({} when absent).
function Reader:events()
    local out = {}
    for line in (runinfo.read_file(self:path("events.log")) or ""):gmatch("[^\n]+") do
        out[#out + 1] = line
    end
    return out
end

function Reader:summary()
    if not runinfo.is_file(self:path("summary.json")) then return nil end
    return M.read_summary(self:path("summary.json"))
end

function Reader:log_text() return runinfo.read_file(self:path("log.txt")) end
function Reader:latest_checkpoint() return checkpoints.latest_checkpoint(self.dir) end
function Reader:checkpoints() return checkpoints.list_checkpoints(self.dir) end

-- The evaluation of the last metrics row, {step, specific, generic, basis = {[j] = loss}}
-- (numbers only), or nil when there is none or (with `step`) it is at another step.
function Reader:last_eval(step)
    local recs = self:metrics()
    local row = recs[#recs]
    if not row or (step ~= nil and row.step ~= step) then return nil end
    local function num(v) return type(v) == "number" and v or nil end
    local ev = {step = row.step, specific = num(row.specific_loss), generic = num(row.generic_loss),
                basis = {}}
    for key, v in pairs(row) do
        local j = key:match("^basis_(%d+)_loss$")
        if j then ev.basis[tonumber(j)] = num(v) end
    end
    -- keyed by basis index: stats.summary sums in index order, so the mean is the same bits
    -- in every process
    ev.basis_mean = stats.summary(ev.basis).mean
    return ev
end

local ALIGN_COLUMN = {}
for _, c in ipairs(logs.ALIGN_COLUMNS) do ALIGN_COLUMN[c] = true end

-- The policy's ctx.log fields, one table per update that logged any, in step order:
-- {{step = s, <field> = value, ...}, ...}. Numbers come back as numbers, other values as
-- the strings written.
function Reader:policy_log()
    local by_step = {}
    local function at(step)
        by_step[step] = by_step[step] or {step = step}
        return by_step[step]
    end
    local from_policy = {}
    for _, r in ipairs(self:records("policy.csv")) do
        at(r.step)[r.key] = r.value
        from_policy[r.step] = true
    end
    -- older run directories: the extra columns of alignments.csv, equal on a step's rows
    local recs, header = self:alignments()
    for _, r in ipairs(recs) do
        if not from_policy[r.step] then
            for _, c in ipairs(header) do
                if not ALIGN_COLUMN[c] and r[c] ~= "" then at(r.step)[c] = r[c] end
            end
        end
    end
    local out = {}
    for _, t in pairs(by_step) do out[#out + 1] = t end
    table.sort(out, function(a, b) return a.step < b.step end)
    return out
end

return M

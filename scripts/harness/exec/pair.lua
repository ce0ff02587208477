-- One pair run in this process, for every executor that trains here: the trainer options
-- its directory calls for, run_cell under a handler that tells the errors that end the
-- sweep (a usage error, a user-code error, a Ctrl-C) from a failure of this pair alone, and
-- its summary.json.
local runinfo = require "util.runinfo"
local overrides = require "cli.overrides"
local command = require "harness.command"
local summary = require "harness.summary"

local M = {}

-- Trainer options for an unfinished pair in dir: resume from its checkpoint, restart over
-- a run without one, or start fresh.
local function trainer_opts(dir, a)
    if a.overwrite then return {overwrite = true} end
    local rundir = require "rundir"
    if rundir.latest_checkpoint(dir) then return {resume = true} end
    if rundir.started(dir) then return {overwrite = true} end
    return {}
end

-- A usage error, a user-code error (a policy's: every cell of it would fail the same way)
-- or a Ctrl-C ends the sweep; any other error fails this pair only.
local function handler(e)
    if require("util.errors").is(e) then return e end
    local msg = tostring(e)
    if msg:find("interrupted!", 1, true) or msg:find("interrupted (in ", 1, true) then
        return overrides.usage_error(msg)
    end
    return debug.traceback(msg, 2)
end

-- Runs plan's pair here; returns its summary, or nil and the error message. how:
--   ranks = true        the pair is one data-parallel run over all the ranks: only rank 0
--                       writes, and every rank takes rank 0's trainer options;
--   independent = true  this rank trains the pair alone (the trainer gets topts.independent).
function M.run(plan, pair, how)
    how = how or {}
    local writer = not how.ranks or dga.rank() == 0
    if writer then
        runinfo.mkdir_p(pair.dir)
        summary.remove(pair.dir)
    end
    local topts = trainer_opts(pair.dir, plan.args)
    if how.ranks then
        local h = dga.bcast(writer and (topts.resume and "resume" or topts.overwrite and "overwrite" or "-") or nil, 0)
        topts = h == "-" and {} or {[h] = true}
    end
    topts.independent = how.independent or nil
    local t0 = runinfo.now()
    local ok, res = xpcall(plan.o.run_cell, handler, pair.cell, pair.seed, pair.dir, topts)
    if not ok then
        if require("util.errors").is(res) then error(res, 0) end
        return nil, tostring(res)
    end
    local where = string.format("cell %s, seed %d", pair.cell.id, pair.seed)
    local okm, metrics = pcall(summary.flat_metrics, res, where)
    if not okm then return nil, tostring(metrics) end
    local s = summary.record(pair, metrics, {
        data_seed = plan.args.data_seed, key = plan.key, sweep = plan.o.name, argv = plan.argv,
        command = command.display(plan.argv, plan.o.argv == nil), seconds = runinfo.now() - t0})
    if writer then summary.write(pair.dir, s) end
    return s
end

return M

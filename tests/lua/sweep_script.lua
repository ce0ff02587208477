-- A tiny experiment on harness.sweep, run as a subprocess by sweep_spec.lua (not a spec).
--
--   dgalua tests/lua/sweep_script.lua --out DIR --log FILE [--train] [--die-at N]
--          [--fail CELL] [sweep options: --seeds, --jobs, --policy, --set, ...]
--
-- Cells: one per policy (sweep.policies over uniform and dga), in groups g1 and g2.
-- Every run_cell call appends "<cell> <seed> <resume|overwrite|fresh>" to --log.
-- --die-at N: the process exits at once (status 9, no cleanup) in its N-th run_cell call,
-- as a killed sweep would. --fail CELL: run_cell raises an error in that cell.
-- Without --train, run_cell returns made-up metrics (loss = seed + 0.1 * the cell's
-- number); with it, the cell trains the trainer fixture's tiny model for 8 steps.
-- --stop-at N (with --train): the trainer stops cleanly at step N, leaving a checkpoint and
-- no summary.json, and the process exits 9: a pair interrupted in the middle.
-- --step-seconds S (with --train): the trainer sleeps S seconds after each step, so that a
-- test can signal the sweep while its workers train.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua"
package.path = here .. "/?.lua;" .. package.path

local argparse = require "argparse"
local exp = require "harness.experiment"
local sweep = require "harness.sweep"
local agg = require "harness.aggregate"

local p = argparse("sweep_script.lua", "A tiny sweep for the tests.")
exp.add_common_options(p, {out = "runs/sweep_script"})
sweep.add_options(p)
p:option("--log", "Append one line per run_cell call to this file."):count(1)
p:flag("--train", "Train the trainer fixture's tiny model in each cell.")
p:option("--die-at", "Exit (status 9) in this run_cell call."):convert(tonumber)
p:option("--fail", "Raise an error in this cell.")
p:option("--stop-at", "--train: stop the trainer at this step (with a checkpoint), then exit 9."):convert(tonumber)
p:option("--step-seconds", "--train: sleep this long after each step."):convert(tonumber)
local a = p:parse(arg)

local cells = {}
for i, pol in ipairs(sweep.policies(a, {{name = "uniform"}, {name = "dga", beta = 0.5, eta = 1.0}})) do
    for _, g in ipairs{"g1", "g2"} do
        cells[#cells + 1] = {id = g .. "/" .. pol.label, group = g, policy = pol.label, spec = pol,
                             number = i}
    end
end

local calls = 0
local summaries = sweep.run{
    name = "sweep_script", out = a.out, args = a, cells = cells,
    -- The test's fault injection does not change what a finished pair computed.
    key_ignore = {["--log"] = "value", ["--die-at"] = "value", ["--fail"] = "value",
                  ["--stop-at"] = "value", ["--step-seconds"] = "value"},
    run_cell = function(cell, seed, dir, topts)
        calls = calls + 1
        local f = assert(io.open(a.log, "a"))
        f:write(string.format("%s %d %s\n", cell.id, seed,
                              topts.resume and "resume" or (topts.overwrite and "overwrite" or "fresh")))
        f:close()
        if a.die_at == calls then os.exit(9, false) end
        if a.fail == cell.id then error("the cell " .. cell.id .. " was told to fail") end
        if not a.train then
            return {loss = seed + 0.1 * cell.number, group_number = cell.group == "g1" and 1 or 2}
        end
        local fixture = require "trainer_fixture"
        local cfg = fixture.config(dir, {seed = seed, steps = 8, checkpoint_every = 4,
                                         policy = sweep.policy_config(cell.spec)})
        sweep.overrides(a, cfg)
        if a.stop_at then topts.stop_at = a.stop_at end
        if a.step_seconds then
            topts.hooks = {after_step = function() os.execute("sleep " .. a.step_seconds) end}
        end
        local s = sweep.train(cfg, topts)
        if a.stop_at then os.exit(9, false) end
        return {specific_final = s.specific_loss, generic_final = s.generic_loss,
                step = s.step, model = s.model, basis = s.basis}
    end,
}
if not summaries then return end   -- a --jobs worker
agg{out = a.out, reference = "uniform"}

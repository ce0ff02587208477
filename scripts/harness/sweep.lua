-- The experiment protocol: several training seeds per configuration ("cell"), each
-- (cell, seed) pair in its own run directory, finished pairs skipped when the command runs
-- again, pairs run in this process, in --jobs worker processes or over MPI ranks, and
-- --policy / --set overrides.
--
--   local sweep = require "harness.sweep"
--   local p = argparse("my.lua", "...")
--   exp.add_common_options(p, {out = "runs/my"})
--   sweep.add_options(p)
--   local a = p:parse(arg)
--   local cells = {}
--   for _, pol in ipairs(sweep.policies(a, {{name = "natural"}, {name = "dga", beta = 0.1, label = "dga_ema"}})) do
--     cells[#cells + 1] = {id = "b256/" .. pol.label, group = "b256", policy = pol.label, spec = pol}
--   end
--   local summaries = sweep.run{name = "my", out = a.out, args = a, cells = cells,
--     run_cell = function(cell, seed, dir, topts)
--       local cfg = exp.run_config(a, preset, steps, cell.id, {run_dir = dir, seed = seed,
--                                  policy = sweep.policy_config(cell.spec), ...})
--       sweep.overrides(a, cfg)
--       local s = sweep.train(cfg, topts)
--       return {specific_final = s.specific_loss, generic_final = s.generic_loss}
--     end}
--   if not summaries then return end   -- a worker: its coordinator (or rank 0) goes on
--   require("harness.aggregate"){out = a.out, metrics = {"specific_final"}, reference = "natural"}
--
-- Options (add_options):
--   --seeds 1,2,3 (ranges 1-5 too)   training seeds: model init, sampling, alignment probes.
--                                    Default 1. --seed N is the same as --seeds N.
--   --data-seed N                    store, clustering, splits, held-out and basis selection.
--                                    Default 1. The same for every training seed, so seeds
--                                    vary the training and not the data.
--   --jobs N                         N pairs at a time, in worker processes. Default 1.
--   --policy NAME|FILE (repeatable)  replaces the experiment's policy list; see policies().
--   --set key=value (repeatable)     overrides a trainer config field; see overrides().
--   --overwrite                      rerun finished pairs; the trainer gets {overwrite = true}.
--   --cell ID                        internal (--jobs): this process is the worker of one pair.
--
-- sweep.run's table may give cost = function(cell) -> the work of one run of the cell
-- relative to the others (default 1); the progress lines' ETA weighs the runs left by it.
-- say = function(line): where the progress lines go (default: stderr); quiet = true: nowhere.
--
-- The design: a plan and executors.
--   harness/plan.lua      the pairs in order (seeds outer, cells inner, so a complete
--                         comparison over the first seed is there before the second seed
--                         starts), which are finished and may be trusted, the coordinator's
--                         lock on --out, progress lines, failures and the final error.
--   harness/exec/*.lua    how the unfinished pairs run. One executor per sweep, chosen by
--                         sweep.run (executor() below):
--     in_process          one after the other, here (and a --jobs worker's one pair);
--     jobs                --jobs N: worker processes, N at a time (exec/jobs.lua says how
--                         they end with their coordinator, a SIGKILL included);
--     mpi_split           under mpirun (a dgalua built with MPI, R > 1 ranks, no --jobs) with
--                         more than one pair: rank r runs pairs i with (i - 1) % R == r,
--                         each a one-rank run (topts.independent: the trainer's data
--                         parallelism is off for it, as DGA_DATA_PARALLEL=0 would make it);
--     data_parallel       under mpirun with one pair (or DGA_SWEEP_SPLIT=0): each pair is
--                         one data-parallel run over all the ranks; a failed pair ends the job.
--     exec/pair.lua runs one pair in this process for all but `jobs`.
--   harness/summary.lua   summary.json: written, read, and the losses of a resumed pair.
--   harness/command.lua   the command key, the line summary.json records, a worker's command.
--   harness/policy_specs.lua  --policy entries, --set policy.KEY, --set (re-exported here).
-- An executor returns whether this process holds the sweep's results. sweep.run then
-- returns the summaries (finished before or now) in pair order, or nil in a worker: a
-- --cell process or an MPI rank other than 0, whose script must then end (the `if not
-- summaries then return end` above), so that only the coordinator (rank 0) aggregates,
-- plots and writes what follows sweep.run. A worker whose pair failed raises its error
-- instead (its process exits non-zero, and its coordinator reports it). Library code
-- neither exits nor sets another module's state: errors are Lua errors.
--
-- A run directory is <out>/<cell.id>/seed-<seed>. The pair is finished iff summary.json
-- exists there; it is written atomically after run_cell returns and holds the metrics, the
-- cell id and fields, the seed, the data seed, the command and its key (the command without
-- the options that choose which pairs run or where: --seeds, --seed, --jobs, --cell,
-- --policy, --out, --cache, --resume, --overwrite, --no-plot, and the script's own
-- options listed in sweep.run's `key_ignore`, e.g. {["--verbose"] = "flag", ["--log"] =
-- "value"}; option order does not matter). A finished pair whose key differs from the
-- current command's is refused (its numbers would come from another configuration): use
-- --overwrite or another --out. So is one whose cell changed (summary.json keeps the cell's
-- fields as canonical JSON, policy options included). An unfinished pair whose directory
-- holds a checkpoint resumes from it (topts.resume = true); one that holds a run but no
-- checkpoint restarts (topts.overwrite = true). run_cell must pass topts to trainer.run.
-- The coordinator locks <out> itself while it runs: a second sweep on the same --out
-- stops at once, naming the first one's process, instead of failing pair by pair.
--
-- With --jobs N > 1, each worker writes its output to <dir>/log.txt (its first line names
-- its process). Everything the script does before sweep.run (store builds, tokenisation)
-- runs in the coordinator first, so the workers find the caches warm and never build the
-- same store at once. A failed pair is reported with its log's tail (or its error) and the
-- sweep goes on; at the end sweep.run raises an error naming the failures, so the script
-- exits non-zero. Under MPI, a failed pair fails the sweep on rank 0, as without MPI;
-- whatever the script does before sweep.run (store builds) runs on every rank: warm the
-- caches with one process first.
--
-- sweep.run's table: name, out, args (the parsed options), cells (a list of tables, each
-- with a unique `id`, a relative path; `group` and other plain fields are kept in
-- summary.json), run_cell(cell, seed, dir, topts) -> metrics; optional: known (the
-- experiment's extra --set keys, as for sweep.overrides: the keys are then checked before
-- anything runs), key_ignore (see above), prepare (a function called once before the
-- first pair runs, in the coordinator with --jobs: build shared caches there when run_cell
-- builds its data lazily), argv (default: the global arg), quiet.
--
-- sweep.train(cfg, topts) runs the trainer with them and also returns the losses of a pair
-- resumed at its final step (use it rather than trainer.run); sweep.policy_config(spec)
-- strips the `label` field a policy spec carries.
local policy_specs = require "harness.policy_specs"
local summary = require "harness.summary"
local plan_of = require "harness.plan"

local M = {}

-- ---- options -------------------------------------------------------------------------

local overrides = require "cli.overrides"

-- "1,2,5-7" -> {1, 2, 5, 6, 7}; nil and a message on anything else (or a repeated seed).
function M.parse_seeds(s)
    local out, seen = {}, {}
    for tok in tostring(s):gmatch("[^,%s]+") do
        local lo, hi = tok:match("^(%d+)%-(%d+)$")
        lo, hi = math.tointeger(tonumber(lo)), math.tointeger(tonumber(hi))
        if not lo then
            lo = math.tointeger(tonumber(tok))
            hi = lo
        end
        if not lo or not hi or lo < 0 or hi < lo then
            return nil, string.format("'%s' is not a seed (integer >= 0) or a range a-b", tok)
        end
        if hi - lo > 10000 then return nil, string.format("'%s': range of more than 10000 seeds", tok) end
        for v = lo, hi do
            if seen[v] then return nil, string.format("seed %d is given twice", v) end
            seen[v] = true
            out[#out + 1] = v
        end
    end
    if #out == 0 then return nil, "no seed given" end
    return out
end

-- The option element of `parser` with this name, or nil.
local function find_option(parser, name)
    for _, o in ipairs(parser._options or {}) do
        for _, n in ipairs(o._aliases or {}) do if n == name then return o end end
        if o._name == name then return o end
    end
    return nil
end

function M.add_options(p)
    local args = require "cli.args"
    local seeds_opt = p:option("--seeds", "Training seeds, comma separated (ranges a-b too): each "
                               .. "covers model init, batch sampling and alignment probes. Default: 1.")
        :convert(M.parse_seeds)
    local seed_opt = find_option(p, "--seed")
    if not seed_opt then
        seed_opt = p:option("--seed", "One training seed: the same as --seeds N."):convert(args.int(0))
    end
    p:mutex(seeds_opt, seed_opt)
    p:option("--data-seed", "Seed of the data: store, clustering, splits, held-out sets and "
             .. "basis selection, the same for every training seed. Default: 1.", "1")
        :convert(args.int(0)):show_default(false)
    p:option("--jobs", "Run this many (cell, seed) pairs at a time, each in its own process "
             .. "(output in <run dir>/log.txt). Default: 1.", "1"):convert(args.int(1)):show_default(false)
    p:option("--policy", "A policy to run: a registry name, a label of the experiment's own "
             .. "list, or a Lua policy file (the run is named from its declared name), with options "
             .. "for it alone after a colon (dga:eta=5,beta=1 runs as dga_eta5_beta1). "
             .. "Repeatable; replaces the experiment's policy list."):count("*")
        :argname("<name|file[:key=value,...]>")
    p:option("--set", "Override a trainer config field by dotted path, e.g. optimizer.lr=3e-3, "
             .. "T_r=50, policy.beta=0.1 (every policy that has the option; one policy: --policy), "
             .. "model.layers=2, align.method=jvp. Repeatable; unknown keys and values of the wrong "
             .. "type are errors."):count("*")
        :argname("<key=value>"):convert(overrides.parse)
    p:flag("--overwrite", "Rerun (cell, seed) pairs that already finished, replacing their runs.")
    p:option("--cell", "(internal, used by --jobs) Run only the cell with this id, then exit.")
    local prev = p._action
    p:action(function(a, ...)
        a.seeds = a.seeds or {a.seed or 1}
        a.seed = a.seeds[1]
        a.policy = a.policy or {}
        a.set = a.set or {}
        if prev then return prev(a, ...) end
    end)
    return p
end

-- The training seeds of parsed options (also when add_options's action did not run).
function M.seeds(a)
    if a.seeds then return a.seeds end
    return {a.seed or 1}
end

-- ---- policies (harness/policy_specs.lua) ----------------------------------------------

for _, name in ipairs{"policy_file_name", "split_policy_entry", "policies", "policy_config",
                      "apply_policy_sets", "overrides"} do
    M[name] = policy_specs[name]
end

-- ---- the run ---------------------------------------------------------------------------

M.run_dir = plan_of.run_dir

-- trainer.run(cfg, topts), for run_cell, with the losses of a pair resumed at its final
-- step (harness/summary.lua, final_losses).
function M.train(cfg, topts)
    local s = require("trainer").run(cfg, topts)
    return summary.final_losses(cfg.run_dir, s)
end

-- Every rank must see the same pairs to run (a shared file system, read before any rank
-- writes).
local function same_pairs_on_every_rank(plan)
    local n = dga.allgather(dga.tensor({#plan.todo}))
    for r = 1, #n do
        if n[r] ~= #plan.todo then
            error(string.format("sweep: rank %d sees %d runs to do, rank %d sees %d: the ranks need "
                                .. "one shared file system for %s", dga.rank(), #plan.todo, r - 1,
                                math.tointeger(n[r]) or n[r], plan.out), 0)
        end
    end
end

-- The executor of a plan, and its argument (the ranks, or the number of jobs).
local function executor(plan)
    local jobs = plan.args.jobs or 1
    local ranks = (not plan.worker and dga.has_mpi and dga.has_mpi()) and dga.size() or 1
    if ranks > 1 then
        same_pairs_on_every_rank(plan)
        local split = #plan.todo > 1 and os.getenv("DGA_SWEEP_SPLIT") ~= "0"
        if jobs > 1 then
            error(overrides.usage_error(string.format("sweep: --jobs %d under mpirun (%d ranks): %s",
                jobs, ranks, split and "the ranks already share the runs; use one or the other"
                                   or "use one or the other")), 0)
        end
        return require(split and "harness.exec.mpi_split" or "harness.exec.data_parallel"), ranks
    end
    if jobs > 1 and not plan.worker and #plan.todo > 0 then return require("harness.exec.jobs"), jobs end
    return require("harness.exec.in_process")
end

-- Runs every (cell, seed) pair not finished yet; returns the summaries in pair order, or
-- nil in a worker (see the top of this file).
function M.run(o)
    local plan = plan_of.new(o)
    local sweep_lock <close> = plan:lock()   -- luacheck: no unused
    plan:find_pairs()
    if plan.worker then require("harness.exec.jobs").enter_worker(plan) end
    -- Shared preparation (store builds, tokenisation) once, before the first pair: with
    -- --jobs, in the coordinator, so the workers find the caches warm instead of building
    -- the same store at the same time.
    if o.prepare and #plan.todo > 0 then o.prepare() end
    local exec, how = executor(plan)
    if exec.run(plan, how) then return plan:results() end
    if plan.worker and #plan.failures > 0 then error(plan:failure_message(), 0) end
    return nil
end

return M

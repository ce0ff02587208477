-- The experiment protocol: several training seeds per configuration ("cell"), each
-- (cell, seed) in its own run directory, finished pairs skipped when the command runs
-- again, N cells at a time in child processes, and --policy / --set overrides.
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
--   require("harness.aggregate"){out = a.out, metrics = {"specific_final"}, reference = "natural"}
--
-- Options (add_options):
--   --seeds 1,2,3 (ranges 1-5 too)   training seeds: model init, sampling, alignment probes.
--                                    Default 1. --seed N is the same as --seeds N.
--   --data-seed N                    store, clustering, splits, held-out and basis selection.
--                                    Default 1. The same for every training seed, so seeds
--                                    vary the training and not the data.
--   --jobs N                         N cells at a time, in child processes. Default 1.
--   --policy NAME|FILE (repeatable)  replaces the experiment's policy list; see policies().
--   --set key=value (repeatable)     overrides a trainer config field; see overrides().
--   --overwrite                      rerun finished pairs; the trainer gets {overwrite = true}.
--   --cell ID                        internal (--jobs): run only this cell, then exit.
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
-- The coordinator holds <out>/.sweep.lock while it runs: a second sweep on the same --out
-- stops at once, naming the first one's process, instead of failing pair by pair.
--
-- With --jobs N > 1, the parent re-runs the same script (same interpreter, its options,
-- the same argv) with --cell ID --seeds S --jobs 1 added, N at a time, through one bash
-- coordinator that reports each child's exit status on a pipe (`wait -n`), so nothing is
-- polled. Each child writes its output to <dir>/log.txt. Everything the script does before
-- sweep.run (store builds, tokenisation) runs in the parent first, so the children find
-- the caches warm and never build the same store at once. A failed pair is reported with
-- its log's tail (or its error) and the sweep goes on; at the end sweep.run raises an error
-- naming the failures, so the script exits non-zero.
--
-- Under mpirun (a dgalua built with MPI, R > 1 ranks, no --jobs), with more than one pair to
-- run, the ranks share the pairs: rank r runs pairs i (1-based, in the order above) with
-- (i - 1) % R == r, each a one-rank training run (no collective inside a pair: the trainer's
-- data parallelism is off, as DGA_DATA_PARALLEL=0 would make it). With one pair to run, or
-- DGA_SWEEP_SPLIT=0, every pair is instead one data-parallel run over all the ranks (rank 0
-- writes its summary.json; a failed pair ends the job). When every rank is done, the ranks other than 0
-- exit (status 0), and rank 0 reads every pair's summary.json (a file system the ranks share)
-- and returns, so only rank 0 aggregates, plots and writes what follows sweep.run. A failed
-- pair fails the sweep on rank 0, as without MPI. Whatever the script does before sweep.run
-- (store builds) runs on every rank: warm the caches with one process first.
--
-- sweep.run's table: name, out, args (the parsed options), cells (a list of tables, each
-- with a unique `id`, a relative path; `group` and other plain fields are kept in
-- summary.json), run_cell(cell, seed, dir, topts) -> metrics; optional: known (the
-- experiment's extra --set keys, as for sweep.overrides: the keys are then checked before
-- anything runs), key_ignore (see above), prepare (a function called once before the
-- first pair runs, in the parent with --jobs: build shared caches there when run_cell
-- builds its data lazily), argv (default: the global arg), quiet.
--
-- Additions to the planned API (nothing in it changed): run_cell receives a 4th argument,
-- the trainer options topts;
-- sweep.train(cfg, topts) runs the trainer with them and also returns the losses of a pair
-- resumed at its final step (use it rather than trainer.run); sweep.policy_config(spec)
-- strips the `label` field a policy spec carries.
local runinfo = require "util.runinfo"
local rundir = require "rundir"
local overrides = require "cli.overrides"
local progress = require "util.progress"

local M = {}

local display_command

-- ---- options -------------------------------------------------------------------------

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
             .. "list, or a Lua policy file (the run is named from its declared name). "
             .. "Repeatable; replaces the experiment's policy list."):count("*")
    p:option("--set", "Override a trainer config field by dotted path, e.g. optimizer.lr=3e-3, "
             .. "T_r=50, policy.beta=0.1, model.layers=2, align.method=jvp. Repeatable; unknown "
             .. "keys and values of the wrong type are errors."):count("*")
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

-- ---- policies --------------------------------------------------------------------------

local function abspath(path)
    if path:sub(1, 1) == "/" then return path end
    return require("lfs").currentdir() .. "/" .. path
end

-- The name a policy file declares: the module's `name`, else the `name` of the object its
-- new({}) returns.
function M.policy_file_name(path)
    local policies = require "policies"
    local ok, mod = pcall(policies.module, path)
    if not ok then error(overrides.usage_error("--policy " .. path .. ": " .. tostring(mod)), 0) end
    local name = type(mod.name) == "string" and mod.name or nil
    if not name then
        local ok2, obj = pcall(mod.new, {})
        if ok2 and type(obj) == "table" and type(obj.name) == "string" then name = obj.name end
    end
    if not name or name == "" then
        error(overrides.usage_error("--policy " .. path .. ": the policy declares no name (give its "
                                    .. "module, or the object new() returns, a `name` field)"), 0)
    end
    if not name:match("^[%w_%-%.]+$") or name:match("^%.") then
        error(overrides.usage_error(string.format("--policy %s: declared name '%s' cannot name a run "
                                    .. "directory (letters, digits, _ - .)", path, name)), 0)
    end
    return name
end

local function copy(t)
    local out = {}
    for key, v in pairs(t) do out[key] = v end
    return out
end

-- "dga:eta=5,beta=1" -> "dga", {{key = "eta", value = 5, raw = "eta=5"}, ...}; an entry
-- without options -> entry, {}. A file path may hold ':' only before its ".lua".
function M.split_policy_entry(entry)
    local head, opts = entry:match("^(.-):([%w_]+=.*)$")
    if not head or head == "" then return entry, {} end
    local list = {}
    for part in opts:gmatch("[^,]+") do
        local s, err = overrides.parse(part)
        if not s then error(overrides.usage_error("--policy " .. entry .. ": " .. err), 0) end
        if s.key:find(".", 1, true) or s.key == "name" then
            error(overrides.usage_error(string.format("--policy %s: '%s' is not a policy option name",
                                                      entry, s.key)), 0)
        end
        list[#list + 1] = s
    end
    return head, list
end

-- The label suffix of an option: "_eta5", "_beta0.1", "_initnatural".
local function option_tag(s)
    local v = s.value
    if math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2^53 then v = math.tointeger(v) end
    return "_" .. s.key .. tostring(v):gsub("[^%w%-%.]", "_")
end

-- The base spec of a --policy entry (no options): a file, a label of default_list, or a
-- policy name.
local function base_spec(entry, default_list)
    if entry:match("%.lua$") or (entry:find("/", 1, true) and runinfo.is_file(entry)) then
        local path = abspath(entry)
        return {name = path, label = M.policy_file_name(path)}
    end
    for _, spec in ipairs(default_list or {}) do
        if (spec.label or spec.name) == entry then
            local s = copy(spec)
            s.label = entry
            return s
        end
    end
    local ok, err = pcall(require("policies").module, entry)
    if not ok then
        local labels = {}
        for _, spec in ipairs(default_list or {}) do labels[#labels + 1] = spec.label or spec.name end
        error(overrides.usage_error(string.format("--policy %s: %s%s", entry,
            tostring(err):gsub("^policies: ", ""),
            #labels > 0 and ("; this experiment's policies: " .. table.concat(labels, ", ")) or "")), 0)
    end
    return {name = entry, label = entry}
end

-- Raises a usage error naming the entry when the policy refuses its options.
local function check_spec(spec, where)
    local ok, err = pcall(require("policies").get, spec.name, M.policy_config(spec))
    if not ok then
        -- the policy's message without its file:line (the user's mistake is in the option)
        local msg = tostring(err):gsub("^[^\n]-%.lua:%d+: ", ""):gsub("^policies: ", "")
        error(overrides.usage_error(string.format("%s: %s", where, msg)), 0)
    end
end

-- The policy specs to run: each a trainer policy table plus `label` (the name of its run
-- directory). Without --policy: default_list (labels default to the names). With it, each
-- entry is one of
--   - a file (ends in .lua, or is a path with a "/"): {name = <absolute path>, label = <declared name>};
--   - a label of default_list: that entry (with its options);
--   - a policy name: {name = NAME, label = NAME};
-- each optionally followed by ":key=value[,key=value...]", options given to that policy
-- only; the label then shows them (dga:eta=5 -> dga_eta5), so two settings of one policy
-- run side by side in their own directories.
function M.policies(a, default_list)
    local list = {}
    local chosen = a.policy or {}
    if #chosen == 0 then
        for _, spec in ipairs(default_list or {}) do
            local s = copy(spec)
            s.label = s.label or s.name
            list[#list + 1] = s
        end
    else
        for _, entry in ipairs(chosen) do
            local head, opts = M.split_policy_entry(entry)
            local s = base_spec(head, default_list)
            for _, o in ipairs(opts) do
                s[o.key] = o.value
                s.label = s.label .. option_tag(o)
                -- an option given to this policy alone wins over a --set for every policy
                s.pinned = s.pinned or {}
                s.pinned[o.key] = true
            end
            if #opts > 0 then check_spec(s, "--policy " .. entry) end
            list[#list + 1] = s
        end
    end
    local seen = {}
    for _, s in ipairs(list) do
        if seen[s.label] then
            error(overrides.usage_error("--policy: two policies would share the run name '" .. s.label .. "'"), 0)
        end
        seen[s.label] = true
    end
    return list
end

-- The trainer's cfg.policy of a spec: the spec without `label` and `pinned` (the options
-- --policy NAME:key=value gave it, which a --set policy.key does not override).
function M.policy_config(spec)
    local out = {}
    for key, v in pairs(spec) do
        if key ~= "label" and key ~= "pinned" then out[key] = v end
    end
    return out
end

-- The --set policy.<option> entries of parsed options, applied to the policy specs of the
-- cells (cell.policy) before anything runs, so each cell records the options it runs with.
-- An option that no policy of the sweep takes is refused, naming the policies; one that
-- only some take is applied to those, and said once.
function M.apply_policy_sets(a, cells, say)
    local specs, order = {}, {}
    for _, cell in ipairs(cells) do
        local spec = type(cell.policy) == "table" and cell.policy or cell.spec
        if type(spec) == "table" and spec.name and not specs[spec] then
            specs[spec] = true
            order[#order + 1] = spec
        end
    end
    -- Cells without policy specs: the trainer applies the options to each run (M.overrides).
    if #order == 0 then return end
    for _, s in ipairs(a.set or {}) do
        local opt = s.key:match("^policy%.(.+)$")
        if opt and opt ~= "name" then
            s.in_cells = true
            local takers, others, pinned = {}, {}, {}
            for _, spec in ipairs(order) do
                local label = spec.label or spec.name
                if overrides.policy_takes(spec.name, opt) == false then others[#others + 1] = label
                elseif spec.pinned and spec.pinned[opt] then pinned[#pinned + 1] = label
                else takers[#takers + 1] = spec end
            end
            if #pinned > 0 and say then
                say("--set %s: not applied to %s (its --policy option wins)", s.raw, table.concat(pinned, ", "))
            end
            if #takers == 0 and #pinned > 0 then goto next_set end
            if #takers == 0 then
                error(overrides.usage_error(string.format(
                    "--set %s: no policy of this sweep has the option '%s' (%s); give an option to one "
                    .. "policy with --policy NAME:%s=VALUE", s.raw, opt,
                    #others > 0 and table.concat(others, ", ") or "no policies", opt)), 0)
            end
            if #others > 0 and say then
                local names = {}
                for _, spec in ipairs(takers) do names[#names + 1] = spec.label or spec.name end
                say("--set %s: applied to %s only (%s %s no option '%s')", s.raw, table.concat(names, ", "),
                    table.concat(others, ", "), #others == 1 and "has" or "have", opt)
            end
            for _, spec in ipairs(takers) do
                spec[opt] = s.value
                check_spec(spec, "--set " .. s.raw .. " (policy " .. (spec.label or spec.name) .. ")")
            end
        end
        ::next_set::
    end
end

-- Applies the --set list of parsed options `a` to a trainer cfg (see cli/overrides.lua for
-- the checks); extra_known: the experiment's own fields. Policy options that
-- apply_policy_sets put into the cells' specs are not applied again. Returns cfg.
function M.overrides(a, cfg, extra_known)
    local sets = {}
    for _, s in ipairs(a.set or {}) do
        if not s.in_cells then sets[#sets + 1] = s end
    end
    return overrides.apply(cfg, sets, extra_known, overrides.SWEEP_RESERVED)
end

-- trainer.run(cfg, topts), for run_cell. A pair killed after its last checkpoint but
-- before summary.json resumes at its final step: the trainer then trains and evaluates
-- nothing, and its summary has no losses. They are the last row of the run's metrics.csv
-- (written at that step before the checkpoint), so they are read from there. That file
-- keeps 9 significant digits, so the losses are rounded to 9 digits on both paths: a
-- resumed pair's summary then equals an uninterrupted one's bit for bit. basis_loss is the
-- mean of the rounded basis losses.
local function round9(v) return type(v) == "number" and tonumber(string.format("%.9g", v)) or v end

function M.train(cfg, topts)
    local trainer = require "trainer"
    local s = trainer.run(cfg, topts)
    if s.specific_loss == nil and s.generic_loss == nil and s.basis_loss == nil then
        local run = rundir.open(cfg.run_dir)
        local ok, last = pcall(run.last_eval, run, s.step)
        if ok and last then
            s.specific_loss, s.generic_loss = last.specific, last.generic
            s.basis = next(last.basis) and last.basis or nil
        end
    end
    s.specific_loss, s.generic_loss = round9(s.specific_loss), round9(s.generic_loss)
    if type(s.basis) == "table" then
        local keys, n, sum = {}, 0, 0
        for j in pairs(s.basis) do keys[#keys + 1] = j end
        table.sort(keys)   -- a fixed order of summation, whichever path filled the table
        for _, j in ipairs(keys) do
            s.basis[j] = round9(s.basis[j])
            n, sum = n + 1, sum + s.basis[j]
        end
        s.basis_loss = n > 0 and sum / n or nil
    end
    return s
end

-- ---- the command -----------------------------------------------------------------------

-- Options that choose which pairs run, how, or where, but not what a pair computes.
local CONTROL_VALUE = {["--seeds"] = true, ["--seed"] = true, ["--jobs"] = true,
                       ["--cell"] = true, ["--policy"] = true, ["--out"] = true, ["--cache"] = true}
local CONTROL_FLAG = {["--resume"] = true, ["--overwrite"] = true, ["--no-plot"] = true}

-- argv without the options of `drop_value` (with their values) and `drop_flag`.
local function strip(argv, drop_value, drop_flag)
    local out, i = {}, 1
    while i <= #argv do
        local t = argv[i]
        local name = t:match("^(%-%-[^=]+)=") or t
        if drop_value[name] then
            i = i + (t:find("=", 1, true) and 1 or 2)
        elseif drop_flag and drop_flag[t] then
            i = i + 1
        else
            out[#out + 1] = t
            i = i + 1
        end
    end
    return out
end

local function shell_quote(s)
    return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- A token as the shell needs it: bare when it is plain, else single-quoted.
local function shell_word(s)
    s = tostring(s)
    if s ~= "" and s:match("^[%w_%-%.,/=+:@]+$") then return s end
    return shell_quote(s)
end

-- The command line to paste into a shell: the interpreter, its options and the script
-- when this process was started from one (with_script), then the arguments.
function display_command(argv, with_script)
    local parts = {}
    if with_script and type(arg) == "table" then
        local lo = 0
        while arg[lo - 1] ~= nil do lo = lo - 1 end
        for i = lo, 0 do parts[#parts + 1] = shell_word(arg[i]) end
    end
    for _, t in ipairs(argv) do parts[#parts + 1] = shell_word(t) end
    return table.concat(parts, " ")
end

local function argv_of(o)
    local src = o.argv or arg or {}
    local out = {}
    for i = 1, #src do out[i] = src[i] end
    return out
end

-- The key of a command: what a finished pair's numbers depend on. The argv without the
-- control options (and the caller's `ignore`: option -> "value" | "flag"), cut into units
-- (an option and the values after it), the units sorted by option name, keeping the order
-- of repeated options (--set a=1 --set a=2 differs from the reverse).
local function command_key(argv, ignore)
    local drop_value, drop_flag = {}, {}
    for k in pairs(CONTROL_VALUE) do drop_value[k] = true end
    for k in pairs(CONTROL_FLAG) do drop_flag[k] = true end
    for k, kind in pairs(ignore or {}) do
        if kind == "flag" then drop_flag[k] = true else drop_value[k] = true end
    end
    local t = strip(argv, drop_value, drop_flag)
    local units = {}
    for _, tok in ipairs(t) do
        if tok:match("^%-%-") or #units == 0 then
            units[#units + 1] = {name = tok:match("^(%-%-[^=]+)") or "", toks = {tok}, i = #units + 1}
        else
            local u = units[#units]
            u.toks[#u.toks + 1] = tok
        end
    end
    table.sort(units, function(x, y)
        if x.name ~= y.name then return x.name < y.name end
        return x.i < y.i
    end)
    local parts = {}
    for _, u in ipairs(units) do parts[#parts + 1] = table.concat(u.toks, " ") end
    return table.concat(parts, " ")
end

-- ---- the run ---------------------------------------------------------------------------

function M.run_dir(out, cell_id, seed)
    return string.format("%s/%s/seed-%d", out, cell_id, seed)
end

local function check_cells(cells)
    if type(cells) ~= "table" or #cells == 0 then error("sweep.run: cells must be a non-empty list", 3) end
    local seen = {}
    for i, c in ipairs(cells) do
        local id = type(c) == "table" and c.id
        if type(id) ~= "string" or id == "" then
            error(string.format("sweep.run: cell %d has no string id", i), 3)
        end
        if not id:match("^[%w_%-%.=+,/]+$") or id:match("^/") or id:match("/$") or id:match("//")
           or id:match("%.%.") or id:match("^%.") or id:match("/%.") then
            error(string.format("sweep.run: cell id '%s' is not a relative directory name "
                                .. "(letters, digits, _ - . = + , and / between parts)", id), 3)
        end
        if seen[id] then error(string.format("sweep.run: two cells have the id '%s'", id), 3) end
        seen[id] = true
    end
end

-- Plain fields of a cell (what summary.json records about it).
local function cell_fields(cell)
    local out = {}
    for key, v in pairs(cell) do
        local t = type(v)
        if type(key) == "string" and (t == "number" or t == "string" or t == "boolean") then
            out[key] = v
        end
    end
    return out
end

-- The cell as canonical JSON text: its plain fields and nested tables (a policy spec), with
-- tensors, functions and other userdata reduced to their type (their addresses change from
-- run to run). A finished pair whose cell text differs was made by another definition of
-- the cell (other policy options, a policy file where a built-in policy ran before).
local function cell_text(cell)
    local seen = {}
    local function plain(v)
        local t = type(v)
        if t == "number" or t == "string" or t == "boolean" then return v end
        if t == "table" and getmetatable(v) == nil and not seen[v] then
            seen[v] = true
            local out = {}
            for key, val in pairs(v) do
                if type(key) == "string" or math.type(key) == "integer" then out[key] = plain(val) end
            end
            seen[v] = nil
            return out
        end
        return "<" .. t .. ">"
    end
    return require("util.json").encode(plain(cell))
end

-- run_cell's table as flat metrics: numbers, strings and booleans kept; a table of numbers
-- becomes name_<key> entries; tensors, models and deeper tables are left out.
local function flat_metrics(res, where)
    if type(res) ~= "table" then
        error(where .. ": run_cell returned " .. type(res) .. ", expected a table of metrics", 0)
    end
    local out = {}
    for key, v in pairs(res) do
        if type(key) == "string" then
            local t = type(v)
            if t == "number" or t == "string" or t == "boolean" then
                out[key] = v
            elseif t == "table" and getmetatable(v) == nil then
                for k2, v2 in pairs(v) do
                    if type(v2) == "number" and (type(k2) == "string" or math.type(k2) == "integer") then
                        out[key .. "_" .. tostring(k2)] = v2
                    end
                end
            end
        end
    end
    return out
end

local function read_summary(path)
    local ok, s = pcall(rundir.read_summary, path, true)
    if not ok then error(overrides.usage_error("sweep: " .. tostring(s)), 0) end
    return s
end

local function tail(path, n)
    local text = runinfo.read_file(path)
    if not text then return "(no log at " .. path .. ")" end
    local lines = {}
    for line in text:gmatch("[^\n]*") do
        -- a progress line redrawn with \r: keep its last state
        lines[#lines + 1] = line:match("([^\r]*)\r*$")
    end
    while #lines > 0 and lines[#lines] == "" do lines[#lines] = nil end
    local first = math.max(1, #lines - n + 1)
    local out = {}
    for i = first, #lines do out[#out + 1] = "    | " .. lines[i] end
    return table.concat(out, "\n")
end

-- Trainer options for an unfinished pair in dir.
local function trainer_opts(dir, a)
    if a.overwrite then return {overwrite = true} end
    if rundir.latest_checkpoint(dir) then return {resume = true} end
    for _, f in ipairs{"config.lua", "metrics.csv"} do
        if runinfo.exists(dir .. "/" .. f) then return {overwrite = true} end
    end
    return {}
end

-- Runs one pair in this process; returns the summary table, or nil and an error message.
-- o._dp_ranks: the pair is one data-parallel run over the ranks (see M.run): only rank 0
-- writes, and every rank takes rank 0's trainer options.
local function run_here(o, pair, argv, key)
    local a = o.args
    local writer = not o._dp_ranks or dga.rank() == 0
    local spath = pair.dir .. "/summary.json"
    if writer then
        runinfo.mkdir_p(pair.dir)
        if runinfo.exists(spath) then os.remove(spath) end
    end
    local topts = trainer_opts(pair.dir, a)
    if o._dp_ranks then
        local how = dga.bcast(writer and (topts.resume and "resume" or topts.overwrite and "overwrite" or "-") or nil, 0)
        topts = how == "-" and {} or {[how] = true}
    end
    local t0 = runinfo.now()
    local ok, res = xpcall(o.run_cell, function(e)
        -- A usage error, a user-code error (a policy's: every cell of it would fail the same
        -- way) or a Ctrl-C ends the sweep; any other error fails this pair only.
        if require("cli.errors").is(e) then return e end
        local msg = tostring(e)
        if msg:find("interrupted!", 1, true) or msg:find("interrupted (in ", 1, true) then
            return overrides.usage_error(msg)
        end
        return debug.traceback(msg, 2)
    end, pair.cell, pair.seed, pair.dir, topts)
    if not ok then
        if require("cli.errors").is(res) then error(res, 0) end
        return nil, tostring(res)
    end
    local where = string.format("cell %s, seed %d", pair.cell.id, pair.seed)
    local okm, metrics = pcall(flat_metrics, res, where)
    if not okm then return nil, tostring(metrics) end
    local summary = {
        cell = pair.cell.id, group = pair.cell.group, seed = pair.seed, cell_text = cell_text(pair.cell),
        data_seed = a.data_seed or 1, metrics = metrics, fields = cell_fields(pair.cell),
        script = type(arg) == "table" and arg[0] or nil,
        command = display_command(argv, o.argv == nil), argv = argv, key = key, sweep = o.name,
        seconds = runinfo.now() - t0, finished = os.date("!%Y-%m-%dT%H:%M:%SZ"),
    }
    if writer then rundir.write_summary(pair.dir, summary) end
    return summary
end

-- The interpreter and its options as this script was started (arg[-n] .. arg[-1]).
local function interpreter()
    if type(arg) ~= "table" then return nil end
    local lo = 0
    while arg[lo - 1] ~= nil do lo = lo - 1 end
    if lo == 0 then return nil end
    local out = {}
    for i = lo, -1 do out[#out + 1] = arg[i] end
    return out, arg[0]
end

local function child_command(argv, pair)
    local interp, script = interpreter()
    if not interp or not script then
        error("sweep: --jobs needs the script to be run as `dgalua script.lua ...` (no arg table)", 0)
    end
    local parts = {}
    for _, t in ipairs(interp) do parts[#parts + 1] = shell_quote(t) end
    parts[#parts + 1] = shell_quote(script)
    for _, t in ipairs(strip(argv, {["--seeds"] = true, ["--seed"] = true, ["--jobs"] = true,
                                    ["--cell"] = true}, nil)) do
        parts[#parts + 1] = shell_quote(t)
    end
    for _, t in ipairs{"--cell", pair.cell.id, "--seeds", tostring(pair.seed), "--jobs", "1"} do
        parts[#parts + 1] = shell_quote(t)
    end
    return table.concat(parts, " ")
end

-- Runs the pairs in child processes, `jobs` at a time. report(i, summary_or_nil, err).
local function run_children(pairs_list, argv, jobs, report)
    local lines = {"set -u", "n=0"}
    for i, pair in ipairs(pairs_list) do
        runinfo.mkdir_p(pair.dir)
        lines[#lines + 1] = string.format('if [ "$n" -ge %d ]; then wait -n; n=$((n-1)); fi', jobs)
        lines[#lines + 1] = string.format('{ %s >%s 2>&1 </dev/null; echo "done %d $?"; } &',
                                          child_command(argv, pair), shell_quote(pair.dir .. "/log.txt"), i)
        lines[#lines + 1] = "n=$((n+1))"
    end
    lines[#lines + 1] = "wait"
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write(table.concat(lines, "\n"), "\n")
    f:close()
    local pipe = assert(io.popen("bash " .. shell_quote(script), "r"))
    local seen = {}
    for line in pipe:lines() do
        local i, rc = line:match("^done (%d+) (%d+)$")
        i, rc = tonumber(i), tonumber(rc)
        if i and pairs_list[i] and not seen[i] then
            seen[i] = true
            local pair = pairs_list[i]
            local spath = pair.dir .. "/summary.json"
            if rc == 0 and runinfo.is_file(spath) then
                local ok, s = pcall(read_summary, spath)
                if ok then report(i, s) else report(i, nil, tostring(s)) end
            else
                report(i, nil, string.format("%s with status %d; the end of %s/log.txt:\n%s",
                    rc == 0 and "exited without writing summary.json" or "failed", rc,
                    pair.dir, tail(pair.dir .. "/log.txt", 15)))
            end
        end
    end
    pipe:close()
    os.remove(script)
    for i = 1, #pairs_list do
        if not seen[i] then report(i, nil, "the coordinator ended without reporting it (interrupted?)") end
    end
end

-- The coordinator's lock on <out>/.sweep.lock, or nil where no lock is taken: in a cell
-- child (--cell, under its coordinator's lock) and on MPI ranks other than 0.
local function lock_out(a, out)
    if a.cell or (dga.has_mpi and dga.has_mpi() and dga.rank() ~= 0) then return nil end
    runinfo.mkdir_p(out)
    local ok, lk = pcall(dga.lock, out .. "/.sweep.lock")
    if not ok then
        error(overrides.usage_error(string.format(
            "sweep: another sweep is running on %s (%s); wait for it, or use another --out",
            out, tostring(lk))), 0)
    end
    return lk
end

-- Runs every (cell, seed) pair not finished yet; returns the summaries (finished before or
-- now) in pair order: seeds outer, cells inner, so a complete comparison over the first
-- seed is there before the second seed starts. See the top of this file.
function M.run(o)
    assert(type(o) == "table", "sweep.run: expected a table")
    local a = o.args or error("sweep.run: args (the parsed options) are required", 2)
    local out = o.out or a.out or error("sweep.run: out is required", 2)
    if type(o.run_cell) ~= "function" then error("sweep.run: run_cell must be a function", 2) end
    check_cells(o.cells)
    local seeds = M.seeds(a)
    local argv = argv_of(o)
    local key = command_key(argv, o.key_ignore)
    local cells = o.cells
    if a.cell then
        cells = {}
        for _, c in ipairs(o.cells) do if c.id == a.cell then cells[1] = c end end
        if #cells == 0 then
            local ids = {}
            for _, c in ipairs(o.cells) do ids[#ids + 1] = c.id end
            error(overrides.usage_error("--cell " .. a.cell .. ": no such cell (cells: "
                                        .. table.concat(ids, ", ") .. ")"), 0)
        end
    end
    local quiet = o.quiet
    local function say(fmt, ...)
        if not quiet then io.stderr:write(string.format(fmt, ...), "\n") end
    end
    -- A bad --set stops the sweep before any run (and before N children would each fail on
    -- it); policy options go into the cells' specs, so the cells record what they run.
    if #(a.set or {}) > 0 then
        local known = overrides.known(nil, o.known)
        for _, s in ipairs(a.set) do
            if not s.key:match("^policy%.") or s.key == "policy.name" then
                overrides.check(s, known, overrides.SWEEP_RESERVED)
            end
        end
        M.apply_policy_sets(a, o.cells, not a.cell and say or nil)
    end

    -- One coordinator per --out: a second sweep on the same directory would pick the same
    -- unfinished pairs and its children would then fail on the runs' own locks, one by one.
    local sweep_lock <close> = lock_out(a, out)   -- luacheck: no unused

    -- Which pairs are finished already.
    local all, todo, results = {}, {}, {}
    for _, seed in ipairs(seeds) do
        for _, cell in ipairs(cells) do
            local pair = {cell = cell, seed = seed, dir = M.run_dir(out, cell.id, seed)}
            all[#all + 1] = pair
            local spath = pair.dir .. "/summary.json"
            if runinfo.is_file(spath) and not a.overwrite then
                local s = read_summary(spath)
                if s.key ~= nil and s.key ~= key then
                    error(overrides.usage_error(string.format(
                        "sweep: %s finished under another command:\n  then: %s\n  now:  %s\n"
                        .. "its numbers would not match this configuration; use --overwrite to rerun it, "
                        .. "or another --out", pair.dir, tostring(s.key), key)), 0)
                end
                local now = cell_text(cell)
                if s.cell_text ~= nil and s.cell_text ~= now then
                    error(overrides.usage_error(string.format(
                        "sweep: %s finished with another definition of cell %s:\n  then: %s\n  now:  %s\n"
                        .. "use --overwrite to rerun it, or another --out", pair.dir, cell.id,
                        tostring(s.cell_text), now)), 0)
                end
                pair.done = s
            else
                todo[#todo + 1] = pair
            end
        end
    end
    if #all - #todo > 0 and not a.cell then
        say("%s: %d of %d runs finished already (summary.json present), skipped",
            o.name or "sweep", #all - #todo, #all)
    end

    local failures = {}
    local t0 = runinfo.now()
    local done_n = 0
    local function report(i, summary, err)
        local pair = todo[i]
        done_n = done_n + 1
        local el = runinfo.now() - t0
        local eta = done_n < #todo and progress.format_duration(el / done_n * (#todo - done_n)) or "0:00"
        local logp = (o._children and (pair.dir .. "/log.txt")) or pair.dir
        if summary then
            pair.done = summary
            say("run %d of %d: %s, seed %d, %s elapsed, ETA %s  (%s)", done_n, #todo, pair.cell.id,
                pair.seed, progress.format_duration(el), eta, logp)
        else
            pair.failed_here = true
            failures[#failures + 1] = {pair = pair, err = err}
            say("run %d of %d: %s, seed %d FAILED, %s elapsed, ETA %s  (%s)\n%s", done_n, #todo,
                pair.cell.id, pair.seed, progress.format_duration(el), eta, logp, err)
        end
    end

    -- Shared preparation (store builds, tokenisation) once, before the first pair: with
    -- --jobs, in the parent, so the children find the caches warm instead of building the
    -- same store at the same time.
    if o.prepare and #todo > 0 then o.prepare() end

    local jobs = a.jobs or 1
    local ranks = (not a.cell and dga.has_mpi and dga.has_mpi()) and dga.size() or 1
    local split = ranks > 1 and #todo > 1 and os.getenv("DGA_SWEEP_SPLIT") ~= "0"
    if ranks > 1 then
        -- Every rank must see the same pairs to run (a shared file system, read before any
        -- rank writes).
        local n = dga.allgather(dga.tensor({#todo}))
        for r = 1, #n do
            if n[r] ~= #todo then
                error(string.format("sweep: rank %d sees %d runs to do, rank %d sees %d: the ranks need "
                                    .. "one shared file system for %s", dga.rank(), #todo, r - 1,
                                    math.tointeger(n[r]) or n[r], out), 0)
            end
        end
    end
    if ranks > 1 and not split then
        -- One pair (or DGA_SWEEP_SPLIT=0): each pair is one data-parallel run over all the
        -- ranks. A failed pair ends the job: the ranks must not drift apart between pairs.
        if jobs > 1 then
            error(overrides.usage_error(string.format("sweep: --jobs %d under mpirun (%d ranks): use one "
                                                      .. "or the other", jobs, ranks)), 0)
        end
        o._dp_ranks = true
        for i, pair in ipairs(todo) do
            local s, err = run_here(o, pair, argv, key)
            if not s then
                io.stderr:write(string.format("sweep: %s, seed %d failed on rank %d (data parallel over %d "
                                              .. "ranks: the job stops):\n%s\n", pair.cell.id, pair.seed,
                                              dga.rank(), ranks, tostring(err)))
                os.exit(1, true)
            end
            report(i, s, err)
        end
        o._dp_ranks = nil
        if dga.rank() ~= 0 then
            io.stdout:flush()
            os.exit(0, true)
        end
    elseif split then
        if jobs > 1 then
            error(overrides.usage_error(string.format("sweep: --jobs %d under mpirun (%d ranks): the ranks "
                                                      .. "already share the runs; use one or the other",
                                                      jobs, ranks)), 0)
        end
        local me = dga.rank()
        local dp = require "trainer.data_parallel"
        dp.independent = true
        local nfail = 0
        for i, pair in ipairs(todo) do
            if (i - 1) % ranks == me then
                local s, err = run_here(o, pair, argv, key)
                if not s then nfail = nfail + 1 end
                report(i, s, err)
            end
        end
        dp.independent = nil
        -- Every rank waits here for the others: then every summary.json is written.
        dga.allgather(dga.tensor({nfail}))
        if me ~= 0 then
            io.stdout:flush()
            os.exit(0, true)
        end
        for _, pair in ipairs(todo) do
            if not pair.done and not pair.failed_here then
                local spath = pair.dir .. "/summary.json"
                if runinfo.is_file(spath) then
                    pair.done = read_summary(spath)
                else
                    failures[#failures + 1] = {pair = pair, err = "failed on another rank (see its stderr)"}
                end
            end
        end
    elseif jobs > 1 and not a.cell and #todo > 0 then
        o._children = true
        say("%s: %d runs, %d at a time; each writes <run dir>/log.txt", o.name or "sweep", #todo, jobs)
        run_children(todo, argv, jobs, report)
        o._children = nil
    else
        for i, pair in ipairs(todo) do
            local s, err = run_here(o, pair, argv, key)
            report(i, s, err)
        end
    end

    if a.cell and o.exit_after_cell ~= false then
        io.stdout:flush()
        os.exit(#failures == 0 and 0 or 1, true)
    end
    if #failures > 0 then
        local names, first = {}, {}
        for _, f in ipairs(failures) do
            names[#names + 1] = string.format("%s seed %d", f.pair.cell.id, f.pair.seed)
            first[#first + 1] = string.format("  %s seed %d: %s", f.pair.cell.id, f.pair.seed,
                                              tostring(f.err):match("^[^\n]*"))
        end
        error(string.format("sweep %s: %d of %d runs failed: %s\n%s\n(the finished runs are kept: "
                            .. "the same command runs only the failed ones; scripts/aggregate.lua %s "
                            .. "summarises what is there)", o.name or "", #failures, #todo,
                            table.concat(names, "; "), table.concat(first, "\n"), out), 0)
    end
    for _, pair in ipairs(all) do results[#results + 1] = pair.done end
    return results
end

return M

-- The plan of a sweep: which (cell, seed) pairs there are, in which order, which are
-- finished already (and may be trusted: same command key, same cell definition), the lock
-- one coordinator holds on --out, the progress lines, the failures and the final error.
-- How the pairs run is an executor's business (harness/exec/*.lua); the plan does not know
-- about processes or ranks.
local runinfo = require "util.runinfo"
local overrides = require "cli.overrides"
local progress = require "util.progress"
local command = require "harness.command"
local summary = require "harness.summary"
local policy_specs = require "harness.policy_specs"

local M = {}
local Plan = {}
Plan.__index = Plan

function M.run_dir(out, cell_id, seed)
    return string.format("%s/%s/seed-%d", out, cell_id, seed)
end

-- Errors name sweep.run's caller: level 4 is Plan.new's caller's caller.
local function check_cells(cells)
    if type(cells) ~= "table" or #cells == 0 then error("sweep.run: cells must be a non-empty list", 4) end
    local seen = {}
    for i, c in ipairs(cells) do
        local id = type(c) == "table" and c.id
        if type(id) ~= "string" or id == "" then
            error(string.format("sweep.run: cell %d has no string id", i), 4)
        end
        if not id:match("^[%w_%-%.=+,/]+$") or id:match("^/") or id:match("/$") or id:match("//")
           or id:match("%.%.") or id:match("^%.") or id:match("/%.") then
            error(string.format("sweep.run: cell id '%s' is not a relative directory name "
                                .. "(letters, digits, _ - . = + , and / between parts)", id), 4)
        end
        if seen[id] then error(string.format("sweep.run: two cells have the id '%s'", id), 4) end
        seen[id] = true
    end
end

-- The cells this process runs: all of them, or the one --cell names (a worker).
local function selected_cells(cells, only)
    if not only then return cells end
    for _, c in ipairs(cells) do if c.id == only then return {c} end end
    local ids = {}
    for _, c in ipairs(cells) do ids[#ids + 1] = c.id end
    error(overrides.usage_error("--cell " .. only .. ": no such cell (cells: " .. table.concat(ids, ", ") .. ")"), 0)
end

-- A bad --set stops the sweep before any run (and before N workers would each fail on it);
-- policy options go into the cells' specs, so the cells record what they run.
function Plan:check_sets()
    local a = self.args
    if #(a.set or {}) == 0 then return end
    local known = overrides.known(nil, self.o.known)
    for _, s in ipairs(a.set) do
        if not s.key:match("^policy%.") or s.key == "policy.name" then
            overrides.check(s, known, overrides.SWEEP_RESERVED)
        end
    end
    policy_specs.apply_policy_sets(a, self.o.cells, not self.worker and function(...) self:say(...) end or nil)
end

-- A finished pair's summary, refused when it was made by another command or another
-- definition of its cell (its numbers would not be this configuration's).
function Plan:trusted(pair)
    local s = summary.read(summary.path(pair.dir))
    if s.key ~= nil and s.key ~= self.key then
        error(overrides.usage_error(string.format(
            "sweep: %s finished under another command:\n  then: %s\n  now:  %s\n"
            .. "its numbers would not match this configuration; use --overwrite to rerun it, "
            .. "or another --out", pair.dir, tostring(s.key), self.key)), 0)
    end
    local now = summary.cell_text(pair.cell)
    if s.cell_text ~= nil and s.cell_text ~= now then
        error(overrides.usage_error(string.format(
            "sweep: %s finished with another definition of cell %s:\n  then: %s\n  now:  %s\n"
            .. "use --overwrite to rerun it, or another --out", pair.dir, pair.cell.id,
            tostring(s.cell_text), now)), 0)
    end
    return s
end

-- The seeds each cell runs: the command's, or the cell's own list (cell.seeds: where a claim
-- needs more seeds than the rest). A worker runs the one seed its coordinator gave it.
function Plan:seeds_of(cell)
    if self.worker then return self.seeds end
    if cell.same_as and self.by_id[cell.same_as] then cell = self.by_id[cell.same_as] end   -- its source's
    if type(cell.seeds) ~= "table" then return self.seeds end
    return cell.seeds
end

-- Every seed of the plan, in order: the command's first, then the cells' own.
function Plan:seed_order()
    local out, seen = {}, {}
    local function add(sd) if not seen[sd] then seen[sd] = true; out[#out + 1] = sd end end
    for _, sd in ipairs(self.seeds) do add(sd) end
    for _, cell in ipairs(self.cells) do for _, sd in ipairs(self:seeds_of(cell)) do add(sd) end end
    return out
end

-- Every pair in order, seeds outer and cells inner (a complete comparison over the first
-- seed is there before the second seed starts); `todo` the unfinished ones. A cell with
-- `same_as = <id>` runs nothing: it computes what that cell computes (natural in every group
-- whose other cells differ by what natural never reads), so its pairs take that cell's
-- summary once it exists (Plan:copy_aliases), marked with `same_as`.
function Plan:find_pairs()
    self.all, self.todo, self.aliases = {}, {}, {}
    local by_id = {}
    for _, cell in ipairs(self.o.cells) do by_id[cell.id] = cell end
    self.by_id = by_id
    for _, seed in ipairs(self:seed_order()) do
        for _, cell in ipairs(self.cells) do
            local runs = false
            for _, sd in ipairs(self:seeds_of(cell)) do runs = runs or sd == seed end
            if runs then
                local pair = {cell = cell, seed = seed, dir = M.run_dir(self.out, cell.id, seed)}
                self.all[#self.all + 1] = pair
                if summary.exists(pair.dir) and not self.args.overwrite then
                    pair.done = self:trusted(pair)
                elseif cell.same_as then
                    if not by_id[cell.same_as] then
                        error(string.format("sweep: cell %s is the same as %s, which is not a cell", cell.id,
                                            tostring(cell.same_as)), 0)
                    end
                    pair.source_dir = M.run_dir(self.out, cell.same_as, seed)
                    self.aliases[#self.aliases + 1] = pair
                else
                    self.todo[#self.todo + 1] = pair
                end
            end
        end
    end
    local n_done = #self.all - #self.todo - #self.aliases
    if n_done > 0 and not self.worker then
        self:say("%s: %d of %d runs finished already (summary.json present), skipped",
                 self.name, n_done, #self.all)
    end
    if #self.aliases > 0 and not self.worker then
        self:say("%s: %d of %d runs are another cell's run (same_as), copied when it finishes",
                 self.name, #self.aliases, #self.all)
    end
    self.t0 = runinfo.now()
    self.todo_cost, self.done_cost = 0, 0
    for _, pair in ipairs(self.todo) do self.todo_cost = self.todo_cost + self:cost(pair.cell) end
end

-- The work of one run of a cell, relative to the others (sweep.run's `cost`, default 1): the
-- ETA weighs the runs left by it, so a study whose last runs are 16 times longer says so.
function Plan:cost(cell)
    local c = self.o.cost and self.o.cost(cell) or 1
    if type(c) ~= "number" or c ~= c or c <= 0 then
        error(string.format("sweep.run: cost of cell %s is %s, expected a positive number", cell.id, tostring(c)), 0)
    end
    return c
end

-- The plan of sweep.run's table o (see harness/sweep.lua).
function M.new(o)
    assert(type(o) == "table", "sweep.run: expected a table")
    local a = o.args or error("sweep.run: args (the parsed options) are required", 3)
    local out = o.out or a.out or error("sweep.run: out is required", 3)
    if type(o.run_cell) ~= "function" then error("sweep.run: run_cell must be a function", 3) end
    check_cells(o.cells)
    local self = setmetatable({o = o, args = a, out = out, name = o.name or "sweep", quiet = o.quiet,
                               seeds = a.seeds or {a.seed or 1}, argv = command.argv_of(o),
                               worker = a.cell ~= nil, failures = {}, done_n = 0}, Plan)
    self.key = command.key(self.argv, o.key_ignore)
    self.cells = selected_cells(o.cells, a.cell)
    self:check_sets()
    return self
end

function Plan:say(fmt, ...)
    if self.quiet then return end
    local line = string.format(fmt, ...)
    if self.o.say then self.o.say(line) else io.stderr:write(line, "\n") end
end

-- One coordinator per --out: a second sweep on the same directory would pick the same
-- unfinished pairs and its workers would then fail on the runs' own locks, one by one. No
-- lock in a worker (under its coordinator's) nor on MPI ranks other than 0: nil there.
function Plan:lock()
    if self.worker or (dga.has_mpi and dga.has_mpi() and dga.rank() ~= 0) then return nil end
    runinfo.mkdir_p(self.out)
    local ok, lk = pcall(dga.lock, self.out)   -- the directory itself: no lock file to delete
    if not ok then
        error(overrides.usage_error(string.format(
            "sweep: another sweep is running on %s (%s); wait for it, or use another --out",
            self.out, tostring(lk))), 0)
    end
    return lk
end

-- The outcome of todo[i]: its summary, or nil and the error. `where` (default: the run
-- directory) is shown with it.
function Plan:report(i, s, err, where)
    local pair = self.todo[i]
    self.done_n = self.done_n + 1
    local n, el = #self.todo, runinfo.now() - self.t0
    self.done_cost = self.done_cost + self:cost(pair.cell)
    local left = self.todo_cost - self.done_cost
    local eta = (self.done_n < n and left > 0) and progress.format_duration(el / self.done_cost * left) or "0:00"
    where = where or pair.dir
    if s then
        pair.done = s
        self:say("run %d of %d: %s, seed %d, %s elapsed, ETA %s  (%s)", self.done_n, n, pair.cell.id,
                 pair.seed, progress.format_duration(el), eta, where)
    else
        pair.failed_here = true
        self.failures[#self.failures + 1] = {pair = pair, err = err}
        self:say("run %d of %d: %s, seed %d FAILED, %s elapsed, ETA %s  (%s)\n%s", self.done_n, n,
                 pair.cell.id, pair.seed, progress.format_duration(el), eta, where, err)
    end
end

-- A pair that failed in another process and was not reported here.
function Plan:failed_elsewhere(pair, err)
    self.failures[#self.failures + 1] = {pair = pair, err = err}
end

-- The error of a sweep with failures. A worker's names its pair; the coordinator's says
-- what is kept and how to go on.
function Plan:failure_message()
    local names, first = {}, {}
    for _, f in ipairs(self.failures) do
        names[#names + 1] = string.format("%s seed %d", f.pair.cell.id, f.pair.seed)
        first[#first + 1] = string.format("  %s seed %d: %s", f.pair.cell.id, f.pair.seed,
                                          tostring(f.err):match("^[^\n]*"))
    end
    if self.worker then
        return string.format("sweep %s: %s failed:\n%s", self.name, table.concat(names, "; "),
                             table.concat(first, "\n"))
    end
    return string.format("sweep %s: %d of %d runs failed: %s\n%s\n(the finished runs are kept: "
                         .. "the same command runs only the failed ones; scripts/aggregate.lua %s "
                         .. "summarises what is there)", self.o.name or "", #self.failures, #self.todo,
                         table.concat(names, "; "), table.concat(first, "\n"), self.out)
end

-- The pairs of `same_as` cells, once their source pair finished: its summary under this
-- cell's id, group and fields, with same_as (the cell) and same_as_dir (the run directory
-- the numbers come from; the report reads curves and weights there). A source that failed
-- or did not run leaves the alias unfinished, and says so.
function Plan:copy_aliases()
    for _, pair in ipairs(self.aliases or {}) do
        if summary.exists(pair.source_dir) then
            local src = summary.read(summary.path(pair.source_dir))
            local s = {}
            for k, v in pairs(src) do s[k] = v end
            local own = summary.record(pair, src.metrics, {data_seed = src.data_seed, key = self.key,
                sweep = self.o.name, argv = self.argv, command = src.command, seconds = 0})
            for k, v in pairs(own) do s[k] = v end
            s.same_as, s.same_as_dir, s.finished, s.seconds = pair.cell.same_as, pair.source_dir, src.finished, 0
            runinfo.mkdir_p(pair.dir)
            summary.write(pair.dir, s)
            pair.done = s
        else
            self:failed_elsewhere(pair, "its source " .. pair.cell.same_as .. " did not finish")
        end
    end
end

-- Every pair's summary in order, or the error naming the failures.
function Plan:results()
    self:copy_aliases()
    if #self.failures > 0 then error(self:failure_message(), 0) end
    local out = {}
    for _, pair in ipairs(self.all) do out[#out + 1] = pair.done end
    return out
end

return M

-- A pair's summary.json, the file that says a (cell, seed) pair is finished: what it holds,
-- how it is written and read back, and the final losses of a pair resumed at its last
-- step. The one place the sweep touches that file, through the run-directory module.
local runinfo = require "util.runinfo"
local json = require "util.json"
local rundir = require "rundir"
local overrides = require "cli.overrides"

local M = {}

function M.path(dir) return dir .. "/summary.json" end

-- Whether the pair in dir is finished.
function M.exists(dir) return runinfo.is_file(M.path(dir)) end

-- Before a pair runs: a summary left from an earlier definition of it must not survive.
function M.remove(dir)
    local p = M.path(dir)
    if runinfo.exists(p) then os.remove(p) end
end

-- A summary.json as a table; a usage error when it is not one.
function M.read(path)
    local ok, s = pcall(rundir.read_summary, path, true)
    if not ok then error(overrides.usage_error("sweep: " .. tostring(s)), 0) end
    return s
end

-- Written atomically, after run_cell returned: its presence means finished.
function M.write(dir, summary) rundir.write_summary(dir, summary) end

-- Plain fields of a table: its string keys with number, string or boolean values (what
-- summary.json records about a cell; what a cell records of its experiment's preset).
function M.plain_fields(t)
    local out = {}
    for key, v in pairs(t) do
        local kind = type(v)
        if type(key) == "string" and (kind == "number" or kind == "string" or kind == "boolean") then
            out[key] = v
        end
    end
    return out
end

-- The cell as canonical JSON text: its plain fields and nested tables (a policy spec), with
-- tensors, functions and other userdata reduced to their type (their addresses change from
-- run to run). A finished pair whose cell text differs was made by another definition of
-- the cell (other policy options, a policy file where a built-in policy ran before).
function M.cell_text(cell)
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
    return json.encode(plain(cell))
end

-- run_cell's table as flat metrics: numbers, strings and booleans kept; a table of numbers
-- becomes name_<key> entries; tensors, models and deeper tables are left out.
function M.flat_metrics(res, where)
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

-- The summary of a pair that run_cell finished: pair = {cell, seed}, metrics (flat), run =
-- {data_seed, command, argv, key, sweep, seconds}.
function M.record(pair, metrics, run)
    return {
        cell = pair.cell.id, group = pair.cell.group, seed = pair.seed, cell_text = M.cell_text(pair.cell),
        data_seed = run.data_seed or 1, metrics = metrics, fields = M.plain_fields(pair.cell),
        script = type(arg) == "table" and arg[0] or nil,
        command = run.command, argv = run.argv, key = run.key, sweep = run.sweep,
        seconds = run.seconds, finished = os.date("!%Y-%m-%dT%H:%M:%SZ"),
    }
end

-- A pair killed after its last checkpoint but before summary.json resumes at its final step: the trainer then trains and evaluates
-- nothing, and its summary has no losses. They are the last row of the run's metrics.csv
-- (written at that step before the checkpoint), so they are read from there. That file
-- keeps 9 significant digits, so the losses are rounded to 9 digits on both paths: a
-- resumed pair's summary then equals an uninterrupted one's bit for bit. basis_loss is the
-- mean of the rounded basis losses.
local function round9(v) return type(v) == "number" and tonumber(string.format("%.9g", v)) or v end

-- Fills in the losses of the trainer summary s of the run in run_dir (see above) and
-- rounds them; returns s.
function M.final_losses(run_dir, s)
    if s.specific_loss == nil and s.generic_loss == nil and s.basis_loss == nil then
        local run = rundir.open(run_dir)
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

return M

-- The checkpoints of a run directory and its "latest" pointer (part of the run-directory
-- module, scripts/rundir/init.lua).
--
-- Checkpoints are ckpt-<step>.safetensors. A save writes the file atomically (the core:
-- tmp + fsync + rename), then replaces "latest" atomically (commit), then removes the older
-- checkpoints. A resume reads "latest", or the newest complete checkpoint when the pointer is
-- missing; *.tmp.* files (saves interrupted by a crash) never match.
local runinfo = require "util.runinfo"

local M = {}

local CKPT_PATTERN = "^ckpt%-(%d+)%.safetensors$"

function M.ckpt_name(step) return string.format("ckpt-%08d.safetensors", step) end

-- Complete checkpoints in dir, newest first: list of {step=, name=}.
function M.list_checkpoints(dir)
    local out = {}
    for _, name in ipairs(runinfo.list(dir)) do
        local s = name:match(CKPT_PATTERN)
        if s then out[#out + 1] = {step = tonumber(s), name = name} end
    end
    table.sort(out, function(a, b) return a.step > b.step end)
    return out
end

-- The path of the checkpoint to resume from, or nil.
function M.latest_checkpoint(dir)
    local pointer = runinfo.read_file(dir .. "/latest")
    if pointer then
        local name = pointer:match("^%s*(%S+)")
        if name and name:match(CKPT_PATTERN) and runinfo.is_file(dir .. "/" .. name) then
            return dir .. "/" .. name
        end
    end
    local all = M.list_checkpoints(dir)
    if all[1] then return dir .. "/" .. all[1].name end
    return nil
end

-- Points "latest" at the checkpoint `name` (already complete) and removes the others.
function M.commit(dir, name)
    runinfo.write_atomic(dir .. "/latest", name .. "\n")
    for _, c in ipairs(M.list_checkpoints(dir)) do
        if c.name ~= name then os.remove(dir .. "/" .. c.name) end
    end
end

-- A fresh start: no checkpoint and no pointer left from an earlier run.
function M.clear_checkpoints(dir)
    for _, c in ipairs(M.list_checkpoints(dir)) do os.remove(dir .. "/" .. c.name) end
    os.remove(dir .. "/latest")
end

-- This process's id (the first field of /proc/self/stat).
local function own_pid()
    local stat = runinfo.read_file("/proc/self/stat")
    return stat and math.tointeger(tonumber(stat:match("^(%d+)")))
end

-- Whether process pid still runs (a zombie has finished: it only waits for its parent).
local function pid_alive(pid)
    local stat = runinfo.read_file("/proc/" .. pid .. "/stat")
    if not stat then return false end
    local state = stat:match("^%d+ %b() (%a)")
    return state ~= "Z" and state ~= "X"
end

-- Removes the leftovers of saves interrupted by a crash (*.tmp.<pid>) whose writer is gone.
-- A file of a process that still runs may be a save in progress and is left alone; this
-- process's own ones are leftovers too, as it starts writing only after this call.
function M.remove_tmp(dir)
    local me = own_pid()
    for _, name in ipairs(runinfo.list(dir)) do
        local pid = math.tointeger(tonumber(name:match("%.tmp%.(%d+)$")))
        if pid and (pid == me or not pid_alive(pid)) then os.remove(dir .. "/" .. name) end
    end
end

-- Whether dir holds (part of) a run: a checkpoint or a metrics log.
function M.holds_run(dir)
    return M.list_checkpoints(dir)[1] ~= nil or runinfo.exists(dir .. "/metrics.csv")
end

return M

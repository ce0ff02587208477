-- A --jobs sweep's workers end with their coordinator, however it ends (issue 22, point 1):
-- SIGTERM or SIGKILL to the coordinator of tests/lua/sweep_script.lua leaves no worker
-- (nor launcher) running 5 s later, and the same command then completes with the results
-- of an uninterrupted sweep. Also the process helpers the sweep uses (dga.getpid,
-- dga.getppid, dga.kill) and a worker's refusal to run once its launcher is gone.
local h = require "tests.lua.helpers"
local json = require "util.json"
local lfs = require "lfs"

local q = h.shell_quote
local DGALUA = h.DGALUA
local SCRIPT = "tests/lua/sweep_script.lua"
-- 6 pairs (2 groups x 3 seeds), 2 at a time, each 8 training steps
local ARGS = " --threads 1 --train --seeds 1,2,3 --jobs 2 --policy uniform"

local base
local function tmp(name)
    base = base or h.tmpdir()
    return base .. "/" .. name
end
teardown(function() h.rm(base) end)

local function sleep(s) os.execute("sleep " .. s) end

-- Whether process pid runs. A zombie does not (in a container nobody may reap it).
local function alive(pid)
    local f = io.open("/proc/" .. pid .. "/stat")
    if not f then return false end
    local stat = f:read("a")
    f:close()
    local state = stat:match("%) (%a)")
    return state ~= nil and state ~= "Z" and state ~= "X"
end

-- The pids the workers wrote at the top of their log.txt.
local function logged_workers(out)
    local p = io.popen("cat " .. q(out) .. "/*/*/seed-*/log.txt 2>/dev/null")
    local text = p:read("a")
    p:close()
    local pids = {}
    for pid in text:gmatch("sweep: worker process (%d+)") do pids[#pids + 1] = tonumber(pid) end
    return pids
end

-- Running processes of the sweep on `out`: the logged workers, the launcher, and any worker
-- whose command line names `out` (one started too late to have logged).
local function survivors(out, launcher)
    local set = {}
    for _, pid in ipairs(logged_workers(out)) do set[pid] = true end
    set[launcher] = true
    for entry in lfs.dir("/proc") do
        local pid = tonumber(entry)
        local f = pid and io.open("/proc/" .. entry .. "/cmdline")
        if f then
            local cmd = f:read("a")
            f:close()
            if cmd:find(out, 1, true) and cmd:find("--cell", 1, true) then set[pid] = true end
        end
    end
    local left = {}
    for pid in pairs(set) do if alive(pid) then left[#left + 1] = pid end end
    table.sort(left)
    return left
end

-- The metrics of every pair of a finished sweep, by run directory.
local function results(out)
    local r = {}
    for _, g in ipairs{"g1", "g2"} do
        for seed = 1, 3 do
            local dir = string.format("%s/%s/uniform/seed-%d", out, g, seed)
            local m = json.read_file(dir .. "/summary.json").metrics
            r[dir:sub(#out + 2)] = {m.step, m.specific_final, m.generic_final}
        end
    end
    return r
end

local reference
local function reference_results()
    if not reference then
        local out = tmp("reference")
        local code, _, err = h.run(q(DGALUA) .. " " .. SCRIPT .. " --out " .. q(out) .. " --log "
                                   .. q(tmp("reference.log")) .. ARGS, tmp("reference.err"))
        assert.are.equal(0, code, err)
        reference = results(out)
    end
    return reference
end

-- Starts the slow sweep in the background, waits until its first two workers train, sends
-- `sig` to the coordinator; returns the processes left 5 s later (killed then), the out
-- directory and the command's arguments.
local function signal_sweep(sig)
    local out, log, errf = tmp(sig), tmp(sig .. ".log"), tmp(sig .. ".err")
    local args = " --out " .. q(out) .. " --log " .. q(log) .. ARGS
    local p = io.popen(q(DGALUA) .. " " .. SCRIPT .. args .. " --step-seconds 1 >" .. q(errf)
                       .. " 2>&1 </dev/null & echo $!")
    local coordinator = tonumber(p:read("l"))
    p:close()
    for _ = 1, 300 do
        if #logged_workers(out) >= 2 then break end
        sleep(0.1)
    end
    assert.are.equal(2, #logged_workers(out), h.read(errf))
    local launcher = tonumber((h.read(errf) or ""):match("launcher process (%d+)"))
    assert.is_number(launcher, h.read(errf))
    assert.is_true(dga.kill(coordinator, sig))
    local left
    for _ = 1, 50 do
        left = survivors(out, launcher)
        if #left == 0 then break end
        sleep(0.1)
    end
    for _, pid in ipairs(left) do dga.kill(pid, "KILL") end
    return left, out, args
end

describe("a --jobs sweep's workers", function()
    before_each(function()
        if not DGALUA then pending("DGALUA is not set (run through tests/run)") end
    end)

    for _, sig in ipairs{"TERM", "KILL"} do
        it("end with their coordinator on SIG" .. sig .. ", and the rerun completes with the same results", function()
            local left, out, args = signal_sweep(sig)
            assert.are.same({}, left)    -- no worker or launcher 5 s after the signal
            local code, _, err = h.run(q(DGALUA) .. " " .. SCRIPT .. args, tmp(sig .. ".rerun.err"))
            assert.are.equal(0, code, err)
            assert.is_nil(err:find("locked by", 1, true))
            assert.are.same(reference_results(), results(out))
            for dir in pairs(results(out)) do
                assert.is_nil(h.read(out .. "/" .. dir .. "/log.txt"):find("\0", 1, true))
            end
        end)
    end

    it("refuse to run when their launcher is gone", function()
        local log = tmp("orphan.log")
        local code, _, err = h.run("DGA_SWEEP_LAUNCHER=1 " .. q(DGALUA) .. " " .. SCRIPT .. " --out "
                                   .. q(tmp("orphan")) .. " --log " .. q(log)
                                   .. " --cell g1/uniform --seeds 1 --jobs 1", tmp("orphan.err"))
        assert.are_not.equal(0, code)
        h.contains(err, "this worker's launcher (process 1) has ended")
        assert.is_nil(h.read(log))       -- run_cell never ran
    end)
end)

describe("process helpers", function()
    it("give this process's pid and its parent's", function()
        if not DGALUA then pending("DGALUA is not set (run through tests/run)") end
        local p = io.popen("exec " .. q(DGALUA) .. " -e 'print(dga.getppid(), dga.getpid())'")
        local ppid, pid = p:read("a"):match("^(%d+)\t(%d+)")
        p:close()
        assert.are.equal(dga.getpid(), tonumber(ppid))
        assert.are_not.equal(dga.getpid(), tonumber(pid))
    end)

    it("signal a process by name, say when it does not exist, and refuse the rest", function()
        assert.is_true(dga.kill(dga.getpid(), "0"))
        local p = io.popen("sleep 30 & echo $!")
        local child = tonumber(p:read("l"))
        p:close()
        assert.is_true(alive(child))
        assert.is_true(dga.kill(child, "TERM"))
        for _ = 1, 50 do
            if not alive(child) then break end
            sleep(0.1)
        end
        assert.is_false(alive(child))
        local ok, msg = dga.kill(2 ^ 22 + 12345, "TERM")   -- above the kernel's largest pid
        assert.is_false(ok)
        h.contains(msg, "No such process")
        h.raises("expected a process id > 1", dga.kill, -5, "TERM")
        h.raises("expected a process id > 1", dga.kill, 1, "TERM")
        h.raises("expected \"TERM\"", dga.kill, dga.getpid(), "STOP")
    end)
end)

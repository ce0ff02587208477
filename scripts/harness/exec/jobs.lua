-- The executor of --jobs N: each pair runs in a worker process (the same interpreter,
-- script and arguments with --cell ID --seeds S --jobs 1 added, output in <dir>/log.txt),
-- N at a time. A bash launcher starts them and reports each one's exit status on a pipe
-- (`wait -n`), so nothing is polled.
--
-- Nothing outlives the coordinator (the process that called sweep.run), however it ends:
--   - the launcher is started under `setpriv --pdeathsig TERM`, so the kernel sends it
--     SIGTERM when the coordinator dies, a SIGKILL included; it checks that its parent is
--     still the coordinator once that is set (closing the window before it);
--   - the launcher's trap on SIGTERM and SIGHUP sends SIGTERM to its running workers;
--   - each worker is started under `setpriv --pdeathsig TERM` too (so a launcher killed
--     outright takes them along), and checks at its start (sweep.run, M.enter_worker) that
--     its parent is still its launcher (DGA_SWEEP_LAUNCHER);
--   - the coordinator leaving by a Lua error (a Ctrl-C included) sends SIGTERM to the
--     launcher before its error goes on, and waits for it.
-- The workers stay in the coordinator's process group, so a Ctrl-C at the terminal still
-- reaches them directly. A sweep run again after a killed one finds no leftover worker
-- writing into its run directories.
local runinfo = require "util.runinfo"
local command = require "harness.command"
local summary = require "harness.summary"

local M = {}

local quote = command.shell_quote

-- The prefix that ties a process to its parent's life, or "" where setpriv is missing
-- (said once: then only a clean exit or a Ctrl-C of the coordinator ends the workers).
local tie
local function tie_prefix(plan)
    if tie == nil then
        tie = os.execute("command -v setpriv >/dev/null 2>&1") and "setpriv --pdeathsig TERM -- " or ""
        if tie == "" then
            plan:say("sweep: setpriv (util-linux) not found: workers will outlive a killed coordinator")
        end
    end
    return tie
end

-- The launcher's bash script: prints "launcher PID", then "done I STATUS" as each worker
-- i (plan order) ends.
local function launcher_script(plan, jobs)
    local lines = {
        "set -u",
        string.format('[ "$PPID" = %d ] || exit 1', dga.getpid()),
        "trap 'kill -TERM $(jobs -p) 2>/dev/null; exit 143' TERM HUP",
        -- wait -n -p is bash 5.1's
        '[ "${BASH_VERSINFO[0]}${BASH_VERSINFO[1]}" -ge 51 ] || { echo "bash $BASH_VERSION"; exit 1; }',
        'echo "launcher $$"',
        "declare -A pair=()",
        "n=0",
        -- waits for a worker (wait -n may also return for a signal, with no pid)
        "reap() {",
        "  local pid st",
        '  while :; do pid=""; wait -n -p pid; st=$?; [ -n "$pid" ] && break; done',
        '  echo "done ${pair[$pid]} $st" || exit 1',
        "  n=$((n-1))",
        "}",
    }
    for i, p in ipairs(plan.todo) do
        runinfo.mkdir_p(p.dir)
        lines[#lines + 1] = string.format('if [ "$n" -ge %d ]; then reap; fi', jobs)
        lines[#lines + 1] = string.format("DGA_SWEEP_LAUNCHER=$$ %s%s >%s 2>&1 </dev/null &", tie_prefix(plan),
                                          command.worker(plan.argv, p), quote(p.dir .. "/log.txt"))
        lines[#lines + 1] = string.format("pair[$!]=%d; n=$((n+1))", i)
    end
    lines[#lines + 1] = 'while [ "$n" -gt 0 ]; do reap; done'
    return table.concat(lines, "\n") .. "\n"
end

-- The launcher as a to-be-closed value: closing it before its end (an error in the
-- coordinator) ends it and its workers, and waits for it.
local Launcher = {}
Launcher.__index = Launcher

function Launcher:__close()
    if self.pid and not self.ended then dga.kill(self.pid, "TERM") end
    if self.pipe then self.pipe:close() end
    os.remove(self.script)
end

local function start(plan, jobs)
    local self = setmetatable({script = os.tmpname()}, Launcher)
    local f = assert(io.open(self.script, "w"))
    f:write(launcher_script(plan, jobs))
    f:close()
    self.pipe = assert(io.popen("exec " .. tie_prefix(plan) .. "bash " .. quote(self.script), "r"))
    local first = self.pipe:read("l") or ""
    self.pid = math.tointeger(tonumber(first:match("^launcher (%d+)$")))
    if not self.pid then
        self.ended = true
        error("sweep: the --jobs launcher did not start" .. (first:match("^bash ")
              and (": it needs bash 5.1 or later, this is " .. first) or ""), 0)
    end
    return self
end

-- The last n lines of the log of the worker that ran in dir, indented.
local function tail(dir, n)
    local text = require("rundir").open(dir):log_text()
    if not text then return "(no log at " .. dir .. "/log.txt)" end
    local lines = {}
    for line in text:gmatch("[^\n]*") do
        -- a progress line redrawn with \r: keep its last state
        lines[#lines + 1] = line:match("([^\r]*)\r*$")
    end
    while #lines > 0 and lines[#lines] == "" do lines[#lines] = nil end
    local out = {}
    for i = math.max(1, #lines - n + 1), #lines do out[#out + 1] = "    | " .. lines[i] end
    return table.concat(out, "\n")
end

-- The outcome of worker i that ended with status rc.
local function outcome(plan, i, rc)
    local p = plan.todo[i]
    if rc == 0 and summary.exists(p.dir) then
        local ok, s = pcall(summary.read, summary.path(p.dir))
        if ok then return s end
        return nil, tostring(s)
    end
    return nil, string.format("%s with status %d; the end of %s/log.txt:\n%s",
        rc == 0 and "exited without writing summary.json" or "failed", rc, p.dir,
        tail(p.dir, 15))
end

-- Runs plan's pairs in workers, `jobs` at a time; the coordinator holds the results.
function M.run(plan, jobs)
    local launcher <close> = start(plan, jobs)
    plan:say("%s: %d runs, %d at a time (launcher process %d); each writes <run dir>/log.txt",
             plan.name, #plan.todo, jobs, launcher.pid)
    local seen = {}
    for line in launcher.pipe:lines() do
        local i, rc = line:match("^done (%d+) (%d+)$")
        i, rc = tonumber(i), tonumber(rc)
        if i and plan.todo[i] and not seen[i] then
            seen[i] = true
            local s, err = outcome(plan, i, rc)
            plan:report(i, s, err, plan.todo[i].dir .. "/log.txt")
        end
    end
    launcher.ended = true
    for i, p in ipairs(plan.todo) do
        if not seen[i] then
            plan:report(i, nil, "the launcher ended without reporting it (interrupted?)", p.dir .. "/log.txt")
        end
    end
    return true
end

-- In a worker (--cell), before its pair runs: its pid in its log (what a test or a user
-- looks for), and a stop when its launcher is already gone.
function M.enter_worker(plan)
    local launcher = math.tointeger(tonumber(os.getenv("DGA_SWEEP_LAUNCHER") or ""))
    io.stderr:write(string.format("sweep: worker process %d for %s, seed %s\n", dga.getpid(),
                                  plan.args.cell, table.concat(plan.seeds, ",")))
    if launcher and dga.getppid() ~= launcher then
        error(string.format("sweep: this worker's launcher (process %d) has ended: its coordinator is "
                            .. "gone, so the worker stops", launcher), 0)
    end
end

return M

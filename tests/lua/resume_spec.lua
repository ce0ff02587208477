-- Resume: a run stopped half-way and resumed gives, step for step, the same metrics, weights,
-- alignments and epochs as the uninterrupted run (all columns but wall-clock `seconds`);
-- a process that dies between writing a checkpoint and moving the "latest" pointer, or that
-- leaves a partial *.tmp.* checkpoint, resumes from the last complete checkpoint; and a real
-- dgalua process killed with SIGKILL while it writes a checkpoint leaves the previous one
-- intact and resumable.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua"
package.path = here .. "/?.lua;" .. package.path

local fixture = require "trainer_fixture"
local trainer = require "trainer"
local csvlog = require "util.csvlog"
local runinfo = require "util.runinfo"

local base
-- Width of the model of the SIGKILL test: 2 layers of 320 make ~2.5M parameters, a ~30 MB
-- checkpoint (parameters + AdamW moments), which takes milliseconds to write.
local KILL_WIDTH = 320
local h = require "tests.lua.helpers"
local rmtree, rows_without_seconds = h.rmtree, h.rows_without_seconds

local FILES = {"metrics.csv", "weights.csv", "alignments.csv", "epochs.csv", "policy.csv"}

local function assert_same_run(a, b)
    for _, f in ipairs(FILES) do
        local ra, rb = rows_without_seconds(a .. "/" .. f), rows_without_seconds(b .. "/" .. f)
        assert.are.equal(#ra, #rb, f .. ": row counts differ")
        for i = 1, #ra do assert.are.equal(ra[i], rb[i], f .. ": row " .. i) end
    end
end

-- Runs the fixture's training in a child dgalua process with trainer options `opts`
-- (a Lua table constructor); returns its exit status and output.
local function child(run_dir, opts)
    local script = base .. "/child.lua"
    local f = assert(io.open(script, "w"))
    f:write(string.format([[
        package.path = %q .. "/?.lua;" .. package.path
        -- the crash: the process ends at once, without closing or flushing anything
        local function die_at(s) return function(step) if step == s then os.exit(9, false) end end end
        local cfg = require("trainer_fixture").config(%q)
        require("trainer").run(cfg, %s)
    ]], here, run_dir, opts))
    f:close()
    local exe = os.getenv("DGALUA") or "build/dgalua"
    local p = io.popen(exe .. " " .. script .. " 2>&1")
    local out = p:read("a")
    local _, _, code = p:close()
    return code, out
end

describe("resume", function()
    setup(function()
        base = os.tmpname()
        os.remove(base)
        runinfo.mkdir_p(base)
        trainer.run(fixture.config(base .. "/full"), {quiet = true})
    end)
    teardown(function() rmtree(base) end)

    it("continues a stopped run bit-identically", function()
        local dir = base .. "/split"
        trainer.run(fixture.config(dir), {quiet = true, stop_at = 12})
        assert.are.equal("ckpt-00000012.safetensors", runinfo.read_file(dir .. "/latest"):match("%S+"))
        local _, rows = csvlog.read(dir .. "/metrics.csv")
        assert.are.equal(4, #rows)   -- steps 0, 4, 8, 12
        trainer.run(fixture.config(dir), {quiet = true, resume = true})
        assert_same_run(base .. "/full", dir)
    end)

    it("survives a death between the checkpoint write and the pointer update", function()
        local dir = base .. "/killed"
        -- checkpoint_every = 8: ckpt 8 is complete and named by latest; the process dies
        -- right after ckpt 16 is written, before latest moves (and before 8 is removed).
        local code, out = child(dir, "{quiet = true, hooks = {before_pointer = die_at(16)}}")
        assert.are_not.equal(0, code, out)
        assert.are.equal("ckpt-00000008.safetensors", runinfo.read_file(dir .. "/latest"):match("%S+"))
        -- rows up to step 16 were written before the death: resume must drop those after 8
        local _, rows = csvlog.read(dir .. "/metrics.csv")
        assert.are.equal(5, #rows)
        -- a save torn by a crash: a partial tmp file with a later step, and a garbage pointer tmp
        local f = assert(io.open(dir .. "/ckpt-00000024.safetensors.tmp.99999", "wb"))
        f:write("\16\0\0\0\0\0\0\0{\"__metad")
        f:close()
        f = assert(io.open(dir .. "/latest.tmp.99999", "wb"))
        f:write("ckpt-00000024.safetensors\n")
        f:close()
        -- and a half-written CSV row at the end of metrics.csv
        f = assert(io.open(dir .. "/metrics.csv", "ab"))
        f:write("20,1280,0.00")
        f:close()
        trainer.run(fixture.config(dir), {quiet = true, resume = true})
        assert_same_run(base .. "/full", dir)
        -- the torn files were cleaned up, one checkpoint is left
        assert.is_false(runinfo.exists(dir .. "/ckpt-00000024.safetensors.tmp.99999"))
        assert.are.equal(1, #trainer.list_checkpoints(dir))
    end)

    it("resumes from the newest complete checkpoint when the pointer is missing", function()
        local dir = base .. "/nopointer"
        local code, out = child(dir, "{quiet = true, hooks = {after_step = die_at(20)}}")
        assert.are_not.equal(0, code, out)
        os.remove(dir .. "/latest")
        assert.are.equal(base .. "/nopointer/ckpt-00000016.safetensors", trainer.latest_checkpoint(dir))
        trainer.run(fixture.config(dir), {quiet = true, resume = true})
        assert_same_run(base .. "/full", dir)
    end)

    it("resumes from the command line with the run directory alone (config.lua + data/)", function()
        local dir = base .. "/cli"
        local code, out = child(dir, "{quiet = true, hooks = {after_step = die_at(12)}}")
        assert.are_not.equal(0, code, out)
        local exe = os.getenv("DGALUA") or "build/dgalua"
        local p = io.popen(string.format("%s %s/scripts/trainer.lua --resume %s --quiet 2>&1", exe,
                                         runinfo.repo_root(), dir))
        out = p:read("a")
        local ok = p:close()
        assert.is_true(ok, out)
        assert.is_truthy(out:find("step 24", 1, true), out)
        assert_same_run(base .. "/full", dir)
    end)

    it("drops a CSV whose header was torn by a crash (alignments.csv is created late)", function()
        -- checkpoints at 2, 4, ...: ckpt 2 comes before the first alignment row (step 4), so a
        -- death while alignments.csv got its first write can leave a bare, torn header
        local over = {eval_every = 2, checkpoint_every = 2}
        local ref = base .. "/torn_ref"
        trainer.run(fixture.config(ref, over), {quiet = true})
        local dir = base .. "/torn"
        trainer.run(fixture.config(dir, over), {quiet = true, stop_at = 2})
        assert.is_false(runinfo.exists(dir .. "/alignments.csv"))
        local f = assert(io.open(dir .. "/alignments.csv", "wb"))
        f:write("step,domain,ali")
        f:close()
        trainer.run(fixture.config(dir, over), {quiet = true, resume = true})
        assert_same_run(ref, dir)
    end)

    -- The real thing: a dgalua child process killed with SIGKILL while the core is writing a
    -- checkpoint (its ckpt-*.safetensors.tmp.<pid> exists). The model is large enough that a
    -- save takes milliseconds to tens of milliseconds; the parent polls the run directory and
    -- kills the child as soon as the tmp file of a checkpoint after the first one appears.
    -- When the save wins the race (the tmp file was renamed before the signal landed) the
    -- attempt proves nothing and is repeated.
    it("survives a real SIGKILL in the middle of writing a checkpoint", function()
        local lfs = require "lfs"
        local over = string.format(
            "{model = {layers = 2, width = %d, heads = 4}, steps = 12, eval_every = 2, "
            .. "checkpoint_every = 2}", KILL_WIDTH)
        local KILL_FROM = 6         -- kill during the save of a checkpoint >= this step
        local ATTEMPTS = 8
        local ref = base .. "/sigkill_ref"
        trainer.run(fixture.config(ref, load("return " .. over)()), {quiet = true})

        local exe = os.getenv("DGALUA") or "build/dgalua"
        local pid
        finally(function()
            if pid then os.execute("kill -9 " .. pid .. " 2>/dev/null") end
        end)
        -- The process state letter from /proc ("R", "S", "D", "Z", ...), nil once it is gone.
        local function state(p)
            local f = io.open("/proc/" .. p .. "/stat", "r")
            if not f then return nil end
            local s = f:read("a") or ""
            f:close()
            return s:match("^%d+ %b() (%a)")
        end
        local function alive(p)
            local s = state(p)
            return s ~= nil and s ~= "Z" and s ~= "X"
        end
        -- ckpt tmp files in dir: list of {name=, step=}
        local function ckpt_tmps(dir)
            local out = {}
            if lfs.attributes(dir, "mode") ~= "directory" then return out end
            for name in lfs.dir(dir) do
                local s = name:match("^ckpt%-(%d+)%.safetensors%.tmp%.%d+$")
                if s then out[#out + 1] = {name = name, step = tonumber(s)} end
            end
            return out
        end

        local dir, killed_tmp
        for attempt = 1, ATTEMPTS do
            dir = string.format("%s/sigkill_%d", base, attempt)
            local log = dir .. ".log"
            local script = dir .. ".lua"
            local f = assert(io.open(script, "w"))
            f:write(string.format([[
                package.path = %q .. "/?.lua;" .. package.path
                local cfg = require("trainer_fixture").config(%q, %s)
                require("trainer").run(cfg, {quiet = true})
            ]], here, dir, over))
            f:close()
            local p = io.popen(string.format("sh -c '%s %s >%s 2>&1 & echo $!'", exe, script, log))
            pid = math.tointeger(tonumber(p:read("l")))
            p:close()
            assert.is_not_nil(pid)
            local child_pid, seen = pid, nil
            local give_up = os.time() + 300   -- only a guard against a hung child
            while alive(pid) do
                -- a complete checkpoint first, so there is a previous one to keep
                if runinfo.exists(dir .. "/latest") then
                    for _, t in ipairs(ckpt_tmps(dir)) do
                        if t.step >= KILL_FROM then seen = t end
                    end
                end
                if seen or os.time() > give_up then
                    os.execute("kill -9 " .. pid)
                    break
                end
                os.execute("sleep 0.001")
            end
            -- wait until the kernel has finished it (an orphan may stay a zombie: fine)
            while alive(pid) do os.execute("sleep 0.001") end
            pid = nil
            if seen then
                -- the tmp file is the killed process's own (named after its pid)
                assert.are.equal(child_pid, math.tointeger(tonumber(seen.name:match("(%d+)$"))))
                if runinfo.exists(dir .. "/" .. seen.name) then
                    killed_tmp = seen
                    break
                end
                -- the save finished between the poll and the signal: try again
            else
                -- every save of the run was missed by the polls (a very loaded machine): try
                -- again, but only when the run itself went well
                assert.are.equal("ckpt-00000012.safetensors",
                                 (runinfo.read_file(dir .. "/latest") or ""):match("%S+"),
                                 "attempt " .. attempt .. ": the child run failed:\n"
                                 .. (runinfo.read_file(log) or ""))
            end
        end
        if os.getenv("DGA_KILL_DEBUG") and killed_tmp then
            io.stderr:write(string.format("sigkill: %s: %s (%d bytes) left, latest %s", dir,
                            killed_tmp.name, lfs.attributes(dir .. "/" .. killed_tmp.name, "size"),
                            runinfo.read_file(dir .. "/latest")))
        end
        assert.is_truthy(killed_tmp, "no attempt out of " .. ATTEMPTS .. " killed the run "
                         .. "while a checkpoint was being written")

        -- the metrics row of the step being saved was written before the save: resume has to
        -- drop the rows after the checkpoint it resumes from
        local _, rows = csvlog.read(dir .. "/metrics.csv")
        assert.are.equal(killed_tmp.step // 2 + 1, #rows)
        -- the previous checkpoint is intact and named by latest
        local name = runinfo.read_file(dir .. "/latest"):match("%S+")
        local step = tonumber(name:match("^ckpt%-(%d+)%.safetensors$"))
        assert.is_not_nil(step, name)
        assert.is_true(step < killed_tmp.step)
        assert.is_true(step >= KILL_FROM - 2)
        local ck = dga.load_checkpoint(dir .. "/" .. name)
        assert.are.equal(step, math.tointeger(tonumber(ck.meta.step)))
        assert.is_truthy(ck.blobs.sampler)
        assert.are.equal(trainer.latest_checkpoint(dir), dir .. "/" .. name)

        -- resuming runs to the end exactly as the uninterrupted run did
        trainer.run(fixture.config(dir, load("return " .. over)()), {quiet = true, resume = true})
        assert_same_run(ref, dir)
        -- the torn tmp file is gone and only the final checkpoint is left
        assert.is_false(runinfo.exists(dir .. "/" .. killed_tmp.name))
        for n in lfs.dir(dir) do assert.is_nil(n:match("%.tmp%."), n) end
        local cks = trainer.list_checkpoints(dir)
        assert.are.equal(1, #cks)
        assert.are.equal(12, cks[1].step)
    end)

    it("says a run is already at its step, with its real summary, and changes nothing", function()
        local dir = base .. "/done"
        trainer.run(fixture.config(dir), {quiet = true})
        local metrics = runinfo.read_file(dir .. "/metrics.csv")
        local recs = csvlog.read_records(dir .. "/metrics.csv")
        local last = recs[#recs]
        local exe = os.getenv("DGALUA") or "build/dgalua"
        for _, steps in ipairs{"", " --steps 24", " --steps 12"} do
            local p = io.popen(string.format("%s %s/scripts/trainer.lua --resume %s --quiet%s 2>&1", exe,
                                             runinfo.repo_root(), dir, steps))
            local out = p:read("a")
            local ok = p:close()
            assert.is_true(ok, out)
            local asked = steps == "" and 24 or tonumber(steps:match("%d+"))
            assert.is_truthy(out:find(string.format("tiny: the run is already at step 24 (asked for %d): "
                                                    .. "nothing to train", asked), 1, true), out)
            assert.is_truthy(out:find(string.format("tiny: step 24, specific loss %.4f, generic loss %.4f",
                                                    last.specific_loss, last.generic_loss), 1, true), out)
            assert.is_falsy(out:find("nan", 1, true), out)
        end
        assert.are.equal(metrics, runinfo.read_file(dir .. "/metrics.csv"))
        -- in-process: the summary of the checkpoint and the last metrics row
        local s = trainer.resume(dir, {steps = 20}, {quiet = true})
        assert.are.equal(24, s.step)
        assert.are.equal(last.specific_loss, s.specific_loss)
        assert.are.equal(last.basis_2_loss, s.basis[2])
        assert.are.equal(3, #s.weights)
    end)

    it("removes leftover temporary files only when their writer is gone", function()
        local dir = base .. "/tmpfiles"
        trainer.run(fixture.config(dir), {quiet = true, stop_at = 12})
        local stat = runinfo.read_file("/proc/self/stat")
        local me, parent = stat:match("^(%d+) %b() %a (%d+)")
        local gone = "4194305"   -- above the kernel's largest pid
        for _, pid in ipairs{me, parent, gone} do
            local f = assert(io.open(dir .. "/ckpt-00000016.safetensors.tmp." .. pid, "wb"))
            f:write("partial")
            f:close()
        end
        trainer.run(fixture.config(dir), {quiet = true, resume = true})
        assert_same_run(base .. "/full", dir)
        assert.is_false(runinfo.exists(dir .. "/ckpt-00000016.safetensors.tmp." .. gone))
        assert.is_false(runinfo.exists(dir .. "/ckpt-00000016.safetensors.tmp." .. me))
        -- the parent (busted's runner) still runs: its file may be a save in progress
        assert.is_true(runinfo.exists(dir .. "/ckpt-00000016.safetensors.tmp." .. parent))
        -- a fresh start cleans up the same way
        os.remove(dir .. "/ckpt-00000016.safetensors.tmp." .. parent)
    end)

    -- A full disk: a small tmpfs filled up in the middle of the run. The run stops with an error
    -- that names the file and the cause; once space is back, the resume gives the same run.
    it("stops on a full disk with a clear error and resumes once space is back", function()
        local mnt = base .. "/tmpfs"
        runinfo.mkdir_p(mnt)
        if not os.execute("mount -t tmpfs -o size=4m tmpfs " .. mnt .. " 2>/dev/null") then
            pending("cannot mount a tmpfs here (needs root): the /dev/full test in csv_spec covers the CSV writes")
            return
        end
        finally(function() os.execute("umount " .. mnt) end)
        local dir = mnt .. "/run"
        local ballast = mnt .. "/ballast"
        local function fill()
            local f = assert(io.open(ballast, "wb"))
            local chunk = string.rep("x", 4096)
            while f:write(chunk) and f:flush() do end
            f:close()
        end
        -- The first alignment round (step 8) comes after the first checkpoint (step 4): the disk
        -- fills up at step 5, and alignments.csv, a new file, cannot get its header. (Rows
        -- appended to the other logs still fit in their last page.)
        local over = {T_r = 8, checkpoint_every = 4}
        local ref = base .. "/fulldisk_ref"
        trainer.run(fixture.config(ref, over), {quiet = true})
        local ok, err = pcall(trainer.run, fixture.config(dir, over),
                              {quiet = true, hooks = {after_step = function(step) if step == 5 then fill() end end}})
        assert.is_false(ok)
        assert.matches(dir .. "/alignments.csv: cannot write: No space left on device", err, 1, true)
        -- the lock went with the error
        dga.lock(dir):release()
        os.remove(ballast)
        trainer.run(fixture.config(dir, over), {quiet = true, resume = true})
        assert_same_run(ref, dir)
    end)

    it("fails clearly when there is nothing to resume", function()
        local dir = base .. "/empty"
        runinfo.mkdir_p(dir)
        assert.error_matches(function()
            trainer.run(fixture.config(dir), {quiet = true, resume = true})
        end, "no complete checkpoint")
    end)
end)

-- Resume: a run stopped half-way and resumed gives, step for step, the same metrics, weights,
-- alignments and epochs as the uninterrupted run (all columns but wall-clock `seconds`);
-- a process that dies between writing a checkpoint and moving the "latest" pointer, or that
-- leaves a partial *.tmp.* checkpoint, resumes from the last complete checkpoint.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua"
package.path = here .. "/?.lua;" .. package.path

local fixture = require "trainer_fixture"
local trainer = require "trainer"
local csvlog = require "dgalib.csvlog"
local runinfo = require "dgalib.runinfo"

local base
local function rmtree(d)
    if d and d:match("^/tmp/") then os.execute("rm -rf '" .. d .. "'") end
end

-- Rows of a CSV with the `seconds` column removed (the only wall-clock value).
local function rows_without_seconds(path)
    local header, rows, index = csvlog.read(path)
    assert.is_not_nil(header, path)
    local drop = index.seconds
    local out = {}
    for r, row in ipairs(rows) do
        local keep = {}
        for j, v in ipairs(row) do if j ~= drop then keep[#keep + 1] = v end end
        out[r] = table.concat(keep, ",")
    end
    return out
end

local FILES = {"metrics.csv", "weights.csv", "alignments.csv", "epochs.csv"}

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
        local code, out = child(dir, "{quiet = true, die_before_pointer = 16}")
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
        local code, out = child(dir, "{quiet = true, die_after_step = 20}")
        assert.are_not.equal(0, code, out)
        os.remove(dir .. "/latest")
        assert.are.equal(base .. "/nopointer/ckpt-00000016.safetensors", trainer.latest_checkpoint(dir))
        trainer.run(fixture.config(dir), {quiet = true, resume = true})
        assert_same_run(base .. "/full", dir)
    end)

    it("resumes from the command line with the run directory alone (config.lua + data/)", function()
        local dir = base .. "/cli"
        local code, out = child(dir, "{quiet = true, die_after_step = 12}")
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

    it("fails clearly when there is nothing to resume", function()
        local dir = base .. "/empty"
        runinfo.mkdir_p(dir)
        assert.error_matches(function()
            trainer.run(fixture.config(dir), {quiet = true, resume = true})
        end, "no complete checkpoint")
    end)
end)

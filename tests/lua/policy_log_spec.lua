-- Every field a policy passes to ctx.log reaches the run directory (policy.csv), read back
-- through the run-directory module: for policies that align (DGA, DoGE) and for those that
-- do not (ODM, DoReMi, and a loss-based policy written here as a file).
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua"
package.path = here .. "/?.lua;" .. package.path
local trainer = require "trainer"
local rundir = require "rundir"
local policies = require "policies"
local csvlog = require "util.csvlog"
local runinfo = require "util.runinfo"
local fixture = require "trainer_fixture"
local h = require "tests.lua.helpers"

local base

-- What the file holds for v: csvlog's text of it, read back as a number where it is one.
local function as_written(v)
    local s = csvlog.format_field(v)
    return tonumber(s) or s
end

-- A policy that forwards to policies.get(name, opts) and records every ctx.log call of its
-- updates: {{step =, fields = {...}}, ...} (the trainer never sees the difference).
local function spied(name, opts)
    local inner = policies.get(name, opts)
    local recorded = {}
    local spy = {name = inner.name, fixed = inner.fixed}
    function spy.init(_, ctx) return inner:init(ctx) end
    function spy.update(_, ctx, step)
        local log, got = ctx.log, {}
        ctx.log = function(a, b)
            for key, v in pairs(a == ctx and b or a) do got[key] = v end
            return log(a, b)
        end
        local w = inner:update(ctx, step)
        ctx.log = log
        if next(got) then recorded[#recorded + 1] = {step = step, fields = got} end
        return w
    end
    function spy.state() return inner:state() end
    function spy.set_state(_, st) return inner:set_state(st) end
    if inner.probes then function spy.probes(_, ctx) return inner:probes(ctx) end end
    package.loaded["policies.spy"] = {new = function() return spy end}
    return recorded
end

-- policy.csv, read through the module, holds exactly the recorded fields at their steps.
local function check_on_disk(dir, recorded)
    local log = rundir.open(dir):policy_log()
    assert.is_true(#recorded > 0, "the policy logged nothing: nothing to check")
    assert.are.equal(#recorded, #log, "updates that logged")
    for i, want in ipairs(recorded) do
        local got = log[i]
        assert.are.equal(want.step, got.step)
        local n = 0
        for key, v in pairs(want.fields) do
            n = n + 1
            assert.are.equal(as_written(v), got[key], string.format("step %d, field %s", want.step, key))
        end
        local m = 0
        for key in pairs(got) do if key ~= "step" then m = m + 1 end end
        assert.are.equal(n, m, "fields at step " .. want.step)
    end
    return log
end

local function run_spied(name, opts, over)
    local dir = base .. "/" .. name
    local recorded = spied(name, opts)
    local o = {policy = {name = "spy"}, steps = 12}
    for key, v in pairs(over or {}) do o[key] = v end
    trainer.run(fixture.config(dir, o), {quiet = true})
    return dir, recorded
end

describe("policy.csv: every ctx.log field on disk", function()
    setup(function()
        base = os.tmpname()
        os.remove(base)
        runinfo.mkdir_p(base)
    end)
    teardown(function()
        package.loaded["policies.spy"] = nil
        h.rmtree(base)
    end)

    it("odm (no alignment): eps, max_weight, mean_reward", function()
        local dir, recorded = run_spied("odm")
        local log = check_on_disk(dir, recorded)
        for _, key in ipairs{"eps", "max_weight", "mean_reward"} do assert.is_number(log[1][key]) end
        assert.is_false(runinfo.exists(dir .. "/alignments.csv"))
    end)

    it("dga (aligns): g_spe_sq, mean_abs_a, std_a, eta", function()
        local dir, recorded = run_spied("dga", {beta = 0.5, eta = 1.0})
        local log = check_on_disk(dir, recorded)
        for _, key in ipairs{"g_spe_sq", "mean_abs_a", "std_a", "eta"} do assert.is_number(log[1][key]) end
        assert.is_true(runinfo.exists(dir .. "/alignments.csv"))
    end)

    it("doge (aligns): max_weight, avg_max_weight", function()
        local dir, recorded = run_spied("doge")
        local log = check_on_disk(dir, recorded)
        for _, key in ipairs{"max_weight", "avg_max_weight"} do assert.is_number(log[1][key]) end
    end)

    it("doremi (losses against a reference): max_weight, mean_excess", function()
        local ref_dir = base .. "/reference"
        trainer.run(fixture.config(ref_dir, {policy = {name = "natural"}, steps = 8}), {quiet = true})
        local dir, recorded = run_spied("doremi", {reference = trainer.latest_checkpoint(ref_dir)})
        local log = check_on_disk(dir, recorded)
        for _, key in ipairs{"max_weight", "mean_excess"} do assert.is_number(log[1][key]) end
    end)

    it("a policy file that logs without aligning, a key first logged at a later update included", function()
        local path = base .. "/logs_losses.lua"
        h.write(path, [[
            local M = {}
            M.__index = M
            function M.new() return setmetatable({name = "logs_losses"}, M) end
            function M:init(ctx) return dga.tensor({1, 1, 1}):normalize_() end
            function M:update(ctx, step)
                ctx.log{seen = step, drawn = ctx.train_count:sum(), note = "update " .. step}
                if step >= 8 then ctx:log{late = step * 10, ok = true} end
                return dga.tensor({1, 2, 3}):normalize_()
            end
            function M:state() return {tensors = {}, values = {}} end
            function M:set_state() end
            return M
        ]])
        local dir = base .. "/file_policy"
        trainer.run(fixture.config(dir, {policy = {name = path}, steps = 16}), {quiet = true})
        local log = rundir.open(dir):policy_log()
        assert.are.same({
            {step = 4, seen = 4, drawn = 16, note = "update 4"},
            {step = 8, seen = 8, drawn = 16, note = "update 8", late = 80, ok = "true"},
            {step = 12, seen = 12, drawn = 16, note = "update 12", late = 120, ok = "true"},
        }, log)
    end)

    it("keeps policy.csv through a resume, cut back to the checkpoint's step", function()
        local dir = base .. "/resumed"
        local cfg = fixture.config(dir, {policy = {name = "odm"}})
        trainer.run(cfg, {quiet = true, stop_at = 8})
        -- rows written after the checkpoint (a crash before the next one) are dropped
        local f = assert(io.open(dir .. "/policy.csv", "ab"))
        f:write("12,eps,0.5\r\n")
        f:close()
        trainer.run(fixture.config(dir, {policy = {name = "odm"}}), {quiet = true, resume = true})
        local ref = base .. "/straight"
        trainer.run(fixture.config(ref, {policy = {name = "odm"}}), {quiet = true})
        assert.are.equal(runinfo.read_file(ref .. "/policy.csv"), runinfo.read_file(dir .. "/policy.csv"))
    end)

    it("reads the fields of an older run directory from alignments.csv", function()
        local dir = base .. "/old"
        runinfo.mkdir_p(dir)
        h.write(dir .. "/alignments.csv", "step,domain,align,loss,grad_norm,target_loss,target_norm,eta,std_a\r\n"
                .. "4,1,0.1,2,1,3,1,0.25,0.5\r\n4,2,0.2,2,1,3,1,0.25,0.5\r\n"
                .. "8,1,0.1,2,1,3,1,0.125,0.75\r\n8,2,0.2,2,1,3,1,0.125,0.75\r\n")
        assert.are.same({{step = 4, eta = 0.25, std_a = 0.5}, {step = 8, eta = 0.125, std_a = 0.75}},
                        rundir.open(dir):policy_log())
    end)

    it("refuses a field it cannot write, naming it", function()
        runinfo.mkdir_p(base .. "/bad")
        local logs = rundir.open_logs(base .. "/bad", {}, "w")
        local ok, err = pcall(logs.policy_fields, logs, 4, {w = dga.tensor({1, 2})}, "mine")
        logs:close()
        assert.is_false(ok)
        h.contains(err, "policy 'mine': ctx.log field w is a userdata")
        -- the stand-in of a rank that does not write raises the same, so no rank runs on alone
        local null = rundir.null_logs()
        ok, err = pcall(null.policy_fields, null, 4, {w = dga.tensor({1, 2})}, "mine")
        assert.is_false(ok)
        h.contains(err, "policy 'mine': ctx.log field w is a userdata")
        null:policy_fields(4, {eps = 0.5}, "mine")
    end)
end)

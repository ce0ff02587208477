-- Errors in the user's code and commands: a failing policy is one line naming the policy,
-- its file, the phase and what was wrong; its result is checked once (a float32 tensor of k
-- finite, non-negative weights summing to 1); usage mistakes exit with status 2, a failing
-- policy with 1, and no traceback is printed unless DGA_TRACEBACK=1.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua"
package.path = here .. "/?.lua;" .. package.path
local h = require "helpers"
local fixture = require "trainer_fixture"
local trainer = require "trainer"

-- A policy file whose init and update return what `init_body` and `update_body` compute.
local function policy_file(dir, name, init_body, update_body)
    local path = dir .. "/" .. name .. ".lua"
    h.write(path, string.format([[
local policies = require "policies"
local M = {name = %q}
M.__index = M
function M.new(opts) return setmetatable({}, M) end
function M:init(ctx) %s end
function M:update(ctx, step) %s end
function M:state() return {tensors = {}, values = {}} end
function M:set_state() end
return M
]], name, init_body, update_body))
    return path
end

local function run_error(policy_path)
    local dir = h.tmpdir("uerr")
    local cfg = fixture.config(dir .. "/run", {steps = 8, T_r = 4, eval_every = 4, checkpoint_every = 0,
                                               policy = {name = policy_path}})
    local ok, err = pcall(trainer.run, cfg, {quiet = true})
    h.rm(dir)
    assert.is_false(ok)
    assert.is_true(require("util.errors").is(err), tostring(err))
    return tostring(err)
end

describe("a failing policy", function()
    local dir
    setup(function() dir = h.tmpdir("policies") end)
    teardown(function() h.rm(dir) end)

    it("returning a plain table is refused at init, naming the policy, its file and the phase", function()
        local p = policy_file(dir, "table_init",
            "local w = {} for i = 1, ctx.k do w[i] = 1 / ctx.k end return w", "return nil")
        assert.are.equal(string.format("policy 'table_init' (%s), init: returned a plain Lua table, expected a "
                                       .. "float32 tensor of 3 weights (dga.tensor{...})", p), run_error(p))
    end)

    it("returning nil, a string or the wrong count at an update names the step", function()
        local p = policy_file(dir, "nil_update", "return policies.uniform(ctx)", "return nil")
        h.contains(run_error(p), "policy 'nil_update' (" .. p .. "), update at step 4: returned a nil, expected")
        p = policy_file(dir, "str_update", "return policies.uniform(ctx)", "return 'uniform'")
        h.contains(run_error(p), "update at step 4: returned a string, expected a float32 tensor of 3 weights")
        p = policy_file(dir, "short", "return policies.uniform(ctx)", "return dga.tensor({0.5, 0.5})")
        h.contains(run_error(p), "update at step 4: returned 2 weights, expected 3")
    end)

    it("returning weights that are not a distribution says which entry", function()
        local p = policy_file(dir, "nan", "return policies.uniform(ctx)", "return dga.tensor({0/0, 0.5, 0.5})")
        h.contains(run_error(p), "policy 'nan' (" .. p .. "), update at step 4: its weights: entry 1 is")
        p = policy_file(dir, "neg", "return dga.tensor({1.5, -0.5, 0})", "return nil")
        h.contains(run_error(p), "init: its weights: entry 2 is -0.5 (expected finite and >= 0)")
    end)

    it("that raises keeps its own file and line, once", function()
        local p = policy_file(dir, "crash", "return policies.uniform(ctx)", "local t = nil; return t.x")
        local msg = run_error(p)
        h.contains(msg, "policy 'crash' (" .. p .. "), update at step 4: " .. p .. ":6: attempt to index a nil value")
        assert.is_nil(msg:find("stack traceback", 1, true))
    end)

    it("stops a sweep at once with one line and status 1; DGA_TRACEBACK=1 shows the traceback", function()
        if not h.DGALUA then pending("DGALUA is not set (run through tests/run)") return end
        local p = policy_file(dir, "crash2", "return policies.uniform(ctx)", "local t = nil; return t.x")
        local out = h.tmpdir("sweep")
        local cmd = string.format("%s tests/lua/sweep_script.lua --out %s --log %s/log --train --seeds 1,2 --policy %s",
                                  h.shell_quote(h.DGALUA), out, out, p)
        local code, _, err = h.run(cmd, out .. "/err")
        assert.are.equal(1, code)
        local lines = {}
        for l in err:gmatch("[^\n]+") do lines[#lines + 1] = l end
        assert.are.equal(1, #lines, err)
        h.contains(lines[1], "dgalua: policy 'crash2' (" .. p .. "), update at step 4: ")
        -- one pair ran: the sweep did not go on to fail the second seed the same way
        local n = 0
        for _ in h.read(out .. "/log"):gmatch("[^\n]+") do n = n + 1 end
        assert.are.equal(1, n)
        code, _, err = h.run("DGA_TRACEBACK=1 " .. cmd .. " --overwrite", out .. "/err2")
        assert.are.equal(1, code)
        h.contains(err, "stack traceback")
        h.rm(out)
    end)
end)

describe("usage mistakes", function()
    it("exit with status 2 in experiments, naming the option without a file position", function()
        if not h.DGALUA then pending("DGALUA is not set (run through tests/run)") return end
        local out = h.tmpdir("usage")
        local code, _, err = h.run(string.format("%s tests/lua/sweep_script.lua --out %s --log %s/log --policy dga:etaa=5",
                                                 h.shell_quote(h.DGALUA), out, out), out .. "/err")
        assert.are.equal(2, code)
        h.contains(err, "dgalua: --policy dga:etaa=5: policy 'dga': unknown option 'etaa'")
        code, _, err = h.run(string.format("%s tests/lua/sweep_script.lua --out %s --log %s/log --set policy.tau=1",
                                           h.shell_quote(h.DGALUA), out, out), out .. "/err")
        assert.are.equal(2, code)
        h.contains(err, "dgalua: --set policy.tau=1: no policy of this sweep has the option 'tau'")
        h.rm(out)
    end)
end)

describe("the trainer's inputs", function()
    it("refuse a token id outside the vocabulary up front, naming the tensor and the position", function()
        local dir = h.tmpdir("oov")
        local cfg = fixture.config(dir .. "/run", {steps = 4})
        cfg.specific.train = cfg.specific.train:clone()
        cfg.specific.train[20] = 460   -- row 2, column 3 of 17-token rows
        local ok, err = pcall(trainer.run, cfg, {quiet = true})
        assert.is_false(ok)
        h.contains(tostring(err), "specific.train holds token id 460 at [2,3], outside the vocabulary [0, 32)")
        -- nothing was trained: the check comes before the run directory is written
        assert.is_nil(io.open(dir .. "/run/metrics.csv"))
        h.rm(dir)
    end)
end)

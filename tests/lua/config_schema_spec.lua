-- The configuration schema (scripts/trainer/schema.lua): every key `--set` accepts, set to a
-- value other than its default through the --set path, trains a few steps, and the run
-- directory records the value the trainer (or the policy) actually used.
local schema = require "trainer.schema"
local config = require "trainer.config"
local overrides = require "cli.overrides"
local trainer = require "trainer"
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua"
package.path = here .. "/?.lua;" .. package.path
local fixture = require "trainer_fixture"

local function tmpdir(tag)
    local d = os.tmpname()
    os.remove(d)
    d = d .. "_" .. tag
    assert(os.execute("mkdir -p '" .. d .. "'"))
    return d
end

-- Keys whose value must fit the fixture's tiny run (3 domains of 17-token sequences over a
-- 32-token vocabulary; steps 6, eval_every and T_r 3), or that need data it does not have.
local VALUE = {
    steps = 9, batch = 3, T_r = 2, eval_every = 2, checkpoint_every = 6, eval_batch = 5,
    eval_max = 5, align_batch = 2, heldout_per_domain = 2, generic_max = 4, sparse_k = 2,
    weights_min = 0.05, clip = 0.5, threads = 1, progress_every = 2, eval_progress_min = 7,
    budget = 20, budget_tokens = 320, epoch_cap = 50, ["model.vocab"] = 40, ["model.width"] = 24,
    ["model.heads"] = 8, ["optimizer.decay"] = "all", ["schedule.kind"] = "linear",
    ["schedule.total"] = 12, ["schedule.warmup"] = 1, ["schedule.min_lr"] = 1e-4,
    ["align.method"] = "jvp", ["model.precision"] = "fp32-onednn", ["align.normalize"] = "none", ["policy.name"] = "natural",
    name = "renamed", seed = 11,
}
local NEEDS = {
    ["store.level"] = "a domain store (the fixture's domains are tensors)",
    dist = "basis histograms (distribution mode)",
    ["align.normalize"] = "the default method with another normalisation: tested as cosine below",
}

-- A value other than the default, valid for the entry.
local function other_value(e)
    if VALUE[e.key] ~= nil then return VALUE[e.key] end
    if e.choices then
        for _, c in ipairs(e.choices) do if c ~= e.default then return c end end
    end
    if e.type == "boolean" then return not e.default end
    if e.type == "int" then return (e.default or e.min or 1) + 1 end
    if e.type == "number" then
        local v = (e.default or 0.5) / 2
        if e.max and v > e.max then v = e.max / 2 end
        return v
    end
    if e.type == "string" then return "other" end
    error("no test value for " .. e.key)
end

-- The value the running trainer used, from the objects it built where one shows it.
local function used(key, run)
    local leaf = key:match("^model%.(.+)$")
    if leaf == "precision" then return run.model:precision() end
    if leaf and leaf ~= "vocab" then return run.model:config()[leaf] end
    if leaf == "vocab" then return run.model:config().vocab end
    leaf = key:match("^optimizer%.(.+)$")
    if leaf and leaf ~= "clip" then
        local text = tostring(run.opt)
        if leaf == "beta1" or leaf == "beta2" then
            local b1, b2 = text:match("betas=%(([^,]+), ([^%)]+)%)")
            return tonumber(leaf == "beta1" and b1 or b2)
        end
        local v = text:match("[%(%s]" .. leaf .. "=([^,;%)]+)")
        return tonumber(v) or v
    end
    if key == "clip" then return run.clip end
    if key == "policy.name" then return run.policy.name end
    return schema.get_path(run.cfg, key)
end

local function same(a, b)
    if type(a) == "number" and type(b) == "number" then
        return math.abs(a - b) <= 1e-6 * math.max(1, math.abs(a))
    end
    return a == b
end

describe("config schema", function()
    local threads = dga.get_threads and dga.get_threads()
    after_each(function() if threads then dga.set_threads(threads) end end)

    it("gives the trainer's defaults, and documents every key", function()
        local d = config.defaults
        assert.are.equal(200, d.steps)
        assert.are.equal("matrices", d.optimizer.decay)
        local doc = schema.doc_markdown()
        for _, e in ipairs(schema.entries) do
            if e.type ~= "table" then assert.truthy(doc:find("`" .. e.key .. "`", 1, true), e.key) end
        end
    end)

    it("refuses unknown keys with close matches, and values out of range", function()
        local base = fixture.config("/tmp/never")
        base.stpes = 100
        assert.has_error(function() config.prepare(base) end, "trainer: unknown key 'stpes' (close matches: steps)")
        base = fixture.config("/tmp/never")
        base.checkpiont_every = 20
        assert.has_error(function() config.prepare(base) end,
                         "trainer: unknown key 'checkpiont_every' (close matches: checkpoint_every)")
        base = fixture.config("/tmp/never")
        base.optimizer.beta2 = 1.5
        assert.has_error(function() config.prepare(base) end,
                         "trainer: cfg.optimizer.beta2 = 1.5, expected a number >= 0 and <= 1")
    end)

    it("accepts through --set every key the trainer reads (weights_min, eval_progress_min, progress_every)", function()
        local cfg = fixture.config("/tmp/never")
        overrides.apply(cfg, {"weights_min=0.01", "eval_progress_min=10", "progress_every=5"})
        assert.are.equal(0.01, cfg.weights_min)
        assert.are.equal(10, cfg.eval_progress_min)
        assert.are.equal(5, cfg.progress_every)
    end)

    local keys = {}
    for key in pairs(schema.settable()) do keys[#keys + 1] = key end
    table.sort(keys)
    for _, key in ipairs(keys) do
        local e = schema.by_key[key]
        if not NEEDS[key] then
            it("records what ran for --set " .. key, function()
                local v = other_value(e)
                assert.is_nil(schema.check_value(e, v), key)
                assert.are_not.equal(tostring(e.default), tostring(v), key .. ": not a change")
                local dir = tmpdir("schema") .. "/run"
                local cfg = fixture.config(dir, {steps = 6, T_r = 3, eval_every = 3, checkpoint_every = 0,
                                                 basis = false})
                cfg.optimizer = {lr = 3e-3}
                cfg.schedule = {}
                cfg.align_batch = nil
                cfg.eval_batch = nil
                if key == "policy.name" then cfg.policy = {name = "uniform"} end
                local raw = type(v) == "string" and ("'" .. v .. "'") or tostring(v)
                overrides.apply(cfg, {key .. "=" .. raw})
                local seen
                local ok, err = pcall(trainer.run, cfg, {quiet = true, hooks = {after_step = function(_, run)
                    if seen == nil then seen = used(key, run) end
                end}})
                assert(ok, tostring(err))
                assert.is_true(same(v, seen), string.format("%s: the trainer used %s, expected %s", key,
                                                            tostring(seen), tostring(v)))
                local recorded = schema.get_path(trainer.load_run_config(dir), key)
                assert.is_true(same(v, recorded), string.format("%s: the run recorded %s, it ran with %s",
                                                                key, tostring(recorded), tostring(v)))
            end)
        end
    end

    it("records what ran for --set align.normalize (with the exact method)", function()
        local dir = tmpdir("schema_norm") .. "/run"
        local cfg = fixture.config(dir, {steps = 6, T_r = 3, eval_every = 3, checkpoint_every = 0})
        overrides.apply(cfg, {"align.normalize=cosine"})
        local seen
        trainer.run(cfg, {quiet = true, hooks = {after_step = function(_, run)
            seen = seen or run.cfg.align.normalize
        end}})
        assert.are.equal("cosine", seen)
        assert.are.equal("cosine", trainer.load_run_config(dir).align.normalize)
    end)

    it("records the policy's options with its defaults filled in, as the policy ran them", function()
        local dir = tmpdir("schema_policy") .. "/run"
        local cfg = fixture.config(dir, {steps = 6, T_r = 3, eval_every = 3, checkpoint_every = 0})
        cfg.policy = {name = "dga", eta = 5}
        local used_opts
        trainer.run(cfg, {quiet = true, hooks = {after_step = function(_, run)
            used_opts = used_opts or run.policy.opts
        end}})
        local rec = trainer.load_run_config(dir).policy
        assert.are.equal(5, used_opts.eta)
        assert.are.equal("fixed", used_opts.eta_mode)
        for k, v in pairs(used_opts) do assert.are.same(v, rec[k], k) end
    end)

    it("records the precision that ran: bf16 where the CPU has it, else the fp32 it fell back to", function()
        local dir = tmpdir("schema_bf16") .. "/run"
        local cfg = fixture.config(dir, {steps = 3, T_r = 3, eval_every = 3, checkpoint_every = 0})
        overrides.apply(cfg, {"model.precision=bf16"})
        local ran
        trainer.run(cfg, {quiet = true, hooks = {after_step = function(_, run) ran = ran or run.model:precision() end}})
        assert.is_truthy(ran == "bf16" or ran == "fp32", ran)
        assert.are.equal(ran, trainer.load_run_config(dir).model.precision)
    end)
end)


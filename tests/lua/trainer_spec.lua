-- The trainer on a tiny synthetic data set: the run directory's files and their columns,
-- weights that are distributions, the config and the checkpoint pointer.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua"
package.path = here .. "/?.lua;" .. package.path

local fixture = require "trainer_fixture"
local trainer = require "trainer"
local csvlog = require "util.csvlog"
local runinfo = require "util.runinfo"

local function rmtree(d)
    if d and d:match("^/tmp/") then os.execute("rm -rf '" .. d .. "'") end
end

-- Every directory of this spec lives under one temporary base, removed at the end.
local base
local function tmpdir(tag)
    if not base then
        base = os.tmpname()
        os.remove(base)
        runinfo.mkdir_p(base)
    end
    local d = base .. "/" .. tag
    runinfo.mkdir_p(d)
    return d
end
teardown(function() rmtree(base) end)

describe("trainer", function()
    local dir, summary
    setup(function()
        dir = tmpdir("trainer")
        summary = trainer.run(fixture.config(dir .. "/run"), {quiet = true})
    end)

    it("writes metrics.csv with one row per evaluation and the expected columns", function()
        local header, rows = csvlog.read(dir .. "/run/metrics.csv")
        assert.are.same({"step", "tokens", "lr", "train_loss", "grad_norm", "specific_loss",
                         "generic_loss", "basis_1_loss", "basis_2_loss", "seconds"}, header)
        -- step 0 (before training) then every eval_every = 4 steps up to 24.
        assert.are.equal(7, #rows)
        for i, row in ipairs(rows) do
            assert.are.equal((i - 1) * 4, tonumber(row[1]))
            assert.are.equal((i - 1) * 4 * 4 * (fixture.L - 1), tonumber(row[2]))
            local spe = tonumber(row[6])
            assert.is_true(spe > 0 and spe < 10)
        end
        -- Training lowers the specific loss of the tiny model.
        assert.is_true(tonumber(rows[#rows][6]) < tonumber(rows[1][6]))
    end)

    it("writes weights.csv in long form, each step a distribution over the domains", function()
        local recs, header = csvlog.read_records(dir .. "/run/weights.csv")
        assert.are.same({"step", "domain", "weight"}, header)
        local sums, counts = {}, {}
        for _, r in ipairs(recs) do
            assert.is_true(r.weight >= 0)
            sums[r.step] = (sums[r.step] or 0) + r.weight
            counts[r.step] = (counts[r.step] or 0) + 1
        end
        -- the initial weights, then one update every T_r = 4 steps before the last step
        local steps = 0
        for step, s in pairs(sums) do
            steps = steps + 1
            assert.are.equal(3, counts[step])
            assert.is_true(math.abs(s - 1) < 1e-5, "weights at step " .. step .. " sum to " .. s)
            assert.are.equal(0, step % 4)
        end
        assert.are.equal(6, steps)   -- 0, 4, 8, 12, 16, 20
    end)

    it("writes alignments.csv for the DGA updates, and the policy's log fields to policy.csv", function()
        local recs, header = csvlog.read_records(dir .. "/run/alignments.csv")
        assert.are.same({"step", "domain", "align", "loss", "grad_norm", "target_loss", "target_norm"},
                        header)
        local plog = require("rundir").open(dir .. "/run"):policy_log()
        assert.are.equal(5, #plog)   -- one per update: 4, 8, 12, 16, 20
        for i, t in ipairs(plog) do
            assert.are.equal(4 * i, t.step)
            for _, key in ipairs{"g_spe_sq", "mean_abs_a", "std_a", "eta"} do assert.is_number(t[key]) end
        end
        assert.are.equal(5 * 3, #recs)
        for _, r in ipairs(recs) do
            assert.is_number(r.align)
            assert.is_true(r.loss > 0)
            assert.is_true(r.grad_norm > 0)
        end
    end)

    it("writes epochs.csv with draws that add up to the training batches", function()
        local recs, header = csvlog.read_records(dir .. "/run/epochs.csv")
        assert.are.same({"step", "domain", "epochs", "drawn", "capped"}, header)
        local drawn = 0
        for _, r in ipairs(recs) do if r.step == 24 then drawn = drawn + r.drawn end end
        assert.are.equal(24 * 4, drawn)
    end)

    it("logs domains that reach the epoch cap and stops sampling them", function()
        local d = tmpdir("cap") .. "/run"
        -- domain 3 holds 40 sequences and gets most of the mass: with a cap of 1 epoch it
        -- leaves the mixture once its 40 sequences are drawn (24 steps x 4 = 96 draws)
        local cfg = fixture.config(d, {epoch_cap = 1, policy = {name = "importance"},
                                       is_histogram = dga.tensor{0.1, 0.1, 0.8}})
        trainer.run(cfg, {quiet = true})
        local recs = csvlog.read_records(d .. "/epochs.csv")
        local last = {}
        for _, r in ipairs(recs) do if r.step == 24 then last[r.domain] = r end end
        assert.are.equal(1, last[3].capped)
        assert.are.equal(40, last[3].drawn)
        assert.are.equal(1, last[3].epochs)
        -- and the run says when: one line in events.log naming the domain and the step
        local ev = assert(io.open(d .. "/events.log")):read("a")
        local step, name = ev:match("step (%d+): domain (%S+) reached the epoch cap %(1%)")
        assert.are.equal(cfg.domain_names and cfg.domain_names[3] or "3", name)
        assert.is_true(tonumber(step) >= 10 and tonumber(step) <= 24, ev)
        -- a cap every domain reaches ends the run with a message, not a traceback
        local d2 = tmpdir("cap_all") .. "/run"
        local ok, err = pcall(trainer.run, fixture.config(d2, {epoch_cap = 1, budget = 2}), {quiet = true})
        assert.is_false(ok)
        assert.matches("every domain reached its epoch cap", err, 1, true)
        assert.matches("step %d+:", err)
    end)

    it("writes the config, the domains and a complete checkpoint named by 'latest'", function()
        local cfg = runinfo.read_config(dir .. "/run/config.lua")
        assert.are.equal("tiny", cfg.name)
        assert.are.equal("dga", cfg.policy.name)
        assert.are.equal(16, cfg.model.context)
        local doms = csvlog.read_records(dir .. "/run/domains.csv")
        assert.are.equal("random", doms[2].name)
        local latest = runinfo.read_file(dir .. "/run/latest")
        assert.are.equal("ckpt-00000024.safetensors", latest:match("%S+"))
        -- older checkpoints removed once the pointer moved on
        assert.are.equal(1, #trainer.list_checkpoints(dir .. "/run"))
        local ck = dga.load_checkpoint(dir .. "/run/" .. latest:match("%S+"))
        assert.are.equal(24, tonumber(ck.meta.step))
        assert.is_not_nil(ck.blobs.sampler)
        assert.are.equal(3, #ck.tensors.weights)
    end)

    it("returns a summary with the final losses", function()
        assert.are.equal("tiny", summary.name)
        assert.is_true(summary.specific_loss > 0)
        assert.is_true(summary.generic_loss > 0)
        assert.is_true(summary.basis_loss > 0)
    end)

    it("prints a progress line", function()
        local d = tmpdir("progress")
        local script = d .. "/run.lua"
        local f = assert(io.open(script, "w"))
        f:write(string.format([[
            package.path = %q .. "/?.lua;" .. package.path
            local cfg = require("trainer_fixture").config(%q, {steps = 8, progress = true,
                                                               eval_progress_min = 0})
            require("trainer").run(cfg)
        ]], here, d .. "/run"))
        f:close()
        local exe = os.getenv("DGALUA") or "build/dgalua"
        local p = io.popen(exe .. " " .. script .. " 2>&1")
        local out = p:read("a")
        local ok = p:close()
        assert.is_true(ok, out)
        -- the last update names the step out of the total and the loss
        assert.is_truthy(out:find("tiny step 8/8 | loss %d+%.%d+"), out)
        -- the final evaluation (long, with eval_progress_min = 0) says what it has evaluated
        for i, what in ipairs{"specific, 8 sequences", "generic, 9 sequences", "basis 1 (count), 4 sequences",
                              "basis 2 (random), 4 sequences"} do
            local line = string.format("tiny: final evaluation %d/4: %s: loss ", i, what)
            assert.is_truthy(out:find(line, 1, true), line .. " not in " .. out)
        end
        -- and only the final one
        local _, n = out:gsub("final evaluation 1/4", "")
        assert.are.equal(1, n, out)
    end)

    it("draws the run's loss and weight figures with gnuplot", function()
        local plot = require "plot"
        local out = dir .. "/plots"
        local made = plot.plot_runs({dir .. "/run"}, out)
        assert.are.equal(2, #made)   -- the loss figure and the run's weights
        for _, f in ipairs(made) do
            for _, path in ipairs{f.png, f.svg} do
                local fh = assert(io.open(path, "rb"))
                local bytes = fh:read("a")
                fh:close()
                assert.is_true(#bytes > 1000, path)
            end
        end
        local png = assert(io.open(made[1].png, "rb"))
        assert.are.equal("\137PNG", png:read(4))
        png:close()
        -- the stacked areas' data: cumulative weights end at 1 (with 3 domains, all shown)
        local dat = runinfo.read_file(out .. "/weights_tiny.dat")
        for line in dat:gmatch("[^\n]+") do
            if not line:match("^#") then
                local last = tonumber(line:match("(%S+)%s*$"))
                assert.is_true(math.abs(last - 1) < 1e-5, line)
            end
        end
    end)

    it("holds generic sequences out of sampling when no generic set is given", function()
        local d = tmpdir("holdout") .. "/run"
        local run = trainer.new(fixture.config(d, {generic_heldout = false, heldout_per_domain = 2,
                                                   policy = {name = "uniform"}}), {quiet = true})
        -- two sequences from each of the three domains, taken from their ends
        assert.are.same({6, fixture.L}, run.generic_heldout:shape())
        assert.are.same({46, 62, 38}, run.budget)
        local s = run:train()
        assert.is_true(s.generic_loss > 0)
        -- a fixed policy is not called again: only the initial weights are logged
        local recs = csvlog.read_records(d .. "/weights.csv")
        assert.are.equal(3, #recs)
        -- no training draw reached a held-out sequence: draws stay within the budget
        local ep = csvlog.read_records(d .. "/epochs.csv")
        for _, r in ipairs(ep) do
            if r.step == 24 then
                assert.is_true(r.drawn <= run.budget[r.domain] * r.epochs)
            end
        end
    end)

    it("writes only the weights that matter when k is large (sparse_k)", function()
        local d = tmpdir("sparse") .. "/run"
        trainer.run(fixture.config(d, {sparse_k = 2, steps = 8, policy = {name = "importance"},
                                       is_histogram = dga.tensor{0.6, 0.4, 0}}), {quiet = true})
        local recs = csvlog.read_records(d .. "/weights.csv")
        assert.are.equal(2, #recs)   -- domain 3 (weight 0) left out
        assert.are.same({1, 2}, {recs[1].domain, recs[2].domain})
        local d2 = tmpdir("sparse2") .. "/run"
        trainer.run(fixture.config(d2, {sparse_k = 2, steps = 8, weights_min = 0.5,
                                        policy = {name = "importance"},
                                        is_histogram = dga.tensor{0.6, 0.4, 0}}), {quiet = true})
        recs = csvlog.read_records(d2 .. "/weights.csv")
        assert.are.equal(1, #recs)
        assert.are.equal(1, recs[1].domain)
    end)

    it("takes budgets in tokens, rounded down to whole sequences", function()
        local L = fixture.L
        local run = trainer.new(fixture.config(tmpdir("btok") .. "/run",
                                               {budget_tokens = {3 * L + L - 1, 5 * L, 1}}), {quiet = true})
        assert.are.same({3, 5, 0}, run.budget)
        run:close()
        assert.has_error(function()
            trainer.new(fixture.config(tmpdir("btok2") .. "/run", {budget = 3, budget_tokens = 3 * L}),
                        {quiet = true})
        end, "trainer: give budget (sequences) or budget_tokens, not both")
    end)

    it("trains in distribution mode: weights over the basis sets, leaves mixed by P", function()
        local d = tmpdir("dist") .. "/run"
        local cfg = fixture.config(d, {dist = true, policy = {name = "dga_dist", beta = 0.5}})
        cfg.basis[1].histogram = dga.tensor{0.8, 0.0, 0.2}
        cfg.basis[2].histogram = dga.tensor{0.0, 0.7, 0.3}
        local run = trainer.new(cfg, {quiet = true})
        run:train()
        local recs = csvlog.read_records(d .. "/weights.csv")
        local sums, n = {}, 0
        for _, r in ipairs(recs) do
            assert.is_true(r.domain >= 1 and r.domain <= 2)
            sums[r.step] = (sums[r.step] or 0) + r.weight
            n = n + 1
        end
        for step, s in pairs(sums) do assert.is_true(math.abs(s - 1) < 1e-5, "step " .. step) end
        -- the sampler draws leaves from P alpha: leaf 1 only through basis 1, 2 through basis 2
        local w = run.weights
        local leaves = run.sampler:weights()
        assert.is_true(math.abs(leaves[1] - 0.8 * w[1]) < 1e-5)
        assert.is_true(math.abs(leaves[2] - 0.7 * w[2]) < 1e-5)
        local doms = csvlog.read_records(d .. "/domains.csv")
        assert.are.equal("random", doms[2].name)
    end)

    it("runs alignment rounds over many domains (k = 40) and exits cleanly", function()
        -- In a child process: a binding that overruns the Lua stack with many batches
        -- corrupts the heap and shows up as a crash or a hang at exit, not as an error.
        local d = tmpdir("many")
        local script = d .. "/run.lua"
        local f = assert(io.open(script, "w"))
        f:write(string.format([[
            package.path = %q .. "/?.lua;" .. package.path
            local fixture = require("trainer_fixture")
            local rng = dga.rng(5)
            local doms = {}
            for i = 1, 40 do
                local t = dga.zeros(8, fixture.L, "int32")
                for j = 1, #t do t[j] = (i + rng:below(4)) %% fixture.V end
                doms[i] = t
            end
            local cfg = fixture.config(%q, {domains = doms, domain_names = false, steps = 12,
                                            checkpoint_every = 0, basis = false})
            local s = require("trainer").run(cfg, {quiet = true})
            collectgarbage("collect")
            print("alignment rows " .. #require("util.csvlog").read_records(%q .. "/alignments.csv"))
        ]], here, d .. "/run", d .. "/run"))
        f:close()
        local exe = os.getenv("DGALUA") or "build/dgalua"
        local p = io.popen("timeout 120 " .. exe .. " " .. script .. " 2>&1")
        local out = p:read("a")
        local ok = p:close()
        assert.is_true(ok, out)
        assert.is_truthy(out:find("alignment rows 80", 1, true), out)   -- updates at 4 and 8
    end)

    it("rejects bad configurations with clear messages", function()
        local d = fixture.data(7)
        assert.error_matches(function()
            trainer.new(fixture.config(nil))
        end, "trainer: cfg.run_dir (the run directory) is required", 1, true)
        assert.error_matches(function()
            trainer.new(fixture.config(tmpdir("bad"), {checkpoint_every = 6}))
        end, "multiple of eval_every")
        assert.error_matches(function()
            trainer.new(fixture.config(tmpdir("bad"), {specific = {train = d.specific_train,
                                                                   heldout = dga.zeros(2, 5, "int32")}}))
        end, "specific.heldout: sequences of 5 tokens")
        -- sizes and periods fail before anything is built, not at step 1
        for key, v in pairs{batch = 0, T_r = 0, eval_batch = 2.5, steps = -1} do
            assert.error_matches(function()
                trainer.new(fixture.config(tmpdir("bad"), {[key] = v}))
            end, "trainer: cfg." .. key .. " = " .. tostring(v) .. ", expected an integer >= 1", 1, true)
        end
    end)
end)

describe("trainer run directories", function()
    it("refuses to start over a run unless told to overwrite it", function()
        local d = tmpdir("overwrite") .. "/run"
        trainer.run(fixture.config(d, {steps = 4}), {quiet = true})
        local before = runinfo.read_file(d .. "/metrics.csv")
        assert.error_matches(function()
            trainer.run(fixture.config(d, {steps = 4}), {quiet = true})
        end, d .. " already holds a run (a checkpoint or metrics.csv): resume it", 1, true)
        assert.are.equal(before, runinfo.read_file(d .. "/metrics.csv"))
        assert.is_not_nil(trainer.latest_checkpoint(d))
        -- a metrics log alone (a run killed before its first checkpoint) is a run too
        local d2 = tmpdir("overwrite2")
        runinfo.write_atomic(d2 .. "/metrics.csv", "step\r\n0\r\n")
        assert.error_matches(function()
            trainer.run(fixture.config(d2, {steps = 4}), {quiet = true})
        end, "already holds a run", 1, true)
        -- overwrite = true starts afresh
        local s = trainer.run(fixture.config(d, {steps = 8}), {quiet = true, overwrite = true})
        assert.are.equal(8, s.step)
        local _, rows = csvlog.read(d .. "/metrics.csv")
        assert.are.equal(3, #rows)
    end)

    it("has one writer: a second one fails at once, naming the holder's pid", function()
        local d = tmpdir("locked") .. "/run"
        runinfo.mkdir_p(d)
        local me = math.tointeger(tonumber(runinfo.read_file("/proc/self/stat"):match("^(%d+)")))
        local lock = dga.lock(d)
        assert.error_matches(function()
            trainer.run(fixture.config(d, {steps = 4}), {quiet = true})
        end, d .. ": locked by process " .. me, 1, true)
        assert.is_false(runinfo.exists(d .. "/metrics.csv"))
        lock:release()
        -- the run holds the lock while it trains, and releases it at the end
        local seen
        trainer.run(fixture.config(d, {steps = 4}), {quiet = true, hooks = {after_step = function()
            seen = select(2, pcall(dga.lock, d))
        end}})
        assert.matches("locked by process " .. me, seen, 1, true)
        dga.lock(d):release()
        -- and on an error too (a resume that asks for a checkpoint of another model)
        assert.error_matches(function()
            trainer.run(fixture.config(d, {model = {layers = 2, width = 16, heads = 2}}), {quiet = true, resume = true})
        end, "config mismatch: file has n_layer=1, model has n_layer=2", 1, true)
        dga.lock(d):release()
    end)

    it("sees the lock of another process, which the kernel drops when it dies", function()
        local d = tmpdir("locked_child")
        local exe = os.getenv("DGALUA") or "build/dgalua"
        local script = d .. "/hold.lua"
        runinfo.write_atomic(script, string.format([[
            local lock = dga.lock(%q)
            local held = %q
            local f = io.open(held .. ".tmp", "w"); f:write(dga.getpid(), "\n"); f:close()
            os.rename(held .. ".tmp", held)   -- whole when the parent sees it
            io.read("l")   -- until the parent closes the pipe, or kills this process
            lock:release()
        ]], d .. "/run", d .. "/held"))
        runinfo.mkdir_p(d .. "/run")
        local p = io.popen(string.format("exec %s %s > %s/out 2>&1", exe, script, d), "w")
        local pid
        finally(function()
            if pid then os.execute("kill -9 " .. pid .. " 2>/dev/null") end
            p:close()
        end)
        -- wait for the child to hold the lock (it says so in a file)
        while not runinfo.exists(d .. "/held") do os.execute("sleep 0.01") end
        pid = math.tointeger(tonumber(runinfo.read_file(d .. "/held"):match("^(%d+)")))
        assert.is_not_nil(pid)
        assert.error_matches(function()
            trainer.run(fixture.config(d .. "/run", {steps = 4}), {quiet = true})
        end, "locked by process " .. pid .. ", which is writing there", 1, true)
        os.execute("kill -9 " .. pid)
        p:close()
        p = io.popen("true", "w")
        pid = nil
        local s = trainer.run(fixture.config(d .. "/run", {steps = 4}), {quiet = true})
        assert.are.equal(4, s.step)
    end)

    it("locks the output of tokenize.lua and build_store.lua", function()
        local d = tmpdir("tool_locks")
        local exe = os.getenv("DGALUA") or "build/dgalua"
        local root = runinfo.repo_root()
        local me = math.tointeger(tonumber(runinfo.read_file("/proc/self/stat"):match("^(%d+)")))
        for _, t in ipairs{{"tokenize.lua --corpus x --tokenizer x --out " .. d .. "/shard.bin", d .. "/shard.bin.lock"},
                           {"build_store.lua x --out " .. d .. "/store/", d .. "/store.lock"}} do
            local lock = dga.lock(t[2])
            local p = io.popen(string.format("%s %s/scripts/%s 2>&1", exe, root, t[1]))
            local out = p:read("a")
            local ok = p:close()
            lock:release()
            assert.is_falsy(ok, out)
            assert.is_truthy(out:find(t[2] .. ": locked by process " .. me, 1, true), out)
        end
    end)
end)

describe("trainer checkpoints", function()
    it("give back the policy's plain values with their types, its tensors and the history", function()
        local checkpoint = require "trainer.checkpoint"
        local path = tmpdir("ckschema") .. "/c.safetensors"
        local function parts()
            local model = dga.gpt{layers = 1, width = 16, heads = 2, context = 8, vocab = 32, batch = 2, seed = 1}
            return model, dga.adamw(model, {lr = 1e-3}), dga.sampler({4, 4}, {seed = 1}), dga.rng(2)
        end
        local model, opt, sampler, rng = parts()
        -- a policy without state()/set_state(): its fields are scraped
        local policy = {name = "plain", count = 3, scale = 0.1, on = true, off = false, label = "x:y",
                        alpha = dga.tensor{0.25, 0.75}, skipped = {1, 2}}
        local history = {dga.tensor{0.5, 0.5}, dga.tensor{0.25, 0.75}}
        checkpoint.save(path, {step = 12, name = "n", policy_name = "plain", elapsed = 1.5, model = model,
                               optimizer = opt, weights = history[2], policy = policy, history = history,
                               sampler = sampler, rng = rng})
        local m2, o2 = parts()
        local restored = {}
        local ck = checkpoint.load(path, {model = m2, optimizer = o2, policy = restored})
        assert.are.equal(12, ck.step)
        assert.are.equal(1.5, ck.elapsed)
        assert.are.same({0.25, 0.75}, ck.weights:totable())
        assert.are.equal(2, #ck.history)
        assert.are.same({0.5, 0.5}, ck.history[1]:totable())
        assert.are.equal("string", type(ck.sampler))
        assert.are.equal("string", type(ck.rng))
        assert.are.equal(math.type(3), math.type(restored.count))
        assert.are.equal(3, restored.count)
        assert.are.equal(0.1, restored.scale)
        assert.are.equal(true, restored.on)
        assert.are.equal(false, restored.off)
        assert.are.equal("x:y", restored.label)
        assert.are.equal("plain", restored.name)
        assert.are.same({0.25, 0.75}, restored.alpha:totable())
        assert.is_nil(restored.skipped)
    end)
end)

describe("dga.lock", function()
    it("is released once, by release, __close or the collector", function()
        local path = tmpdir("lockobj") .. "/x.lock"
        local l = dga.lock(path)
        assert.is_true(l:held())
        assert.are.equal("dga.lock (" .. path .. ")", tostring(l))
        l:release()
        l:release()
        assert.is_false(l:held())
        assert.are.equal("dga.lock (released)", tostring(l))
        do
            local l2 <close> = dga.lock(path)   -- luacheck: no unused
            local ok, err = pcall(dga.lock, path)
            assert.is_false(ok)
            local me = io.open("/proc/self/stat"):read("l"):match("^(%d+)")
            assert.matches(path .. ": locked by process " .. me .. ", which is writing there", err, 1, true)
        end
        dga.lock(path)   -- dropped: the collector releases it
        collectgarbage("collect")
        dga.lock(path):release()
        assert.error_matches(function() dga.lock(tmpdir("lockobj") .. "/no/such/dir/x.lock") end,
                             "x.lock: cannot open the lock file: No such file or directory", 1, true)
    end)
end)

describe("trainer alignment rounds", function()
    local align = require "trainer.align"
    local V, T, B = fixture.V, fixture.L - 1, 4
    local data = fixture.data(7)
    local model = dga.gpt{layers = 1, width = 16, heads = 2, context = T, vocab = V, batch = B, seed = 4}
    local function batch(seqs, first)
        return {trainer.rows_to_io(seqs, {first, first + 1, first + 2, first + 3})}
    end
    local target = batch(data.specific_train, 1)
    local probes = {batch(data.domains[1], 1), false, batch(data.domains[2], 5), target}
    local function round(normalize, lr_scale, lr)
        return align.round(model, target, probes, 4, {method = "exact", normalize = normalize,
                                                      lr_scale = lr_scale}, lr)
    end
    local raw = round("none")

    it("gives the raw inner products with normalize = none, 0 where there is no probe", function()
        local r = dga.align(model, target[1], target[2], {probes[1], probes[3], probes[4]})
        model:zero_grad()
        assert.are.same({r.dot[1], 0, r.dot[2], r.dot[3]}, raw.align:totable())
        assert.are.same({r.grad_norm[1], 0, r.grad_norm[2], r.grad_norm[3]}, raw.grad_norm:totable())
        assert.are.equal(0, raw.loss[2])
        -- the target batch against itself: <g_t, g_t> = |g_t|^2
        assert.is_true(math.abs(raw.align[4] / raw.target_norm ^ 2 - 1) < 1e-4)
    end)

    it("divides by |g_i| |g_t| with normalize = cosine", function()
        local r = round("cosine")
        assert.are.same(raw.align:totable(), r.dot:totable())   -- the raw products stay
        assert.is_true(math.abs(r.align[4] - 1) < 1e-4, "a batch against itself: cosine 1")
        assert.are.equal(0, r.align[2])
        for _, i in ipairs{1, 3} do
            local expect = raw.align[i] / (raw.grad_norm[i] * raw.target_norm)
            assert.is_true(math.abs(r.align[i] - expect) <= 1e-6 * math.abs(expect), tostring(i))
            assert.is_true(math.abs(r.align[i]) <= 1 + 1e-6)
        end
    end)

    it("divides by the mean norm of the probed components with normalize = mean_norm", function()
        local r = round("mean_norm")
        local mean = (raw.grad_norm[1] + raw.grad_norm[3] + raw.grad_norm[4]) / 3
        for _, i in ipairs{1, 3, 4} do
            local expect = raw.align[i] / mean
            assert.is_true(math.abs(r.align[i] - expect) <= 1e-6 * math.abs(expect), tostring(i))
        end
        assert.are.equal(0, r.align[2])
    end)

    it("multiplies by the learning rate with lr_scale", function()
        local lr = 0.25   -- a power of two: the product is exact
        assert.are.same(raw.align:scale(lr):totable(), round("none", true, lr).align:totable())
        local c, cl = round("cosine"), round("cosine", true, lr)
        for i = 1, 4 do assert.are.equal(c.align[i] * lr, cl.align[i]) end
    end)

    it("refuses a normalisation the method cannot give", function()
        local d = tmpdir("norm_fd")
        assert.error_matches(function()
            trainer.new(fixture.config(d, {align = {normalize = "cosine", method = "fd"}}))
        end, 'needs per-domain gradient norms, which align.method = "fd" does not compute', 1, true)
        assert.error_matches(function()
            trainer.new(fixture.config(d, {align = {normalize = "cos"}}))
        end, 'align.normalize = cos, expected "none", "cosine" or "mean_norm"', 1, true)
    end)

    it("takes a policy's own probe batches", function()
        -- a DGA policy that probes domain 2 with domain 1's data and leaves domain 3 out
        local calls, run_model = 0, nil
        package.preload["policies.probing_test"] = function()
            local dga_policy = require "policies.dga"
            local P = setmetatable({}, {__index = dga_policy})
            P.__index = P
            function P.new(opts)
                return setmetatable({name = "probing_test", opts = dga_policy.options("probing_test", opts)}, P)
            end
            function P:probes(ctx)
                calls = calls + 1
                -- what a policy can use: the model, and a batch of any component
                assert.are.equal(run_model(), ctx.model)
                local x, y = ctx:probe(3, 2)
                assert.are.same({2, fixture.L - 1}, x:shape())
                assert.are.same({2, fixture.L - 1}, y:shape())
                local p = ctx:probes()
                return {p[1], p[1], false}
            end
            return P
        end
        local d = tmpdir("probing") .. "/run"
        local run = trainer.new(fixture.config(d, {steps = 8, policy = {name = "probing_test", eta = 1}}),
                                {quiet = true})
        function run_model() return run.model end
        run:train()
        assert.are.equal(1, calls)   -- one update, at step 4
        local recs = csvlog.read_records(d .. "/alignments.csv")
        assert.are.equal(3, #recs)
        assert.are.equal(recs[1].align, recs[2].align)
        assert.are.equal(recs[1].loss, recs[2].loss)
        assert.are.same({0, 0, 0}, {recs[3].align, recs[3].loss, recs[3].grad_norm})
    end)
end)

describe("util.csvlog", function()
    it("quotes per RFC 4180 and reads back what it wrote", function()
        local d = tmpdir("csv")
        local path = d .. "/x.csv"
        local log = csvlog.open(path, {"step", "name", "value"})
        log:write{step = 1, name = 'a,"b"\nc', value = 0.1}
        log:write{step = 2, name = "plain", value = 1 / 3}
        log:write_list{3, "", 2.5}
        log:close()
        local text = runinfo.read_file(path)
        assert.are.equal('step,name,value\r\n1,"a,""b""\nc",0.1\r\n', text:sub(1, 36))
        local header, rows = csvlog.read(path)
        assert.are.same({"step", "name", "value"}, header)
        assert.are.equal('a,"b"\nc', rows[1][2])
        assert.is_true(math.abs(tonumber(rows[2][3]) - 1 / 3) < 1e-8)
        assert.are.equal("", rows[3][2])
        assert.error_matches(function() log = csvlog.open(path, {"a"}); log:write{nope = 1} end,
                             path .. ": no column 'nope'", 1, true)
    end)

    it("truncates after a step, dropping a torn last record", function()
        local d = tmpdir("csv2")
        local path = d .. "/m.csv"
        local log = csvlog.open(path, {"step", "loss"})
        for s = 0, 40, 10 do log:write{step = s, loss = s / 7} end
        log:close()
        local f = assert(io.open(path, "ab"))
        f:write("50,0.12")   -- a record cut by a crash
        f:close()
        assert.are.equal(3, csvlog.truncate_after(path, "step", 20))
        local _, rows = csvlog.read(path)
        assert.are.same({"0", "10", "20"}, {rows[1][1], rows[2][1], rows[3][1]})
        -- appending checks the header
        assert.error_matches(function() csvlog.open(path, {"step", "other"}, "a") end, "differs")
        csvlog.open(path, {"step", "loss"}, "a"):close()
    end)
end)

describe("data.corpus", function()
    local data = require "data.corpus"
    it("accepts a given directory only in the expected layout", function()
        local d = tmpdir("mmlu")
        assert.is_nil((data.find_mmlu(d)))
        runinfo.mkdir_p(d .. "/dev")
        runinfo.mkdir_p(d .. "/test")
        assert.is_nil((data.find_mmlu(d)))   -- the directories alone are not a release
        runinfo.write_atomic(d .. "/dev/anatomy_dev.csv", "q,a,b,c,d,A\n")
        assert.is_nil((data.find_mmlu(d)))
        runinfo.write_atomic(d .. "/test/anatomy_test.csv", "q,a,b,c,d,A\n")
        assert.are.equal(d, data.find_mmlu(d))
        assert.is_nil((data.find_corpus(d .. "/dev")))
    end)

    it("says where to put MMLU and exits non-zero when it is nowhere", function()
        local exe = os.getenv("DGALUA") or "build/dgalua"
        local p = io.popen(string.format(
            "DGA_SHARED_DATA=/nonexistent %s -e 'require(\"data.corpus\").require_mmlu(\"/nonexistent/mmlu\")' 2>&1",
            exe))
        local out = p:read("a")
        local ok, _, code = p:close()
        assert.is_falsy(ok)
        assert.are.equal(2, code)
        assert.is_truthy(out:find("dev/<subject>_dev.csv", 1, true), out)
        assert.is_truthy(out:find("--mmlu DIR", 1, true), out)
    end)
end)

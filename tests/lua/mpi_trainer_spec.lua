-- Data-parallel training and distributed alignment rounds (scripts/trainer/data_parallel.lua) on two
-- ranks, against the same runs on one rank. Needs mpirun and the MPI build beside $DGALUA
-- (<build>/mpi/dgalua, which `make test` builds where mpicc exists); pending otherwise.
-- Every process runs with one thread, and every mpirun under `timeout`, so a hang fails.
--
-- Tolerance: two ranks sum two half-batch gradients where one rank computes the batch's
-- gradient in one pass, so the float32 sums round differently; over 20 AdamW steps of the tiny
-- model the training losses stay within 1e-4 of each other (they differ around 1e-6).
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua"
local h = require "tests.lua.helpers"
local csvlog = require "util.csvlog"

local TOL = 1e-4
local TIMEOUT = "timeout -k 5 180 "

local function setup()
    local two, exe = h.mpi_two_ranks()
    if not two then return nil, exe end
    return {two = two .. h.shell_quote(exe) .. " --threads 1",
            two_own = two .. "-x DGA_DATA_PARALLEL=0 " .. h.shell_quote(exe) .. " --threads 1",
            two_after = two .. "-x DGA_OVERLAP_ALLREDUCE=0 " .. h.shell_quote(exe) .. " --threads 1",
            one = TIMEOUT .. h.shell_quote(h.DGALUA) .. " --threads 1"}
end

describe("data-parallel training on two ranks (mpirun)", function()
    local cmd, why = setup()
    if not cmd then
        pending(why)
        return
    end
    local dir
    before_each(function() dir = h.tmpdir() end)
    after_each(function() h.rm(dir) end)

    -- Runs `body` (Lua, with `fixture`, `trainer`, `rank` and `dir` in scope) with launcher
    -- `how` ("one" or "two"); returns the exit code, stdout and stderr.
    local n = 0
    local function run(how, body)
        n = n + 1
        local path = string.format("%s/s%d.lua", dir, n)
        h.write(path, string.format([[
package.path = %q .. "/?.lua;" .. package.path
local fixture = require "trainer_fixture"
local trainer = require "trainer"
local rank, dir = dga.rank(), %q
%s
]], here, dir, body))
        return h.run(cmd[how] .. " " .. h.shell_quote(path), path .. ".err")
    end

    local function metrics(d)
        local recs = csvlog.read_records(d .. "/metrics.csv")
        assert.is_truthy(recs, d .. "/metrics.csv is missing")
        return recs
    end

    local function close_rows(a, b, key)
        assert.are.equal(#a, #b)
        for i = 1, #a do
            assert.are.equal(a[i].step, b[i].step)
            local x, y = a[i][key], b[i][key]
            if type(x) == "number" then
                assert.is_true(math.abs(x - y) <= TOL,
                               string.format("%s at step %d: %.9g vs %.9g", key, a[i].step, x, y))
            else
                assert.are.equal(x, y)
            end
        end
    end

    local CFG = "{steps = 20, eval_every = 1, checkpoint_every = 0, check_replicas = true}"

    it("gives the one-rank losses, the same weights on both ranks, and only rank 0 writes", function()
        for _, batch in ipairs{4, 5} do   -- 5: the ranks take 2 and 3 rows
            -- eval_batch 3: the 8 held-out sequences are 3 batches, split 1 and 2 over the ranks
            local over = CFG:gsub("}$", ", batch = " .. batch .. ", eval_batch = 3}")
            local code, _, err = run("one", string.format(
                "trainer.run(fixture.config(dir .. '/one', %s), {quiet = true})", over))
            assert.are.equal(0, code, err)
            local out
            code, out, err = run("two", string.format([[
local s = trainer.run(fixture.config(dir .. '/two' .. (rank == 0 and '' or '-rank1'), %s), {quiet = true})
print(rank, s.model:checksum(), string.format("%%a", s.specific_loss))
]], over))
            assert.are.equal(0, code, err)
            local sums, spec = {}, {}
            for r, c, l in out:gmatch("(%d)%s+(%x+)%s+(%S+)") do sums[r], spec[r] = c, l end
            assert.is_truthy(sums["0"] and sums["1"], out)
            assert.are.equal(sums["0"], sums["1"])
            assert.are.equal(spec["0"], spec["1"])
            assert.is_false(h.exists(dir .. "/two-rank1"), "rank 1 wrote a run directory")
            local a, b = metrics(dir .. "/one"), metrics(dir .. "/two")
            assert.are.equal(21, #a)
            for _, key in ipairs{"train_loss", "specific_loss", "generic_loss", "grad_norm", "tokens"} do
                close_rows(a, b, key)
            end
            -- at step 0 the parameters are the same: the split evaluation gives one rank's bits
            assert.are.equal(0, a[1].step)
            assert.are.equal(a[1].specific_loss, b[1].specific_loss)
            assert.are.equal(a[1].generic_loss, b[1].generic_loss)
            -- the policy saw the same alignments, to the tolerance
            local wa = csvlog.read_records(dir .. "/one/weights.csv")
            local wb = csvlog.read_records(dir .. "/two/weights.csv")
            close_rows(wa, wb, "weight")
            h.rm(dir .. "/one")
            h.rm(dir .. "/two")
        end
    end)

    it("splits a held-out evaluation over the ranks and gets one rank's value, bit for bit", function()
        local code, out, err = run("two", [[
local dp = require("trainer.data_parallel").new({})
local m = dga.gpt{layers = 1, width = 16, heads = 2, context = 8, vocab = 32, batch = 3, seed = 5}
local evaluated, row_losses = 0, dga.eval_row_losses
dga.eval_row_losses = function(model, seqs, b)   -- counts this rank's rows
  evaluated = evaluated + seqs:shape()[1]
  return row_losses(model, seqs, b)
end
for _, n in ipairs{7, 2, 1} do   -- 3, 1 and 1 batches of 3: both ranks, one, one
  local rows = {}
  for i = 1, n do
    rows[i] = {}
    for t = 1, 9 do rows[i][t] = (i * 5 + t * t * 3) % 32 end
  end
  local seqs = dga.tensor(rows, "int32")
  print("eval", rank, n, string.format("%a", dp:eval_seqs(m, seqs, 3)),
        string.format("%a", dga.eval_loss_seqs(m, seqs, 3)))
end
print("rows", rank, dp.size, evaluated)
-- a bad token id in rank 1's rows: both ranks raise rank 1's message
local bad = {}
for i = 1, 7 do bad[i] = {} for t = 1, 9 do bad[i][t] = (i + t) % 32 end end
bad[6][4] = 99
local ok, e = pcall(dp.eval_seqs, dp, m, dga.tensor(bad, "int32"), 3)
print("error", rank, tostring(ok), e)
]])
        assert.are.equal(0, code, err)
        local seen = 0
        for _, _, split, whole in out:gmatch("eval\t(%d)\t(%d)\t(%S+)\t(%S+)") do
            assert.are.equal(whole, split)
            seen = seen + 1
        end
        assert.are.equal(6, seen, out)
        -- the work was split: of 7 + 2 + 1 rows, rank 0 took 3 (one batch of the 7), rank 1 the rest
        h.contains(out, "rows\t0\t2\t3\n")
        h.contains(out, "rows\t1\t2\t7\n")
        local raised = 0
        for line in out:gmatch("error\t[01]\tfalse\t[^\n]*") do
            h.contains(line, "token id 99 at [3,4] outside vocabulary [0, 32) (rows 4-7 of 7, counted from the "
                             .. "first of those, evaluated on rank 1)")
            raised = raised + 1
        end
        assert.are.equal(2, raised, out)
    end)

    it("gives the same run with the all-reduce overlapped with the backward or after it", function()
        -- two ranks: one addition per gradient element either way, so the same bits
        local body = [[
local s = trainer.run(fixture.config(dir .. '/%s', {steps = 12, eval_every = 2, batch = 5,
  model = {layers = 2, width = 16, heads = 2}}), {quiet = true})
print(rank, require("trainer.data_parallel").new({}).overlap, s.model:checksum())
]]
        local code, on, err = run("two", body:format("on"))
        assert.are.equal(0, code, err)
        local off
        code, off, err = run("two_after", body:format("off"))
        assert.are.equal(0, code, err)
        h.contains(on, "0\ttrue\t")
        h.contains(off, "0\tfalse\t")
        -- the same parameters on both ranks of both runs
        local sums = {}
        for sum in (on .. off):gmatch("%d%s+%a+%s+(%x+)") do sums[#sums + 1] = sum end
        assert.are.equal(4, #sums)
        for i = 2, 4 do assert.are.equal(sums[1], sums[i]) end
        local a = h.rows_without_seconds(dir .. "/on/metrics.csv")
        assert.are.equal(7, #a)
        assert.are.same(a, h.rows_without_seconds(dir .. "/off/metrics.csv"))
    end)

    it("gives the one-rank alignments exactly, for exact, fd and jvp rounds", function()
        local body = [[
local dp = require("trainer.data_parallel").new({})
local align = require "trainer.align"
local d = fixture.data(7)
local model = dga.gpt{layers = 1, width = 16, heads = 2, context = 16, vocab = 32, batch = 4, seed = 5}
local function io(seqs, first)
  local rows = {}
  for b = 1, 4 do rows[b] = first + b end
  return {require("trainer.sources").rows_to_io(seqs, rows)}
end
local target = io(d.specific_train, 0)
-- five probes, one missing: the two ranks take two and three of the four present
local probes = {io(d.domains[1], 0), io(d.domains[2], 4), false, io(d.domains[3], 8), io(d.domains[1], 20)}
for _, method in ipairs{"exact", "fd", "jvp"} do
  local r = align.round(model, target, probes, 5, {method = method, normalize = "none"}, nil,
                        dp.size > 1 and dp or nil)
  local out = {}
  for j = 1, 5 do out[#out + 1] = string.format("%a %a %a", r.align[j], r.loss[j], r.grad_norm[j]) end
  print(rank, method, string.format("%a %a", r.target_norm, r.target_loss), table.concat(out, " "))
end
]]
        local code, one, err = run("one", body)
        assert.are.equal(0, code, err)
        local two
        code, two, err = run("two", body)
        assert.are.equal(0, code, err)
        local want = {}
        for method, rest in one:gmatch("0%s+(%a+)%s+([^\n]+)") do want[method] = rest end
        local seen = 0
        for r, method, rest in two:gmatch("(%d)%s+(%a+)%s+([^\n]+)") do
            assert.are.equal(want[method], rest, "rank " .. r .. ", " .. method)
            seen = seen + 1
        end
        assert.are.equal(6, seen)
    end)

    it("resumes under MPI as if it never stopped, and on one rank from a two-rank checkpoint", function()
        local over = "{steps = 16, checkpoint_every = 4}"
        local code, _, err = run("two", string.format(
            "trainer.run(fixture.config(dir .. '/full', %s), {quiet = true})", over))
        assert.are.equal(0, code, err)
        code, _, err = run("two", string.format(
            "trainer.run(fixture.config(dir .. '/cut', %s), {quiet = true, stop_at = 8})", over))
        assert.are.equal(0, code, err)
        code, _, err = run("two", string.format(
            "trainer.run(fixture.config(dir .. '/cut', %s), {quiet = true, resume = true})", over))
        assert.are.equal(0, code, err)
        local a, b = metrics(dir .. "/full"), metrics(dir .. "/cut")
        assert.are.equal(5, #a)
        for i = 1, #a do
            a[i].seconds, b[i].seconds = nil, nil
            assert.are.same(a[i], b[i])
        end
        -- one rank continues a two-rank checkpoint, and says so
        code, _, err = run("two", string.format(
            "trainer.run(fixture.config(dir .. '/half', %s), {quiet = true, stop_at = 8})", over))
        assert.are.equal(0, code, err)
        code, _, err = run("one", string.format(
            "trainer.run(fixture.config(dir .. '/half', %s), {resume = true, quiet = true})", over))
        assert.are.equal(0, code, err)
        h.contains(err, "was written by 2 ranks, resuming on 1")   -- quiet silences progress only
        close_rows(a, metrics(dir .. "/half"), "train_loss")
    end)

    it("ends the job non-zero with a message when a rank fails mid-run, or the replicas drift", function()
        local code, _, err = run("two", [[
trainer.run(fixture.config(dir .. '/dies'), {quiet = true, hooks = {after_step = function(step)
  if step == 3 and rank == 1 then error("rank one fails at step 3") end
end}})
print("rank " .. rank .. " should never finish")
]])
        assert.are_not.equal(0, code)
        h.contains(err, "rank one fails at step 3")
        h.contains(err, "rank 1 of 2 exits with status 1; aborting the job")
        -- rank 1 changes `mutation` (Lua, with the Run r in scope) after step 2; the check at
        -- step 4 must stop the job before it finishes
        local function drifts(name, mutation, expected, over)
            local c, out, e = run("two", string.format([[
trainer.run(fixture.config(dir .. '/%s', %s), {quiet = true, hooks = {after_step = function(step, r)
  if step == 2 and rank == 1 then %s end
end}})
print("finished")
]], name, over or "{check_replicas = true}", mutation))
            assert.are_not.equal(0, c)
            assert.is_nil(out:find("finished", 1, true))
            h.contains(e, expected)
        end
        drifts("drift", "local p = r.model:params(); p[1] = p[1] + 1e-3; r.model:set_params(p)",
               "check_replicas: step 4: the parameters of rank 1 differ from rank 0's")
        -- a policy that decides differently on one rank: the same parameters, other weights
        -- (the cheap weights check at every update finds it first, with check_replicas or without)
        drifts("drift-mix", "local a = r.policy.alpha; a[1] = a[1] * 1.5; a:normalize_()",
               "step 4: the mixture weights of rank 1 differ from rank 0's: the policy decided differently")
        drifts("drift-mix-default", "local a = r.policy.alpha; a[1] = a[1] * 1.5; a:normalize_()",
               "step 4: the mixture weights of rank 1 differ from rank 0's: the policy decided differently", "{}")
    end)

    it("spreads a sweep's runs over the ranks, one-rank runs, and only rank 0 gets the results", function()
        local code, out, err = run("two", [[
local sweep, json = require "harness.sweep", require "util.json"
local p = require("argparse")("t", "test")
require("harness.experiment").add_common_options(p, {out = dir .. "/sw"})
sweep.add_options(p)
local a = p:parse{"--seeds", "1,2", "--out", dir .. "/sw"}
local res = sweep.run{name = "t", out = a.out, args = a, argv = {}, quiet = true,
  cells = {{id = "u", policy = "uniform"}, {id = "d", policy = "dga"}},
  run_cell = function(cell, seed, d, topts)
    local cfg = fixture.config(d, {steps = 4, seed = seed, policy = {name = cell.policy}})
    local s = trainer.run(cfg, topts)
    return {rank = dga.rank(), loss = s.specific_loss}
  end}
if not res then print("worker", rank) return end
print("returned", rank, #res)
]])
        assert.are.equal(0, code, err)
        h.contains(out, "returned\t0\t4")
        assert.is_nil(out:find("returned\t1", 1, false))
        h.contains(out, "worker\t1")     -- rank 1's sweep.run returned nil, and its script ended
        local json = require "util.json"
        local got = {}
        for _, pair in ipairs{"u/seed-1", "d/seed-1", "u/seed-2", "d/seed-2"} do
            got[#got + 1] = json.read_file(dir .. "/sw/" .. pair .. "/summary.json").metrics.rank
        end
        assert.are.same({0, 1, 0, 1}, got)

        -- one pair: one data-parallel run over both ranks, its summary written once by rank 0
        code, out, err = run("two", [[
local sweep = require "harness.sweep"
local p = require("argparse")("t", "test")
require("harness.experiment").add_common_options(p, {out = dir .. "/one"})
sweep.add_options(p)
local a = p:parse{"--seeds", "3", "--out", dir .. "/one"}
local res = sweep.run{name = "t", out = a.out, args = a, argv = {}, quiet = true,
  cells = {{id = "d", policy = "dga"}},
  run_cell = function(cell, seed, d, topts)
    local s = trainer.run(fixture.config(d, {steps = 4, seed = seed}), topts)
    return {ranks = require("trainer.data_parallel").new({}).size, loss = s.specific_loss}
  end}
if not res then print("worker", rank) return end
print("returned", rank, #res)
]])
        assert.are.equal(0, code, err)
        h.contains(out, "returned\t0\t1")
        assert.is_nil(out:find("returned\t1", 1, false))
        h.contains(out, "worker\t1")
        assert.are.equal(2, json.read_file(dir .. "/one/d/seed-3/summary.json").metrics.ranks)
    end)

    it("lets every rank run a run of its own with DGA_DATA_PARALLEL=0", function()
        local code, out, err = run("two_own", [[
local s = trainer.run(fixture.config(dir .. '/own' .. rank, {steps = 4, batch = 3}), {quiet = true})
print(rank, s.step)
]])
        assert.are.equal(0, code, err)
        h.contains(out, "0\t4")
        h.contains(out, "1\t4")
        assert.is_true(h.exists(dir .. "/own0/metrics.csv"))
        assert.is_true(h.exists(dir .. "/own1/metrics.csv"))
    end)
end)

-- The collectives: dga.rank, dga.size, dga.allreduce, dga.bcast, dga.allgather, and the
-- gradient all-reduce overlapped with the backward (m:backward_allreduce) against the one
-- after it (m:backward, m:allreduce_grads).
-- In this process (a dgalua without MPI) they are the one-rank stub. With mpirun on PATH and
-- the MPI build beside $DGALUA (<build>/mpi/dgalua, which `make test` builds where mpicc
-- exists), a script runs on two ranks and the values are checked here; so is a rank that
-- fails while the other waits in a collective: the job must end non-zero with a message.
local h = require "tests.lua.helpers"

-- Both data-parallel gradient paths on one model and this rank's batch: the gradient of
-- m:backward then m:allreduce_grads(scale), and of m:backward_allreduce(scale), as tensors.
local GRADS = [[
local function both_paths(scale, rows)
  local m = dga.gpt{layers = 3, width = 16, heads = 2, context = 8, vocab = 32, batch = 3, seed = 3}
  local rng = dga.rng(10 + dga.rank())
  local x, y = dga.zeros(rows, 8, "int32"), dga.zeros(rows, 8, "int32")
  for i = 1, rows * 8 do x[i], y[i] = rng:below(32), rng:below(32) end
  m:zero_grad()
  m:forward(x, y)
  m:backward()
  m:allreduce_grads(scale)
  local plain = m:grads()
  m:zero_grad()
  m:forward(x, y)
  assert(m:backward_allreduce(scale) == m)
  return plain, m:grads(), m, x, y
end
local function same_bits(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if string.format("%a", a[i]) ~= string.format("%a", b[i]) then return false end
  end
  return true
end
]]

local function mpi_setup()
    local two, exe = h.mpi_two_ranks()
    if not two then return nil, exe end
    return two .. h.shell_quote(exe)
end

describe("collectives, one rank (no MPI)", function()
    if dga.has_mpi() then
        pending("this dgalua is built with MPI; the two-rank tests cover it")
        return
    end

    it("is rank 0 of 1", function()
        assert.are.equal(0, dga.rank())
        assert.are.equal(1, dga.size())
    end)

    it("reduces, broadcasts and gathers one buffer to itself", function()
        local t = dga.tensor({1.5, -2, 3})
        assert.are.equal(t, dga.allreduce(t))
        assert.are.same({1.5, -2, 3}, t:totable())
        dga.allreduce(t, "mean")
        assert.are.same({1.5, -2, 3}, t:totable())
        assert.are.equal("text", dga.bcast("text", 0))
        local i = dga.tensor({4, 5}, "int32")
        assert.are.same({4, 5}, dga.bcast(i, 0):totable())
        local all, counts = dga.allgather(dga.tensor({{1, 2}, {3, 4}}))
        assert.are.same({1, 2, 3, 4}, all:totable())
        assert.are.same({4}, counts)
    end)

    it("backward_allreduce is backward then the scaling, bit for bit", function()
        local both_paths, same_bits = load(GRADS .. "return both_paths, same_bits")()
        for _, s in ipairs{1, 0.4, 2 / 3} do
            local plain, overlapped, m = both_paths(s, 3)
            assert.is_true(same_bits(plain, overlapped), "scale " .. s)
            assert.is_true(m:grad_norm() > 0)
        end
        -- by hand: 0.375 is a float32, so each double product rounds as float32's does
        local plain, _, m, x, y = both_paths(1, 2)
        local want = plain:clone()
        for i = 1, #want do want[i] = want[i] * 0.375 end
        assert.is_false(same_bits(plain, want))   -- same_bits can say no
        m:zero_grad()
        m:forward(x, y)
        m:backward_allreduce(0.375)
        assert.is_true(same_bits(want, m:grads()))
        m = dga.gpt{layers = 1, width = 8, heads = 2, context = 4, vocab = 8, batch = 1}
        h.raises("no forward pass", m.backward_allreduce, m)
        h.raises("scale must be a finite number", m.backward_allreduce, m, 0 / 0)
    end)

    it("names bad arguments", function()
        h.raises("root must be a rank in 0..0", dga.bcast, "x", 1)
        h.raises("expected a float32 tensor", dga.allreduce, dga.tensor({1}, "int32"))
        h.raises("invalid option 'max'", dga.allreduce, dga.tensor({1}), "max")
        h.raises("expected a float32 tensor", dga.allgather, dga.tensor({1}, "int32"))
    end)
end)

describe("collectives on two ranks (mpirun)", function()
    local cmd, why = mpi_setup()
    if not cmd then
        pending(why)
        return
    end
    local dir
    before_each(function() dir = h.tmpdir() end)
    after_each(function() h.rm(dir) end)

    local function run(script)
        h.write(dir .. "/s.lua", script)
        return h.run(cmd .. " " .. h.shell_quote(dir .. "/s.lua"), dir .. "/err")
    end

    it("give the right values on every rank", function()
        local code, out, err = run([[
local r, n = dga.rank(), dga.size()
local function show(key, t) print(("%d %s %s"):format(r, key, table.concat(t, ","))) end
show("size", {n})
local t = dga.tensor({r + 1, 10 * (r + 1), 0.5})
show("sum", dga.allreduce(t):totable())
show("mean", dga.allreduce(dga.tensor({r + 1, 10 * (r + 1), 0.5}), "mean"):totable())
-- a longer buffer: the element sums are exact in float32
local big = dga.zeros(100003)
for i = 1, 100003, 997 do big[i] = i * (r + 1) end
dga.allreduce(big)
local ok = true
for i = 1, 100003 do
  local want = (i - 1) % 997 == 0 and 3 * i or 0
  if big[i] ~= want then ok = false end
end
show("big", {tostring(ok)})
show("bcast", dga.bcast(dga.tensor({r, r, r}), 1):totable())
show("bcasti", dga.bcast(dga.tensor({r + 7}, "int32"), 0):totable())
show("str", {dga.bcast(r == 1 and "from one" or nil, 1)})
local mine = {}
for i = 1, r + 1 do mine[i] = r + i / 4 end
local all, counts = dga.allgather(dga.tensor(mine))
show("gather", all:totable())
show("counts", counts)
show("badroot", {select(2, pcall(dga.bcast, "x", 2)):match("root must be a rank in 0%.%.1") and "ok" or "no"})
]])
        assert.are.equal(0, code, err)
        local got = {}
        for line in out:gmatch("[^\n]+") do
            local r, key, v = line:match("^(%d) (%w+) (.*)$")
            if r then got[r .. key] = v end
        end
        for r = 0, 1 do
            local function v(key) return got[r .. key] end
            assert.are.equal("2", v("size"))
            assert.are.equal("3.0,30.0,1.0", v("sum"))
            assert.are.equal("1.5,15.0,0.5", v("mean"))
            assert.are.equal("true", v("big"))
            assert.are.equal("1.0,1.0,1.0", v("bcast"))
            assert.are.equal("7", v("bcasti"))
            assert.are.equal("from one", v("str"))
            assert.are.equal("0.25,1.25,1.5", v("gather"))
            assert.are.equal("1,2", v("counts"))
            assert.are.equal("ok", v("badroot"))
        end
    end)

    it("overlap the gradient all-reduce with the backward: the same bits as after it", function()
        -- the ranks take 2 and 3 rows of 5, scaled by their share as the trainer does
        local code, out, err = run(GRADS .. [[
local r = dga.rank()
local rows = r == 0 and 2 or 3
local plain, overlapped, m = both_paths(rows / 5, rows)
m:set_params(overlapped)   -- the checksum of the gradient's bits
print(r, tostring(same_bits(plain, overlapped)), m:checksum(), m:grad_norm() > 0)
]])
        assert.are.equal(0, code, err)
        local sums = {}
        for r, same, sum, nz in out:gmatch("(%d)%s+(%a+)%s+(%x+)%s+(%a+)") do
            assert.are.equal("true", same, "rank " .. r)
            assert.are.equal("true", nz, "rank " .. r)
            sums[r] = sum
        end
        assert.is_truthy(sums["0"] and sums["1"], out)
        assert.are.equal(sums["0"], sums["1"])
    end)

    it("end the job when a rank cannot start its overlapped all-reduce", function()
        local code, out, err = run([[
local m = dga.gpt{layers = 2, width = 16, heads = 2, context = 8, vocab = 32, batch = 1}
local x = dga.tensor({{1, 2, 3}}, "int32")
if dga.rank() == 0 then m:forward(x, x) end
m:backward_allreduce(0.5)   -- rank 1: no forward
print("rank " .. dga.rank() .. " should never get here")
]])
        assert.are_not.equal(0, code)
        assert.is_nil(out:find("should never get here", 1, true))
        h.contains(err, "no forward pass")
        h.contains(err, "rank 1 of 2 exits with status 1; aborting the job")
    end)

    it("end the job with a message when a rank fails while the other waits", function()
        local code, _, err = run([[
local t = dga.tensor({1, 2, 3})
if dga.rank() == 1 then error("rank one gives up") end
dga.allreduce(t)
print("rank 0 should never get here")
]])
        assert.are_not.equal(0, code)
        h.contains(err, "rank one gives up")
        h.contains(err, "rank 1 of 2 exits with status 1; aborting the job")
    end)

    it("end the job when a rank is killed", function()
        local code, out, err = run([[
local t = dga.tensor({1, 2, 3})
if dga.rank() == 1 then
  local pid = io.open("/proc/self/stat"):read("n")
  os.execute("kill -9 " .. pid)
end
dga.allreduce(t)
print("rank 0 should never get here")
]])
        assert.are_not.equal(0, code)
        assert.is_nil(out:find("should never get here", 1, true))
        h.contains(out .. err, "exited on signal 9")
    end)
end)

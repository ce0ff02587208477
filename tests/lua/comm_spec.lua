-- The collectives: dga.rank, dga.size, dga.allreduce, dga.bcast, dga.allgather.
-- In this process (a dgalua without MPI) they are the one-rank stub. With mpirun on PATH and
-- the MPI build beside $DGALUA (<build>/mpi/dgalua, which `make test` builds where mpicc
-- exists), a script runs on two ranks and the values are checked here; so is a rank that
-- fails while the other waits in a collective: the job must end non-zero with a message.
local h = require "tests.lua.helpers"

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

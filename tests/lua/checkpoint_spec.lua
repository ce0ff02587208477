-- dga.save_checkpoint / dga.load_checkpoint: exact resume, extras, and clear errors.
local dga = require "dga"

local CFG = {layers = 2, width = 16, heads = 2, context = 8, vocab = 32, batch = 2}
local dir

local h = require "tests.lua.helpers"
local err_of, write_all = h.err_of, h.write
local function read_all(path) return assert(h.read(path)) end

local function batch(shift)
    local inp, tgt = {}, {}
    for b = 1, 2 do
        inp[b], tgt[b] = {}, {}
        for t = 1, 8 do
            inp[b][t] = (b * 11 + t * 7 + shift) % 32
            tgt[b][t] = (b * 5 + t * 3 + shift) % 32
        end
    end
    return dga.tensor(inp, "int32"), dga.tensor(tgt, "int32")
end

local function step(m, opt, shift)
    local inp, tgt = batch(shift)
    m:zero_grad()
    local loss = m:forward(inp, tgt)
    m:backward()
    opt:step()
    return loss
end

local function model(seed)
    local c = {}
    for k, v in pairs(CFG) do c[k] = v end
    c.seed = seed
    return dga.gpt(c)
end

setup(function()
    dir = h.tmpdir()
end)

teardown(function()
    h.rm(dir)
end)

describe("checkpoints", function()
    it("resume exactly: params, moments, steps and the next losses", function()
        local a = model(1)
        local oa = dga.adamw(a, {lr = 1e-2})
        for s = 1, 3 do step(a, oa, s) end
        local path = dir .. "/resume.safetensors"
        dga.save_checkpoint(path, {model = a, optimizer = oa})

        local b = model(99)
        local ob = dga.adamw(b, {lr = 5e-3, beta2 = 0.9})
        local ck = dga.load_checkpoint(path, {model = b, optimizer = ob})
        assert.equal(b, ck.model)
        assert.equal(3, ob:steps())
        assert.equal(3, ck.steps)
        assert.is_true(math.abs(ob:config().beta2 - 0.95) < 1e-7)   -- restored from the file
        assert.equal(0, (a:params() - b:params()):norm())
        -- identical moments show as identical updates, step after step
        for s = 4, 6 do assert.equal(step(a, oa, s), step(b, ob, s)) end
        assert.equal(0, (a:params() - b:params()):norm())
    end)

    it("creates a model when none is given and round-trips extras", function()
        local a = model(2)
        local r = dga.rng(5)
        r:uniform()
        local path = dir .. "/extras.safetensors"
        dga.save_checkpoint(path, {model = a,
            tensors = {weights = dga.vec{0.25, 0.75}, ids = dga.arange(4):reshape(2, 2),
                       ["policy.ema"] = {0.5, 0.5}},
            blobs = {rng = r:state(), empty = ""},
            meta = {name = "run1", step = 12, lr = 0.003, whole = 3.0, huge = 2 ^ 70}})
        local ck = dga.load_checkpoint(path)
        assert.same({layers = 2, width = 16, heads = 2, context = 8, vocab = 32, batch = 2},
                    ck.config)
        assert.same(ck.config, ck.model:config())
        assert.equal(0, (ck.model:params() - a:params()):norm())
        assert.same({0.25, 0.75}, ck.tensors.weights:totable())
        assert.equal("int32", ck.tensors.ids:dtype())
        assert.same({{0, 1}, {2, 3}}, ck.tensors.ids:totable())
        assert.same({0.5, 0.5}, ck.tensors["policy.ema"]:totable())
        assert.equal(r:state(), ck.blobs.rng)
        assert.equal("", ck.blobs.empty)
        assert.equal("run1", ck.meta.name)
        assert.equal(12, ck.meta.step)
        assert.equal("integer", math.type(ck.meta.step))
        assert.equal(0.003, ck.meta.lr)
        assert.equal(3.0, ck.meta.whole)
        assert.equal("float", math.type(ck.meta.whole))
        assert.equal(2 ^ 70, ck.meta.huge)
        assert.is_nil(ck.steps)   -- no optimizer in this file
    end)

    it("takes the model from the optimizer", function()
        local a = model(3)
        local oa = dga.adamw(a)
        step(a, oa, 1)
        local path = dir .. "/opt_only.safetensors"
        dga.save_checkpoint(path, {optimizer = oa})
        local b = model(4)
        local ob = dga.adamw(b)
        dga.load_checkpoint(path, {optimizer = ob})
        assert.equal(0, (a:params() - b:params()):norm())
        assert.equal(1, ob:steps())
    end)

    it("rejects malformed files with messages naming the file", function()
        local a = model(5)
        local path = dir .. "/good.safetensors"
        dga.save_checkpoint(path, {model = a})
        local good = read_all(path)
        local bad = dir .. "/bad.safetensors"

        write_all(bad, good:sub(1, #good - 100))
        local e = err_of(dga.load_checkpoint, bad)
        assert.matches("bad.safetensors: truncated: header says %d+ bytes of data, file has %d+", e)

        local colon = good:find(":", 9, true)
        write_all(bad, good:sub(1, colon - 1) .. ";" .. good:sub(colon + 1))
        assert.matches("bad.safetensors: header is not valid JSON", err_of(dga.load_checkpoint, bad))

        write_all(bad, "this is not a checkpoint at all")
        assert.matches("implausible", err_of(dga.load_checkpoint, bad))

        write_all(bad, "")
        assert.matches("too short", err_of(dga.load_checkpoint, bad))

        assert.matches("cannot open", err_of(dga.load_checkpoint, dir .. "/absent.safetensors"))

        -- the good file still loads
        assert.is_not_nil(dga.load_checkpoint(path).model)
    end)

    it("checks the config and the optimizer against the file", function()
        local a = model(6)
        local path = dir .. "/cfg.safetensors"
        dga.save_checkpoint(path, {model = a})
        local other = dga.gpt{layers = 1, width = 16, heads = 2, context = 8, vocab = 32}
        local before = other:params()
        assert.matches("config mismatch: file has n_layer=2, model has n_layer=1",
                       err_of(dga.load_checkpoint, path, {model = other}))
        assert.equal(0, (before - other:params()):norm())   -- untouched
        local b = model(7)
        assert.matches("no optimizer state",
                       err_of(dga.load_checkpoint, path, {model = b, optimizer = dga.adamw(b)}))
    end)

    it("rejects bad arguments", function()
        local a = model(8)
        local p = dir .. "/args.safetensors"
        assert.matches("unknown option 'modle'", err_of(dga.save_checkpoint, p, {modle = a}))
        assert.matches("no model", err_of(dga.save_checkpoint, p, {}))
        -- option values are named inside argument #2, never by their stack slot
        assert.matches("bad argument #2 to 'dga.save_checkpoint' (option 'model' must be an open dga.gpt, got number)",
                       err_of(dga.save_checkpoint, p, {model = 1}), 1, true)
        assert.matches("bad argument #2 to 'dga.save_checkpoint' (option 'optimizer' must be an open "
                       .. "dga.adamw, got string)",
                       err_of(dga.save_checkpoint, p, {model = a, optimizer = "x"}), 1, true)
        assert.matches("bad argument #2 to 'dga.save_checkpoint' (tensors.w: entry [2] is a string",
                       err_of(dga.save_checkpoint, p, {model = a, tensors = {w = {1, "x"}}}), 1, true)
        assert.matches("tensors must be a table", err_of(dga.save_checkpoint, p, {model = a, tensors = 3}))
        assert.matches("meta.x is a boolean",
                       err_of(dga.save_checkpoint, p, {model = a, meta = {x = true}}))
        assert.matches("blobs: expected name = binary string",
                       err_of(dga.save_checkpoint, p, {model = a, blobs = {x = 1}}))
        assert.matches("unknown option 'tensors'", err_of(dga.load_checkpoint, p, {tensors = {}}))
        local f = io.open(p, "rb")
        assert.is_nil(f)   -- nothing was written
    end)

    it("a failed save leaves the previous checkpoint intact", function()
        local a = model(9)
        local path = dir .. "/keep.safetensors"
        dga.save_checkpoint(path, {model = a, meta = {v = 1}})
        local before = read_all(path)
        -- a closed tensor among the extras makes the save fail (the C tests cover a
        -- failure after the temporary file was opened)
        local closed = dga.vec(2)
        closed:close()
        assert.matches("closed", err_of(dga.save_checkpoint, path,
                                        {model = a, meta = {v = 2}, tensors = {w = closed}}))
        local ls = io.popen("ls '" .. dir .. "'")
        local listing = ls:read("a")
        ls:close()
        assert.is_nil(listing:match("keep%.safetensors%.tmp"))
        assert.equal(before, read_all(path))
    end)

    it("write_file_atomic replaces a file whole and names the path on failure", function()
        local path = dir .. "/small.txt"
        dga.write_file_atomic(path, "first\n")
        dga.write_file_atomic(path, "second, with a NUL \0 inside\n")
        assert.equal("second, with a NUL \0 inside\n", read_all(path))
        local ls = io.popen("ls '" .. dir .. "'")
        local listing = ls:read("a")
        ls:close()
        assert.is_nil(listing:match("small%.txt%.tmp"))
        assert.matches(dir .. "/no/such/dir/x.txt", err_of(dga.write_file_atomic,
                                                          dir .. "/no/such/dir/x.txt", "x"), 1, true)
        assert.matches("string expected", err_of(dga.write_file_atomic, path, {}))
        assert.equal("second, with a NUL \0 inside\n", read_all(path))
    end)
end)

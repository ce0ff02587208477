-- The dgalua executable and the CLI tools (train / eval / generate), run as subprocesses
-- through $DGALUA (set by tests/run). Small shards written with dga.shard_write; tools whose
-- bindings are missing from this build are marked pending instead of failing.
local dga = require "dga"

local h = require "tests.lua.helpers"
local shell_quote, write, read, contains = h.shell_quote, h.write, h.read, h.contains

local DGALUA = h.DGALUA
local ROOT = h.cwd()   -- busted runs from the repository top

local tmpdir
local function tmp(name) return tmpdir .. "/" .. name end

-- Runs a shell command; returns exit code, stdout, stderr.
local function run(cmd) return h.run(cmd, tmp("stderr.txt")) end

local function dgalua(args) return run(shell_quote(DGALUA) .. " " .. args) end

-- Losses of a train.lua --log CSV (step,loss,grad_norm,lr).
local function losses(path)
    local out = {}
    for line in (read(path) or ""):gmatch("[^\n]+") do
        local step, loss = line:match("^(%d+),([^,]+),")
        if step then out[tonumber(step)] = tonumber(loss) end
    end
    return out
end

describe("dgalua", function()
    setup(function() tmpdir = h.tmpdir() end)
    teardown(function()
        h.rm(tmpdir)
    end)

    before_each(function()
        if not DGALUA then pending("DGALUA is not set (run through tests/run)") end
    end)

    describe("interpreter", function()
        it("runs -e statements", function()
            local code, out = dgalua("-e 'print(1+1)'")
            assert.are.equal(0, code)
            assert.are.equal("2\n", out)
        end)

        it("passes script arguments as lua does", function()
            write(tmp("args.lua"), "print(arg[0], arg[1], arg[2], #arg, select('#', ...), ...)\n" ..
                                   "print(arg[-1] ~= nil, type(dga), dga == require 'dga')\n")
            local code, out = dgalua(shell_quote(tmp("args.lua")) .. " a 'b c'")
            assert.are.equal(0, code)
            assert.are.equal(tmp("args.lua") .. "\ta\tb c\t2\t2\ta\tb c\ntrue\ttable\ttrue\n", out)
        end)

        it("runs -e and -l before the script, in order, and honours --", function()
            write(tmp("order.lua"), "print(x, type(sched.make), arg[-1], arg[-2], arg[-3], arg[1])\n")
            local code, out, err = dgalua("-e 'x = 7' -l sched=trainer.schedule -- " ..
                                          shell_quote(tmp("order.lua")) .. " -v")
            assert.are.equal(0, code, err)
            assert.are.equal("7\tfunction\t--\tsched=trainer.schedule\t-l\t-v\n", out)
        end)

        it("runs a statement piped into stdin, and '-'", function()
            local code, out = run("printf 'print(6*7)\\n' | " .. shell_quote(DGALUA))
            assert.are.equal(0, code)
            assert.are.equal("42\n", out)
            code, out = run("printf 'print(...)\\n' | " .. shell_quote(DGALUA) .. " - x y")
            assert.are.equal(0, code)
            assert.are.equal("x\ty\n", out)
        end)

        it("prints expression values and joins incomplete lines in the REPL", function()
            local input = "x = 5\\nx * 2\\nfor i = 1, 2 do\\nprint('i' .. i)\\nend\\nerror('oops')\\n" ..
                          "'still here'\\n"
            local code, out, err = run("printf \"" .. input .. "\" | " .. shell_quote(DGALUA) .. " -i")
            assert.are.equal(0, code)
            contains(out, "10\n")
            contains(out, "i1\n")
            contains(out, "i2\n")
            contains(out, "still here\n")
            contains(err, "dgalua: oops\n")
        end)

        it("reports errors with a non-zero status, a traceback under --debug", function()
            local code, out, err = dgalua("-e 'local function f() error(\"boom\") end f()'")
            assert.are.equal(1, code)
            assert.are.equal("", out)
            assert.are.equal("dgalua: boom\n", err)
            code, out, err = dgalua("--debug -e 'local function f() error(\"boom\") end f()'")
            assert.are.equal(1, code)
            assert.are.equal("", out)
            contains(err, "dgalua: (command line):1: boom")
            contains(err, "stack traceback:")
            write(tmp("bad.lua"), "x = = 1\n")
            code, out, err = dgalua(shell_quote(tmp("bad.lua")))
            assert.are.equal(1, code)
            assert.are.equal("", out)
            contains(err, "dgalua: ")
            contains(err, "bad.lua:1:")
            code, out, err = dgalua(shell_quote(tmp("missing.lua")))
            assert.are.equal(2, code)
            assert.are.equal("", out)
            contains(err, "cannot open")
        end)

        it("has --help, -v and rejects unknown options", function()
            local code, out = dgalua("--help")
            assert.are.equal(0, code)
            contains(out, "usage: dgalua")
            code, out = dgalua("-v")
            assert.are.equal(0, code)
            contains(out, "dgalua " .. dga.version)
            local _, err
            code, _, err = dgalua("--frobnicate")
            assert.are.equal(2, code)
            contains(err, "'--frobnicate'")
            code, _, err = dgalua("--threads 0 -e 'print(1)'")
            assert.are.equal(2, code)
            contains(err, "'--threads'")
        end)

        it("a user's mistake prints one line; a bug and DGALUA_DEBUG=1 a traceback", function()
            write(tmp("mistake.lua"), "local function f() error('x.bin: no such shard') end\nf()\n")
            local code, out, err = dgalua(shell_quote(tmp("mistake.lua")))
            local _
            assert.are.equal(1, code)
            assert.are.equal("", out)
            assert.are.equal("dgalua: x.bin: no such shard\n", err)
            code, _, err = run("DGALUA_DEBUG=1 " .. shell_quote(DGALUA) .. " " .. shell_quote(tmp("mistake.lua")))
            assert.are.equal(1, code)
            contains(err, "mistake.lua:1: x.bin: no such shard")
            contains(err, "stack traceback:")
            -- a core error names the file, alone on its line
            code, _, err = dgalua("-e 'dga.shard_read(\"" .. tmp("absent.bin") .. "\")'")
            assert.are.equal(1, code)
            assert.are.equal(1, select(2, err:gsub("\n", "")), err)
            contains(err, tmp("absent.bin"))
            -- a data file's own name and line are not taken for a script position
            code, _, err = dgalua("-e 'error(\"corpus/a.jsonl:12: bad JSON\", 0)'")
            assert.are.equal(1, code)
            assert.are.equal("dgalua: corpus/a.jsonl:12: bad JSON\n", err)
            write(tmp("bug.lua"), "local t = nil\nprint(t.field)\n")
            code, _, err = dgalua(shell_quote(tmp("bug.lua")))
            assert.are.equal(1, code)
            contains(err, "attempt to index a nil value")
            contains(err, "stack traceback:")
            code, _, err = dgalua("-e 'assert(false)'")
            assert.are.equal(1, code)
            contains(err, "stack traceback:")
        end)

        it("tools: a bad argument exits 2, a missing input file 1 with one line", function()
            local code, _, err = dgalua(shell_quote(ROOT .. "/scripts/tokenize.lua") .. " --bogus")
            assert.are.equal(2, code)
            contains(err, "unknown option '--bogus'")
            for _, e in ipairs{"quickstart", "lowdata", "mmlu_dist", "recover"} do
                code, _, err = dgalua(shell_quote(ROOT .. "/experiments/" .. e .. ".lua") .. " --bogus")
                assert.are.equal(2, code, e)
                contains(err, "unknown option '--bogus'")
            end
            -- every command-line tool, the ones a list here would forget included
            local tools = 0
            for tool in require("lfs").dir(ROOT .. "/scripts") do
                if tool:match("%.lua$") then
                    code = dgalua(shell_quote(ROOT .. "/scripts/" .. tool) .. " --bogus")
                    assert.are.equal(2, code, tool)
                    tools = tools + 1
                end
            end
            assert.is_true(tools >= 19, tools .. " tools")
            local out
            code, out, err = dgalua(shell_quote(ROOT .. "/scripts/eval.lua") .. " --checkpoint " ..
                                    shell_quote(tmp("none.safetensors")) .. " --data x.bin")
            assert.are.equal(1, code)
            assert.are.equal("", out)
            assert.are.equal(1, select(2, err:gsub("\n", "")), err)
            contains(err, tmp("none.safetensors"))
        end)

        it("sets the OpenBLAS thread count from --threads and DGA_THREADS", function()
            local code, out = dgalua("--threads 1 -e 'print(dga.get_threads())'")
            assert.are.equal(0, code)
            assert.are.equal("1\n", out)
            code, out = run("DGA_THREADS=1 " .. shell_quote(DGALUA) .. " -e 'print(dga.get_threads())'")
            assert.are.equal(0, code)
            assert.are.equal("1\n", out)
            code, out = dgalua("-e 'dga.set_threads(1) print(dga.get_threads())'")
            assert.are.equal(0, code)
            assert.are.equal("1\n", out)
        end)

        it("shortens OpenBLAS's idle spin when it runs on more than one thread, unless the user set it", function()
            local print_spin = shell_quote(DGALUA) .. " -e 'print(os.getenv(\"OPENBLAS_THREAD_TIMEOUT\"))'"
            local code, out = run("env -u OPENBLAS_THREAD_TIMEOUT DGA_THREADS=2 " .. print_spin)
            assert.are.equal(0, code)
            assert.are.equal("14\n", out)
            code, out = run("env OPENBLAS_THREAD_TIMEOUT=20 DGA_THREADS=2 " .. print_spin)
            assert.are.equal(0, code)
            assert.are.equal("20\n", out)
            code, out = run("env -u OPENBLAS_THREAD_TIMEOUT DGA_THREADS=1 " .. print_spin)
            assert.are.equal(0, code)
            assert.are.equal("nil\n", out)
        end)

        it("refuses to run under mpirun when built without MPI, instead of running the job once per process", function()
            local code, out = dgalua("-e 'print(dga.has_mpi())'")
            assert.are.equal(0, code)
            if out ~= "false\n" then return end   -- the MPI build: a launcher's variables are its own
            for _, var in ipairs{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"} do
                local err
                code, out, err = run("env " .. var .. "=2 " .. shell_quote(DGALUA) .. " -e 'print(1)'")
                assert.are.equal(1, code, var)
                assert.are.equal("", out)
                contains(err, "started by mpirun as one of 2 processes, but this build has no MPI")
                contains(err, "build/mpi/dgalua")
            end
            code, out = run("env OMPI_COMM_WORLD_SIZE=1 " .. shell_quote(DGALUA) .. " -e 'print(1)'")
            assert.are.equal(0, code)
            assert.are.equal("1\n", out)
        end)

        it("finds scripts/ from any directory, and DGALUA_SCRIPTS overrides it", function()
            local code, out = run("cd / && " .. shell_quote(DGALUA) ..
                                  " -e 'print(type(require(\"trainer.schedule\").make))'")
            assert.are.equal(0, code)
            assert.are.equal("function\n", out)
            os.execute("mkdir -p " .. shell_quote(tmp("alt/harness")))
            write(tmp("alt/harness/marker.lua"), "return 'alt scripts'\n")
            code, out = run("cd / && DGALUA_SCRIPTS=" .. shell_quote(tmp("alt")) .. " " ..
                            shell_quote(DGALUA) .. " -e 'print((require(\"harness.marker\")))'")
            assert.are.equal(0, code)
            assert.are.equal("alt scripts\n", out)
        end)
    end)

    describe("tools", function()
        for _, tool in ipairs{"train", "eval", "generate"} do
            it(tool .. ".lua --help", function()
                local code, out = dgalua(shell_quote(ROOT .. "/scripts/" .. tool .. ".lua") .. " --help")
                assert.are.equal(0, code)
                contains(out, "Usage: " .. tool .. ".lua")
                contains(out, tool == "train" and "--data" or "--checkpoint")
            end)
        end

        it("train.lua rejects bad arguments", function()
            local code, _, err = dgalua(shell_quote(ROOT .. "/scripts/train.lua") .. " --steps 3")
            assert.are.equal(2, code)
            contains(err, "--data")
            code, _, err = dgalua(shell_quote(ROOT .. "/scripts/train.lua") .. " --data x --steps 0")
            assert.are.equal(2, code)
            contains(err, "0 is outside 1..")
        end)

        local shard, ckpt
        local TRAIN = " --layers 1 --width 16 --heads 2 --context 8 --batch 4 --steps 20" ..
                      " --lr 1e-2 --warmup 2 --threads 1"

        local function need_shard()
            if not dga.shard_write then pending("dga.shard_write is not in this build") return false end
            if not shard then
                shard = tmp("train.bin")
                local t = dga.zeros(3000, "int32")
                for i = 1, 3000 do t[i] = (i * 7 + (i // 11)) % 32 end
                dga.shard_write(shard, t, 32)
            end
            return true
        end

        local function train(seed, extra)
            return dgalua(shell_quote(ROOT .. "/scripts/train.lua") .. " --data " ..
                          shell_quote(shard) .. TRAIN .. " --seed " .. seed .. (extra or ""))
        end

        it("train.lua trains on a shard, logs every step and lowers the loss", function()
            if not need_shard() then return end
            local save = " --save " .. shell_quote(tmp("ckpt.safetensors"))
            local code, out, err = train(1, " --log " .. shell_quote(tmp("a.csv")) .. save)
            assert.are.equal(0, code, err)
            contains(err, "step 20/20")
            contains(err, "tok/s")
            contains(out, "final loss")
            local l = losses(tmp("a.csv"))
            assert.are.equal(20, #l)
            assert.is_true(l[20] < l[1] - 0.5, string.format("loss %g -> %g", l[1], l[20]))
            contains(out, "saved ")
            ckpt = tmp("ckpt.safetensors")
        end)

        it("train.lua is bit-identical for the same seed", function()
            if not need_shard() then return end
            local c1 = train(7, " --quiet --log " .. shell_quote(tmp("d1.csv")))
            local c2 = train(7, " --quiet --log " .. shell_quote(tmp("d2.csv")))
            local c3 = train(8, " --quiet --log " .. shell_quote(tmp("d3.csv")))
            assert.are.same({0, 0, 0}, {c1, c2, c3})
            local a, b, c = losses(tmp("d1.csv")), losses(tmp("d2.csv")), losses(tmp("d3.csv"))
            assert.are.equal(20, #a)
            for i = 1, 20 do assert.is_true(a[i] == b[i], "step " .. i) end
            assert.is_false(a[20] == c[20])
        end)

        it("eval.lua and generate.lua use the saved checkpoint", function()
            if not need_shard() then return end
            assert.truthy(ckpt, "the training test saves the checkpoint")
            local code, out, err = dgalua(shell_quote(ROOT .. "/scripts/eval.lua") .. " --checkpoint " ..
                                          shell_quote(ckpt) .. " --data " .. shell_quote(shard) ..
                                          " --batch 64")
            assert.are.equal(0, code, err)
            local loss, windows, tokens = out:match("^loss (%S+) ppl %S+ windows (%d+) tokens (%d+)")
            assert.truthy(loss, out)
            assert.are.equal(2999 // 8, tonumber(windows))
            assert.are.equal(2999 // 8 * 8, tonumber(tokens))
            assert.is_true(tonumber(loss) < math.log(32))

            local gen = shell_quote(ROOT .. "/scripts/generate.lua") .. " --checkpoint " ..
                        shell_quote(ckpt) .. " --prompt-ids '1 2 3' --tokens 6"
            code, out, err = dgalua(gen)
            assert.are.equal(0, code, err)
            local echoed, new = out:match("^([%d ]+) | ([%d ]+)\n")
            assert.are.equal("1 2 3", echoed, out)   -- the prompt first, then the generated ids
            local ids = {}
            for id in new:gmatch("%d+") do ids[#ids + 1] = tonumber(id) end
            assert.are.equal(6, #ids)
            for _, id in ipairs(ids) do assert.is_true(id >= 0 and id < 32) end
            local _, s1 = dgalua(gen .. " --temperature 1 --seed 5")
            local _, s2 = dgalua(gen .. " --temperature 1 --seed 5")
            assert.are.equal(s1, s2)
            code, _, err = dgalua(gen .. " --prompt-ids 'a b'")
            assert.are.equal(2, code)
            contains(err, "not a token id")
        end)

        it("build_store.lua --embedder gpt:DIR takes a checkpoint directory", function()
            -- a two-source corpus, a tokenizer trained on it, and an untrained model saved as a directory
            local corpus, _ = tmp("gptcorpus")
            os.execute("mkdir -p " .. shell_quote(corpus .. "/alpha") .. " " .. shell_quote(corpus .. "/omega"))
            local r, docs = dga.rng(4), {alpha = {}, omega = {}}
            for name, letters in pairs{alpha = "abcdefgh", omega = "stuvwxyz"} do
                for d = 1, 12 do
                    local words = {}
                    for i = 1, 60 do
                        local a, b = 1 + r:below(8), 1 + r:below(8)
                        words[i] = letters:sub(a, a) .. letters:sub(b, b) .. letters:sub(a, a)
                    end
                    docs[name][d] = '{"text": "' .. table.concat(words, " ") .. '"}'
                end
                write(corpus .. "/" .. name .. "/part.jsonl", table.concat(docs[name], "\n") .. "\n")
            end
            local texts = dga.read_texts(corpus)
            local tok = dga.tokenizer_train(texts, {vocab = 300})
            local m = dga.gpt{layers = 1, width = 16, heads = 2, context = 32, vocab = tok:vocab_size(), batch = 2}
            require("data.model_dir").save(tmp("embedder"), {model = m, tokenizer = tok})
            local code, out, err = dgalua(shell_quote(ROOT .. "/scripts/build_store.lua") .. " " .. shell_quote(corpus) ..
                                          " --out " .. shell_quote(tmp("gptstore")) .. " --levels 2 --seq-len 33" ..
                                          " --tokenizer " .. shell_quote(tmp("embedder/tokenizer.json")) ..
                                          " --embedder gpt:" .. shell_quote(tmp("embedder")) .. " --quiet")
            assert.are.equal(0, code, err)
            contains(out, "level 1: 2 domains")
            contains(read(tmp("gptstore/manifest.json")), '"name": "gpt"')
            code, _, err = dgalua(shell_quote(ROOT .. "/scripts/build_store.lua") .. " " .. shell_quote(corpus) ..
                                  " --out " .. shell_quote(tmp("gptstore2")) .. " --embedder gpt:" ..
                                  shell_quote(tmp("no_model")) .. " --quiet")
            assert.are.equal(1, code)
            contains(err, "no_model")
        end)

        it("train.lua writes a checkpoint directory, resumes it step for step and guards it", function()
            if not need_shard() then return end
            local val = tmp("val.bin")
            local v = dga.zeros(400, "int32")
            for i = 1, 400 do v[i] = (i * 5 + (i // 7)) % 32 end
            dga.shard_write(val, v, 32)
            -- any tokenizer of 32 ids or fewer decodes the generated text
            dga.tokenizer_train({"abc abd"}, {vocab = 260}):save(tmp("tok_src.json"))
            local dir, again = tmp("run_full"), tmp("run_split")
            local opts = " --val " .. shell_quote(val) .. " --val-every 5 --tokenizer " .. shell_quote(tmp("tok_src.json"))
            local _
            local code, out, err = train(3, opts .. " --quiet --save " .. shell_quote(dir) .. " --log " ..
                                         shell_quote(tmp("full.csv")))
            assert.are.equal(0, code, err)
            contains(out, "val loss ")
            for _, f in ipairs{"model.safetensors", "config.json", "tokenizer.json"} do
                assert.is_true(h.exists(dir .. "/" .. f), f)
            end
            local config = read(dir .. "/config.json")
            for _, key in ipairs{'"n_embd": 16', '"n_layer": 1', '"n_head": 2', '"n_positions": 8', '"vocab_size": 32',
                                 '"model_type": "gpt2"'} do
                contains(config, key)
            end
            -- the validation loss is in the log every 5 steps
            local log = read(tmp("full.csv"))
            contains(log, "step,loss,grad_norm,lr,val_loss\n")
            assert.truthy(log:match("\n5,[^\n]+,%d[^,\n]*\n"), log)
            assert.truthy(log:match("\n4,[^\n]+,\n"), log)

            -- stopped at step 10 and resumed: the same log, the same final weights
            code, _, err = train(3, opts .. " --quiet --checkpoint-every 5 --stop-at 10 --save " ..
                                 shell_quote(again) .. " --log " .. shell_quote(tmp("split.csv")))
            assert.are.equal(0, code, err)
            assert.is_false(read(tmp("split.csv")):find("\n11,", 1, true) ~= nil)
            code, out, err = train(3, opts .. " --checkpoint-every 5 --resume --save " .. shell_quote(again) ..
                                   " --log " .. shell_quote(tmp("split.csv")))
            assert.are.equal(0, code, err)
            contains(err, "resuming")
            assert.are.equal(read(tmp("full.csv")), read(tmp("split.csv")))
            local final = out:match("final loss %S+ %(mean of last 10 steps %S+%)")
            assert.truthy(final, out)

            -- a finished run resumed again prints its own summary
            code, out, err = train(3, opts .. " --quiet --resume --save " .. shell_quote(again))
            assert.are.equal(0, code, err)
            contains(out, final)
            assert.is_nil(out:find("nan", 1, true), out)

            -- an existing checkpoint is not overwritten by accident
            code, _, err = train(3, " --quiet --save " .. shell_quote(again))
            assert.are.equal(2, code)
            contains(err, "already holds a checkpoint")
            code = train(3, " --quiet --overwrite --steps 2 --save " .. shell_quote(again))
            assert.are.equal(0, code)

            -- the tools take the directory: eval gives the same loss as on the single file
            local ev = shell_quote(ROOT .. "/scripts/eval.lua") .. " --data " .. shell_quote(shard)
            local _, a = dgalua(ev .. " --checkpoint " .. shell_quote(dir))
            local _, b = dgalua(ev .. " --checkpoint " .. shell_quote(dir .. "/model.safetensors"))
            contains(a, "loss ")
            assert.are.equal(a, b)
            code, out, err = dgalua(shell_quote(ROOT .. "/scripts/generate.lua") .. " --checkpoint " ..
                                    shell_quote(dir) .. " --prompt-ids '1 2' --tokens 4 --temperature 1" ..
                                    " --top-k 3 --top-p 0.9 --seed 2")
            assert.are.equal(0, code, err)
            contains(out, "text: ")   -- the directory's tokenizer.json decodes
            code, _, err = dgalua(ev .. " --checkpoint " .. shell_quote(tmp("no_such_dir")))
            assert.are.equal(1, code)
            contains(err, "no_such_dir")
            code, _, err = dgalua(shell_quote(ROOT .. "/scripts/generate.lua") .. " --checkpoint " ..
                                  shell_quote(dir) .. " --prompt-ids '1' --top-k 3")
            assert.are.equal(2, code)
            contains(err, "--temperature")
        end)

        -- A shard written with header vocabulary 0 ("unknown", as llm.c's tools write it).
        local function write_raw_shard(path, ids)
            local header = {20240520, 1, #ids, 0}
            for i = 5, 256 do header[i] = 0 end
            local parts = {}
            for i = 1, 256 do parts[i] = string.pack("<i4", header[i]) end
            for i = 1, #ids do parts[#parts + 1] = string.pack("<I2", ids[i]) end
            write(path, table.concat(parts))
        end

        it("eval.lua refuses a shard of another vocabulary than the checkpoint's", function()
            if not need_shard() then return end
            assert.truthy(ckpt, "the training test saves the checkpoint")
            local function eval(data)
                return dgalua(shell_quote(ROOT .. "/scripts/eval.lua") .. " --checkpoint " ..
                              shell_quote(ckpt) .. " --data " .. shell_quote(data))
            end
            local t = dga.zeros(100, "int32")
            for i = 1, 100 do t[i] = i % 10 end
            -- every id fits, but the shard was made for a 64-token vocabulary (and a smaller one)
            for _, v in ipairs{64, 16} do
                dga.shard_write(tmp("v" .. v .. ".bin"), t, v)
                local code, _, err = eval(tmp("v" .. v .. ".bin"))
                assert.are.equal(1, code, err)
                contains(err, tmp("v" .. v .. ".bin") .. " has a vocabulary of " .. v .. ", but " ..
                              ckpt .. " has 32")
            end
            -- a shard that does not say: its ids are checked
            local ids = {}
            for i = 1, 100 do ids[i] = i % 10 end
            ids[50] = 40
            write_raw_shard(tmp("raw.bin"), ids)
            local code, _, err = eval(tmp("raw.bin"))
            assert.are.equal(1, code, err)
            contains(err, tmp("raw.bin") .. " holds token id 40, outside the vocabulary of " .. ckpt .. " (32)")
        end)

        it("train.lua checks the shard's vocabulary and ids before training", function()
            if not need_shard() then return end
            local code, _, err = train(1, " --vocab 16")
            assert.are.equal(1, code, err)
            contains(err, "--vocab 16, but " .. shard .. " has a vocabulary of 32")
            local ids = {}
            for i = 1, 100 do ids[i] = i % 20 end
            write_raw_shard(tmp("raw20.bin"), ids)
            code, _, err = dgalua(shell_quote(ROOT .. "/scripts/train.lua") .. " --data " ..
                                  shell_quote(tmp("raw20.bin")) .. TRAIN .. " --vocab 16")
            assert.are.equal(1, code, err)
            contains(err, tmp("raw20.bin") .. " holds token id 19, outside --vocab 16")
            assert.is_nil(err:find("step 1/", 1, true))
        end)
    end)

    describe("corpora without a usable document", function()
        local tok_path
        local function need_tokenizer()
            if not tok_path then
                tok_path = tmp("tok.json")
                dga.tokenizer_train({"the cat sat on the mat", "a dog"}, {vocab = 270}):save(tok_path)
            end
            return tok_path
        end
        local function corpus(name, files)
            local dir = tmp(name)
            assert(os.execute("mkdir -p " .. shell_quote(dir .. "/src/empty_sub")))
            for file, text in pairs(files) do write(dir .. "/src/" .. file, text) end
            return dir
        end
        local deep = string.rep("[", 3000) .. string.rep("]", 3000)
        local cases = {
            {"no files", {}, "no .jsonl or .txt files"},
            {"only empty files", {["a.jsonl"] = "", ["b.jsonl"] = "\n\n"}, "2 files, all empty"},
            {"garbage", {["a.jsonl"] = "\0\1garbage\n"}, "a.jsonl:1: not valid JSON"},
            {"no text field", {["a.jsonl"] = '{"title": "x"}\n'}, 'a.jsonl:1: no "text" field'},
            {"text not a string", {["a.jsonl"] = '{"text": 3}\n'}, 'a.jsonl:1: "text" is not a string'},
            {"nesting too deep", {["a.jsonl"] = '{"text": ' .. deep .. '}\n'}, "a.jsonl:1: not valid JSON"},
        }
        for i, c in ipairs(cases) do
            it("tokenize.lua fails on " .. c[1] .. ", and writes no shard", function()
                local dir = corpus("c" .. i, c[2])
                local out = tmp("c" .. i .. ".bin")
                local code, _, err = dgalua(shell_quote(ROOT .. "/scripts/tokenize.lua") .. " --quiet --corpus " ..
                                            shell_quote(dir) .. " --tokenizer " .. shell_quote(need_tokenizer()) ..
                                            " --out " .. shell_quote(out))
                assert.are.equal(1, code, err)
                contains(err, "no document to encode")
                contains(err, c[3])
                assert.is_false(h.exists(out))
            end)
        end

        it("build_store.lua names the skipped lines when no sequence is left", function()
            local dir = corpus("bs", {["a.jsonl"] = '{"text": 3}\nnot json\n'})
            local code, _, err = dgalua(shell_quote(ROOT .. "/scripts/build_store.lua") .. " " .. shell_quote(dir) ..
                                        " --out " .. shell_quote(tmp("bs_store")) .. " --quiet --vocab 260")
            assert.are.equal(1, code, err)
            contains(err, "2 malformed input lines skipped, the first: ")
            contains(err, 'a.jsonl:1: "text" is not a string')
            -- with a tokenizer given, the failure is the missing sequences, and says the same
            code, _, err = dgalua(shell_quote(ROOT .. "/scripts/build_store.lua") .. " " .. shell_quote(dir) ..
                                  " --out " .. shell_quote(tmp("bs_store")) .. " --quiet --tokenizer " ..
                                  shell_quote(need_tokenizer()))
            assert.are.equal(1, code, err)
            contains(err, "no complete sequence")
            contains(err, "2 malformed input lines skipped, the first: ")
        end)

        it("empty directories inside a corpus are no error for any tool", function()
            local text = string.rep("the cat sat on the mat. ", 40)
            local dir = corpus("ok", {["a.jsonl"] = '{"text": "' .. text .. '"}\n'})
            assert(os.execute("mkdir -p " .. shell_quote(dir .. "/src/empty_sub/deeper")))
            local tok = tmp("ok_tok.json")
            local code, _, err = dgalua(shell_quote(ROOT .. "/scripts/train_tokenizer.lua") .. " --corpus " ..
                                        shell_quote(dir) .. " --vocab 270 --out " .. shell_quote(tok))
            assert.are.equal(0, code, err)
            code, _, err = dgalua(shell_quote(ROOT .. "/scripts/tokenize.lua") .. " --quiet --corpus " ..
                                  shell_quote(dir) .. " --tokenizer " .. shell_quote(tok) .. " --out " ..
                                  shell_quote(tmp("ok.bin")))
            assert.are.equal(0, code, err)
            code, _, err = dgalua(shell_quote(ROOT .. "/scripts/build_store.lua") .. " " .. shell_quote(dir) ..
                                  " --out " .. shell_quote(tmp("ok_store")) .. " --quiet --levels 1 --seq-len 9 " ..
                                  "--tokenizer " .. shell_quote(tok))
            assert.are.equal(0, code, err)
        end)
    end)
end)

describe("script helpers", function()
    local schedule = require "trainer.schedule"
    local progress = require "util.progress"
    local windows = require "data.windows"
    local args = require "cli.args"

    local function near(a, b) return math.abs(a - b) <= 1e-12 * math.max(1, math.abs(b)) end

    it("schedule: linear warmup, cosine to min_lr, clamped after total", function()
        local lr = schedule.make{lr = 1e-3, warmup = 10, total = 110, min_lr = 1e-4}
        assert.is_true(near(lr(1), 1e-4))
        assert.is_true(near(lr(5), 5e-4))
        assert.is_true(near(lr(10), 1e-3))
        assert.is_true(near(lr(60), 1e-4 + 0.5 * 9e-4))     -- half way: the cosine's midpoint
        assert.is_true(near(lr(110), 1e-4))
        assert.is_true(near(lr(500), 1e-4))
        for s = 11, 110 do assert.is_true(lr(s) <= lr(s - 1) + 1e-18) end
        local lin = schedule.make{kind = "linear", lr = 1, warmup = 0, total = 12, min_lr = 0}
        assert.is_true(near(lin(6), 0.5))
        local const = schedule.make{kind = "constant", lr = 0.5, warmup = 4}
        assert.is_true(near(const(2), 0.25))
        assert.are.equal(0.5, const(1000))
        h.raises("kind must be cosine, linear or constant, got step", function() schedule.make{kind = "step", lr = 1, total = 2} end)
        h.raises("total must be a finite number >= 1, got nil", function() schedule.make{lr = 1} end)
        h.raises("min_lr 2 is above lr 1", function() schedule.make{lr = 1, total = 5, min_lr = 2} end)
        h.raises("lr must be a finite number >= 0, got", function() schedule.make{lr = 0 / 0, total = 5} end)
    end)

    it("progress: one line per update with step, loss, lr, extras and ETA", function()
        local lines = {}
        local out = {write = function(self, ...) for _, s in ipairs{...} do lines[#lines + 1] = s end end,
                     flush = function() end}
        local p = progress.new{total = 4, label = "run", out = out, overwrite = false, every = 2}
        p:start(0)
        for step = 1, 4 do p:update(step, {loss = 2.5, lr = 1e-3, tokens = 64, spe = 3.25}) end
        p:finish()
        local text = table.concat(lines)
        local got = {}
        for l in text:gmatch("[^\n]+") do got[#got + 1] = l end
        assert.are.equal(2, #got)                          -- steps 2 and 4 (every = 2)
        assert.truthy(got[1]:match("^run step 2/4 | loss 2%.5000 | lr 1%.00e%-03 | spe 3%.25 | "))
        assert.truthy(got[2]:find("ETA", 1, true))
        assert.are.equal("1:02:03", progress.format_duration(3723))
        assert.are.equal("2:05", progress.format_duration(125))
        assert.are.equal("12.3k", progress.format_rate(12345))
        assert.are.equal("4.20M", progress.format_rate(4.2e6))
    end)

    it("progress: off a terminal, a line per milestone rather than per refresh", function()
        local lines = {}
        local out = {write = function(self, ...) for _, s in ipairs{...} do lines[#lines + 1] = s end end,
                     flush = function() end}
        local p = progress.new{total = 1000, label = "run", out = out, overwrite = false}
        p:start(0)
        for step = 1, 1000 do
            -- a new evaluation every 250 steps changes the extra field
            p:update(step, {loss = 2.5, lr = 1e-3, tokens = 64, spe = 3 + (step // 250)})
        end
        p:milestone(1000, {loss = 2.4})
        p:finish()
        local steps = {}
        for l in table.concat(lines):gmatch("[^\n]+") do
            steps[#steps + 1] = tonumber(l:match("step (%d+)/1000"))
        end
        -- first, every 100 steps (a tenth), the evaluations at 250 and 750, the last, the milestone
        assert.are.same({1, 101, 201, 250, 350, 450, 500, 600, 700, 750, 850, 950, 1000, 1000}, steps)
        assert.is_true(type(dga.isatty(1)) == "boolean")
        h.raises("expected 0 (stdin), 1 (stdout) or 2 (stderr)", function() dga.isatty(7) end)
    end)

    it("windows: random windows lie inside the shard, sequential ones tile it", function()
        local tokens = dga.arange(50)                      -- token i-1 at index i
        local x, y = windows.random(tokens, 6, 8, dga.rng(3))
        assert.are.same({6, 8}, x:shape())
        for b = 1, 6 do
            local s = x:at(b, 1)
            assert.is_true(s >= 0 and s + 8 <= 49)
            for t = 1, 8 do
                assert.are.equal(s + t - 1, x:at(b, t))
                assert.are.equal(s + t, y:at(b, t))
            end
        end
        local x2 = windows.random(tokens, 6, 8, dga.rng(3))
        assert.are.equal(0, (x - x2):norm())
        assert.are.equal(6, windows.count(tokens, 8))      -- (50 - 1) // 8
        local sx, sy = windows.sequential(tokens, 8, 2, 3)
        assert.are.equal(8, sx:at(1, 1))
        assert.are.equal(9, sy:at(1, 1))
        assert.are.equal(31, sx:at(3, 8))
        assert.are.equal(32, sy:at(3, 8))
        h.raises("windows: windows 5..7 outside 1..6", function() windows.sequential(tokens, 8, 5, 3) end)
        h.raises("windows: 5 tokens, a window needs context + 1 = 9", function() windows.random(dga.arange(5), 1, 8, dga.rng(1)) end)
    end)

    it("args: integer, number and token-id converters", function()
        assert.are.equal(5, args.int(1)("5"))
        assert.is_nil(args.int(1)("0"))
        assert.is_nil(args.int()("1.5"))
        assert.are.equal(0.5, args.number(0)("0.5"))
        assert.is_nil(args.number(0)("nan"))
        assert.is_nil(args.number(0)("-1"))
        assert.are.same({1, 2, 3}, args.ids("1 2,3"))
        assert.is_nil(args.ids("1 x"))
        assert.is_nil(args.ids(""))
        assert.are.equal(32, args.shard_vocab{vocab_size = 32})
        assert.is_nil(args.shard_vocab{vocab_size = 0})
    end)
end)

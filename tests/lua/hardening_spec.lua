-- Issue 22, second hardening round: no tool overwrites its own input, no input that is not a
-- regular file blocks a tool, write errors end a run, locks leave nothing that looks stale,
-- and the smaller silent results of point 7 are errors naming the faulty file. The tools run
-- as subprocesses through $DGALUA (set by tests/run); `timeout` turns a hang into a failure.
local dga = require "dga"

local h = require "tests.lua.helpers"
local shell_quote, write, read, contains = h.shell_quote, h.write, h.read, h.contains

local ROOT = h.cwd()
local tmpdir
local function tmp(name) return tmpdir .. "/" .. name end
local function run(cmd) return h.run(cmd, tmp("stderr.txt")) end
-- A tool run, ended after 60 s: a blocked open() then fails the test instead of hanging it.
local function tool(name, args)
    return run("timeout -s KILL 60 " .. shell_quote(h.DGALUA) .. " " .. shell_quote(ROOT .. "/scripts/" .. name) ..
               " " .. args)
end
local q = shell_quote

local TOK
local function tokenizer()
    if not TOK then
        TOK = tmp("tok.json")
        dga.tokenizer_train({"the cat sat on the mat", "a dog ran far away", "the end"}, {vocab = 300}):save(TOK)
    end
    return TOK
end

local SHARD
local function shard()
    if not SHARD then
        SHARD = tmp("train.bin")
        local t = dga.zeros(3000, "int32")
        for i = 1, 3000 do t[i] = (i * 7 + (i // 11)) % 32 end
        dga.shard_write(SHARD, t, 32)
    end
    return SHARD
end
local TRAIN = " --layers 1 --width 16 --heads 2 --context 8 --batch 4 --lr 1e-2 --threads 1 --quiet"

local CKPT
local function checkpoint()
    if not CKPT then
        CKPT = tmp("ckpt")
        local code, _, err = tool("train.lua", "--data " .. q(shard()) .. TRAIN .. " --steps 2 --save " .. q(CKPT))
        assert.are.equal(0, code, err)
    end
    return CKPT
end

local function mkfifo(path)
    assert(os.execute("mkfifo " .. q(path)))
    return path
end

describe("hardening (issue 22)", function()
    setup(function() tmpdir = h.tmpdir() end)
    teardown(function() h.rm(tmpdir) end)
    before_each(function()
        if not h.DGALUA then pending("DGALUA is not set (run through tests/run)") end
    end)

    describe("an output that is one of the tool's inputs is refused before anything is written", function()
        local function corpus()
            local d = tmp("corpus")
            os.execute("mkdir -p " .. q(d .. "/web"))
            write(d .. "/web/a.jsonl", '{"text": "the cat sat on the mat"}\n{"text": "a dog ran far away"}\n')
            return d
        end

        it("tokenize.lua --out naming its --corpus file, directly or through a symlink", function()
            local c = corpus()
            local doc = c .. "/web/a.jsonl"
            local before = read(doc)
            local code, _, err = tool("tokenize.lua", "--quiet --corpus " .. q(doc) .. " --tokenizer " .. q(tokenizer())
                                      .. " --out " .. q(doc))
            assert.are.equal(1, code, err)
            contains(err, "this output is the input")
            contains(err, "--corpus")
            assert.are.equal(before, read(doc))
            assert(os.execute("ln -sf " .. q(doc) .. " " .. q(tmp("link.bin"))))
            code, _, err = tool("tokenize.lua", "--quiet --corpus " .. q(c) .. " --tokenizer " .. q(tokenizer())
                                .. " --out " .. q(tmp("link.bin")))
            assert.are.equal(1, code, err)
            contains(err, "is a document of the input directory")
            assert.are.equal(before, read(doc))
            -- its tokenizer too, and nothing is left beside it
            local tok_before = read(tokenizer())
            code, _, err = tool("tokenize.lua", "--quiet --corpus " .. q(c) .. " --tokenizer " .. q(tokenizer())
                                .. " --out " .. q(tokenizer()))
            assert.are.equal(1, code, err)
            contains(err, "--tokenizer")
            assert.are.equal(tok_before, read(tokenizer()))
            assert.is_false(h.exists(tokenizer() .. ".lock"))
        end)

        it("train_tokenizer.lua --out naming a corpus file", function()
            local c = corpus()
            local doc = c .. "/web/a.jsonl"
            local before = read(doc)
            local code, _, err = tool("train_tokenizer.lua", "--quiet --vocab 260 --corpus " .. q(c) .. " --out " .. q(doc))
            assert.are.equal(1, code, err)
            contains(err, doc .. ": this output is a document of the input directory")
            assert.are.equal(before, read(doc))
        end)

        it("is_histogram.lua --texts F --out F, and build_store.lua --out holding its corpus", function()
            local c = corpus()
            local doc = c .. "/web/a.jsonl"
            local before = read(doc)
            local code, _, err = tool("is_histogram.lua", "--store " .. q(tmp("nostore")) .. " --texts " .. q(doc) ..
                                      " --out " .. q(doc))
            assert.are.equal(1, code, err)
            contains(err, "--texts")
            assert.are.equal(before, read(doc))
            code, _, err = tool("build_store.lua", q(c .. "/web") .. " --quiet --vocab 260 --out " .. q(c))
            assert.are.equal(1, code, err)
            contains(err, "this output directory holds the input")
            assert.are.equal(before, read(doc))
        end)

        it("train.lua --log or --save naming its --data shard", function()
            local s = tmp("own.safetensors")   -- a shard, whatever its name
            dga.shard_write(s, dga.zeros(100, "int32"), 32)
            local before = read(s)
            local code, _, err = tool("train.lua", "--data " .. q(s) .. TRAIN .. " --steps 1 --log " .. q(s))
            assert.are.equal(1, code, err)
            contains(err, "this output is the input " .. s .. " (--data)")
            code, _, err = tool("train.lua", "--data " .. q(s) .. TRAIN .. " --steps 1 --overwrite --save " .. q(s))
            assert.are.equal(1, code, err)
            contains(err, "(--data)")
            assert.are.equal(before, read(s))
        end)
    end)

    describe("a FIFO where a file is expected is refused at once, naming it", function()
        it("as a shard, a tokenizer, a checkpoint, a corpus document, an MMLU CSV and a store file", function()
            local fifo = mkfifo(tmp("fifo"))
            local code, _, err = tool("train.lua", "--data " .. q(fifo) .. TRAIN .. " --steps 1")
            assert.are.equal(1, code, err)
            contains(err, fifo .. ": not a regular file (a FIFO")

            code, _, err = tool("tokenize.lua", "--quiet --corpus " .. q(tmp("nothing")) .. " --tokenizer " .. q(fifo) ..
                                " --out " .. q(tmp("f.bin")))
            assert.are.equal(1, code, err)
            contains(err, fifo .. ": not a regular file (a FIFO")

            -- a corpus directory's walk leaves a FIFO out; named directly, it is refused
            local c = tmp("fifo_corpus")
            os.execute("mkdir -p " .. q(c))
            mkfifo(c .. "/x.jsonl")
            code, _, err = tool("tokenize.lua", "--quiet --corpus " .. q(c .. "/x.jsonl") .. " --tokenizer " .. q(tokenizer()) ..
                                " --out " .. q(tmp("f.bin")))
            assert.are.equal(1, code, err)
            contains(err, "x.jsonl: not a regular file (a FIFO")

            -- a checkpoint directory whose weights are a FIFO
            local ck = tmp("fifo_ckpt")
            os.execute("mkdir -p " .. q(ck))
            mkfifo(ck .. "/model.safetensors")
            code, _, err = tool("eval.lua", "--checkpoint " .. q(ck) .. " --data " .. q(shard()))
            assert.are.equal(1, code, err)
            contains(err, "model.safetensors: not a regular file (a FIFO")
            code, _, err = tool("generate.lua", "--checkpoint " .. q(checkpoint()) .. " --tokenizer " .. q(fifo) ..
                                " --prompt x --tokens 1")
            assert.are.equal(1, code, err)
            contains(err, fifo .. ": not a regular file (a FIFO")

            -- an MMLU directory with a FIFO for a CSV
            local m = tmp("fifo_mmlu")
            os.execute("mkdir -p " .. q(m .. "/val") .. " " .. q(m .. "/test") .. " " .. q(m .. "/dev"))
            local row = '"What is 1+1?",1,2,3,4,B\n'
            write(m .. "/test/x_test.csv", row)
            write(m .. "/dev/x_dev.csv", row)
            mkfifo(m .. "/val/x_val.csv")
            local ok, e = pcall(dga.mmlu_load, m, "val")
            assert.is_false(ok)
            contains(tostring(e), "x_val.csv: not a regular file (a FIFO")
        end)

        it("in a store directory", function()
            local c = tmp("sc")
            os.execute("mkdir -p " .. q(c .. "/a") .. " " .. q(c .. "/b"))
            local lines = {}
            for i = 1, 40 do lines[i] = string.format('{"text": "document %d says the cat sat on mat %d"}', i, i) end
            write(c .. "/a/x.jsonl", table.concat(lines, "\n") .. "\n")
            write(c .. "/b/y.jsonl", table.concat(lines, "\n"):gsub("cat", "dog") .. "\n")
            local store = tmp("fifo_store")
            dga.store_build{corpus = c, out = store, levels = {2}, seq_len = 9, vocab = 260}
            os.remove(store .. "/idf.npy")
            mkfifo(store .. "/idf.npy")
            local code, _, err = tool("inspect_store.lua", q(store))
            assert.are.equal(1, code, err)
            contains(err, "idf.npy: not a regular file (a FIFO")
        end)
    end)

    describe("locks", function()
        it("leave no .lock beside a shard or a store, written or failed", function()
            local c = tmp("lock_corpus")
            os.execute("mkdir -p " .. q(c .. "/a") .. " " .. q(tmp("lock_empty")))
            write(c .. "/a/x.jsonl", '{"text": "the cat sat on the mat"}\n')
            local out = tmp("lock_shard.bin")
            local code, _, err = tool("tokenize.lua", "--quiet --corpus " .. q(c) .. " --tokenizer " .. q(tokenizer()) ..
                                      " --out " .. q(out))
            assert.are.equal(0, code, err)
            assert.is_true(h.exists(out))
            assert.is_false(h.exists(out .. ".lock"))
            code, _, err = tool("tokenize.lua", "--quiet --corpus " .. q(tmp("lock_empty")) .. " --tokenizer " ..
                                q(tokenizer()) .. " --out " .. q(tmp("lock_failed.bin")))
            assert.are.equal(1, code, err)
            assert.is_false(h.exists(tmp("lock_failed.bin.lock")))
            code, _, err = tool("build_store.lua", q(tmp("lock_empty")) .. " --quiet --vocab 260 --out " ..
                                q(tmp("lock_store")))
            assert.are.equal(1, code, err)
            assert.is_false(h.exists(tmp("lock_store.lock")))
            -- a usage error after the output is known leaves nothing either
            code = tool("tokenize.lua", "--quiet --corpus " .. q(c) .. " --tokenizer " .. q(tokenizer()) ..
                        " --max-docs -1 --out " .. q(tmp("lock_usage.bin")))
            assert.are.equal(2, code)
            assert.is_false(h.exists(tmp("lock_usage.bin.lock")))
        end)

        it("on a directory, lock the directory itself: nothing to delete, the holder named", function()
            local d = tmp("lock_dir")
            os.execute("mkdir -p " .. q(d))
            local lk = dga.lock(d)
            assert.are.equal("", (io.popen("ls -A " .. q(d)):read("a")))
            local me = io.open("/proc/self/stat"):read("l"):match("^(%d+)")
            local code, _, err = run(q(h.DGALUA) .. " -e " .. q("dga.lock(" .. string.format("%q", d) .. ")"))
            assert.are.equal(1, code)
            contains(err, d .. ": locked by process " .. me)
            assert.are.equal(lk, lk:check())
            lk:release()
            code, _, err = run(q(h.DGALUA) .. " -e " .. q("dga.lock(" .. string.format("%q", d) .. "):release()"))
            assert.are.equal(0, code, err)
        end)

        it("a lock file deleted while held is detected by check", function()
            local f = tmp("held.lock")
            local lk = dga.lock(f)
            assert.is_true(h.exists(f))
            os.remove(f)
            local ok, err = pcall(lk.check, lk)
            assert.is_false(ok)
            contains(tostring(err), "held.lock: this lock file was removed or replaced while locked")
            lk:release()
        end)
    end)

    describe("smaller silent results (point 7)", function()
        it("tokenize.lua refuses a corpus whose documents are all empty, and writes no shard", function()
            local c = tmp("empty_docs")
            os.execute("mkdir -p " .. q(c))
            write(c .. "/a.txt", "")
            write(c .. "/b.txt", "")
            write(c .. "/c.jsonl", '{"text": ""}\n')
            local out = tmp("empty_docs.bin")
            local code, _, err = tool("tokenize.lua", "--quiet --corpus " .. q(c) .. " --tokenizer " .. q(tokenizer()) ..
                                      " --out " .. q(out))
            assert.are.equal(1, code, err)
            contains(err, c .. ": no document to encode (3 documents in 3 files, every one empty)")
            assert.is_false(h.exists(out))
        end)
    end)

    describe("the importance policy's histogram", function()
        it("is refused, named, when int32, 2-D or a plain table", function()
            package.path = ROOT .. "/scripts/?.lua;" .. ROOT .. "/scripts/?/init.lua;" .. package.path
            local policies = require "policies"
            local cases = {
                {dga.tensor({{0.5, 0.5}, {0, 0}}), "is a 2-D float32 tensor [2x2]"},
                {dga.zeros(4, "int32"), "is a 1-D int32 tensor [4]"},
                {{0.25, 0.25, 0.25, 0.25}, "is a table"},
            }
            for _, c in ipairs(cases) do
                local ok, err = pcall(function()
                    return policies.get("importance"):init(h.policy_ctx({1, 1, 1, 1}, {is_histogram = c[1]}))
                end)
                assert.is_false(ok)
                contains(tostring(err), "policy 'importance': is_histogram (the IS histogram) " .. c[2] ..
                                        "; it must be a 1-D float32 tensor of ctx.k = 4 domain weights")
            end
            local w = policies.get("importance"):init(h.policy_ctx({1, 1, 1, 1}, {is_histogram = dga.tensor{1, 1, 2, 0}}))
            assert.are.same({0.25, 0.25, 0.5, 0}, w:totable())
        end)
    end)

    describe("train.lua --resume", function()
        it("refuses a checkpoint without its window generator state, naming it", function()
            local d = tmp("no_rng")
            local code, _, err = tool("train.lua", "--data " .. q(shard()) .. TRAIN .. " --steps 4 --stop-at 2 --save " .. q(d))
            assert.are.equal(0, code, err)
            -- the same checkpoint, less the blob
            local ck = dga.load_checkpoint(d .. "/model.safetensors")
            assert.is_not_nil(ck.blobs.window_rng)
            local opt = dga.adamw(ck.model, {lr = 1e-2})
            dga.load_checkpoint(d .. "/model.safetensors", {model = ck.model, optimizer = opt})
            dga.save_checkpoint(d .. "/model.safetensors", {model = ck.model, optimizer = opt, meta = ck.meta})
            code, _, err = tool("train.lua", "--data " .. q(shard()) .. TRAIN .. " --steps 4 --resume --save " .. q(d))
            assert.are.equal(1, code, err)
            contains(err, d .. "/model.safetensors: the checkpoint holds no window generator state")
        end)
    end)

    describe("generate.lua", function()
        it("refuses a tokenizer whose vocabulary is not the checkpoint's, naming both", function()
            -- a checkpoint of vocabulary 400 with a tokenizer of 285 tokens (another run's)
            local big = tmp("big.safetensors")
            dga.save_checkpoint(big, {model = dga.gpt{layers = 1, width = 8, heads = 2, context = 4, vocab = 400,
                                                     batch = 1}})
            local code, _, err = tool("generate.lua", "--checkpoint " .. q(big) .. " --tokenizer " .. q(tokenizer()) ..
                                      " --prompt-ids '1 2' --tokens 3")
            assert.are.equal(1, code, err)
            contains(err, "the tokenizer " .. tokenizer() .. " has 285 tokens, but the checkpoint " .. big ..
                          " has a vocabulary of 400")
            -- a checkpoint of vocabulary 32 with it: its prompt's ids are checked
            local ck = checkpoint()
            code, _, err = tool("generate.lua", "--checkpoint " .. q(ck) .. " --tokenizer " .. q(tokenizer()) ..
                                " --prompt 'the cat' --tokens 3")
            assert.are.equal(1, code, err)
            contains(err, "--prompt: the tokenizer " .. tokenizer() .. " gives token id")
            contains(err, "outside the vocabulary [0, 32) of the checkpoint " .. ck)
            code, _, err = tool("generate.lua", "--checkpoint " .. q(ck) .. " --prompt-ids '1 40' --tokens 3")
            assert.are.equal(2, code, err)
            contains(err, "--prompt-ids: token id 40 outside the vocabulary [0, 32) of the checkpoint " .. ck)
        end)
    end)

    describe("write errors", function()
        it("train.lua --log /dev/full fails, naming the log", function()
            local code, _, err = tool("train.lua", "--data " .. q(shard()) .. TRAIN .. " --steps 2 --log /dev/full")
            assert.are.equal(1, code, err)
            contains(err, "--log /dev/full: cannot write")
        end)

        it("a tool whose standard output cannot be written fails", function()
            local code, _, err = run(q(h.DGALUA) .. " -e 'print(string.rep(\"x\", 100))' > /dev/full")
            assert.are_not.equal(0, code)
            contains(err, "standard output")
        end)
    end)
end)

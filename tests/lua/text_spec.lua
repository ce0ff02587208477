-- The text API in Lua: dga.read_jsonl / dga.read_texts / dga.text_files, the tokenizer
-- (train, encode, decode, save, load), token shards, and the two CLI tools
-- (scripts/train_tokenizer.lua, scripts/tokenize.lua) run through $DGALUA.
local dga = require "dga"

local DATA = os.getenv("DGA_SHARED_DATA") or "../shared/data"

local h = require "tests.lua.helpers"
local shell_quote, write, exists = h.shell_quote, h.write, h.exists
local DGALUA = h.DGALUA

local corpus = {
    "The cat sat on the mat. The cat's hat was on the mat.",
    "A dog and a cat: they're friends, aren't they? 42 cats, 7 dogs.",
    "def main():\n    return [x * 2 for x in range(10)]\n",
    "Caf\u{e9} cr\u{e8}me br\u{fb}l\u{e9}e \u{2014} na\u{ef}ve r\u{e9}sum\u{e9}.",
}

describe("text", function()
    local dir

    setup(function()
        dir = h.tmpdir("corpus/alpha", "corpus/beta")
        write(dir .. "/corpus/alpha/part-000.jsonl",
              '{"text": "first alpha document"}\n' ..
              'not json at all\n' ..
              '{"text": "second alpha document", "id": 2}\n')
        write(dir .. "/corpus/beta/part-000.jsonl", '{"text": "only beta document"}\n{"title": "x"}\n')
        write(dir .. "/corpus/beta/notes.txt", "a plain text note\n")
    end)

    teardown(function()
        h.rm(dir)
    end)

    describe("reading", function()
        it("iterates documents with file and line, and counts what it skips", function()
            local seen = {}
            local reader = dga.read_jsonl(dir .. "/corpus")
            for text, file, line in reader do
                seen[#seen + 1] = {text, file:match("corpus/(.*)$"), line}
            end
            assert.same({
                {"first alpha document", "alpha/part-000.jsonl", 1},
                {"second alpha document", "alpha/part-000.jsonl", 3},
                {"a plain text note\n", "beta/notes.txt", 1},
                {"only beta document", "beta/part-000.jsonl", 1},
            }, seen)
            local st = reader:stats()
            assert.equal(4, st.docs)
            assert.equal(2, st.skipped)
            assert.equal(1, st.bad_json)
            assert.equal(1, st.no_text)
            assert.equal(2, #st.messages)
            assert.truthy(st.messages[1]:find("alpha/part-000.jsonl:2: not valid JSON", 1, true))
            assert.truthy(st.messages[2]:find("beta/part-000.jsonl:2: no \"text\" field", 1, true))
            assert.truthy(tostring(reader):find("dga.text_reader", 1, true))
        end)

        it("read_texts returns a table and stats, honouring max_docs", function()
            local texts, st = dga.read_texts(dir .. "/corpus", 2)
            assert.same({"first alpha document", "second alpha document"}, texts)
            assert.equal(2, st.docs)
            local all = dga.read_texts(dir .. "/corpus/beta/part-000.jsonl")
            assert.same({"only beta document"}, all)
        end)

        it("text_files lists the walk in sorted order", function()
            local files = dga.text_files(dir .. "/corpus")
            assert.equal(3, #files)
            assert.truthy(files[1]:find("alpha/part%-000%.jsonl$"))
            assert.truthy(files[2]:find("beta/notes%.txt$"))
        end)

        it("raises a clear error for a missing path", function()
            local ok, err = pcall(dga.read_jsonl, dir .. "/nope")
            assert.is_false(ok)
            assert.truthy(err:find("nope: cannot open", 1, true))
            ok, err = pcall(dga.read_texts, dir .. "/nope")
            assert.is_false(ok)
            assert.truthy(err:find("nope", 1, true))
        end)

        it("reads a real corpus domain when the data is there", function()
            local d = DATA .. "/corpus/dm_mathematics"
            if not exists(d .. "/part-000.jsonl") then pending("corpus data absent") return end
            local texts, st = dga.read_texts(d, 50)
            assert.equal(50, #texts)
            assert.equal(0, st.skipped)
        end)
    end)

    describe("tokenizer", function()
        it("trains, round-trips and reports its vocabulary", function()
            local tok = dga.tokenizer_train(corpus, {vocab = 300})
            assert.truthy(tok:vocab_size() <= 300 and tok:vocab_size() > 257)
            assert.equal(tok:vocab_size() - 1, tok:eot())
            assert.truthy(tostring(tok):find("dga.tokenizer", 1, true))
            for _, s in ipairs(corpus) do
                local ids = tok:encode(s)
                assert.equal("int32", ids:dtype())
                assert.truthy(#ids < #s)   -- merges learned on this very text must compress it
                assert.equal(s, tok:decode(ids))
            end
            -- any bytes round-trip, including NUL and invalid UTF-8
            local weird = "\0\255\254 x\0y \192\128 \u{1F600}"
            assert.equal(weird, tok:decode(tok:encode(weird)))
            assert.equal(0, #tok:encode(""))
            assert.equal("", tok:decode({}))
            -- a plain table of ids decodes too; the eot id decodes to its text
            assert.equal("Hi<|endoftext|>", tok:decode({72, 105, tok:eot()}))
            assert.equal("H", tok:decode(72))
        end)

        it("learns the hand-worked first merges", function()
            local tok = dga.tokenizer_train({"aaab aaab ab"}, {vocab = 300})
            -- (a,a) then (a,b) then (aa,ab): see tests/c/test_bpe.c for the counts
            local a, b = tok:merge(0)
            assert.same({97, 97}, {a, b})
            a, b = tok:merge(1)
            assert.same({97, 98}, {a, b})
            a, b = tok:merge(2)
            assert.same({256, 257}, {a, b})
            assert.equal(262, tok:vocab_size())
        end)

        it("trains from an iterator (a reader) as from a table", function()
            local t1 = dga.tokenizer_train(dga.read_jsonl(dir .. "/corpus"), {vocab = 280})
            local t2 = dga.tokenizer_train((dga.read_texts(dir .. "/corpus")), {vocab = 280})
            assert.equal(t1:vocab_size(), t2:vocab_size())
            local s = "second alpha document about beta"
            assert.same(t1:encode(s):totable(), t2:encode(s):totable())
        end)

        it("saves and loads tokenizer.json with identical encodings", function()
            local tok = dga.tokenizer_train(corpus, {vocab = 320})
            local path = dir .. "/tok.json"
            tok:save(path)
            local back = dga.tokenizer_load(path)
            assert.equal(tok:vocab_size(), back:vocab_size())
            for _, s in ipairs(corpus) do
                assert.same(tok:encode(s):totable(), back:encode(s):totable())
            end
            local f = assert(io.open(path, "r"))
            local json = f:read("a")
            f:close()
            assert.truthy(json:find('"type": "BPE"', 1, true))
            assert.truthy(json:find('"<|endoftext|>"', 1, true))
        end)

        it("raises clear errors for bad input", function()
            local tok = dga.tokenizer_train(corpus, {vocab = 300})
            local ok, err = pcall(function() return tok:decode({1, 99999}) end)
            assert.is_false(ok)
            assert.truthy(err:find("token id 99999 at [2] outside vocabulary", 1, true))
            ok, err = pcall(dga.tokenizer_train, {"fine", 42})
            assert.is_false(ok)
            assert.truthy(err:find("texts entry 2 is a number", 1, true))
            ok, err = pcall(dga.tokenizer_train, corpus, {vocab = 10})
            assert.is_false(ok)
            assert.truthy(err:find("vocab", 1, true))
            ok, err = pcall(dga.tokenizer_load, dir .. "/missing.json")
            assert.is_false(ok)
            assert.truthy(err:find("missing.json", 1, true))
            ok, err = pcall(dga.tokenizer_load, dir)
            assert.is_false(ok)
            assert.truthy(err:find("not a regular file", 1, true))
            write(dir .. "/bad.json", "{\"model\": 3}")
            ok, err = pcall(dga.tokenizer_load, dir .. "/bad.json")
            assert.is_false(ok)
            assert.truthy(err:find("model", 1, true))
            tok:close()
            ok, err = pcall(tok.encode, tok, "x")
            assert.is_false(ok)
            assert.truthy(err:find("closed", 1, true))
        end)

        it("encodes a corpus with <|endoftext|> before every document", function()
            local tok = dga.tokenizer_train(corpus, {vocab = 300})
            local ids, st = tok:encode_corpus(dir .. "/corpus")
            assert.equal(4, st.docs)
            local eot, n = tok:eot(), 0
            for i = 1, #ids do if ids[i] == eot then n = n + 1 end end
            assert.equal(4, n)
            assert.equal(eot, ids[1])
            assert.equal("<|endoftext|>first alpha document<|endoftext|>second alpha document" ..
                         "<|endoftext|>a plain text note\n<|endoftext|>only beta document", tok:decode(ids))
            local some = tok:encode_corpus(dir .. "/corpus", {max_docs = 1})
            assert.equal("<|endoftext|>first alpha document", tok:decode(some))
        end)
    end)

    describe("shards", function()
        it("round-trip uint16 and uint32 shards", function()
            local t = dga.tensor({0, 1, 65535, 42}, "int32")
            dga.shard_write(dir .. "/a.bin", t, 65536)
            local back, info = dga.shard_read(dir .. "/a.bin")
            assert.same({0, 1, 65535, 42}, back:totable())
            assert.same({version = 1, n_tokens = 4, vocab_size = 65536, token_bytes = 2}, info)
            dga.shard_write(dir .. "/b.bin", {0, 70000, 99999}, 100000)
            back, info = dga.shard_read(dir .. "/b.bin")
            assert.same({0, 70000, 99999}, back:totable())
            assert.equal(2, info.version)
        end)

        it("rejects tokens outside the vocabulary and malformed files", function()
            local ok, err = pcall(dga.shard_write, dir .. "/c.bin", {1, 2, 300}, 256)
            assert.is_false(ok)
            assert.truthy(err:find("token 300 at index 2 outside vocabulary", 1, true))
            write(dir .. "/junk.bin", string.rep("x", 2000))
            ok, err = pcall(dga.shard_read, dir .. "/junk.bin")
            assert.is_false(ok)
            assert.truthy(err:find("bad magic", 1, true))
            -- truncate a valid shard
            dga.shard_write(dir .. "/d.bin", {1, 2, 3, 4, 5}, 10)
            local f = assert(io.open(dir .. "/d.bin", "rb"))
            local bytes = f:read("a")
            f:close()
            write(dir .. "/d.bin", bytes:sub(1, #bytes - 4))
            ok, err = pcall(dga.shard_read, dir .. "/d.bin")
            assert.is_false(ok)
            assert.truthy(err:find("truncated: header says 5 tokens, file holds 3", 1, true))
        end)
    end)

    describe("command-line tools", function()
        local function run(args)
            return h.run(shell_quote(DGALUA) .. " " .. args, dir .. "/stderr.txt")
        end

        it("train_tokenizer.lua then tokenize.lua make a shard that decodes to the corpus", function()
            if not DGALUA then pending("DGALUA is not set (run through tests/run)") return end
            local tokp, shard = dir .. "/cli_tok.json", dir .. "/cli.bin"
            local code, out, err = run("scripts/train_tokenizer.lua --corpus " .. shell_quote(dir .. "/corpus") ..
                                       " --vocab 290 --sample-mb 1 --out " .. shell_quote(tokp))
            assert.equal(0, code, err)
            assert.truthy(out:find("vocab", 1, true))
            assert.truthy(err:find("1 malformed lines skipped", 1, true) or err:find("2 malformed lines skipped", 1, true))
            code, out, err = run("scripts/tokenize.lua --corpus " .. shell_quote(dir .. "/corpus") ..
                                 " --tokenizer " .. shell_quote(tokp) .. " --out " .. shell_quote(shard))
            assert.equal(0, code, err)
            assert.truthy(out:find("4 documents", 1, true))
            local tok = dga.tokenizer_load(tokp)
            local ids, info = dga.shard_read(shard)
            assert.equal(1, info.version)
            assert.equal(tok:vocab_size(), info.vocab_size)
            local text = tok:decode(ids)
            assert.truthy(text:find("<|endoftext|>only beta document", 1, true))
        end)

        it("print --help and fail cleanly on a missing corpus", function()
            if not DGALUA then pending("DGALUA is not set (run through tests/run)") return end
            local code, out = run("scripts/train_tokenizer.lua --help")
            assert.equal(0, code)
            assert.truthy(out:find("--sample-mb", 1, true))
            code, out = run("scripts/tokenize.lua --help")
            assert.equal(0, code)
            assert.truthy(out:find("--tokenizer", 1, true))
            local _, err
            code, _, err = run("scripts/train_tokenizer.lua --corpus " .. shell_quote(dir .. "/none") ..
                                 " --out " .. shell_quote(dir .. "/x.json"))
            assert.is_not.equal(0, code)
            assert.truthy(err:find("none: cannot open", 1, true))
        end)
    end)
end)

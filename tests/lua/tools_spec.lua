-- The tools as a newcomer first meets them (issue 23, point 7): generate echoes the prompt,
-- eval has a JSON output, inspect_store's first sample comes from the domain's main source,
-- every tool's error starts "dgalua:", and option mistakes name the option (negative
-- numbers included).
local dga = require "dga"
local h = require "tests.lua.helpers"
local json = require "util.json"

local shell_quote, write, contains = h.shell_quote, h.write, h.contains
local DGALUA = h.DGALUA
local ROOT = h.cwd()

local tmpdir
local function tmp(name) return tmpdir .. "/" .. name end
local function tool(name, rest)
    return h.run(shell_quote(DGALUA) .. " " .. shell_quote(ROOT .. "/scripts/" .. name) .. " " .. rest,
                 tmp("err.txt"))
end

describe("the tools", function()
    setup(function()
        tmpdir = h.tmpdir()
        -- a tiny model with its tokenizer, and a shard in its vocabulary
        local tok = dga.tokenizer_train({"It was a dark and stormy night. The cat was dark."}, {vocab = 280})
        local m = dga.gpt{layers = 1, width = 16, heads = 2, context = 16, vocab = tok:vocab_size(), batch = 2}
        require("data.model_dir").save(tmp("ck"), {model = m, tokenizer = tok})
        local ids = dga.zeros(200, "int32")
        for i = 1, 200 do ids[i] = (i * 7) % tok:vocab_size() end
        dga.shard_write(tmp("s.bin"), ids, tok:vocab_size())
    end)
    teardown(function() h.rm(tmpdir) end)
    before_each(function()
        if not DGALUA then pending("DGALUA is not set (run through tests/run)") end
    end)

    it("generate.lua echoes the prompt, and --no-echo leaves it out", function()
        local base = "--checkpoint " .. shell_quote(tmp("ck")) .. " --tokens 3 "
        local code, out, err = tool("generate.lua", base .. "--prompt-ids '5 6 7'")
        assert.are.equal(0, code, err)
        local echoed, new = out:match("^([%d ]+) | ([%d ]+)\n")
        assert.are.equal("5 6 7", echoed, out)
        local _, quiet = tool("generate.lua", base .. "--prompt-ids '5 6 7' --no-echo")
        assert.are.equal(new, quiet:match("^([%d ]+)\n"), quiet)
        code, out, err = tool("generate.lua", base .. "--prompt 'It was a'")
        assert.are.equal(0, code, err)
        assert.truthy(out:find("\ntext: It was a", 1, true), out)
        _, out = tool("generate.lua", base .. "--prompt 'It was a' --no-echo")
        assert.is_nil(out:find("text: It was a", 1, true), out)
    end)

    it("eval.lua --json prints the numbers of the text line as one JSON object", function()
        local rest = "--checkpoint " .. shell_quote(tmp("ck")) .. " --data " .. shell_quote(tmp("s.bin"))
        local code, text, err = tool("eval.lua", rest)
        assert.are.equal(0, code, err)
        local out
        code, out, err = tool("eval.lua", rest .. " --json")
        assert.are.equal(0, code, err)
        local r = json.decode(out, "eval --json")
        assert.are.equal(string.format("loss %.6f ppl %.2f windows %d tokens %d", r.loss, r.ppl, r.windows, r.tokens),
                         text:match("^[^\n]*"))
        assert.are.equal(16, r.context)
        assert.are.equal(tmp("s.bin"), r.data)
    end)

    it("inspect_store.lua shows the domain's majority source first", function()
        -- one domain: 2 documents from a source sorted first, 12 from the other
        for name, n in pairs{aaa_minor = 2, zzz_major = 12} do
            os.execute("mkdir -p " .. shell_quote(tmp("corpus/" .. name)))
            local docs = {}
            for d = 1, n do
                local words = {}
                for i = 1, 80 do words[i] = name:sub(5) .. (i % 7) end
                docs[d] = '{"text": "' .. table.concat(words, " ") .. '"}'
            end
            write(tmp("corpus/" .. name .. "/part.jsonl"), table.concat(docs, "\n") .. "\n")
        end
        dga.store_build{corpus = tmp("corpus"), out = tmp("store"), levels = {1}, seq_len = 33, vocab = 300}
        local s = dga.store_open(tmp("store"))
        assert.are.equal("aaa_minor", s:info(1, 1, 1).source)   -- what the first sample used to be
        s:close()
        local code, out, err = tool("inspect_store.lua", shell_quote(tmp("store")) .. " --samples 3")
        assert.are.equal(0, code, err)
        local sources = {}
        for src in out:gmatch("\n    #%d+ %(([%w_]+), doc") do sources[#sources + 1] = src end
        assert.are.same({"zzz_major", "zzz_major", "zzz_major"}, sources)
        -- with enough samples the minority source gets its share
        local _
        _, out = tool("inspect_store.lua", shell_quote(tmp("store")) .. " --samples 8")
        local minor = select(2, out:gsub("%(aaa_minor, doc", ""))
        assert.are.equal(1, minor, out)
        assert.truthy(out:find("\n    #%d+ %(zzz_major"), out)
    end)

    it("train_tokenizer.lua reports a corpus without text with the dgalua: prefix", function()
        os.execute("mkdir -p " .. shell_quote(tmp("empty/d")))
        local code, _, err = tool("train_tokenizer.lua", "--corpus " .. shell_quote(tmp("empty")) .. " --out " ..
                                  shell_quote(tmp("t.json")))
        assert.are.equal(1, code)
        assert.truthy(err:match("^dgalua: no %.jsonl or %.txt files under "), err)
    end)

    it("range errors name the option, and negative numbers are values", function()
        local data = " --data " .. shell_quote(tmp("s.bin"))
        local code, _, err = tool("train.lua", data .. " --batch 0")
        assert.are.equal(2, code)
        contains(err, "Error: --batch: 0 is outside 1..inf")
        code, _, err = tool("train.lua", data .. " --steps -5")
        assert.are.equal(2, code)
        contains(err, "Error: --steps: -5 is outside 1..inf")
        code, _, err = tool("train.lua", data .. " --lr -1e-3")
        assert.are.equal(2, code)
        contains(err, "Error: --lr: -1e-3 is outside 0..inf")
        code, _, err = tool("generate.lua", "--checkpoint x --top-p 2")
        assert.are.equal(2, code)
        contains(err, "--top-p: 2 is outside 0..1")
        -- an unknown option stays one, and a negative value is accepted where the range allows it
        code, _, err = tool("train.lua", data .. " --bogus -5")
        assert.are.equal(2, code)
        contains(err, "unknown option '--bogus'")
        local args = require "cli.args"
        local p = require("argparse")("t"):add_help(false)
        p:option("--shift"):convert(args.number())
        p:option("-s"):convert(args.int())
        p:flag("--flag")
        local r = p:parse{"--shift", "-2.5", "-s", "-3"}
        assert.are.equal(-2.5, r.shift)
        assert.are.equal(-3, r.s)
        assert.are.same({"--flag", "-1"}, args.join_negative_values(p, {"--flag", "-1"}))
    end)
end)

describe("make deps", function()
    local function dry(args)
        local code, out = h.run("make -n -C " .. shell_quote(ROOT) .. " " .. args, os.tmpname())
        assert.are.equal(0, code, out)
        return out
    end

    it("installs what the main job needs, and OpenMPI only with MPI=1 or for the tests", function()
        if os.execute("command -v make >/dev/null 2>&1") ~= true then pending("no make") end
        local deps = dry("deps")
        contains(deps, "libopenblas-dev")
        assert.is_nil(deps:find("openmpi", 1, true), deps)
        contains(dry("deps MPI=1"), "libopenmpi-dev")
        contains(dry("test-deps"), "openmpi-bin libopenmpi-dev")
    end)
end)

-- Domain store, embeddings, k-means and .npy from Lua, on a small synthetic corpus of two
-- sources whose vocabularies share no letter (so every check below could fail if clustering,
-- ordering or gathering were wrong).
local dga = dga or require "dga"

local h = require "tests.lua.helpers"
local tmpdir, rm = h.tmpdir, h.rm

-- Words of source 1 use letters a..m, source 2 letters n..z.
local function make_words(r, first, count)
    local words = {}
    for i = 1, count do
        local w = {}
        for j = 1, 3 + r:below(5) do w[j] = string.char(first + r:below(13)) end
        words[i] = table.concat(w)
    end
    return words
end

local function make_text(r, words, n)
    local t = {}
    for i = 1, n do t[i] = words[1 + r:below(#words)] end
    return table.concat(t, " ")
end

local function write_jsonl(path, texts)
    local f = assert(io.open(path, "w"))
    for _, t in ipairs(texts) do f:write('{"text": "', t, '"}\n') end
    f:close()
end

describe("domain store", function()
    local root, corpus, store_dir, s, words
    local r = dga.rng(7)

    setup(function()
        root = tmpdir()
        corpus = root .. "/corpus"
        store_dir = root .. "/store"
        words = {make_words(r, string.byte("a"), 30), make_words(r, string.byte("n"), 30)}
        for i, name in ipairs({"alpha", "omega"}) do
            os.execute("mkdir -p '" .. corpus .. "/" .. name .. "'")
            local texts = {}
            for d = 1, 60 do texts[d] = make_text(r, words[i], 40 + r:below(40)) end
            write_jsonl(corpus .. "/" .. name .. "/part-000.jsonl", texts)
        end
        dga.store_build{corpus = corpus, out = store_dir, levels = {2, 3}, seq_len = 33,
                        vocab = 320, seed = 3}
        s = dga.store_open(store_dir)
    end)

    teardown(function()
        if s then s:close() end
        rm(root)
    end)

    it("opens with the requested shape", function()
        assert.are.equal(2, s:levels())
        assert.are.equal(2, s:k(1))
        assert.is_true(s:k(2) >= 2 and s:k(2) <= 6)
        assert.are.equal(33, s:seq_len())
        assert.matches("dga.store%(", tostring(s))
        local m = s:manifest()
        assert.matches('"spherical": true', m)
        assert.matches('"hash384"', m)
    end)

    it("refuses a manifest whose vocabulary is not its tokenizer's", function()
        local copy = root .. "/vocab_copy"
        assert(os.execute(string.format("cp -r %s %s", h.shell_quote(store_dir), h.shell_quote(copy))))
        local m = h.read(copy .. "/manifest.json")
        local changed, n = m:gsub('"vocab_size": 320', '"vocab_size": 9999')
        assert.are.equal(1, n)
        h.write(copy .. "/manifest.json", changed)
        local ok, err = pcall(dga.store_open, copy)
        assert.is_false(ok)
        assert.matches(copy .. "/manifest.json: vocab_size 9999, but " .. copy .. "/tokenizer.json has 320 tokens",
                       err, 1, true)
        rm(copy)
    end)

    it("puts the two sources in different coarse domains", function()
        local names, counts = s:sources(1)
        assert.are.same({"alpha", "omega"}, names)
        for d = 1, 2 do
            assert.is_true((counts:at(d, 1) == 0) ~= (counts:at(d, 2) == 0))
        end
        assert.is_true((counts:at(1, 1) == 0) ~= (counts:at(2, 1) == 0))
    end)

    it("sizes add up and leaf ranges are contiguous", function()
        for l = 1, 2 do
            local sz = s:domain_sizes(l)
            assert.are.equal("int32", sz:dtype())
            assert.are.equal(s:num_sequences(), sz:sum())
            local tk = s:domain_tokens(l)
            for d = 1, s:k(l) do assert.are.equal(sz[d] * 33, tk[d]) end
        end
        local f1, n1 = s:leaves(1, 1)
        local f2, n2 = s:leaves(1, 2)
        assert.are.equal(1, f1)
        assert.are.equal(f1 + n1, f2)
        assert.are.equal(s:k(2), n1 + n2)
    end)

    it("gathers inputs and targets shifted by one", function()
        local inputs, targets = s:gather(1, {1, 2, 2}, {1, 3, 1})
        assert.are.same({3, 32}, inputs:shape())
        assert.are.same({3, 32}, targets:shape())
        local seq = s:sequence(1, 2, 3)
        for t = 1, 32 do
            assert.are.equal(seq[t], inputs:at(2, t))
            assert.are.equal(seq[t + 1], targets:at(2, t))
        end
        local ok, err = pcall(s.gather, s, 1, {1, 3}, {1, 1})
        assert.is_false(ok)
        assert.matches("batch row 2: domain 3 outside %[1, 2%]", err)
        ok, err = pcall(s.sequence, s, 3, 1, 1)
        assert.is_false(ok)
        assert.matches("level 3 outside %[1, 2%]", err)
    end)

    it("decodes sequences with the store's tokenizer into the source's words", function()
        local _, counts = s:sources(1)
        local alpha_domain = counts:at(1, 1) > 0 and 1 or 2
        local tok = s:tokenizer()
        local text = tok:decode(s:sequence(1, alpha_domain, 1))
        text = text:gsub("<|endoftext|>", " ")
        for w in text:gmatch("%a+") do assert.matches("^[a-m]+$", w) end
        assert.are.equal("alpha", s:info(1, alpha_domain, 1).source)
    end)

    it("puts the IS histogram of one source's texts on its domain", function()
        local _, counts = s:sources(1)
        local omega_domain = counts:at(1, 2) > 0 and 1 or 2
        local texts = {}
        for i = 1, 8 do texts[i] = make_text(r, words[2], 30) end
        local hist, used = s:histogram(texts, 1)
        assert.are.equal(8, used)
        assert.are.equal(1, hist[omega_domain])
        assert.are.equal(0, hist[3 - omega_domain])
        local h2 = s:histogram(texts, 2)
        dga.check_distribution(h2)
        local ids, scores = s:nearest(texts[1], 1, 2)
        assert.are.equal(omega_domain, ids[1])
        assert.is_true(scores[1] >= scores[2])
        h.raises("histogram: none of the 2 texts has a word to embed", function() s:histogram({"...", "!!"}, 1) end)
        h.raises("texts[1] is a number, expected a string", function() s:histogram({1, 2}, 1) end)
    end)

    it("builds with the model embedder (gpt:CKPT: mean-pooled hidden states)", function()
        -- a small model trained a few steps on the store's own sequences, saved with the
        -- store's tokenizer beside it, as a gpt:CKPT embedder expects
        local mdir = root .. "/model"
        os.execute("mkdir -p '" .. mdir .. "'")
        s:tokenizer():save(mdir .. "/tokenizer.json")
        local m = dga.gpt{layers = 1, width = 24, heads = 2, context = 32, vocab = s:vocab_size(),
                          batch = 4, seed = 5}
        local opt = dga.adamw(m, {lr = 1e-2})
        for step = 1, 10 do
            local d = 1 + step % 2
            local x, y = s:gather(1, {d, d, d, d}, {1, 2, 3, 1 + step % 4})
            m:zero_grad(); m:forward(x, y); m:backward(); opt:step()
        end
        dga.save_checkpoint(mdir .. "/model.safetensors", {model = m})
        local out = root .. "/store_gpt"
        dga.store_build{corpus = corpus, out = out, levels = {2}, seq_len = 33,
                        tokenizer = mdir .. "/tokenizer.json", embedder = "gpt:" .. mdir .. "/model.safetensors",
                        seed = 3}
        local g = dga.store_open(out)
        assert.matches('"name": "gpt"', g:manifest())
        assert.are.same({2, 24}, g:centroids(1):shape())
        -- the two alphabets still end up in different domains
        local _, counts = g:sources(1)
        assert.is_true((counts:at(1, 1) == 0) ~= (counts:at(2, 1) == 0))
        -- texts embedded after the build (the store's own copy of the model) land there too
        local alpha_domain = counts:at(1, 1) > 0 and 1 or 2
        local texts = {}
        for i = 1, 6 do texts[i] = make_text(r, words[1], 30) end
        local hist = g:histogram(texts, 1)
        assert.are.equal(1, hist[alpha_domain])
        local e = dga.embed({texts[1], texts[1]}, g)
        assert.are.same({2, 24}, e:shape())
        assert.is_true(math.abs(e:narrow(1, 1):norm() - 1) < 1e-5)
        g:close()
        -- no tokenizer beside the checkpoint: a clear error
        os.remove(mdir .. "/tokenizer.json")
        local ok, err = pcall(dga.store_build, {corpus = corpus, out = root .. "/store_gpt2", levels = {2},
                                                seq_len = 33, vocab = 320, embedder = "gpt:" .. mdir .. "/model.safetensors"})
        assert.is_false(ok)
        assert.matches("tokenizer.json beside the checkpoint", err, 1, true)
    end)

    it("runs the CLI tools", function()
        local exe = os.getenv("DGALUA")
        if not exe then pending("DGALUA not set") return end
        local out2 = root .. "/store2"
        -- a malformed line and a good one, in a file of their own (this is the last test)
        local bad = assert(io.open(corpus .. "/alpha/part-001.jsonl", "w"))
        bad:write('{"text": "unterminated\n', '{"text": "', make_text(r, words[1], 50), '"}\n')
        bad:close()
        -- "--out DIR/" (a trailing slash) names the store DIR
        local cmd = string.format("'%s' scripts/build_store.lua '%s' --out '%s/' --levels 2 --seq-len 17 --vocab 300 --quiet --embeddings",
            exe, corpus, out2)
        local f = io.popen(cmd .. " 2>&1")
        local log = f:read("a")
        assert.is_true(f:close(), log)
        assert.matches("level 1: 2 domains", log)
        assert.matches("1 malformed lines skipped", log, 1, true)
        assert.matches("alpha/part-001.jsonl:1: not valid JSON", log, 1, true)
        assert.is_nil(io.open(out2 .. "/.tmp", "r"))
        -- embeddings.npy: one unit row per store row, in store order, so the rows of coarse
        -- domain d are nearest to centroid d
        local s2 = dga.store_open(out2)
        local emb, cen = dga.npy_load(out2 .. "/embeddings.npy"), s2:centroids(1)
        assert.are.same({s2:num_sequences(), 384}, emb:shape())
        local sizes, row = s2:domain_sizes(1), 0
        for d = 1, 2 do
            for _ = 1, sizes[d] do
                row = row + 1
                local e = emb:narrow(row, 1):reshape{384}
                assert.is_true(math.abs(e:norm() - 1) < 1e-4)
                local other = 3 - d
                assert.is_true(e:dot(cen:narrow(d, 1):reshape{384}) > e:dot(cen:narrow(other, 1):reshape{384}),
                               "row " .. row .. " of domain " .. d)
            end
        end
        s2:close()
        local texts = root .. "/is.txt"
        local tf = assert(io.open(texts, "w"))
        for i = 1, 5 do tf:write(make_text(r, words[1], 20), "\n") end
        tf:close()
        f = io.popen(string.format("'%s' scripts/is_histogram.lua --store '%s' --texts '%s' --lines --out '%s/h.npy' 2>&1",
            exe, out2, texts, root))
        log = f:read("a")
        assert.is_true(f:close(), log)
        local hist = dga.npy_load(root .. "/h.npy")
        assert.are.same({2}, hist:shape())
        assert.are.equal(1, hist:max())
        -- JSON Lines input with a malformed line: counted and named, the rest used
        local jl = assert(io.open(root .. "/is.jsonl", "w"))
        jl:write('{"text": "', make_text(r, words[1], 20), '"}\n', 'not json\n')
        jl:close()
        f = io.popen(string.format("'%s' scripts/is_histogram.lua --store '%s' --texts '%s/is.jsonl' 2>&1",
            exe, out2, root))
        log = f:read("a")
        assert.is_true(f:close(), log)
        assert.matches("1 malformed lines skipped", log, 1, true)
        assert.matches("is.jsonl:2: not valid JSON", log, 1, true)
        assert.matches("1 texts %(1 with words%)", log)
        f = io.popen(string.format("'%s' scripts/inspect_store.lua '%s' --samples 1 2>&1", exe, out2))
        log = f:read("a")
        assert.is_true(f:close(), log)
        assert.matches("domain 2:", log)
        assert.matches("sources: alpha 9%d+%%", log)
        assert.matches("sources: omega 9%d+%%", log)
    end)
end)

describe("embeddings, k-means, npy", function()
    it("embeds deterministically into unit vectors", function()
        local texts = {"the court held the contract void", "def f(x): return x", "the court"}
        local a, b = dga.embed(texts), dga.embed(texts)
        assert.are.same({3, 384}, a:shape())
        for i = 1, #a do assert.are.equal(a[i], b[i]) end
        for i = 1, 3 do
            local row = a:narrow(i, 1)
            assert.is_true(math.abs(row:norm() - 1) < 1e-5)
        end
        h.raises("texts[2] is a boolean, expected a string", function() dga.embed({"x", false}) end)
    end)

    it("k-means recovers separated blobs", function()
        local r = dga.rng(5)
        local n, d = 300, 4
        local pts = dga.zeros(n, d)
        local centers = {{10, 0, 0, 0}, {0, 10, 0, 0}, {0, 0, 10, 0}}
        for i = 1, n do
            local c = centers[(i - 1) % 3 + 1]
            for j = 1, d do pts[(i - 1) * d + j] = c[j] + 0.1 * r:normal() end
        end
        local cent, assign = dga.kmeans(pts, 3, {seed = 1})
        assert.are.same({3, 4}, cent:shape())
        for i = 4, n do assert.are.equal(assign[i - 3], assign[i]) end
        assert.are_not.equal(assign[1], assign[2])
        assert.are_not.equal(assign[2], assign[3])
        assert.are_not.equal(assign[1], assign[3])
        h.raises("k = 0, expected 1 <= k <= n", function() dga.kmeans(pts, 0) end)
    end)

    it("hierarchical k-means numbers leaves contiguously per parent", function()
        local r = dga.rng(11)
        local n, d = 400, 6
        local pts = dga.zeros(n, d)
        for i = 1, n do
            local c = (i - 1) % 4 + 1
            for j = 1, d do pts[(i - 1) * d + j] = (j == c and 5 or 0) + 0.3 * r:normal() end
        end
        local tree = dga.kmeans_hierarchical(pts, {4, 3}, {seed = 2})
        assert.are.equal(4, tree.k[1])
        local kleaf = tree.k[2]
        assert.are.equal(1, tree.ranges[1][1])
        assert.are.equal(kleaf + 1, tree.ranges[1][5])
        -- Points of one blob share a coarse domain: their leaves fall in one coarse range.
        local function coarse(leaf)
            for c = 1, 4 do
                if leaf >= tree.ranges[1][c] and leaf < tree.ranges[1][c + 1] then return c end
            end
        end
        for i = 5, n do assert.are.equal(coarse(tree.leaf[i - 4]), coarse(tree.leaf[i])) end
        h.raises("levels[1] must be an integer >= 1", function() dga.kmeans_hierarchical(pts, {0}) end)
    end)

    it("saves and loads .npy", function()
        local p = os.tmpname()
        local t = dga.tensor({{1.5, 2}, {3, 4}})
        dga.npy_save(p, t)
        local u = dga.npy_load(p)
        assert.are.same({2, 2}, u:shape())
        assert.are.equal("float32", u:dtype())
        assert.are.same(t:totable(), u:totable())
        local i = dga.tensor({1, 2, 3}, "int32")
        dga.npy_save(p, i)
        assert.are.equal("int32", dga.npy_load(p):dtype())
        local f = io.open(p, "wb")
        f:write("this is not numpy, only some text")
        f:close()
        local ok, err = pcall(dga.npy_load, p)
        assert.is_false(ok)
        assert.matches("not a .npy file", err)
        os.remove(p)
        ok, err = pcall(dga.npy_load, "/tmp")
        assert.is_false(ok)
        assert.truthy(err:find("/tmp: not a regular file", 1, true))
    end)
end)

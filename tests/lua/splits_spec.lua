-- Document-level splits (dgalib.splits): roles, the store of a plan, the leakage check, on a
-- small synthetic corpus whose documents share no stretch of text (so any hit of the check is
-- a real leak), then on small real data.
local dga = dga or require "dga"
local splits = require "dgalib.splits"

local h = require "tests.lua.helpers"

local function write_jsonl(path, texts)
    local f = assert(io.open(path, "w"))
    for _, t in ipairs(texts) do f:write('{"text": "', t, '"}\n') end
    f:close()
end

-- Domain i's words use letters first..first+12; every document is random words.
local function make_corpus(root, r, spec)
    for _, d in ipairs(spec) do
        os.execute("mkdir -p '" .. root .. "/" .. d.name .. "'")
        local texts = {}
        for i = 1, d.docs do
            local words = {}
            for j = 1, 30 + r:below(40) do
                local w = {}
                for c = 1, 2 + r:below(6) do w[c] = string.char(d.first + r:below(13)) end
                words[j] = table.concat(w)
            end
            texts[i] = table.concat(words, " ")
        end
        write_jsonl(root .. "/" .. d.name .. "/part-000.jsonl", texts)
    end
end

-- fn() raises an error matching the Lua pattern pat.
local function raises_match(fn, pat)
    local e = h.err_of(fn)
    assert(e:match(pat), string.format("%q does not match %q", e, pat))
end

local function same_list(a, b)
    if #a ~= #b then return false end
    for i = 1, #a do if a[i] ~= b[i] then return false end end
    return true
end

describe("splits on a synthetic corpus", function()
    local root, corpus, cache
    local opts

    setup(function()
        root = h.tmpdir("corpus", "cache")
        corpus, cache = root .. "/corpus", root .. "/cache"
        make_corpus(corpus, dga.rng(11), {
            {name = "alpha", docs = 40, first = string.byte("a")},
            {name = "beta", docs = 50, first = string.byte("h")},
            {name = "gamma", docs = 30, first = string.byte("n")},
        })
        opts = {corpus = corpus, data_seed = 1, targets = {"gamma"}, specific_heldout_docs = 6,
                basis_docs = 4, basis_heldout_docs = 2, generic_heldout_docs = 3}
    end)

    teardown(function() h.rm(root) end)

    local function with(extra)
        local o = {}
        for k, v in pairs(opts) do o[k] = v end
        for k, v in pairs(extra or {}) do o[k] = v end
        return o
    end

    it("gives every document exactly one role, the counts asked for", function()
        local plan = splits.plan(opts)
        for _, d in ipairs{"alpha", "beta", "gamma"} do
            local seen, n = {}, 0
            for _, r in ipairs(splits.ROLES) do
                for _, doc in ipairs(plan:docs(d, r)) do
                    assert.is_nil(seen[doc], d .. " document " .. doc .. " has two roles")
                    seen[doc], n = r, n + 1
                    assert.are.equal(r, plan:role(d, doc))
                end
            end
            assert.are.equal(#dga.read_texts(corpus .. "/" .. d), n)
        end
        assert.are.equal(6, #plan:docs("gamma", "specific_heldout"))
        assert.are.equal(24, #plan:docs("gamma", "specific_train"))
        assert.are.equal(0, #plan:docs("gamma", "store"))
        assert.are.equal(4, #plan:docs("alpha", "basis"))
        assert.are.equal(2, #plan:docs("alpha", "basis_heldout"))
        assert.are.equal(3, #plan:docs("beta", "generic_heldout"))
        assert.are.equal(50 - 9, #plan:docs("beta", "store"))
        -- texts are the documents named by docs
        local all = dga.read_texts(corpus .. "/beta")
        local docs, texts = plan:docs("beta", "basis"), plan:texts("beta", "basis")
        for i, doc in ipairs(docs) do assert.are.equal(all[doc], texts[i]) end
        local desc = plan:describe()
        assert.are.equal(41, desc.domains.beta.store.docs)
        assert.is_truthy(plan:summary():match("beta"))
    end)

    it("is deterministic per data_seed, changes with it, and ignores other domains", function()
        local a, b = splits.plan(opts), splits.plan(opts)
        local c = splits.plan(with{data_seed = 2})
        local only_beta = splits.plan(with{targets = {}, domains = {"beta"}})
        local changed = false
        for _, r in ipairs(splits.ROLES) do
            for _, d in ipairs{"alpha", "beta", "gamma"} do
                assert.is_true(same_list(a:docs(d, r), b:docs(d, r)))
                if not same_list(a:docs(d, r), c:docs(d, r)) then changed = true end
            end
            assert.is_true(same_list(a:docs("beta", r), only_beta:docs("beta", r)))
        end
        assert.is_true(changed)
    end)

    it("caps the store at max_mb and names bad counts", function()
        local plan = splits.plan(with{max_mb = 0.002})
        local n, bytes = 0, 0
        for _, t in ipairs(plan:texts("beta", "store")) do n, bytes = n + 1, bytes + #t end
        assert.is_true(n >= 1 and n < 41)
        assert.is_true(bytes >= 2000 and bytes - #plan:texts("beta", "store")[n] < 2000)
        assert.are.equal(41 - n, #plan:docs("beta", "unused"))
        raises_match(function() splits.plan(with{specific_heldout_docs = 30}):docs("gamma", "store") end,
                               "gamma has 30 documents")
        raises_match(function() splits.plan(with{basis_docs = 40}):texts("alpha", "basis") end,
                               "alpha has 40 documents")
        raises_match(function() splits.plan(with{basis_docs = -1}) end, "basis_docs for alpha")
        raises_match(function() splits.plan(with{targets = {"delta"}}) end, "target 'delta'")
        raises_match(function() splits.plan(opts):texts("alpha", "train") end, "unknown role 'train'")
    end)

    it("builds a store of exactly the store documents, keyed by data_seed", function()
        local plan = splits.plan(opts)
        local dir = plan:store{levels = {2}, seq_len = 17, vocab = 300, cache = cache, quiet = true}
        local s = dga.store_open(dir)
        local names = s:sources()
        assert.are.same({"alpha", "beta"}, names)
        local m = s:manifest()
        assert.are.equal(#plan:docs("alpha", "store") + #plan:docs("beta", "store"),
                         tonumber(m:match('"documents":%s*(%d+)')))
        assert.are.equal(dir, plan:store{levels = {2}, seq_len = 17, vocab = 300, cache = cache, quiet = true})
        local other = splits.plan(with{data_seed = 2}):store{levels = {2}, seq_len = 17, vocab = 300,
                                                               cache = cache, quiet = true}
        assert.are_not.equal(dir, other)
        -- No held-out document reaches the store: the check over every store sequence.
        local tok = s:tokenizer()
        local heldout = {}
        for _, d in ipairs{"alpha", "beta"} do
            for _, r in ipairs{"basis", "basis_heldout", "generic_heldout"} do heldout[d .. "/" .. r] = plan:texts(d, r) end
        end
        heldout.spec_heldout = plan:texts("gamma", "specific_heldout")
        heldout.spec_train = plan:texts("gamma", "specific_train")
        local res = splits.check_disjoint{heldout = heldout, inputs = {store = splits.store_seqs(s)},
                                          tok = tok}
        assert.are.equal(s:num_sequences(), res.input_rows)
        assert.is_true(res.heldout_windows > 100)
        -- The control: the plain store of the whole corpus holds them, and the check says so.
        local whole = cache .. "/whole"
        dga.store_build{corpus = corpus, out = whole, levels = {2}, seq_len = 17,
                        tokenizer = dir .. "/tokenizer.json"}
        raises_match(function()
            splits.check_disjoint{heldout = {basis = plan:texts("beta", "basis")},
                                  inputs = {store = splits.store_seqs(whole)}, tok = tok}
        end, "held%-out 'basis' sequence at token %d+ .* occurs in input 'store' as row %d+")
        s:close()
    end)

    it("filters documents in the core build and rejects a bad filter", function()
        local out = cache .. "/filtered"
        local _, stats = dga.store_build{corpus = corpus, out = out, levels = {2}, seq_len = 17, vocab = 300,
                                         docs = {beta = {3, 1, 2}}}
        assert.is_truthy(stats)
        local s = dga.store_open(out)
        assert.are.same({"beta"}, s:sources())
        assert.are.equal(3, tonumber(s:manifest():match('"documents":%s*(%d+)')))
        s:close()
        raises_match(function()
            dga.store_build{corpus = corpus, out = out, levels = {2}, seq_len = 17, docs = {delta = {1}}}
        end, "filter source 'delta'")
        raises_match(function()
            dga.store_build{corpus = corpus, out = out, levels = {2}, seq_len = 17, docs = {beta = {1, 51}}}
        end, "names document 50, but the source has only 50 documents")
        raises_match(function()
            dga.store_build{corpus = corpus, out = out, levels = {2}, seq_len = 17, docs = {beta = {2, 2}}}
        end, "lists document 2 twice")
        raises_match(function()
            dga.store_build{corpus = corpus, out = out, levels = {2}, seq_len = 17, docs = {beta = {0}}}
        end, "document number >= 1")
    end)
end)

describe("check_disjoint", function()
    local function rows(n, L, base)
        local t = dga.zeros(n, L, "int32")
        for i = 1, n * L do t[i] = (base + i * 7919) % 5000 end
        return t
    end

    it("passes disjoint sets and names a planted leak", function()
        local held, inp = rows(10, 8, 0), rows(50, 8, 123457)
        local res = splits.check_disjoint{heldout = {spec = held}, inputs = {train = inp}}
        assert.are.equal(50, res.input_rows)
        assert.are.equal(73, res.heldout_windows)
        inp:narrow(37, 1):copy_(held:narrow(4, 1))
        raises_match(function()
            splits.check_disjoint{heldout = {spec = held}, inputs = {other = rows(3, 8, 99), train = inp}}
        end, "held%-out 'spec' sequence at token 25 %(its row 4 when cut from token 1%) occurs in input 'train' as row 37")
    end)

    it("finds held-out text whatever the phase it was cut at", function()
        local held, inp = rows(6, 8, 0), rows(20, 8, 555555)
        -- 15 held-out tokens (2L - 1) starting mid-row land in input rows 9..10.
        for j = 1, 15 do inp[8 * 8 + j] = held[3 + j] end
        raises_match(function()
            splits.check_disjoint{heldout = {spec = held}, inputs = {train = inp}}
        end, "held%-out 'spec' sequence at token 4 .*input 'train' as row 9")
        local clean, dropped = splits.decontaminate{heldout = {spec = held}, inputs = {train = inp}}
        assert.are.equal(2, dropped.spec)
        assert.are.equal(4, clean.spec:shape()[1])
        splits.check_disjoint{heldout = clean, inputs = {train = inp}}
    end)

    it("rejects sets it cannot compare", function()
        raises_match(function()
            splits.check_disjoint{heldout = {a = rows(2, 8, 0)}, inputs = {b = rows(2, 9, 0)}}
        end, "input 'b' has rows of 9 tokens, expected 8")
        raises_match(function()
            splits.check_disjoint{heldout = {a = {"some text"}}, inputs = {b = rows(2, 8, 0)}}
        end, "held%-out set 'a' is a list of texts: give tok")
    end)
end)

-- Document-level splits (data.splits): roles, the store of a plan, the leakage check, on a
-- small synthetic corpus whose documents share no stretch of text (so any hit of the check is
-- a real leak), then on small real data.
local dga = dga or require "dga"
local splits = require "data.splits"

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
        plan:forget()
        assert.is_nil(plan.by_domain.beta.texts)
        assert.are.same(texts, plan:texts("beta", "basis"))
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

    it("builds the store of a plan that holds every document as the plain build does", function()
        local dir = splits.plan{corpus = corpus, data_seed = 5}:store{levels = {2}, seq_len = 17, vocab = 300,
                                                                      cache = cache, quiet = true}
        local plain = cache .. "/plain"
        dga.store_build{corpus = corpus, out = plain, levels = {2}, seq_len = 17, vocab = 300, seed = 5}
        assert.are.same(splits.store_seqs(plain):totable(), splits.store_seqs(dir):totable())
        assert.are.equal(h.read(plain .. "/manifest.json"), h.read(dir .. "/manifest.json"))
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
        end, "names document index 50 %(0%-based%), but the source has only 50 documents")
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

-- The experiments' data paths on small real data: what they train on (the store, the specific
-- training rows), what they compute IS and basis histograms from, and what they hold out. After
-- decontamination (text the corpus repeats across documents) no held-out row occurs in any of
-- the inputs, and decontamination drops only a small share.
describe("splits on the real corpus", function()
    local data = require "data.corpus"
    local corpus, mmlu_dir = data.find_corpus(), data.find_mmlu()
    local cache
    local L = 33

    setup(function() cache = h.tmpdir() end)
    teardown(function() h.rm(cache) end)

    local function clean_and_check(heldout, inputs, tok)
        local clean, dropped = splits.decontaminate{heldout = heldout, inputs = inputs, tok = tok}
        for name, v in pairs(heldout) do
            local n = v:shape()[1]
            assert.is_true(dropped[name] <= n // 10 + 1,
                           string.format("%s: %d of %d rows dropped", name, dropped[name], n))
        end
        splits.check_disjoint{heldout = clean, inputs = inputs, tok = tok}
        return clean
    end

    it("lowdata and quickstart: target documents out of the store, split by document", function()
        if not corpus then pending("corpus data absent") return end
        local plan = splits.plan{corpus = corpus, data_seed = 3, targets = {"us_legislation"},
                                 domains = {"arxiv_abstracts", "licenses", "code_python"},
                                 specific_heldout_docs = 10, generic_heldout_docs = 4, max_mb = 0.04}
        local store = dga.store_open(plan:store{levels = {4}, seq_len = L, vocab = 400, cache = cache,
                                                quiet = true})
        local tok = store:tokenizer()
        local spec_train = plan:seqs("us_legislation", "specific_train", tok, L, 400)
        local is_texts = splits.row_texts(tok, spec_train)
        local is_hist = store:histogram(is_texts, 1)
        assert.are.equal(4, is_hist:shape()[1])
        local inputs = {store = splits.store_seqs(store), specific_train = spec_train, is = is_texts}
        local heldout = {specific_heldout = plan:seqs("us_legislation", "specific_heldout", tok, L, 200),
                         generic_heldout = plan:interleaved_seqs("generic_heldout", tok, L, 40)}
        clean_and_check(heldout, inputs, tok)
        -- The target is nowhere in the store.
        assert.are.same({"arxiv_abstracts", "code_python", "licenses"}, store:sources())
        store:close()
    end)

    it("mmlu_dist: basis sets and generic held-out from documents the store never saw", function()
        if not corpus or not mmlu_dir then pending("corpus or MMLU data absent") return end
        local plan = splits.plan{corpus = corpus, data_seed = 1,
                                 domains = {"dm_mathematics", "stackexchange", "manpages"},
                                 basis_docs = 6, basis_heldout_docs = 4, generic_heldout_docs = 3,
                                 max_mb = 0.04}
        local store = dga.store_open(plan:store{levels = {2, 2}, seq_len = L, vocab = 400, cache = cache,
                                                quiet = true})
        local tok = store:tokenizer()
        local basis = plan:basis_sets(store, {tok = tok, seq_len = L, level = 2, heldout_seqs = 40})
        assert.are.equal(3, #basis)
        for _, b in ipairs(basis) do
            assert.is_true(math.abs(b.histogram:sum() - 1) < 1e-5)
            assert.is_truthy(b.heldout)
        end
        local mm = dga.mmlu_load(mmlu_dir)
        local q = splits.mmlu_splits(mm, 1)
        local function rendered(qs, n)
            local out = {}
            for i = 1, math.min(n or #qs, #qs) do out[i] = dga.mmlu_render(qs[i], {with_answer = true}) end
            return out
        end
        -- Questions are MMLU's documents: no MMLU_b question is an MMLU_a or dev question.
        splits.check_docs_disjoint{heldout = {mmlu_b = rendered(q.b)},
                                   inputs = {mmlu_a = rendered(q.a), dev = rendered(q.dev)}}
        assert.are.equal(#mm:split("b", 1), #q.b + q.b_dropped)
        -- MMLU repeats questions word for word: without that step, the check fails.
        assert.is_true(q.b_dropped > 0)
        raises_match(function()
            splits.check_docs_disjoint{heldout = {mmlu_b = rendered(mm:split("b", 1))},
                                       inputs = {mmlu_a = rendered(q.a), dev = rendered(q.dev)}}
        end, "leak: held%-out 'mmlu_b' text %d+ is input '[%w_]+' text %d+")
        local inputs = {store = splits.store_seqs(store),
                        mmlu_a = require("harness.experiment").text_seqs(tok, rendered(q.a, 300), L)}
        local heldout = {mmlu_b = require("harness.experiment").text_seqs(tok, rendered(q.b, 300), L),
                         generic = plan:interleaved_seqs("generic_heldout", tok, L, 30)}
        for _, d in ipairs(plan:sources()) do
            inputs["basis_" .. d] = plan:texts(d, "basis")   -- the histogram's input
        end
        for _, b in ipairs(basis) do heldout["basis_heldout_" .. b.name] = b.heldout end
        -- MMLU rows share the prompt template, so MMLU_b's rows are checked against the corpus
        -- inputs only (the question-level check above covers MMLU_a).
        local mmlu_b = heldout.mmlu_b
        heldout.mmlu_b = nil
        local clean = clean_and_check(heldout, inputs, tok)
        inputs.mmlu_a = nil
        splits.check_disjoint{heldout = {mmlu_b = mmlu_b}, inputs = inputs, tok = tok}
        assert.is_truthy(clean.generic)
        store:close()
    end)

    it("recover: a specific set drawn from two store domains out of unseen documents", function()
        if not corpus then pending("corpus data absent") return end
        local plan = splits.plan{corpus = corpus, data_seed = 2,
                                 domains = {"dictionary_gcide", "latex"},
                                 basis_docs = 4, generic_heldout_docs = 4, max_mb = 0.04}
        local store = dga.store_open(plan:store{levels = {2}, seq_len = L, vocab = 400, cache = cache,
                                                quiet = true})
        local tok = store:tokenizer()
        -- Training rows from the `basis` documents, held-out rows from `generic_heldout` ones;
        -- each row labelled with the store domain it would belong to.
        local train = plan:interleaved_seqs("basis", tok, L, 60)
        local held = plan:interleaved_seqs("generic_heldout", tok, L, 30)
        local dom = splits.assign(store, 1, tok, train)
        assert.are.equal(train:shape()[1], #dom)
        local seen = {}
        for _, d in ipairs(dom) do seen[d] = true end
        assert.is_true(seen[1] and seen[2])
        clean_and_check({specific_heldout = held}, {store = splits.store_seqs(store), specific_train = train}, tok)
        store:close()
    end)
end)

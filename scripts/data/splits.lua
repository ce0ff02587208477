-- Document-level data splits that cannot leak: which corpus documents train the model (the
-- domain store), which are held out, and a check that no held-out sequence reaches a
-- training, IS or basis input.
--
--   local splits = require "data.splits"
--   local plan = splits.plan{corpus = C, data_seed = 1,
--       targets = {"us_legislation"},   -- specific domains: wholly excluded from the store
--       specific_heldout_docs = 40,     -- per target: whole documents held out
--       basis_docs = 30,                -- per other domain: documents for its basis histogram
--       basis_heldout_docs = 0,         -- per other domain: documents for its basis held-out loss
--       generic_heldout_docs = 10,      -- per other domain: documents for the generic held-out loss
--       max_mb = nil,                   -- per domain cap on the store's text (MB)
--       domains = nil}                  -- default: every corpus domain
--   plan:texts(domain, role)     -- the role's documents, in the plan's order (a seeded shuffle)
--   plan:docs(domain, role)      -- their 1-based numbers in the reader's order
--   plan:seqs(domain, role, tok, seq_len[, max_seqs])   -- int32 [n, seq_len], documents whole
--   plan:interleaved_seqs(role, tok, seq_len, per_domain)  -- one set over every domain
--   plan:store{levels = {64, 64}, seq_len =, vocab =, cache =, embedder =}  -> store directory
--   plan:describe()              -- documents and bytes per domain and role (plain table)
--   plan:summary()               -- the same as text
--   plan:forget()                -- drops the texts it holds (roles stay); later texts are re-read
--   splits.check_disjoint{heldout = {name = seqs_or_texts, ...},
--                         inputs = {name = seqs_or_texts, ...}, tok =, seq_len =}
--   splits.store_seqs(store_or_dir)  -- every sequence of a store, int32 [n, seq_len]
--   splits.check_docs_disjoint{heldout = {name = texts}, inputs = {name = texts}}  -- whole texts
--   splits.histogram(store, level, tok, seqs)   -- IS histogram, rows embedded as the store's
--   splits.assign(store, level, tok, seqs)      -- each row's nearest store domain
--   plan:basis_sets(store, {tok =, seq_len =, level =})  -- basis sets from held-out documents
--   splits.mmlu_splits(mm, seed)     -- MMLU a / b / dev, b without a's or dev's questions
--   splits.decontaminate{heldout = {name = int32 [n, L]}, inputs = {...}, tok =}
--
-- Roles. A target domain's documents are `specific_heldout` (the first
-- specific_heldout_docs of its shuffled order) or `specific_train` (the rest). Any other
-- domain's are `basis` (the first basis_docs), `basis_heldout` (the next basis_heldout_docs),
-- `generic_heldout` (the next generic_heldout_docs), `store` (the next ones, until max_mb MB
-- of text: the document that crosses the cap is the last) or `unused` (past the cap). Counts
-- may be numbers or tables {[domain] = n} (missing domains: 0).
-- The order is a shuffle seeded by (data_seed, domain) alone, so a document's role depends on
-- data_seed, the domain and the document, never on the training seed or on other domains.
-- The store of a plan is built from exactly its `store` documents (a document filter in the
-- core build: the others are read past, never tokenised, and the tokenizer never sees them);
-- data_seed also seeds its clustering. Its cache key holds every option and a fingerprint of
-- the document list.
--
-- Also: the roles `basis_heldout` and `unused`, the `domains` option, decontaminate (the corpus
-- repeats licence headers and boilerplate across documents), check_docs_disjoint and
-- mmlu_splits (MMLU's documents are questions; its rows share the prompt template).
--
-- Recipes (tests/lua/splits_spec.lua runs each on small real data):
--   specific = a corpus domain (lowdata, quickstart): targets = {T}; specific train and
--     held-out rows from plan:seqs(T, "specific_train" / "specific_heldout"); the IS histogram
--     from the training rows (splits.histogram); generic held-out =
--     plan:interleaved_seqs("generic_heldout", ...), given to the trainer as generic_heldout
--     (it then holds nothing out of the store itself).
--   distribution reweighting (mmlu_dist): no target; plan:basis_sets for the basis columns;
--     splits.mmlu_splits for the specific (a) and evaluation (b) questions.
--   a known mixture of store domains (recover): rows of documents outside the store, labelled
--     with their store domain by splits.assign; training and held-out rows from different
--     roles, so from different documents.
--   Then, before training: decontaminate the held-out sets against the inputs (the store's
--     sequences, the specific training rows, the texts histograms are computed from) and run
--     check_disjoint on the result; MMLU_b questions against MMLU_a and dev with
--     check_docs_disjoint, MMLU_b rows against the corpus inputs with check_disjoint.
local runinfo = require "util.runinfo"

local M = {}

M.ROLES = {"store", "basis", "basis_heldout", "generic_heldout", "specific_train", "specific_heldout", "unused"}
local IS_ROLE = {}
for _, r in ipairs(M.ROLES) do IS_ROLE[r] = true end

-- FNV-1a, 64-bit (Lua integers wrap): a stable seed from text.
local function fnv1a(s, h)
    h = h or -3750763034362895579   -- 0xcbf29ce484222325
    for i = 1, #s do h = (h ~ s:byte(i)) * 1099511628211 end
    return h
end

local function hex(h) return string.format("%016x", h) end

local function count_for(v, domain, what)
    if v == nil then return 0 end
    if type(v) == "table" then v = v[domain] or 0 end
    if math.type(v) ~= "integer" or v < 0 then
        error(string.format("splits.plan: %s for %s must be an integer >= 0, got %s", what, domain,
                            tostring(v)), 3)
    end
    return v
end

local Plan = {}
Plan.__index = Plan

function M.plan(o)
    if type(o) ~= "table" then error("splits.plan: expected an options table", 2) end
    local data = require "data.corpus"
    if type(o.corpus) ~= "string" then error("splits.plan: field 'corpus' (a directory) is required", 2) end
    local seed = o.data_seed or 1
    if math.type(seed) ~= "integer" or seed < 0 then
        error("splits.plan: data_seed must be an integer >= 0, got " .. tostring(o.data_seed), 2)
    end
    if o.max_mb ~= nil and (type(o.max_mb) ~= "number" or o.max_mb <= 0) then
        error("splits.plan: max_mb must be a number > 0 (or nil: no cap), got " .. tostring(o.max_mb), 2)
    end
    local all = data.corpus_domains(o.corpus)
    if #all == 0 then error("splits.plan: corpus " .. o.corpus .. " has no domain directory", 2) end
    local present = {}
    for _, d in ipairs(all) do present[d] = true end
    local domains = {}
    for _, d in ipairs(o.domains or all) do
        if not present[d] then
            error("splits.plan: domain '" .. tostring(d) .. "' is not a directory of " .. o.corpus, 2)
        end
        domains[#domains + 1] = d
    end
    table.sort(domains)
    local is_target, targets = {}, {}
    for _, d in ipairs(o.targets or {}) do
        if not present[d] then
            error("splits.plan: target '" .. tostring(d) .. "' is not a directory of " .. o.corpus, 2)
        end
        if is_target[d] then error("splits.plan: target '" .. d .. "' given twice", 2) end
        is_target[d] = true
        targets[#targets + 1] = d
    end
    local listed = {}
    for _, d in ipairs(domains) do listed[d] = true end
    for _, d in ipairs(targets) do
        if not listed[d] then domains[#domains + 1] = d end
    end
    table.sort(domains)
    local self = setmetatable({
        corpus = o.corpus, data_seed = seed, targets = targets, is_target = is_target,
        domain_list = domains, max_mb = o.max_mb,
        counts = {specific_heldout_docs = o.specific_heldout_docs, basis_docs = o.basis_docs,
                  basis_heldout_docs = o.basis_heldout_docs,
                  generic_heldout_docs = o.generic_heldout_docs},
        by_domain = {},
    }, Plan)
    -- Check every count now, not at the first use of a domain.
    for _, d in ipairs(domains) do
        if is_target[d] then
            count_for(o.specific_heldout_docs, d, "specific_heldout_docs")
        else
            count_for(o.basis_docs, d, "basis_docs")
            count_for(o.basis_heldout_docs, d, "basis_heldout_docs")
            count_for(o.generic_heldout_docs, d, "generic_heldout_docs")
        end
    end
    return self
end

function Plan:domains() return {table.unpack(self.domain_list)} end

-- The non-target domains (those that feed the store).
function Plan:sources()
    local out = {}
    for _, d in ipairs(self.domain_list) do
        if not self.is_target[d] then out[#out + 1] = d end
    end
    return out
end

-- The seeded order of a domain's documents, and each one's role (computed on first use).
function Plan:_domain(domain)
    local st = self.by_domain[domain]
    if st then return st end
    local known = false
    for _, d in ipairs(self.domain_list) do known = known or d == domain end
    if not known then error("splits: domain '" .. tostring(domain) .. "' is not in the plan", 3) end
    local texts, stats = dga.read_texts(self.corpus .. "/" .. domain)
    require("data.corpus").warn_skipped(stats)
    local n = #texts
    if n == 0 then error("splits: corpus domain " .. domain .. " has no documents", 3) end
    local order = {}
    for i = 1, n do order[i] = i end
    -- Seeded by (data_seed, domain) only; masked positive so the seed means the same on any
    -- platform's integer conversion.
    local h = fnv1a(domain, fnv1a(tostring(self.data_seed) .. "\0"))
    dga.rng(h & 0x7fffffffffffffff):shuffle(order)
    local role, by_role = {}, {}
    for _, r in ipairs(M.ROLES) do by_role[r] = {} end
    local function take(i, r)
        role[order[i]] = r
        local list = by_role[r]
        list[#list + 1] = order[i]
    end
    if self.is_target[domain] then
        local nh = count_for(self.counts.specific_heldout_docs, domain, "specific_heldout_docs")
        if nh >= n then
            error(string.format("splits: target %s has %d documents; specific_heldout_docs = %d "
                                .. "leaves none to train on", domain, n, nh), 3)
        end
        for i = 1, n do take(i, i <= nh and "specific_heldout" or "specific_train") end
    else
        local nb = count_for(self.counts.basis_docs, domain, "basis_docs")
        local nbh = count_for(self.counts.basis_heldout_docs, domain, "basis_heldout_docs")
        local ng = count_for(self.counts.generic_heldout_docs, domain, "generic_heldout_docs")
        if nb + nbh + ng >= n then
            error(string.format("splits: domain %s has %d documents; basis_docs = %d, "
                                .. "basis_heldout_docs = %d and generic_heldout_docs = %d leave "
                                .. "none for the store", domain, n, nb, nbh, ng), 3)
        end
        local cap = self.max_mb and self.max_mb * 1e6 or math.huge
        local bytes = 0
        for i = 1, n do
            if i <= nb then take(i, "basis")
            elseif i <= nb + nbh then take(i, "basis_heldout")
            elseif i <= nb + nbh + ng then take(i, "generic_heldout")
            elseif bytes < cap then
                take(i, "store")
                bytes = bytes + #texts[order[i]]
            else take(i, "unused") end
        end
    end
    local lens = {}
    for i = 1, n do lens[i] = #texts[i] end
    st = {texts = texts, lens = lens, order = order, role = role, by_role = by_role}
    self.by_domain[domain] = st
    return st
end

-- A domain's texts in reading order, read again if forget() dropped them.
function Plan:_texts(domain)
    local st = self:_domain(domain)
    if not st.texts then
        local texts = dga.read_texts(self.corpus .. "/" .. domain)
        if #texts ~= #st.lens then
            error(string.format("splits: %s now has %d documents, the plan was made with %d", domain,
                                #texts, #st.lens), 3)
        end
        st.texts = texts
    end
    return st.texts
end

-- Drops the texts the plan holds (all the domains it has read: up to the whole corpus), keeping
-- every role: call it once the sets are made, before training. Texts asked for later are read
-- again.
function Plan:forget()
    for _, st in pairs(self.by_domain) do st.texts = nil end
end

local function check_role(r)
    if not IS_ROLE[r] then
        error(string.format("splits: unknown role '%s' (expected one of %s)", tostring(r),
                            table.concat(M.ROLES, ", ")), 3)
    end
end

-- 1-based document numbers (reading order of dga.read_texts) of a role, in the plan's order.
function Plan:docs(domain, r)
    check_role(r)
    return {table.unpack(self:_domain(domain).by_role[r])}
end

-- The texts of a role's documents, in the plan's order (empty when the domain has none).
function Plan:texts(domain, r)
    check_role(r)
    local st = self:_domain(domain)
    local out = {}
    local texts = self:_texts(domain)
    for i, doc in ipairs(st.by_role[r]) do out[i] = texts[doc] end
    return out
end

-- The role of document `doc` (1-based) of a domain.
function Plan:role(domain, doc)
    local st = self:_domain(domain)
    local r = st.role[doc]
    if not r then
        error(string.format("splits: %s has %d documents, no document %s", domain, #st.lens,
                            tostring(doc)), 2)
    end
    return r
end

-- Token sequences of a role: its documents in the plan's order, each encoded and followed by
-- <|endoftext|>, the stream cut into rows of seq_len (the tail dropped). max_seqs stops early.
-- Every row comes from the role's documents only.
function Plan:seqs(domain, r, tok, seq_len, max_seqs)
    local texts = self:texts(domain, r)
    if #texts == 0 then
        error(string.format("splits: %s has no '%s' documents in this plan", domain, r), 2)
    end
    return require("data.windows").from_texts(tok, texts, seq_len, max_seqs)
end

-- The rows of one role over several domains (default: every domain that has documents of
-- it), at most per_domain rows from each, interleaved round robin so that the first rows (the
-- trainer evaluates at most eval_max of a set) cover every domain. Also returns the rows per
-- domain. A domain whose documents are too short for one row is an error.
function Plan:interleaved_seqs(r, tok, seq_len, per_domain, domains)
    check_role(r)
    local parts, names, total, most = {}, {}, 0, 0
    for _, d in ipairs(domains or self.domain_list) do
        if #self:_domain(d).by_role[r] > 0 then
            local rows = self:seqs(d, r, tok, seq_len, per_domain)
            parts[#parts + 1], names[#names + 1] = rows, d
            total = total + rows:shape()[1]
            most = math.max(most, rows:shape()[1])
        end
    end
    if total == 0 then error(string.format("splits: no domain has '%s' documents in this plan", r), 2) end
    local out, k, per = dga.zeros(total, seq_len, "int32"), 0, {}
    for i = 1, most do
        for _, rows in ipairs(parts) do
            if i <= rows:shape()[1] then
                k = k + 1
                out:narrow(k, 1):copy_(rows:narrow(i, 1))
            end
        end
    end
    for j, d in ipairs(names) do per[d] = parts[j]:shape()[1] end
    return out, per
end

-- {data_seed, targets, max_mb, store_fingerprint, domains = {[d] = {[role] = {docs =, bytes =}}},
-- rows = {{domain, role, docs, bytes}, ...}} for the run's config and the report. Reads every
-- domain.
function Plan:describe()
    local out = {data_seed = self.data_seed, targets = {table.unpack(self.targets)},
                 max_mb = self.max_mb, domains = {}, rows = {}}
    if #self:sources() > 0 then out.store_fingerprint = select(2, self:store_filter()) end
    for _, d in ipairs(self.domain_list) do
        local st = self:_domain(d)
        out.domains[d] = {}
        for _, r in ipairs(M.ROLES) do
            local list = st.by_role[r]
            if #list > 0 then
                local bytes = 0
                for _, doc in ipairs(list) do bytes = bytes + st.lens[doc] end
                out.domains[d][r] = {docs = #list, bytes = bytes}
                out.rows[#out.rows + 1] = {domain = d, role = r, docs = #list, bytes = bytes}
            end
        end
    end
    return out
end

function Plan:summary()
    local desc = self:describe()
    local lines = {string.format("data split (data_seed %d%s%s): documents (MB) per domain and role",
                                 desc.data_seed,
                                 #desc.targets > 0 and ", targets " .. table.concat(desc.targets, ",") or "",
                                 desc.max_mb and string.format(", store cap %.3g MB per domain", desc.max_mb) or "")}
    local width = 8
    for _, d in ipairs(self.domain_list) do width = math.max(width, #d) end
    local head = {string.format("%-" .. width .. "s", "domain")}
    for _, r in ipairs(M.ROLES) do head[#head + 1] = string.format("%18s", r) end
    lines[#lines + 1] = table.concat(head, " ")
    for _, d in ipairs(self.domain_list) do
        local cells = {string.format("%-" .. width .. "s", d)}
        for _, r in ipairs(M.ROLES) do
            local c = desc.domains[d][r]
            cells[#cells + 1] = string.format("%18s", c and string.format("%d (%.2f)", c.docs, c.bytes / 1e6) or "-")
        end
        lines[#lines + 1] = table.concat(cells, " ")
    end
    return table.concat(lines, "\n")
end

-- The store documents as the core build's filter ({[domain] = {doc, ...}}, ascending) and a
-- fingerprint of it for the cache key.
function Plan:store_filter()
    local filter, h = {}, fnv1a(self.corpus .. "\0")
    for _, d in ipairs(self:sources()) do
        local st = self:_domain(d)
        local docs = {table.unpack(st.by_role.store)}
        table.sort(docs)
        filter[d] = docs
        h = fnv1a(d .. ":" .. #st.lens .. ":", h)
        for _, doc in ipairs(docs) do h = fnv1a(tostring(doc) .. ",", h) end
    end
    if next(filter) == nil then error("splits: the plan has no store domain (every domain is a target)", 2) end
    return filter, hex(h)
end

local function key_part(v)
    return (tostring(v):gsub("[^%w%-_.]", "_"))
end

-- Builds (or reuses) the store of exactly the plan's `store` documents; returns its directory.
-- o: levels ({64}), seq_len (129), vocab (8192), cache (<repo>/runs/cache), embedder, train_mb,
-- iters, quiet. The clustering is seeded by data_seed.
function Plan:store(o)
    o = o or {}
    local cache = o.cache or (runinfo.repo_root() .. "/runs/cache")
    runinfo.mkdir_p(cache)
    local levels = o.levels or {64}
    local filter, fp = self:store_filter()
    local parts = {"store", "plan" .. fp:sub(1, 12), "L" .. table.concat(levels, "_"),
                   "s" .. (o.seq_len or 129), "v" .. (o.vocab or 8192),
                   "ds" .. self.data_seed}
    if o.embedder then parts[#parts + 1] = "e" .. key_part(o.embedder) end
    if o.train_mb then parts[#parts + 1] = "t" .. key_part(o.train_mb) end
    if o.iters then parts[#parts + 1] = "i" .. o.iters end
    local dir = cache .. "/" .. table.concat(parts, "_")
    if runinfo.is_file(dir .. "/manifest.json") then
        if not o.quiet then io.stderr:write("using cached store " .. dir .. "\n") end
        return dir
    end
    if not o.quiet then
        io.stderr:write(string.format("building store %s from the plan's store documents of %s "
                                      .. "(levels %s, seq_len %d, vocab %d)\n", dir, self.corpus,
                                      table.concat(levels, ","), o.seq_len or 129, o.vocab or 8192))
    end
    -- Every document of every corpus domain: a plain build, as a store of the whole corpus is.
    local whole = #self.targets == 0 and #self.domain_list == #require("data.corpus").corpus_domains(self.corpus)
    for _, d in ipairs(self.domain_list) do
        whole = whole and #filter[d] == #self:_domain(d).lens
    end
    local t0 = runinfo.now()
    dga.store_build{corpus = self.corpus, out = dir, docs = not whole and filter or nil, levels = levels,
                    seq_len = o.seq_len, vocab = o.vocab, train_mb = o.train_mb,
                    embedder = o.embedder, iters = o.iters, seed = self.data_seed,
                    verbose = not o.quiet}
    if not o.quiet then io.stderr:write(string.format("store built in %.1f s\n", runinfo.now() - t0)) end
    return dir
end

-- ------------------------------------ histograms and the leakage check: their own files, this API
local histograms, leakage = require "data.histograms", require "data.leakage"
M.row_texts, M.histogram, M.assign = histograms.row_texts, histograms.histogram, histograms.assign
function Plan:basis_sets(store, o) return histograms.basis_sets(self, store, o) end
function Plan:check_role(r) check_role(r) end
M.store_seqs, M.check_disjoint = leakage.store_seqs, leakage.check_disjoint
M.check_docs_disjoint, M.decontaminate = leakage.check_docs_disjoint, leakage.decontaminate

-- ---------------------------------------------------------------- MMLU

-- The paper's MMLU splits with questions as documents: a and b (seeded halves of every
-- subject's test questions, dga's mm:split) and dev. MMLU repeats some questions word for
-- word; b drops those whose rendered text (with the answer) is also in a or dev, so no
-- evaluation question is a training or few-shot question. Returns {a =, b =, dev =,
-- b_dropped = n}.
function M.mmlu_splits(mm, seed)
    local function key(q) return dga.mmlu_render(q, {with_answer = true}) end
    local a, dev = mm:split("a", seed), mm:split("dev")
    local seen = {}
    for _, q in ipairs(a) do seen[key(q)] = true end
    for _, q in ipairs(dev) do seen[key(q)] = true end
    local b, dropped = {}, 0
    for _, q in ipairs(mm:split("b", seed)) do
        if seen[key(q)] then dropped = dropped + 1 else b[#b + 1] = q end
    end
    return {a = a, b = b, dev = dev, b_dropped = dropped}
end

return M

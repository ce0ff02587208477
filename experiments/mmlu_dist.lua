-- Section 3.2 of the paper: DGA distribution reweighting with MMLU as the specific set.
--
--   dgalua experiments/mmlu_dist.lua [--quick] [--seeds 1,2,3] [--jobs 2] [--specific a,dev]
--
-- Generic pool: a store of the "store" documents of a splits plan (--data-seed), clustered
-- hierarchically into --levels (64,64,64: k = 64, 4096 and, at the third level, as many leaves
-- as the store's sequences support, up to 262,144; the table and notes.md say how many).
-- Basis sets, per corpus source: importance-sampling histograms of documents held out of the
-- store (the plan's "basis" role), assigned with the store's own embedder and centroids
-- (store:histogram); each basis's held-out loss is measured on other documents the store
-- never saw (the "basis_heldout" role). N = the sources; N + 1 = those plus the specific
-- set's own histogram.
-- Specific sets (--specific): MMLU_a (half of every subject's test questions) and MMLU_dev (the
-- 285 dev questions: the sparse-histogram regime), rendered with their answers. MMLU_a / MMLU_b
-- are split by --data-seed. Evaluation: MMLU_b (held-out sample during training; at the end,
-- the loss on --eval questions of MMLU_b, answer NLL and 0-shot accuracy on --score of them).
-- Rows, per specific set: natural, IS and DGA distribution reweighting with N and with N + 1
-- bases at every level; at k = 64 also DGA over the k domains and the adaptive-eta variants.
-- Output: runs with summary.json, table.md, notes.md, figures (the Pareto figure of mean basis
-- loss against MMLU_b loss, weights over time).
local C = require "harness.cells"
local exp = require "harness.experiment"
local data = require "data.corpus"
local args = require "cli.args"

-- The fixed step size: eta = 3, calibrated by scripts/calibrate_eta.lua on lowdata's quick
-- model (docs/calibrate_eta.csv; the sweep's result is in lowdata.lua). Distribution
-- reweighting aligns N mixtures with the same gradient scale, so it keeps the same constant.
local ETA = 3

local function options(p)
    p:option("--specific", "Specific sets: a (MMLU_a) and/or dev (MMLU_dev), comma separated.")
    p:option("--levels", "Levels of the store's hierarchical k-means.")
    p:option("--eval", "MMLU_b questions for the final loss (0: all)."):convert(args.int(0))
    p:option("--score", "MMLU_b questions scored for 0-shot accuracy (0: all)."):convert(args.int(0))
    p:option("--eta", "Fixed DGA step size.", tostring(ETA)):convert(tonumber)
end

-- The full model is lowdata's (2 layers, width 96, a 2,048-word vocabulary; lowdata.lua says why).
local function make_preset(a)
    local preset = a.quick and {
    max_mb = 0.2, seq_len = 65, vocab = 2048, steps = 120, batch = 16, T_r = 3,
    eval_every = 40, layers = 2, width = 64, heads = 4, align_batch = 2, lr = 3e-3,
    basis_docs = 6, basis_heldout = 8, spec_heldout = 32, eval = 200, score = 60,
    levels = "8,8,8", specific = "dev",
} or {
    max_mb = 0.6, seq_len = 65, vocab = 2048, steps = 600, batch = 16, T_r = 15,
    eval_every = 60, layers = 2, width = 96, heads = 4, align_batch = 2, lr = 3e-3,
    basis_docs = 20, basis_heldout = 16, spec_heldout = 64, eval = 1500, score = 500,
    levels = "64,64,64", specific = "a,dev",
}
    preset.level_list = {}
    for v in (a.levels or preset.levels):gmatch("%d+") do preset.level_list[#preset.level_list + 1] = tonumber(v) end
    preset.specific_list = {}
    for v in (a.specific or preset.specific):gmatch("[^,]+") do
        if v ~= "a" and v ~= "dev" then error("--specific: a or dev, got " .. v, 0) end
        preset.specific_list[#preset.specific_list + 1] = v
    end
    return preset
end

local function every_mth(list, n)
    if n <= 0 or #list <= n then return list end
    local out, stride = {}, #list / n
    for i = 1, n do out[i] = list[math.floor((i - 1) * stride) + 1] end
    return out
end

local function rendered(questions)
    local out = {}
    for i, q in ipairs(questions) do out[i] = dga.mmlu_render(q, {with_answer = true}) end
    return out
end

local function setup(x)
    local a, preset = x.a, x.preset
    local levels, specifics = preset.level_list, preset.specific_list
    local corpus = data.require_corpus(a.corpus)
    local mmlu_dir = data.require_mmlu(a.mmlu)
    local splits = require "data.splits"
    local plan = splits.plan{corpus = corpus, data_seed = a.data_seed, targets = {},
                             specific_heldout_docs = 0, basis_docs = preset.basis_docs,
                             basis_heldout_docs = a.quick and 3 or 6, generic_heldout_docs = 2,
                             max_mb = preset.max_mb}
    local store_dir = plan:store{levels = levels, seq_len = preset.seq_len, vocab = preset.vocab,
                                 cache = a.cache}
    local store = dga.store_open(store_dir)
    local tok = store:tokenizer()
    local L = preset.seq_len
    local mm = dga.mmlu_load(mmlu_dir)
    local q_eval = mm:split("b", a.data_seed)
    local shuffled = {}
    for i, q in ipairs(q_eval) do shuffled[i] = q end
    dga.rng(a.data_seed + 7):shuffle(shuffled)
    local spec_heldout = C.seqs(tok, rendered(shuffled), L, preset.spec_heldout)
    local q_final = every_mth(q_eval, a.eval or preset.eval)
    local eval_seqs = C.seqs(tok, rendered(q_final), L)
    local spec = {}
    for _, which in ipairs(specifics) do
        local qs = which == "dev" and mm:split("dev") or mm:split("a", a.data_seed)
        local texts = rendered(qs)
        spec[which] = {questions = #qs, texts = texts, train = C.seqs(tok, texts, L)}
    end
    local heldout = {mmlu_b = eval_seqs, mmlu_b_sample = spec_heldout,
                     generic = plan:interleaved_seqs("generic_heldout", tok, L, 4, plan:sources())}
    local inputs = {store = splits.store_seqs(store)}
    for which, s in pairs(spec) do inputs["specific_train " .. which] = s.train end
    local sources = {}
    for _, d in ipairs(plan:sources()) do
        local bt = plan:texts(d, "basis")
        local held = C.seqs(tok, plan:texts(d, "basis_heldout"), L, preset.basis_heldout)
        if #bt > 0 and held then
            sources[#sources + 1] = {name = d, texts = bt, heldout = held}
            heldout["basis_heldout " .. d] = held
            local bs = C.seqs(tok, bt, L)
            if bs then inputs["basis " .. d] = bs end
        end
    end
    local kept = C.check_leaks(heldout, inputs, tok)
    eval_seqs, spec_heldout = kept.mmlu_b, kept.mmlu_b_sample
    for _, src in ipairs(sources) do src.heldout = kept["basis_heldout " .. src.name] end
    return {generic = kept.generic, plan = plan, store_dir = store_dir, store = store, tok = tok, spec = spec,
            spec_heldout = spec_heldout, eval_seqs = eval_seqs, q_score = every_mth(q_final, a.score or preset.score),
            sources = sources, hist = {}, n_eval = #q_final, n_b = #q_eval}
end

-- The N (+ 1) basis sets at a level, cached per (level, specific set) in the data d.
local function basis(d, level, which, with_specific)
    local key = level .. "/" .. which
    if not d.hist[key] then
        local list = {}
        for _, s in ipairs(d.sources) do
            list[#list + 1] = {name = s.name, heldout = s.heldout, histogram = d.store:histogram(s.texts, level)}
        end
        d.hist[key] = {sources = list, specific = d.store:histogram(d.spec[which].texts, level)}
    end
    local h = d.hist[key]
    local out = {}
    for i, b in ipairs(h.sources) do out[i] = b end
    if with_specific then out[#out + 1] = {name = "specific (IS)", histogram = h.specific} end
    return out, h.specific
end

local function dist_variants(tag, with_specific, modes, eta)
    local out = {}
    for _, mode in ipairs(modes) do
        local spec = {name = "dga_dist", beta = 0.1, eta_mode = mode, label = tag .. "_" .. mode}
        if mode == "fixed" then spec.eta = eta end
        out[#out + 1] = {spec = spec, with_specific = with_specific}
    end
    return out
end

local function cells(x)
    local a = x.a
    local levels, specifics = x.preset.level_list, x.preset.specific_list
    local out = {}
    for _, which in ipairs(specifics) do
        for level = 1, #levels do
            local group = string.format("%s/L%d", which, level)
            local rows = {{spec = {name = "natural"}}, {spec = {name = "importance", label = "is"}}}
            for _, r in ipairs(dist_variants("dist_n", false, {"fixed"}, a.eta)) do rows[#rows + 1] = r end
            for _, r in ipairs(dist_variants("dist_n1", true, level == 1 and {"fixed", "std"} or {"fixed"}, a.eta)) do
                rows[#rows + 1] = r
            end
            if level == 1 then
                for _, spec in ipairs(C.dga_variants("dga", {0.1}, a.eta)) do
                    spec.label = spec.label:gsub("_ema", "")
                    rows[#rows + 1] = {spec = spec}
                end
            end
            for _, r in ipairs(rows) do
                local label = C.label(r.spec)
                -- natural reads neither the specific set nor its histogram: it runs once per
                -- level, and the other specific sets' tables show that run (same_as)
                local first = specifics[1] .. "/L" .. level .. "/" .. label
                out[#out + 1] = {id = group .. "/" .. label, group = group, which = which,
                                 level = level, policy = r.spec, with_specific = r.with_specific,
                                 same_as = (label == "natural" and which ~= specifics[1]) and first or nil}
            end
        end
    end
    if a.policy and #a.policy > 0 then
        -- --policy replaces the rows: each named policy runs at every level and specific set.
        out = {}
        for _, which in ipairs(specifics) do
            for level = 1, #levels do
                for _, spec in ipairs(C.policies(a, {})) do
                    local group = string.format("%s/L%d", which, level)
                    out[#out + 1] = {id = group .. "/" .. C.label(spec), group = group, which = which,
                                         level = level, policy = spec, with_specific = true}
                end
            end
        end
    end
    return out
end

-- The letter the model picks most often and its share: a model that always answers "A"
-- scores the share of A answers, whatever it learnt.
local function top_letter_share(score)
    local n, counts = score.loglik:shape()[1], {0, 0, 0, 0}
    for i = 1, n do
        local best = 1
        for j = 2, 4 do if score.loglik:at(i, j) > score.loglik:at(i, best) then best = j end end
        counts[best] = counts[best] + 1
    end
    return math.max(counts[1], counts[2], counts[3], counts[4]) / n
end

local function run_cell(x, cell, seed, dir, topts)
    local d = x.data()
    local pol = C.policy_config(cell.policy)
    local dist = pol.name == "dga_dist"
    local b, is_hist = basis(d, cell.level, cell.which, cell.with_specific or not dist)
    local cfg = exp.run_config(x.a, x.preset, x.steps, cell.id, {
        store = {dir = d.store_dir, level = cell.level},
        specific = {train = d.spec[cell.which].train, heldout = d.spec_heldout},
        generic_heldout = d.generic, basis = b, dist = dist or nil,
        is_histogram = is_hist, policy = pol,
    })
    local m, s = C.train(cfg, seed, dir, x.a, topts)
    local model = s.model
    m.mmlu_b_loss = dga.eval_loss_seqs(model, d.eval_seqs)
    local score = dga.mmlu_score(model, d.tok, d.q_score, {shots = 0})
    m.accuracy, m.answer_nll = 100 * score.accuracy, score.answer_loss
    m.accuracy_top_letter_share = 100 * top_letter_share(score)
    m.k = d.store:k(cell.level)
    -- the scores as lm-evaluation-harness reports them: per subject and category, with stderr
    local R = require "harness.mmlu_results"
    R.write(dir .. "/mmlu_results.json",
            R.document({[0] = R.summarize(score.by_subject)},
                       {run = cell.id, seed = seed, split = "MMLU_b", questions = #d.q_score}))
    return m
end

-- notes.md: the store, the MMLU sets, and accuracy against chance, from the run directories.
local function notes(x)
    local d, a = x.data(), x.a
    local levels, specifics = x.preset.level_list, x.preset.specific_list
    local n_seqs = 0
    do
        local sz = d.store:domain_sizes(1)
        for i = 1, #sz do n_seqs = n_seqs + sz[i] end
    end
    local lines = {string.format("Store: %d sequences of %d tokens from the plan's store documents (data seed %d); "
                                 .. "levels %s give k = %s.", n_seqs,
                                 x.preset.seq_len, a.data_seed, table.concat(levels, ","),
                                 (function()
                                     local ks = {}
                                     for l = 1, #levels do ks[l] = tostring(d.store:k(l)) end
                                     return table.concat(ks, ", ")
                                 end)()),
                   string.format("MMLU_b: %d questions; final loss over %d of them, accuracy on %d (chance 25%%). "
                                 .. "Specific sets: %s. %d basis sources.", d.n_b, d.n_eval, #d.q_score,
                                 (function()
                                     local s = {}
                                     for _, w in ipairs(specifics) do
                                         s[#s + 1] = string.format("MMLU_%s (%d questions)", w, d.spec[w].questions)
                                     end
                                     return table.concat(s, ", ")
                                 end)(), #d.sources),
                   "accuracy_top_letter_share is the share of questions given the model's most frequent letter: "
                   .. "near 100, accuracy is that letter's frequency (chance), not knowledge."}
    local report = require "harness.report"
    -- Two different checks, said per run from the summaries, in words that keep them apart: a
    -- run whose accuracy lies within the 95% binomial interval of a uniform random guesser
    -- (p = 1/4 over the scored questions) cannot be told from chance; a run that gives one
    -- letter to at least 90% of the questions scores that letter's frequency in the questions,
    -- which may lie outside that interval although the run knows nothing. Only the first is
    -- called "chance".
    local col, chance, total = report.collect(a.out), {}, 0
    local half = 100 * 1.96 * math.sqrt(0.25 * 0.75 / #d.q_score)
    local within = 0
    for _, id in ipairs(col.order) do
        for seed, m in pairs(col.cells[id].seeds) do
            total = total + 1
            if (m.accuracy_top_letter_share or 0) >= 90 then chance[#chance + 1] = id end
            if m.accuracy and math.abs(m.accuracy - 25) <= half then within = within + 1 end
        end
    end
    -- by cell, in the table's order: "a/L1/is (3 of 3 seeds)"
    local function by_cell(ids)
        local n = {}
        for _, id in ipairs(ids) do n[id] = (n[id] or 0) + 1 end
        local parts = {}
        for _, id in ipairs(col.order) do
            if n[id] then
                local seeds = 0
                for _ in pairs(col.cells[id].seeds) do seeds = seeds + 1 end
                parts[#parts + 1] = string.format("%s (%d of %d seeds)", id, n[id], seeds)
            end
        end
        return table.concat(parts, ", ")
    end
    if total > 0 then
        lines[#lines + 1] = string.format("Accuracy lies within a random guesser's 95%% interval (25 ± %.1f%% over %d "
                                          .. "questions) in %d of %d runs%s.", half, #d.q_score, within, total,
                                          within == total and ": **accuracy is at chance in every run**" or "")
    end
    local letter_note = "its accuracy is that letter's frequency among the scored questions, not knowledge, "
                        .. "and lies outside the guesser's interval when that frequency does"
    if #chance == total and total > 0 then
        lines[#lines + 1] = string.format("**Every run gives one letter to at least 90%% of the questions** (%d of "
                                          .. "%d): %s; the accuracy column measures the letter distribution of "
                                          .. "MMLU_b, and the losses are the outcomes that say something at this "
                                          .. "scale.", #chance, total, letter_note)
    elseif #chance > 0 then
        lines[#lines + 1] = string.format("One letter for at least 90%% of the questions (%s) in %d of %d runs: %s.",
                                          letter_note, #chance, total, by_cell(chance))
    end
    local out = {}
    for i, l in ipairs(lines) do
        if i > 1 then out[#out + 1] = "" end
        out[#out + 1] = l
    end
    return out
end

return require("harness.descriptor").define({
    name = "mmlu_dist", order = 2, out = "runs/mmlu_dist",
    title = "Section 3.2: distribution reweighting towards MMLU (mmlu_dist.lua)",
    about = "DGA distribution reweighting towards MMLU (the paper's section 3.2).",
    options = options, preset = make_preset, setup = setup, cells = cells, run_cell = run_cell, notes = notes,
    cell_names = "<set>/L<level>/<policy>: the specific set (a: MMLU_a, dev: MMLU_dev), the store's clustering "
                 .. "level (L1: k = its first level, ...), and the policy: natural, is (importance sampling), "
                 .. "dist_n_<eta> (DGA distribution reweighting over the N corpus-source bases), dist_n1_<eta> "
                 .. "(the same plus the specific set's own histogram as a basis), dga_<eta> (DGA over the k domains); "
                 .. "<eta> is fixed (the calibrated constant) or std (adaptive).",
    equal_rows = "natural reads neither the specific set nor its histogram, so it runs once per level (under the "
                 .. "first specific set); its row in the other specific set's table is that run (its summary says "
                 .. "same_as).",
    columns = {mmlu_b_loss = "loss on the MMLU_b questions (answers included) at the end",
               answer_nll = "negative log-likelihood of the correct answer's text",
               accuracy = "0-shot accuracy on the scored MMLU_b questions (%)",
               accuracy_top_letter_share = "share of questions given the model's most frequent letter (%)",
               k = "domains at the cell's level"},
    report = {reference = "natural", weights_labels = {dist_n1_fixed = true, dga_fixed = true},
              curve_note = "The curves are metrics.csv's specific_loss: the loss on a sample of MMLU_b evaluated during "
                           .. "training; the tables' mmlu_b_loss is the loss at the end over more MMLU_b questions "
                           .. "(the notes count them), so the last point of a curve and the table differ.",
              metrics = {"mmlu_b_loss", "basis_mean", "answer_nll", "accuracy", "accuracy_top_letter_share",
                         "l1_mean"},
              pareto = {x = "basis_mean", y = "mmlu_b_loss", title = "MMLU_b loss against mean basis loss (95% CI)",
                        xlabel = "mean basis held-out loss", ylabel = "MMLU_b loss"},
              intro = "MMLU_b loss (over the MMLU_b questions the notes below count), mean held-out loss of the basis "
                   .. "sets (documents the store never saw), NLL of the correct answer's text and 0-shot accuracy. "
                   .. "The paper's claim tested here is its abstract's scenario (ii), improvements over importance "
                   .. "sampling when specialized data is scarce (MMLU_dev); whether distribution reweighting also "
                   .. "beats natural, keeps the basis loss low, or gains from a sparse IS histogram (large k) are "
                   .. "our questions, not sentences of the paper at hand."},
    claims = {
        {id = "dist_below_is_sparse", source = "paper", section = "Abstract",
         quote = require("harness.paper").ABSTRACT_SCENARIOS, where = "^dev/", x = "dist_n1_fixed", y = "is",
         metric = "mmlu_b_loss", better = "lower",
         text = "with few specific examples (MMLU_dev), distribution reweighting ends below IS on MMLU_b"},
        {id = "dist_below_natural", source = "ours", question = "Does distribution reweighting beat natural?",
         x = "dist_n1_fixed", y = "natural", metric = "mmlu_b_loss", better = "lower",
         text = "distribution reweighting (N + 1 bases, fixed eta) ends below natural on MMLU_b"},
        {id = "dist_below_is", source = "ours", question = "Does it beat IS with the larger specific set too?",
         where = "^a/", x = "dist_n1_fixed", y = "is", metric = "mmlu_b_loss", better = "lower",
         text = "distribution reweighting (N + 1 bases, fixed eta) ends below IS on MMLU_b"},
        {id = "dist_basis_below_is", source = "ours", question = "Does it keep the basis loss lower than IS?",
         x = "dist_n1_fixed", y = "is", metric = "basis_mean", better = "lower",
         text = "distribution reweighting keeps the mean basis loss below IS"},
        {id = "specific_basis_helps", source = "ours", question = "Does the specific set's own histogram help as a basis?",
         x = "dist_n1_fixed", y = "dist_n_fixed", metric = "mmlu_b_loss", better = "lower",
         text = "the specific set's own histogram as a basis helps"},
    },
}, ...)

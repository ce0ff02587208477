-- Section 3.2 of the paper: DGA distribution reweighting with MMLU as the specific set.
--
--   dgalua experiments/mmlu_dist.lua [--quick] [--dev] [--out runs/mmlu_dist]
--
-- Specific set: MMLU_a (half of every subject's test questions; --dev: the 5 dev questions
-- per subject), rendered with their answers in the lm-evaluation-harness format, tokenised
-- with the store's tokenizer and cut into sequences. Evaluation: MMLU_b (the other half):
-- during training, the loss on a held-out sample of it (questions drawn at random from every
-- subject); at the end, the loss on all of MMLU_b (same rendering), 0-shot accuracy on all
-- or --score questions and 5-shot accuracy on --score5 questions (letter log-likelihood
-- scoring, as lm-evaluation-harness does).
-- Generic pool: a domain store over the whole corpus, clustered hierarchically (64 coarse
-- domains, each split into up to 64 leaves: k = 64 and k = 4096 at the two levels).
-- Basis sets: the N corpus domains (each one's histogram over the k domains of the level:
-- where its sequences landed in the clustering) plus the specific set's own IS histogram
-- (N + 1 columns of P).
-- Runs, at each k: natural (the store's natural mixture), IS (the MMLU_a histogram, fixed),
-- DGA distribution reweighting (dga_dist over the N + 1 basis distributions).
-- Output: a table like the paper's Table 2 (MMLU_b loss, average basis loss, MMLU accuracy),
-- the runs, and figures (<out>/plots: losses, and the distribution weights of the DGA runs).
local argparse = require "argparse"
local exp = require "dgalib.experiment"
local data = require "dgalib.data"
local runinfo = require "dgalib.runinfo"

local p = argparse("mmlu_dist.lua",
                   "DGA distribution reweighting towards MMLU (the paper's section 3.2, Table 2).")
exp.add_common_options(p, {out = "runs/mmlu_dist"})
p:option("--mmlu", "MMLU directory (dev/, val/, test/); default: data/mmlu or ../shared/data/mmlu.")
p:flag("--dev", "Specific set = MMLU_dev (5 questions per subject) instead of MMLU_a.")
p:option("--levels", "Levels of the store's hierarchical k-means.", "64,64")
p:option("--score", "MMLU_b questions scored for 0-shot accuracy (0: all).")
    :convert(require("dgalib.args").int(0))
p:option("--score5", "MMLU_b questions scored for 5-shot accuracy (dev questions as shots; 0: none).")
    :convert(require("dgalib.args").int(0))
local a = p:parse(arg)
if a.threads and dga.set_threads then dga.set_threads(a.threads) end

local preset = a.quick and {
    max_mb = 0.25, seq_len = 65, vocab = 2048, steps = 480, batch = 16, T_r = 40,
    eval_every = 80, layers = 2, width = 64, heads = 4, align_batch = 8, lr = 3e-3,
    basis_heldout = 8, spec_heldout = 48, score = 200, score5 = 40, beta = 0.3,
} or {
    max_mb = 3, seq_len = 129, vocab = 4096, steps = 2000, batch = 16, T_r = 100,
    eval_every = 100, layers = 4, width = 128, heads = 4, align_batch = 16, lr = 2e-3,
    basis_heldout = 32, spec_heldout = 256, score = 0, score5 = 500, beta = 0.1,
}
local steps = a.steps or preset.steps
local levels = {}
for v in a.levels:gmatch("%d+") do levels[#levels + 1] = tonumber(v) end

local corpus = data.require_corpus(a.corpus)
local mmlu_dir = data.require_mmlu(a.mmlu)
local store_dir = exp.store{corpus = corpus, levels = levels, seq_len = preset.seq_len,
                            vocab = preset.vocab, max_mb = preset.max_mb, cache = a.cache,
                            seed = a.seed}
local store = dga.store_open(store_dir)
local tok = store:tokenizer()

-- ---- the specific set and the evaluation set --------------------------------------------
local mm = dga.mmlu_load(mmlu_dir)
local q_spec = a.dev and mm:split("dev") or mm:split("a", a.seed)
local q_eval = mm:split("b", a.seed)
local function rendered(questions)
    local out = {}
    for i, q in ipairs(questions) do out[i] = dga.mmlu_render(q, {with_answer = true}) end
    return out
end
local spec_texts = rendered(q_spec)
local spec_train = exp.text_seqs(tok, spec_texts, preset.seq_len)
-- The held-out loss during training: MMLU_b questions in a seeded random order (MMLU_b is
-- sorted by subject, so its first sequences would all be abstract algebra), as many as fill
-- spec_heldout sequences. The final loss is on all of MMLU_b.
local shuffled = {}
for i, q in ipairs(q_eval) do shuffled[i] = q end
dga.rng(a.seed + 7):shuffle(shuffled)
local spec_heldout = exp.text_seqs(tok, rendered(shuffled), preset.seq_len, preset.spec_heldout)
local eval_all = exp.text_seqs(tok, rendered(q_eval), preset.seq_len)
-- Accuracy on fixed subsets of MMLU_b (every m-th question: all subjects represented).
local function every_mth(n)
    if n <= 0 or #q_eval <= n then return q_eval end
    local out, stride = {}, #q_eval / n
    for i = 1, n do out[i] = q_eval[math.floor((i - 1) * stride) + 1] end
    return out
end
local q_score = every_mth(a.score or preset.score)
local n_score5 = a.score5 or preset.score5
local q_score5 = n_score5 > 0 and every_mth(n_score5) or nil
local q_dev = mm:split("dev")
io.stderr:write(string.format("specific set %s: %d questions -> %d sequences; MMLU_b: %d questions "
                              .. "(%d held-out sequences, %d scored)\n",
                              a.dev and "MMLU_dev" or "MMLU_a", #q_spec, spec_train:shape()[1],
                              #q_eval, spec_heldout:shape()[1], #q_score))

-- ---- basis sets: the corpus domains (+ the specific set itself) --------------------------
-- Basis j's histogram: where the store's sequences from corpus domain j landed among the k
-- domains of the level (the store records each sequence's source directory). The specific
-- set's own column is its IS histogram (its texts assigned to the nearest centroids).
local domains = data.corpus_domains(corpus)
local basis_heldout = {}
for _, d in ipairs(domains) do
    -- Held-out sequences for the basis loss: the domain's last documents, tokenised. (The
    -- store also holds them when it read the whole domain; with --quick it reads only the
    -- first max_mb of each domain, so these are unseen.)
    local all = dga.read_texts(corpus .. "/" .. d)
    local tail = {}
    for i = math.max(1, #all - 40), #all do tail[#tail + 1] = all[i] end
    basis_heldout[d] = exp.text_seqs(tok, tail, preset.seq_len, preset.basis_heldout)
end

local function basis_for(level)
    local k = store:k(level)
    local names, counts = store:sources(level)
    local b = {}
    for j, name in ipairs(names) do
        local h = dga.zeros(k)
        for d = 1, k do h[d] = counts:at(d, j) end
        b[#b + 1] = {name = name, heldout = basis_heldout[name], histogram = h:normalize()}
    end
    b[#b + 1] = {name = "specific (IS)", histogram = store:histogram(spec_texts, level)}
    return b
end

-- ---- runs ---------------------------------------------------------------------------------
local function config(name, level, policy, extra)
    local cfg = exp.run_config(a, preset, steps, name, {
        store = {dir = store_dir, level = level},
        specific = {train = spec_train, heldout = spec_heldout},
        policy = policy,
    })
    for key, v in pairs(extra or {}) do cfg[key] = v end
    return cfg
end

-- The letter a model picks most often, and for what share of the questions: a small model
-- that always answers "A" scores the share of A answers, whatever it learnt.
local function top_letter(score)
    local n, counts = score.loglik:shape()[1], {0, 0, 0, 0}
    for i = 1, n do
        local best = 1
        for j = 2, 4 do if score.loglik:at(i, j) > score.loglik:at(i, best) then best = j end end
        counts[best] = counts[best] + 1
    end
    local best = 1
    for j = 2, 4 do if counts[j] > counts[best] then best = j end end
    return {letter = ("ABCD"):sub(best, best), share = counts[best] / n}
end

local rows, dga_dirs, all_dirs = {}, {}, {}
for level = 1, store:levels() do
    local k = store:k(level)
    local basis = basis_for(level)
    local is_hist = basis[#basis].histogram
    local runs = {
        config(string.format("natural_k%d", k), level, {name = "natural"}, {basis = basis}),
        config(string.format("is_k%d", k), level, {name = "importance"},
               {basis = basis, is_histogram = is_hist}),
        config(string.format("dga_dist_k%d", k), level, {name = "dga_dist", beta = preset.beta},
               {basis = basis, dist = true}),
    }
    for _, cfg in ipairs(runs) do
        io.stderr:write(string.format("== %s\n", cfg.name))
        local s = exp.run(cfg, a)
        local model = s.model
        if not model then model = dga.load_checkpoint(require("trainer").latest_checkpoint(cfg.run_dir)).model end
        local score = dga.mmlu_score(model, tok, q_score, {shots = 0})
        local score5 = q_score5 and dga.mmlu_score(model, tok, q_score5, {shots = 5, dev = q_dev})
        rows[#rows + 1] = {run = cfg.name, k = k, policy = cfg.policy.name,
                           mmlu_b_loss = dga.eval_loss_seqs(model, eval_all),
                           basis_loss = s.basis_loss, accuracy = 100 * score.accuracy,
                           accuracy5 = score5 and 100 * score5.accuracy,
                           answer_loss = score.answer_loss, top_letter = top_letter(score)}
        all_dirs[#all_dirs + 1] = cfg.run_dir
        if cfg.dist then dga_dirs[#dga_dirs + 1] = cfg.run_dir end
    end
end

print(string.format("\nmmlu_dist: %d steps per run, specific set %s, %d basis sets (+ specific IS)",
                    steps, a.dev and "MMLU_dev" or "MMLU_a", #domains))
local columns = {{"run", "%s"}, {"k", "%d"}, {"mmlu_b_loss", "%.4f", "MMLU_b loss"},
                 {"basis_loss", "%.4f", "avg basis loss"},
                 {"accuracy", "%.1f", "acc % 0-shot"}}
if q_score5 then columns[#columns + 1] = {"accuracy5", "%.1f", "acc % 5-shot"} end
columns[#columns + 1] = {"answer_loss", "%.4f", "answer NLL"}
exp.print_table(rows, columns, a.out .. "/table2.csv")
print(string.format("(MMLU_b loss over all %d MMLU_b questions; accuracy on %d of them 0-shot%s; "
                    .. "chance = 25%%)", #q_eval, #q_score,
                    q_score5 and string.format(", %d 5-shot", #q_score5) or ""))
local one_letter = {}
for _, r in ipairs(rows) do
    if r.top_letter.share >= 0.9 then
        one_letter[#one_letter + 1] = string.format("%s %s %.0f%%", r.run, r.top_letter.letter,
                                                    100 * r.top_letter.share)
    end
end
if #one_letter > 0 then
    print("(0-shot: these runs give one letter to at least 90% of the questions, so their accuracy "
          .. "is that letter's share of the answers, not knowledge: " .. table.concat(one_letter, ", ") .. ")")
end
print("(natural = the paper's 'uniform' baseline: every generic sequence equally likely)")
if not a.no_plot then
    local plot = require "plot"
    local runs = {}
    for i, d in ipairs(all_dirs) do runs[i] = plot.read_run(d) end
    local f = plot.loss_figure(runs, a.out .. "/plots", {title = "MMLU_b loss", ylabel = "MMLU_b loss"})
    print("figure: " .. f.png)
    for _, d in ipairs(dga_dirs) do
        local g = plot.weights_figure(plot.read_run(d), a.out .. "/plots", {top = 8})
        if g then print("figure: " .. g.png) end
    end
end
runinfo.write_atomic(a.out .. "/README.txt",
    "mmlu_dist runs: table2.csv (the comparison), plots/ (losses, distribution weights)\n")

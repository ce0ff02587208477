-- Section 3.1 of the paper: online mixing in the token-limited regime.
--
--   dgalua experiments/lowdata.lua [--quick] [--target us_legislation] [--budgets 2048,8192,0]
--
-- Generic pool: a domain store over every corpus domain EXCEPT the target, clustered into
-- k = 64 domains. Choice made here (the issue allows either): the target's documents are
-- removed from the generic pool by building the store without that corpus domain, so no
-- specific text is ever trained on; the specific set is the target's text tokenised with the
-- store's tokenizer (its first documents for alignment, later ones held out).
-- Token budgets: only the first `budget` tokens of each domain exist for sampling (three
-- sizes; 0 = unlimited), rounded down to whole sequences. Sampling past a budget repeats data
-- (epochs.csv records it).
-- Policies: uniform (1/k), natural (proportional to domain sizes), importance sampling (the
-- specific set's histogram over the 64 domains), DGA without EMA (beta = 1) and DGA with EMA
-- (beta = 0.1).
-- Output: <out>/b<budget>_<policy>/ runs, comparison.csv, figures in <out>/plots.
local argparse = require "argparse"
local exp = require "dgalib.experiment"
local data = require "dgalib.data"
local runinfo = require "dgalib.runinfo"
local csvlog = require "dgalib.csvlog"

local p = argparse("lowdata.lua", "Online data mixing with limited tokens per domain (paper section 3.1).")
exp.add_common_options(p, {out = "runs/lowdata"})
p:option("--target", "Corpus domain used as the specific set (excluded from the generic pool).",
         "us_legislation")
p:option("--budgets", "Tokens per domain available for training, comma separated (0 = unlimited; "
         .. "rounded down to whole sequences).")
p:option("--k", "Domains (k-means clusters) of the generic pool.", "64"):convert(tonumber)
local a = p:parse(arg)
if a.threads and dga.set_threads then dga.set_threads(a.threads) end

local preset = a.quick and {
    max_mb = 0.4, seq_len = 65, vocab = 2048, steps = 320, batch = 16, T_r = 40,
    eval_every = 80, layers = 2, width = 64, heads = 4, align_batch = 4, lr = 3e-3,
    spec_train = 64, spec_heldout = 32, budgets = "256,1024,0",
} or {
    max_mb = 0, seq_len = 129, vocab = 4096, steps = 1500, batch = 16, T_r = 100,
    eval_every = 100, layers = 4, width = 128, heads = 4, align_batch = 16, lr = 2e-3,
    spec_train = 256, spec_heldout = 64, budgets = "2048,8192,0",
}
local steps = a.steps or preset.steps
local budgets = {}
for v in (a.budgets or preset.budgets):gmatch("%d+") do budgets[#budgets + 1] = tonumber(v) end

local corpus = data.require_corpus(a.corpus)
local store_dir = exp.store{corpus = corpus, exclude = {a.target}, levels = {a.k},
                            seq_len = preset.seq_len, vocab = preset.vocab,
                            max_mb = preset.max_mb > 0 and preset.max_mb or nil,
                            cache = a.cache, seed = a.seed}
local store = dga.store_open(store_dir)
local tok = store:tokenizer()

local texts = exp.domain_texts(corpus, a.target)
local seqs = exp.text_seqs(tok, texts, preset.seq_len, preset.spec_train + preset.spec_heldout)
local spec_train, spec_heldout = exp.split(seqs, preset.spec_heldout)
-- The IS histogram from the texts of the specific training sequences' documents: the
-- documents are what the embedder sees (as the store embedded its sequences' text).
local spec_docs = {}
for i = 1, math.min(#texts, 200) do spec_docs[i] = texts[i] end
local is_hist = store:histogram(spec_docs, 1)

local policies = {
    {name = "uniform"},
    {name = "natural"},
    {name = "importance"},
    {name = "dga", beta = 1, label = "dga_noema"},
    {name = "dga", beta = 0.1, label = "dga_ema"},
}

local rows, dirs_by_budget = {}, {}
for _, budget in ipairs(budgets) do
    dirs_by_budget[budget] = {}
    for _, pol in ipairs(policies) do
        local label = pol.label or pol.name
        local policy = {}
        for key, v in pairs(pol) do if key ~= "label" then policy[key] = v end end
        local name = string.format("b%s_%s", budget == 0 and "inf" or tostring(budget), label)
        local cfg = exp.run_config(a, preset, steps, name, {
            store = {dir = store_dir, level = 1},
            budget_tokens = budget > 0 and budget or nil,
            specific = {train = spec_train, heldout = spec_heldout},
            is_histogram = is_hist,
            policy = policy,
        })
        io.stderr:write(string.format("== %s\n", name))
        local s = exp.run(cfg, a)
        -- Repetition: the largest number of epochs any domain started.
        local max_epochs = 0
        local ep = csvlog.read_records(cfg.run_dir .. "/epochs.csv") or {}
        for _, r in ipairs(ep) do
            if r.step == steps and r.epochs > max_epochs then max_epochs = r.epochs end
        end
        rows[#rows + 1] = {run = name, budget = budget == 0 and "unlimited" or tostring(budget),
                           policy = label, specific_loss = s.specific_loss,
                           generic_loss = s.generic_loss, max_epochs = max_epochs}
        table.insert(dirs_by_budget[budget], cfg.run_dir)
    end
end

print(string.format("\nlowdata: target %s, k = %d, %d steps x %d sequences of %d tokens",
                    a.target, store:k(1), steps, preset.batch, preset.seq_len))
exp.print_table(rows, {{"run", "%s"}, {"budget", "%s", "tokens/domain"}, {"policy", "%s"},
                       {"specific_loss", "%.4f", "specific loss"},
                       {"generic_loss", "%.4f", "generic loss"},
                       {"max_epochs", "%d", "max epochs"}},
                a.out .. "/comparison.csv")
if not a.no_plot then
    local plot = require "plot"
    -- The comparison figure: final specific loss against the budget, one line per policy.
    local xlabels, series = {}, {}
    for i, budget in ipairs(budgets) do xlabels[i] = budget == 0 and "unlimited" or tostring(budget) end
    for j, pol in ipairs(policies) do
        local label = pol.label or pol.name
        series[j] = {name = label, values = {}}
        for _, r in ipairs(rows) do
            if r.policy == label then
                for i, x in ipairs(xlabels) do
                    if r.budget == x then series[j].values[i] = r.specific_loss end
                end
            end
        end
    end
    local cmp = plot.series_figure(a.out .. "/plots", "comparison", xlabels, series,
                                   {title = "final specific loss (" .. a.target .. ") by token budget",
                                    xlabel = "tokens per domain", ylabel = "specific loss"})
    print("figure: " .. cmp.png)
    for _, budget in ipairs(budgets) do
        local runs = {}
        for i, d in ipairs(dirs_by_budget[budget]) do runs[i] = plot.read_run(d) end
        local tag = budget == 0 and "unlimited" or tostring(budget)
        local f = plot.loss_figure(runs, a.out .. "/plots",
                                   {title = "specific loss, budget " .. tag .. " tokens/domain",
                                    stem = "specific_loss_b" .. tag})
        print("figure: " .. f.png)
        for _, run in ipairs(runs) do
            if run.policy == "dga" then
                local g = plot.weights_figure(run, a.out .. "/plots", {top = 8})
                if g then print("figure: " .. g.png) end
            end
        end
    end
end
runinfo.write_atomic(a.out .. "/README.txt", "lowdata runs: comparison.csv, plots/\n")

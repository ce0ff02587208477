-- Quickstart: uniform mixing vs DGA on the default corpus, in minutes.
--
--   dgalua experiments/quickstart.lua [--quick] [--out runs/quickstart] [--target us_legislation]
--
-- The generic pool is every corpus domain but the target; the store clusters it into k
-- domains (k-means over sequence embeddings). The specific set is text of the target domain
-- (its first documents for training the alignment, later ones held out), tokenised with the
-- store's tokenizer. Both policies train the same model from the same seed for the same
-- steps; the table compares the specific held-out loss (what DGA optimises) and the generic
-- held-out loss. Figures: <out>/plots.
local argparse = require "argparse"
local exp = require "dgalib.experiment"
local data = require "dgalib.data"
local runinfo = require "dgalib.runinfo"

local p = argparse("quickstart.lua", "Uniform mixing vs DGA on the default corpus (minutes).")
exp.add_common_options(p, {out = "runs/quickstart"})
p:option("--target", "Corpus domain used as the specific set (excluded from the generic pool).",
         "us_legislation")
local a = p:parse(arg)
if a.threads and dga.set_threads then dga.set_threads(a.threads) end

local preset = a.quick and {
    max_mb = 0.4, k = 16, seq_len = 65, vocab = 2048, steps = 800, batch = 16, T_r = 40,
    eval_every = 80, layers = 2, width = 64, heads = 4, align_batch = 16, spec_train = 64,
    spec_heldout = 32, lr = 3e-3, beta = 0.3,
} or {
    max_mb = 2, k = 32, seq_len = 129, vocab = 4096, steps = 1500, batch = 16, T_r = 100,
    eval_every = 100, layers = 4, width = 128, heads = 4, align_batch = 16, spec_train = 256,
    spec_heldout = 64, lr = 2e-3, beta = 0.1,
}
local steps = a.steps or preset.steps

local corpus = data.require_corpus(a.corpus)
local store_dir = exp.store{corpus = corpus, exclude = {a.target}, levels = {preset.k},
                            seq_len = preset.seq_len, vocab = preset.vocab,
                            max_mb = preset.max_mb, cache = a.cache, seed = a.seed}
local store = dga.store_open(store_dir)
local tok = store:tokenizer()

-- Specific set: the target domain's text, cut into sequences; training part first.
local texts = exp.domain_texts(corpus, a.target, 2000)
local seqs = exp.text_seqs(tok, texts, preset.seq_len, preset.spec_train + preset.spec_heldout)
local spec_train, spec_heldout = exp.split(seqs, preset.spec_heldout)

local function config(policy)
    return exp.run_config(a, preset, steps, policy.name, {
        store = {dir = store_dir, level = 1},
        specific = {train = spec_train, heldout = spec_heldout},
        policy = policy,
    })
end

local rows = {}
for _, policy in ipairs{{name = "uniform"}, {name = "dga", beta = preset.beta}} do
    io.stderr:write(string.format("== %s\n", policy.name))
    local s = exp.run(config(policy), a)
    rows[#rows + 1] = s
end

print(string.format("\nquickstart: %d steps, k = %d domains (store %s), specific set = %s",
                    steps, preset.k, store_dir, a.target))
exp.print_table(rows, {{"policy", "%s"}, {"specific_loss", "%.4f", "specific held-out loss"},
                       {"generic_loss", "%.4f", "generic held-out loss"}},
                a.out .. "/comparison.csv")
if not a.no_plot then
    local plot = require "plot"
    local dirs = {}
    for _, r in ipairs(rows) do dirs[#dirs + 1] = r.run_dir end
    for _, f in ipairs(plot.plot_runs(dirs, a.out .. "/plots", {title = "quickstart: specific loss"})) do
        print("figure: " .. f.png)
    end
end
runinfo.write_atomic(a.out .. "/README.txt", "quickstart runs; see comparison.csv and plots/\n")

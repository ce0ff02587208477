-- Quickstart: uniform mixing against DGA on the default corpus, in minutes.
--
--   dgalua experiments/quickstart.lua [--quick] [--out runs/quickstart] [--target us_legislation]
--
-- The same protocol as the study, at demo size: a splits plan (--data-seed) keeps the target
-- domain out of the generic pool and gives the specific training and held-out sets as whole
-- documents; the store holds only the plan's store documents (k clusters); the leakage check
-- runs before training; every (policy, seed) is a cell of a resumable sweep (--seeds, --jobs).
-- Policies: uniform, and DGA + EMA with the fixed eta (ETA, from scripts/calibrate_eta.lua)
-- and the adaptive one. The table: specific and generic held-out losses, mean over seeds.
local C = require "harness.cells"

-- eta = 3: calibrated by scripts/calibrate_eta.lua (docs/calibrate_eta.csv; see lowdata.lua).
local ETA = 3

local function options(p)
    p:option("--target", "Corpus domain used as the specific set (excluded from the generic pool).",
             "us_legislation")
    p:option("--eta", "Fixed DGA step size.", tostring(ETA)):convert(tonumber)
end

local function preset(a)
    return a.quick and {
        max_mb = 0.3, k = 16, seq_len = 65, vocab = 2048, steps = 320, batch = 16, T_r = 20,
        eval_every = 40, layers = 2, width = 64, heads = 4, align_batch = 8, spec_train = 64,
        spec_heldout = 32, lr = 3e-3,
    } or {
        max_mb = 1, k = 32, seq_len = 129, vocab = 4096, steps = 1500, batch = 16, T_r = 50,
        eval_every = 100, layers = 4, width = 128, heads = 4, align_batch = 16, spec_train = 256,
        spec_heldout = 64, lr = 2e-3,
    }
end

local function setup(x)
    local a, ps = x.a, x.preset
    local corpus = require("data.corpus").require_corpus(a.corpus)
    local splits = require "data.splits"
    local plan = splits.plan{corpus = corpus, data_seed = a.data_seed, targets = {a.target},
                             specific_heldout_docs = 8, basis_docs = 0, generic_heldout_docs = 3,
                             max_mb = ps.max_mb}
    local store_dir = plan:store{levels = {ps.k}, seq_len = ps.seq_len, vocab = ps.vocab, cache = a.cache}
    local store = dga.store_open(store_dir)
    local tok = store:tokenizer()
    local L = ps.seq_len
    local train = C.seqs(tok, plan:texts(a.target, "specific_train"), L, ps.spec_train)
    local held = C.seqs(tok, plan:texts(a.target, "specific_heldout"), L, ps.spec_heldout)
    if not (train and held) then error("quickstart: target " .. a.target .. " has too little text", 0) end
    local kept = C.check_leaks({specific = held, generic = plan:interleaved_seqs("generic_heldout", tok, L, 8,
                                                                                 plan:sources())},
                               {specific_train = train, store = splits.store_seqs(store)}, tok)
    return {store_dir = store_dir, train = train, held = kept.specific, generic = kept.generic}
end

local function cells(x)
    local defaults = {{name = "uniform"}}
    for _, spec in ipairs(C.dga_variants("dga", {0.1}, x.a.eta)) do defaults[#defaults + 1] = spec end
    local out = {}
    for _, spec in ipairs(C.policies(x.a, defaults)) do
        out[#out + 1] = {id = x.a.target .. "/" .. C.label(spec), group = x.a.target, policy = spec}
    end
    return out
end

local function run_cell(x, cell, seed, dir, topts)
    local d = x.data()
    local cfg = require("harness.experiment").run_config(x.a, x.preset, x.steps, cell.id, {
        store = {dir = d.store_dir, level = 1},
        specific = {train = d.train, heldout = d.held}, generic_heldout = d.generic,
        policy = C.policy_config(cell.policy),
    })
    return C.train(cfg, seed, dir, x.a, topts)
end

return require("harness.descriptor").define({
    name = "quickstart", order = 4, out = "runs/quickstart",
    title = "Quickstart (quickstart.lua)",
    about = "Uniform mixing vs DGA on the default corpus (minutes).",
    study = {args = {"--quick"}},
    options = options, preset = preset, setup = setup, cells = cells, run_cell = run_cell,
    title_of = function(x)
        return string.format("quickstart: %d steps, k = %d, specific set = %s", x.steps, x.preset.k, x.a.target)
    end,
    cell_names = "<target>/<policy>: the specific set is the corpus domain <target>; dga_ema_fixed is DGA with "
                 .. "the EMA (beta = 0.1) and the calibrated fixed eta, dga_ema_std the same with the adaptive eta.",
    report = {reference = "uniform", intro = "The short demo: uniform against DGA on one target.",
              curve_note = "The curves are metrics.csv's specific_loss at every evaluation; their last point is the "
                           .. "tables' specific_final (the same held-out set)."},
}, ...)

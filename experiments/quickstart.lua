-- Quickstart: uniform mixing against DGA on the default corpus, in minutes.
--
--   dgalua experiments/quickstart.lua [--quick] [--out runs/quickstart] [--target us_legislation]
--
-- The same protocol as the study, at demo size: a splits plan (--data-seed) keeps the target
-- domain out of the generic pool and gives the specific training and held-out sets as whole
-- documents; the store holds only the plan's store documents (k clusters); the leakage check
-- runs before training; every (policy, seed) is a cell of a resumable sweep (--seeds, --jobs).
-- Policies: uniform, and DGA + EMA with the fixed eta (ETA, from experiments/calibrate_eta.lua)
-- and the adaptive one. The table: specific and generic held-out losses, mean over seeds.
local C = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/common.lua")
local exp = require "harness.experiment"
local data = require "data.corpus"

-- eta = 3: calibrated by experiments/calibrate_eta.lua (docs/calibrate_eta.csv; see lowdata.lua).
local ETA = 3

local p = C.parser("quickstart.lua", "Uniform mixing vs DGA on the default corpus (minutes).", "runs/quickstart")
p:option("--target", "Corpus domain used as the specific set (excluded from the generic pool).",
         "us_legislation")
p:option("--eta", "Fixed DGA step size.", tostring(ETA)):convert(tonumber)
local a = C.parse(p)

local preset = a.quick and {
    max_mb = 0.3, k = 16, seq_len = 65, vocab = 2048, steps = 320, batch = 16, T_r = 20,
    eval_every = 40, layers = 2, width = 64, heads = 4, align_batch = 8, spec_train = 64,
    spec_heldout = 32, lr = 3e-3,
} or {
    max_mb = 1, k = 32, seq_len = 129, vocab = 4096, steps = 1500, batch = 16, T_r = 50,
    eval_every = 100, layers = 4, width = 128, heads = 4, align_batch = 16, spec_train = 256,
    spec_heldout = 64, lr = 2e-3,
}
local steps = a.steps or preset.steps
local corpus = data.require_corpus(a.corpus)

local D
local function setup()
    if D then return D end
    local splits = require "data.splits"
    local plan = splits.plan{corpus = corpus, data_seed = a.data_seed, targets = {a.target},
                             specific_heldout_docs = 8, basis_docs = 0, generic_heldout_docs = 3,
                             max_mb = preset.max_mb}
    local store_dir = plan:store{levels = {preset.k}, seq_len = preset.seq_len, vocab = preset.vocab,
                                 cache = a.cache}
    local store = dga.store_open(store_dir)
    local tok = store:tokenizer()
    local L = preset.seq_len
    local train = C.seqs(tok, plan:texts(a.target, "specific_train"), L, preset.spec_train)
    local held = C.seqs(tok, plan:texts(a.target, "specific_heldout"), L, preset.spec_heldout)
    if not (train and held) then error("quickstart: target " .. a.target .. " has too little text", 0) end
    local kept = C.check_leaks({specific = held, generic = plan:interleaved_seqs("generic_heldout", tok, L, 8,
                                                                                 plan:sources())},
                               {specific_train = train, store = splits.store_seqs(store)}, tok)
    held = kept.specific
    local generic = kept.generic
    D = {store_dir = store_dir, train = train, held = held, generic = generic}
    return D
end

local defaults = {{name = "uniform"}}
for _, spec in ipairs(C.dga_variants("dga", {0.1}, a.eta)) do defaults[#defaults + 1] = spec end
local cells = {}
for _, spec in ipairs(C.policies(a, defaults)) do
    cells[#cells + 1] = {id = a.target .. "/" .. C.label(spec), group = a.target, policy = spec}
end

-- The data before the sweep: its children then find the store cached (and the leakage
-- check has passed before any training).
setup()
local sweep = require "harness.sweep"
local summaries = sweep.run{
    name = "quickstart", out = a.out, args = a, cells = cells,
    run_cell = function(cell, seed, dir, topts)
        local d = setup()
        local cfg = exp.run_config(a, preset, steps, cell.id, {
            store = {dir = d.store_dir, level = 1},
            specific = {train = d.train, heldout = d.held}, generic_heldout = d.generic,
            policy = C.policy_config(cell.policy),
        })
        return C.train(cfg, seed, dir, a, topts)
    end,
}
if not summaries then return end   -- a --jobs worker, or an MPI rank other than 0
require("report").experiment("quickstart", a.out, {plot = not a.no_plot, reference = "uniform",
    metrics = {"specific_final", "generic_final", "l1_mean"},
    title = string.format("quickstart: %d steps, k = %d, specific set = %s", steps, preset.k, a.target)})

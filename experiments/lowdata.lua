-- Section 3.1 of the paper: online mixing when every domain has few tokens, in three regimes,
-- with the online-mixing zoo beside DGA, and at three scales.
--
--   dgalua experiments/lowdata.lua [--quick] [--seeds 1,2,3] [--key-seeds 1-5] [--jobs 2]
--                                  [--targets a,b,c] [--regimes 3,10,0] [--scales 1,4,16] [--no-zoo]
--
-- Data (data/splits, one plan per --data-seed): the target domains are wholly excluded from
-- the generic pool; the store holds the "store" documents of the other domains (whole domains
-- but for the held-out documents: so "no limit" means what it says), clustered into k = 64
-- domains. Each target's specific training and held-out sets are whole documents that never
-- share one; the generic held-out set is documents kept out of the store. The leakage check
-- runs on these tensors and on every sequence of the store before any training.
-- Regimes (--regimes, natural epochs; 0 = no limit): each domain offers only budget_tokens
-- tokens (whole sequences), set so that natural mixing passes about E epochs over each domain
-- (a domain smaller than its budget offers what it has); with no limit every domain offers all
-- of itself. Under equal budgets the natural mixture is the uniform one, so uniform runs only
-- without a limit, where they differ.
-- Policies: natural, IS (the specific training documents' histogram), DGA (beta = 1) and
-- DGA + EMA (beta = 0.1) with the fixed eta (ETA below), and DGA + EMA with the adaptive eta as
-- a secondary row; natural, DGA and DGA + EMA (fixed eta), whose comparisons are decided by
-- differences of a few hundredths, run --key-seeds (the study: 1-5), the others --seeds.
-- The zoo (ODM, DoGE, DoReMi: scripts/policies/) runs beside them on the first target in the
-- first regime with a limit and without a limit, same data, budget, seeds and metrics.
-- DoReMi's reference model is a natural-mixture run of the same configuration and seed,
-- trained first inside the cell (reference/).
-- Scales (--scales): at s > 1 the four main policies run on the first target, in the first
-- regime with a limit and without one, with s times the tokens per run (steps, T_r and the
-- evaluation interval times s; the same model, see preset below for why).
-- T_r gives at least 40 policy updates per run (an update every T_r steps, none at the last).
-- Metrics per run (scripts/harness/cells.lua): final, best and final-minus-best specific loss,
-- loss spikes, generic loss, mean L1 weight change per update, epochs.
-- Output: <out>/<target>[/x<s>]/b<E>/<policy>/seed-<s>/ (runs with summary.json), notes.md,
-- table.md / table.csv, and figures in <out>/plots.
local C = require "harness.cells"

-- The fixed DGA step size, calibrated once by scripts/calibrate_eta.lua (target
-- us_legislation, seed 1, lowdata's quick model with beta = 1; docs/calibrate_eta.csv). Final
-- specific loss by eta: 0.3 -> 6.623, 1 -> 6.350, 3 -> 6.237, 10 -> 6.292, 30 -> 6.299 (the
-- adaptive eta: 6.195, its mean eta 5.3). eta = 3 is the lowest; at 10 and 30 the weights
-- collapse onto one domain within a few updates (mean L1 change 0.73 and 1.15 per update
-- against 0.22). It multiplies raw alignments (normalize = "none"); one seed, so the choice is
-- coarse (a factor of 3), which is all a constant needs to be.
local ETA = 3

local function options(p)
    local args = require "cli.args"
    p:option("--targets", "Corpus domains used as specific sets (all excluded from the generic pool), "
             .. "comma separated.")
    p:option("--regimes", "Token regimes, as the epochs natural mixing passes over each domain "
             .. "(comma separated; 0 = no limit).")
    p:option("--natural-epochs", "The same as --regimes (the first edition's name)."):hidden(true)
    p:option("--scales", "Tokens per run, as multiples of the base run (comma separated; 1 = base only).")
    p:option("--regime-targets", "How many targets (the first ones) run every regime; the others run the first "
             .. "budget and no limit (default: 1 in the full preset, every target with --quick)."):convert(args.int(1))
    p:option("--key-seeds", "Seeds of the cells whose claims hinge on small differences (natural, DGA, "
             .. "DGA + EMA with the fixed eta); default: --seeds."):convert(require("harness.sweep").parse_seeds)
    p:flag("--no-zoo", "Leave out ODM, DoGE and DoReMi (the full preset runs them).")
    p:flag("--zoo", "Run ODM, DoGE and DoReMi with --quick too.")
    p:option("--k", "Domains (k-means clusters) of the generic pool.", "64"):convert(args.int(1))
    p:option("--eta", "Fixed DGA step size.", tostring(ETA)):convert(tonumber)
    p:option("--calibrate", "Instead of the policies: DGA (beta = 1) with each of these fixed step sizes "
             .. "and the adaptive one (scripts/calibrate_eta.lua runs this).")
end

local function numbers(text)
    local out = {}
    for v in text:gmatch("[%d.]+") do out[#out + 1] = tonumber(v) end
    return out
end

-- The model: 2 layers of width 96 over a 2,048-word vocabulary (about 0.42M parameters, so a
-- 16x run sees about 23 tokens per parameter). With 4,096 words the output layer was 60% of a
-- step's matrix products and a run took 1.48x as long (natural and DGA at the 3-epoch budget, two
-- at a time), which put the whole study at 7.6 hours against its budget of 6. The model stays the
-- same at every scale: widening it to 128 would cost 1.8x per token; what moves with scale here
-- is the tokens per run, at fixed capacity.
local function preset(a)
    local p = a.quick and {
        max_mb = 0.3, seq_len = 65, vocab = 2048, steps = 240, batch = 16, T_r = 6,
        eval_every = 20, layers = 2, width = 64, heads = 4, align_batch = 2, lr = 3e-3,
        spec_train = 48, spec_heldout = 32, gen_heldout = 8, targets = "us_legislation",
        regimes = "3,0", scales = "1", zoo = false, regime_targets = math.huge,
    } or {
        max_mb = nil, seq_len = 65, vocab = 2048, steps = 600, batch = 16, T_r = 14,
        eval_every = 30, layers = 2, width = 96, heads = 4, align_batch = 2, lr = 3e-3,
        spec_train = 128, spec_heldout = 64, gen_heldout = 12,
        targets = "us_legislation,pubmed_bmc_fulltext,code_python", regimes = "3,10,0", scales = "1,4,16",
        zoo = true, regime_targets = 1,
    }
    p.target_list = {}
    for t in (a.targets or p.targets):gmatch("[^,]+") do p.target_list[#p.target_list + 1] = t end
    p.regime_list = numbers(a.regimes or a.natural_epochs or p.regimes)
    p.scale_list = numbers(a.scales or p.scales)
    p.regime_targets = a.regime_targets or p.regime_targets
    return p
end

-- The data, once per process: the splits plan, the store, each target's specific sets and IS
-- histogram, the generic held-out set; the leakage check before any training.
local function setup(x)
    local a, preset_ = x.a, x.preset
    local corpus = require("data.corpus").require_corpus(a.corpus)
    local splits = require "data.splits"
    local targets = preset_.target_list
    local plan = splits.plan{corpus = corpus, data_seed = a.data_seed, targets = targets,
                             specific_heldout_docs = a.quick and 8 or 20, basis_docs = 0,
                             generic_heldout_docs = a.quick and 4 or 8,
                             max_mb = preset_.max_mb}
    local store_dir = plan:store{levels = {a.k}, seq_len = preset_.seq_len, vocab = preset_.vocab,
                                 cache = a.cache}
    local store = dga.store_open(store_dir)
    local tok = store:tokenizer()
    local L = preset_.seq_len
    local sources = plan:sources()
    local D = {plan = plan, store_dir = store_dir, store = store, tok = tok, spec = {}}
    local heldout = {generic = plan:interleaved_seqs("generic_heldout", tok, L, preset_.gen_heldout, sources)}
    local inputs = {store = splits.store_seqs(store)}
    for _, t in ipairs(targets) do
        local train_docs = plan:texts(t, "specific_train")
        local train = C.seqs(tok, train_docs, L, preset_.spec_train)
        local held = C.seqs(tok, plan:texts(t, "specific_heldout"), L, preset_.spec_heldout)
        if not (train and held) then error("lowdata: target " .. t .. " has too little text", 0) end
        -- The IS histogram from the specific training documents only: those the training
        -- sequences were cut from.
        local docs, need, have = {}, train:shape()[1] * L, 0
        for _, text in ipairs(train_docs) do
            if have >= need then break end
            docs[#docs + 1] = text
            have = have + #tok:encode(text) + 1
        end
        D.spec[t] = {train = train, is = store:histogram(docs, 1)}
        heldout["specific " .. t] = held
        inputs["specific_train " .. t] = train
    end
    local kept = C.check_leaks(heldout, inputs, tok)
    D.generic_heldout = kept.generic
    for _, t in ipairs(targets) do D.spec[t].heldout = kept["specific " .. t] end
    return D
end

-- Tokens per domain so that natural mixing (uniform over the equal budgets) passes E epochs
-- in a run of `steps` steps.
local function budget_of(x, E, steps)
    if E == 0 then return nil end
    local seqs_per_domain = math.max(1, math.floor(steps * x.preset.batch / (x.a.k * E)))
    return seqs_per_domain * x.preset.seq_len
end

local function regime_name(E) return E == 0 and "binf" or ("b" .. tostring(E)) end

-- The first regime with a limit and the one without, where the zoo and the scales run.
local function side_regimes(list)
    local out, limited, free = {}, nil, nil
    for _, E in ipairs(list) do
        if E ~= 0 and not limited then limited = E end
        if E == 0 then free = E end
    end
    if limited then out[#out + 1] = limited end
    if free then out[#out + 1] = free end
    return out
end

-- The cells whose claims hinge on differences of a few hundredths: --key-seeds at the base
-- scale (the scale axis runs --seeds, 3 by default, as its claims are read as trends).
local KEY = {natural = true, dga_fixed = true, dga_ema_fixed = true}

local function main_specs(a)
    local list = {{name = "natural"}, {name = "importance", label = "is"}}
    for _, spec in ipairs(C.dga_variants("dga", {1, 0.1}, a.eta)) do
        if spec.eta_mode == "fixed" or spec.beta ~= 1 then list[#list + 1] = spec end
    end
    return list
end

local function cells(x)
    local a, p = x.a, x.preset
    local out = {}
    local function add(target, E, scale, spec)
        local group = target .. (scale > 1 and ("/x" .. scale) or "") .. "/" .. regime_name(E)
        local label = C.label(spec)
        out[#out + 1] = {id = group .. "/" .. label, group = group, target = target, natural_epochs = E,
                         scale = scale, policy = spec, seeds = scale == 1 and KEY[label] and a.key_seeds or nil}
    end
    if a.calibrate then
        local specs = {{name = "dga", beta = 1, eta_mode = "std", label = "dga_std"}}
        for v in a.calibrate:gmatch("[^,]+") do
            local eta = tonumber(v)
            if not eta or eta <= 0 then error("--calibrate: positive step sizes, got " .. v, 0) end
            specs[#specs + 1] = {name = "dga", beta = 1, eta_mode = "fixed", eta = eta, label = "eta_" .. v}
        end
        for _, spec in ipairs(specs) do add(p.target_list[1], p.regime_list[1], 1, spec) end
        return out
    end
    local chosen = #(a.policy or {}) > 0
    local specs = C.policies(a, main_specs(a))
    -- the middle budgets (b10) on the first --regime-targets targets only: each costs as much as
    -- the others, and the 6-hour budget goes to the scale axis instead
    local side = side_regimes(p.regime_list)
    for i, t in ipairs(p.target_list) do
        for _, E in ipairs(i <= p.regime_targets and p.regime_list or side) do
            for _, spec in ipairs(specs) do add(t, E, 1, spec) end
            if E == 0 and not chosen then add(t, E, 1, {name = "uniform", label = "uniform"}) end
        end
    end
    local first = p.target_list[1]
    if not chosen and not a.no_zoo and (p.zoo or a.zoo) then
        for _, E in ipairs(side_regimes(p.regime_list)) do
            for _, name in ipairs{"odm", "doge", "doremi"} do add(first, E, 1, {name = name, label = name}) end
        end
    end
    for _, scale in ipairs(p.scale_list) do
        if scale > 1 then
            for _, E in ipairs(side_regimes(p.regime_list)) do
                for _, spec in ipairs(specs) do
                    if spec.label ~= "dga_ema_std" then add(first, E, scale, spec) end
                end
            end
        end
    end
    return out
end

-- The trainer config of a cell: the base run times its scale.
local function cell_config(x, cell, dir, policy)
    local d = x.data()
    local sp = d.spec[cell.target]
    local scaled = {}
    for key, v in pairs(x.preset) do scaled[key] = v end
    local s = cell.scale or 1
    scaled.T_r, scaled.eval_every = x.preset.T_r * s, x.preset.eval_every * s
    local steps = x.steps * s
    local budget = budget_of(x, cell.natural_epochs, steps)
    local cfg = require("harness.experiment").run_config(x.a, scaled, steps, cell.id, {
        store = {dir = d.store_dir, level = 1}, budget_tokens = budget,
        specific = {train = sp.train, heldout = sp.heldout}, generic_heldout = d.generic_heldout,
        is_histogram = sp.is, policy = policy,
    })
    cfg.run_dir = dir
    return cfg, budget
end

-- DoReMi's reference: a natural-mixture run of the same configuration and seed, in
-- <dir>/reference (kept when it finished, so a resumed pair does not train it again).
local function doremi_reference(x, cell, seed, dir)
    local ref_dir = dir .. "/reference"
    local cfg = cell_config(x, cell, ref_dir, {name = "natural"})
    cfg.name = cell.id .. " (reference)"
    require("harness.sweep").overrides(x.a, cfg)
    local trainer = require "trainer"
    local last = trainer.latest_checkpoint(ref_dir)
    if not (last and tonumber(last:match("ckpt%-(%d+)")) == cfg.steps) then
        cfg.seed = seed
        cfg.progress = (x.a.jobs or 1) <= 1
        trainer.run(cfg, {overwrite = true})
        last = trainer.latest_checkpoint(ref_dir)
    end
    return last
end

-- A run's work in base runs' tokens, for the sweep's ETA: its scale, twice for DoReMi (it
-- trains its reference first).
local function cost(_, cell)
    return (cell.scale or 1) * (cell.policy.name == "doremi" and 2 or 1)
end

local function run_cell(x, cell, seed, dir, topts)
    local policy = C.policy_config(cell.policy)
    if policy.name == "doremi" then policy.reference = doremi_reference(x, cell, seed, dir) end
    local cfg, budget = cell_config(x, cell, dir, policy)
    local m, s = C.train(cfg, seed, dir, x.a, topts, {budget_tokens = budget or 0, scale = cell.scale or 1})
    -- the step size the policy ran with (a --set or --policy option included)
    local po = s.policy_options or {}
    m.eta_fixed = po.eta_mode == "fixed" and po.eta or nil
    return m, s
end

-- The paper's claims quote its abstract (harness/paper.lua): the comparisons it makes there
-- are against importance sampling.
local ABSTRACT = require("harness.paper").ABSTRACT_SCENARIOS

return require("harness.descriptor").define({
    name = "lowdata", order = 1, out = "runs/lowdata",
    title = "Section 3.1: few tokens per domain, three regimes, the zoo, three scales (lowdata.lua)",
    about = "Online data mixing with limited tokens per domain (paper section 3.1).",
    study = {args = {"--key-seeds", "1-5"}, quick_args = {}}, key_ignore = {["--key-seeds"] = "value"},
    options = options, preset = preset, setup = setup, cells = cells, run_cell = run_cell, cost = cost,
    title_of = function(x) return "lowdata: k = " .. x.a.k .. ", " .. x.steps .. " steps at scale 1" end,
    cell_names = "<target>[/x<s>]/b<E>/<policy>: the specific set is the corpus domain <target>; x<s>: s times "
                 .. "the tokens per run (none: the base run); b<E>: every generic domain offers a token budget "
                 .. "under which natural mixing passes about E epochs, binf: no limit; <policy>: dga is DGA "
                 .. "without EMA (beta = 1), dga_ema with it (beta = 0.1); _fixed: the calibrated fixed eta, _std: "
                 .. "the adaptive eta; is: importance sampling; odm, doge, doremi: the zoo.",
    equal_rows = "under a budget every domain offers the same number of tokens, so the natural mixture "
                 .. "(proportional to the tokens a domain offers) is the uniform one: uniform runs only without "
                 .. "a limit (binf), where the two differ.",
    columns = {budget_tokens = "tokens each generic domain offers (0: no limit)",
               eta_fixed = "the fixed step size DGA ran with (empty for the adaptive one)",
               scale = "tokens per run as a multiple of the base run"},
    report = {reference = "natural", weights_labels = {dga_fixed = true, dga_ema_fixed = true},
              curve_note = "The curves are metrics.csv's specific_loss at every evaluation; their last point is the "
                           .. "tables' specific_final (the same held-out set).",
              intro = "Specific held-out loss (final, best, final - best), loss spikes (an evaluation whose specific "
                   .. "loss rose above the previous one by more than 1% of the running minimum), generic held-out "
                   .. "loss, mean L1 change of the sampling weights per update, most epochs any domain went through, "
                   .. "in each token regime (b3, b10: budgets under which natural passes about 3 or 10 epochs; binf: "
                   .. "no limit) and, for one target, at 4 and 16 times the tokens per run."},
    claims = {
        {id = "is_overfits", source = "paper", section = "Abstract", quote = ABSTRACT, x = "is", y = "natural",
         metric = "specific_gap", better = "higher", where = "/b%d+$",
         text = "IS overfits under a token limit: its final - best gap exceeds natural's"},
        {id = "dga_below_is", source = "paper", section = "Abstract", quote = ABSTRACT, x = "dga_fixed", y = "is",
         metric = "specific_final", better = "lower", where = "/b%d+$", text = "DGA (fixed eta) ends below IS"},
        {id = "ema_below_is", source = "paper", section = "Abstract", quote = ABSTRACT, x = "dga_ema_fixed",
         y = "is", metric = "specific_final", better = "lower", where = "/b%d+$",
         text = "DGA + EMA (fixed eta) ends below IS"},
        {id = "ema_fewer_spikes", source = "ours",
         question = "Does the EMA remove DGA's loss spikes? (the issue's reading of section 3.1; no sentence of the "
                    .. "paper's body is at hand to quote)",
         x = "dga_ema_fixed", y = "dga_fixed", metric = "spikes", better = "lower",
         text = "DGA + EMA has fewer loss spikes than DGA"},
        {id = "ema_smoother", source = "ours", question = "Does the EMA make each update move the mixture less?",
         x = "dga_ema_fixed", y = "dga_fixed", metric = "l1_mean", better = "lower",
         text = "DGA + EMA changes the weights less per update than DGA"},
        {id = "ema_no_worse", source = "ours",
         question = "Is the EMA free without a token limit? (read in binf; the issue's reading of section 3.1)",
         x = "dga_ema_fixed", y = "dga_fixed", metric = "specific_final", better = "lower", where = "/binf$",
         margin = 0.01, text = "DGA + EMA ends no worse than DGA (by more than 0.01 nats)"},
        {id = "dga_below_natural", source = "ours", question = "Does DGA beat the natural mixture?",
         x = "dga_fixed", y = "natural", metric = "specific_final", better = "lower",
         text = "DGA (fixed eta) ends below natural"},
        {id = "ema_below_natural", source = "ours", question = "Does DGA + EMA beat the natural mixture?",
         x = "dga_ema_fixed", y = "natural", metric = "specific_final", better = "lower",
         text = "DGA + EMA (fixed eta) ends below natural"},
        {id = "ema_below_odm", source = "ours", question = "Does DGA + EMA beat ODM (a bandit rewarded by training loss)?",
         x = "dga_ema_fixed", y = "odm", metric = "specific_final", better = "lower",
         text = "DGA + EMA (fixed eta) ends below ODM"},
        {id = "ema_below_doge", source = "ours", question = "Does DGA + EMA beat DoGE (its generalisation estimate, run online)?",
         x = "dga_ema_fixed", y = "doge", metric = "specific_final", better = "lower",
         text = "DGA + EMA (fixed eta) ends below DoGE"},
        {id = "ema_below_doremi", source = "ours", question = "Does DGA + EMA beat DoReMi (excess loss over a reference)?",
         x = "dga_ema_fixed", y = "doremi", metric = "specific_final", better = "lower",
         text = "DGA + EMA (fixed eta) ends below DoReMi"},
    },
}, ...)

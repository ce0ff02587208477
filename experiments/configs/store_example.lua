-- A configuration for scripts/run.lua on real text: a small domain store built from the
-- corpus (cached), with one corpus domain as the specific set and left out of the store.
--
--   dgalua scripts/run.lua experiments/configs/store_example.lua --out runs/store_example
--   dgalua scripts/run.lua experiments/configs/store_example.lua --set policy.beta=1 --set steps=200
--
-- The corpus is found as the experiments find it (DGA_SHARED_DATA, data/corpus or
-- ../shared/data/corpus). The store keeps 0.2 MB of text per domain, clustered into k = 16
-- domains; its first build takes a few seconds and lands in runs/cache. A configuration file
-- may return a function, as here, when building the data takes code: scripts/run.lua calls
-- it with the parsed options.
return function()
    local data = require "data.corpus"
    local exp = require "harness.experiment"
    local target = "us_legislation"
    local corpus = data.require_corpus()
    local store_dir = exp.store{corpus = corpus, exclude = {target}, levels = {16}, seq_len = 65,
                                vocab = 1024, max_mb = 0.2, quiet = true}
    local tok = dga.store_open(store_dir):tokenizer()
    -- The target's documents as sequences of the store's tokenizer: the first 48 for the
    -- alignment's target batches, the last 16 held out.
    local seqs = exp.text_seqs(tok, exp.domain_texts(corpus, target, 200), 65, 64)
    return {
        name = "store_example",
        seed = 1,
        steps = 120, batch = 8, T_r = 20, eval_every = 40, checkpoint_every = 40,
        align_batch = 4,
        model = {layers = 2, width = 64, heads = 4},
        optimizer = {lr = 3e-3, weight_decay = 0.1, clip = 1.0},
        schedule = {kind = "cosine", warmup = 6, min_lr = 3e-4},
        store = {dir = store_dir, level = 1},
        specific = {train = exp.rows(seqs, 1, 48), heldout = exp.rows(seqs, 49, 16)},
        policy = {name = "dga", beta = 0.5},
    }
end

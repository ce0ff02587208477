-- Shared pieces of the experiments (experiments/*.lua): cached domain stores, specific sets
-- made from corpus text, comparison tables.
--
--   local exp = require "harness.experiment"
--   local dir = exp.store{corpus = C, exclude = {"us_legislation"}, levels = {64},
--                         seq_len = 65, vocab = 4096, max_mb = 1, cache = "runs/cache"}
--   local seqs = exp.text_seqs(tok, texts, seq_len)          -- int32 [n, seq_len]
--   exp.print_table(rows, {{"policy", "%s"}, {"specific_loss", "%.4f"}})
local runinfo = require "util.runinfo"
require "cli.args"   -- usage errors exit with status 2
local csvlog = require "util.csvlog"

local M = {}

local function key_of(t)
    local parts = {}
    for _, k in ipairs(t) do parts[#parts + 1] = tostring(k) end
    return table.concat(parts, "_"):gsub("[^%w%-_.]", "_")
end

-- A corpus directory holding only some domains (symlinks into the real corpus), so a store
-- can be built without the specific domain: its text is then never in the generic pool.
-- Superseded by data.splits (a plan's store leaves out whole documents, targets included).
function M.corpus_subset(corpus, exclude, cache)
    local data = require "data.corpus"
    local skip = {}
    for _, d in ipairs(exclude or {}) do skip[d] = true end
    local names = {}
    for _, d in ipairs(data.corpus_domains(corpus)) do
        if not skip[d] then names[#names + 1] = d end
    end
    if #names == 0 then error("corpus " .. corpus .. ": no domain left after excluding", 2) end
    if not exclude or #exclude == 0 then return corpus, names end
    local dir = cache .. "/corpus-without-" .. key_of(exclude)
    runinfo.mkdir_p(dir)
    local abs = corpus:sub(1, 1) == "/" and corpus or (require("lfs").currentdir() .. "/" .. corpus)
    for _, d in ipairs(names) do
        local link = dir .. "/" .. d
        if not runinfo.exists(link) then
            local ok = os.execute(string.format("ln -s '%s/%s' '%s'", abs, d, link))
            if not ok then error("cannot create symlink " .. link, 2) end
        end
    end
    return dir, names
end

-- Builds (or reuses) a domain store of whole corpus domains; returns its directory. The cache
-- key holds every option, so changing one builds a new store. The clustering is seeded by
-- o.data_seed (default 1), never by the training seed: seed replicates share one store.
-- A store that must leave documents out (held-out sets) comes from data.splits instead.
function M.store(o)
    local cache = o.cache or (runinfo.repo_root() .. "/runs/cache")
    runinfo.mkdir_p(cache)
    local levels = o.levels or {64}
    local data_seed = o.data_seed or 1
    local key = key_of{"store", key_of(o.exclude or {"all"}), "L" .. key_of(levels),
                       "s" .. (o.seq_len or 129), "v" .. (o.vocab or 8192),
                       "mb" .. (o.max_mb or 0), "seed" .. data_seed}
    local dir = cache .. "/" .. key
    if runinfo.is_file(dir .. "/manifest.json") then
        if not o.quiet then io.stderr:write("using cached store " .. dir .. "\n") end
        return dir
    end
    local corpus = M.corpus_subset(o.corpus, o.exclude, cache)
    if not o.quiet then
        io.stderr:write(string.format("building store %s from %s (levels %s, seq_len %d, vocab %d%s)\n",
            dir, corpus, table.concat(levels, ","), o.seq_len or 129, o.vocab or 8192,
            o.max_mb and string.format(", %.3g MB per domain", o.max_mb) or ""))
    end
    local t0 = runinfo.now()
    dga.store_build{corpus = corpus, out = dir, levels = levels, seq_len = o.seq_len,
                    vocab = o.vocab, max_mb = o.max_mb, train_mb = o.train_mb,
                    seed = data_seed, verbose = not o.quiet}
    if not o.quiet then
        io.stderr:write(string.format("store built in %.1f s\n", runinfo.now() - t0))
    end
    return dir
end

-- Token sequences of exactly seq_len tokens from texts: data/windows.lua's from_texts.
M.text_seqs = require("data.windows").from_texts


-- The texts of one corpus domain (at most max_docs documents). For texts of a split, use
-- data.splits (plan:texts).
function M.domain_texts(corpus, domain, max_docs)
    local texts = dga.read_texts(corpus .. "/" .. domain, max_docs)
    if #texts == 0 then error("corpus domain " .. domain .. " has no documents", 2) end
    return texts
end

-- Rows `first`..`first+count-1` of a 2-D tensor as a new tensor.
function M.rows(seqs, first, count) return seqs:narrow(first, count):clone() end

-- Prints a table: columns = list of {key, format[, title]}. Also returns the text.
function M.format_table(rows, columns)
    local head, cells, width = {}, {}, {}
    for j, c in ipairs(columns) do
        head[j] = c[3] or c[1]
        width[j] = #head[j]
    end
    for i, r in ipairs(rows) do
        cells[i] = {}
        for j, c in ipairs(columns) do
            local v = r[c[1]]
            local s = v == nil and "-" or (type(v) == "number" and string.format(c[2], v) or tostring(v))
            cells[i][j] = s
            width[j] = math.max(width[j], #s)
        end
    end
    local lines = {}
    local function line(vals)
        local parts = {}
        for j, v in ipairs(vals) do
            parts[j] = (j == 1) and (v .. string.rep(" ", width[j] - #v))
                       or (string.rep(" ", width[j] - #v) .. v)
        end
        lines[#lines + 1] = table.concat(parts, "  ")
    end
    line(head)
    local rule = {}
    for j = 1, #columns do rule[j] = string.rep("-", width[j]) end
    lines[#lines + 1] = table.concat(rule, "  ")
    for _, c in ipairs(cells) do line(c) end
    return table.concat(lines, "\n")
end

function M.print_table(rows, columns, csv_path)
    local text = M.format_table(rows, columns)
    print(text)
    if csv_path then
        local names = {}
        for j, c in ipairs(columns) do names[j] = c[1] end
        local log = csvlog.open(csv_path, names)
        for _, r in ipairs(rows) do
            local rec = {}
            for _, n in ipairs(names) do rec[n] = r[n] end
            log:write(rec)
        end
        log:close()
    end
    return text
end

-- Common options of the experiment scripts.
function M.add_common_options(p, defaults)
    local args = require "cli.args"
    p:flag("--quick", "A small configuration that finishes in minutes on 2 cores.")
    p:option("--out", "Directory for the runs and the figures.", defaults.out)
    p:option("--corpus", "Corpus directory (<domain>/*.jsonl); default: data/corpus or ../shared/data/corpus.")
    p:option("--mmlu", "MMLU directory (dev/, val/, test/), for the experiments that read it; default: data/mmlu "
             .. "or ../shared/data/mmlu.")
    p:option("--cache", "Directory for cached stores (default: <repo>/runs/cache).")
    p:option("--steps", "Training steps per run (overrides the preset)."):convert(args.int(1))
    -- No argparse default: harness.sweep's --seeds takes --seed as an alias and refuses both,
    -- which a default value would trip. The action below gives 1 when neither is used.
    p:option("--seed", "One training seed (model init, sampling, probes): the same as "
             .. "--seeds N with harness.sweep. Default: 1."):convert(args.int(0))
    p:action(function(a)
        if a.seed == nil and a.seeds == nil then a.seed = 1 end
    end)
    p:option("--threads", "OpenBLAS threads."):convert(args.int(1))
    p:flag("--resume", "Continue runs that have a checkpoint in --out instead of restarting them.")
    p:flag("--no-plot", "Do not draw figures.")
    p:option("--precision", "The model's matrix products: fp32 (OpenBLAS, the default), bf16 (oneDNN where the "
             .. "CPU has bf16; elsewhere fp32, said once) or fp32-onednn.", "fp32"):choices{"fp32", "bf16", "fp32-onednn"}
    p:option("--align-method", "How DGA's alignments are computed: exact (one backward per domain, "
             .. "the paper's), fd (central differences along the target gradient) or jvp "
             .. "(forward-mode derivative along it).", "exact"):choices{"exact", "fd", "jvp"}
end

-- The trainer config every experiment shares, from its parsed options `a` and its preset
-- (model size, batch, T_r, eval interval, lr): a run named `name` in <a.out>/<name>, AdamW with
-- weight decay 0.1 and clipping 1.0, warmup over 5% of the steps then cosine to lr / 10.
-- `extra` adds or overrides fields (store, specific, policy, budget, basis, ...).
function M.run_config(a, preset, steps, name, extra)
    local cfg = {
        name = name, run_dir = a.out .. "/" .. name, seed = a.seed or 1,
        steps = steps, batch = preset.batch, T_r = preset.T_r, eval_every = preset.eval_every,
        checkpoint_every = preset.eval_every * 2, align_batch = preset.align_batch,
        model = {layers = preset.layers, width = preset.width, heads = preset.heads, precision = a.precision},
        optimizer = {lr = preset.lr, weight_decay = 0.1, clip = 1.0},
        schedule = {kind = "cosine", warmup = math.max(1, steps // 20), min_lr = preset.lr / 10},
        align = {normalize = "none", method = a.align_method},
    }
    for key, v in pairs(extra or {}) do cfg[key] = v end
    return cfg
end

return M

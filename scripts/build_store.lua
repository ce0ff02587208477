-- Builds a domain store from a corpus directory.
--
--   dgalua scripts/build_store.lua CORPUS --out STORE [--levels 64,64] [--seq-len 129]
--          [--tokenizer tok.json | --vocab 8192] [--max-mb N] [--train-mb N] [--seed S]
--          [--iters N] [--embedder hash384|hash1024|gpt:CKPT] [--euclidean] [--embeddings]
--
-- Each subdirectory of CORPUS is one source (read recursively: .jsonl {"text": ...} and .txt);
-- --max-mb caps the text read per source, --train-mb the text per source the tokenizer is
-- trained on (when no --tokenizer is given). Documents are joined with <|endoftext|> and cut
-- into sequences of --seq-len tokens, which are embedded (hash384) and clustered by a
-- hierarchical spherical k-means (--levels children per level, coarsest first).
-- Prints progress on stderr and a summary with per-domain sizes on stdout. Malformed input
-- lines are skipped and counted (the first ones named by file and line).
local argparse = require "argparse"
local args = require "cli.args"

local p = argparse("build_store.lua", "Build a domain store from a corpus directory.")
p:argument("corpus", "Corpus directory (one subdirectory per source).")
p:option("--out", "Store directory to write."):count(1)
p:option("--levels", "Children per level, coarsest first, e.g. 64,64.", "64")
p:option("--seq-len", "Tokens per sequence (the model sees seq_len - 1).", "129")
p:option("--tokenizer", "A tokenizer.json to use instead of training one.")
p:option("--vocab", "Vocabulary size when training a tokenizer.", "8192")
p:option("--max-mb", "Read at most this many MB of text per source (0: all).", "0")
p:option("--train-mb", "Train the tokenizer on at most this many MB per source (0: all read).", "0")
p:option("--seed", "k-means seed.", "1")
p:option("--iters", "Lloyd iterations per clustering.", "25")
p:option("--embedder", "Sequence embedder: hash384, hash1024 (purer domains, about 2x the time), or "
         .. "gpt:CKPT (mean-pooled hidden states of a trained dgalua model: a checkpoint directory "
         .. "from train.lua --save, or a .safetensors file with its tokenizer.json beside it).", "hash384")
p:flag("--euclidean", "Plain k-means (mean centroids, Euclidean) instead of spherical.")
p:flag("--embeddings", "Also write the sequence embeddings, embeddings.npy (float32 [sequences, dim], "
       .. "store row order; 1.5 KB per sequence with hash384).")
p:flag("--quiet", "No progress output.")
local a = p:parse(arg)
dga.check_output(a.out, {corpus = a.corpus, ["--tokenizer"] = a.tokenizer,
                         ["--embedder"] = a.embedder:match("^gpt:(.*)")})
local function num_opt(v, name)
    local n = tonumber(v)
    if not n or n < 0 then p:error(string.format("%s: expected a number >= 0, got '%s'", name, v)) end
    return n
end

local levels = {}
for item in a.levels:gmatch("[^,]+") do levels[#levels + 1] = args.check_int(p, item, "--levels", 1) end
if #levels == 0 then p:error("--levels: expected a comma-separated list such as 64,64") end

local runinfo = require "util.runinfo"
local embedder = a.embedder
if embedder:match("^gpt:") then
    -- the core reads a model file and the tokenizer.json beside it, which is the directory's layout
    local paths = require("data.model_dir").resolve(embedder:sub(5))
    embedder = "gpt:" .. paths.model
end
local build = {
    corpus = a.corpus, out = a.out, levels = levels,
    seq_len = args.check_int(p, a.seq_len, "--seq-len", 2),
    tokenizer = a.tokenizer, vocab = args.check_int(p, a.vocab, "--vocab", 257),
    max_mb = num_opt(a.max_mb, "--max-mb"), train_mb = num_opt(a.train_mb, "--train-mb"),
    seed = args.check_int(p, a.seed, "--seed", 0), iters = args.check_int(p, a.iters, "--iters", 1),
    spherical = not a.euclidean, embedder = embedder, save_embeddings = a.embeddings,
    verbose = not a.quiet,
}
-- One writer per output: a second build of the same store fails here, naming the first's pid.
-- Taken after the usage checks (their os.exit would skip the release that removes the file).
local lock <close> = dga.lock(a.out:gsub("/+$", "") .. ".lock")   -- luacheck: no unused
local t0 = runinfo.now()
local clock0 = os.clock()
local _, stats = dga.store_build(build)
require("data.corpus").warn_skipped(stats)

local s = dga.store_open(a.out)
print(tostring(s))
print(string.format("built in %.1f s wall, %.1f s CPU; read %d documents, %d malformed lines skipped",
    runinfo.now() - t0, os.clock() - clock0, stats.docs, stats.skipped))
for l = 1, s:levels() do
    local sizes = s:domain_sizes(l)
    print(string.format("level %d: %d domains, sequences per domain min %d / mean %.1f / max %d",
        l, s:k(l), math.tointeger(sizes:min()), sizes:sum() / s:k(l), math.tointeger(sizes:max())))
end
-- Coarse domains: size and main sources.
local names, counts = s:sources(1)
local sizes = s:domain_sizes(1)
print("\nlevel 1 domains (sequences, main sources):")
for d = 1, s:k(1) do
    local row = {}
    for j = 1, #names do row[#row + 1] = {names[j], math.tointeger(counts:at(d, j))} end
    table.sort(row, function(x, y) return x[2] > y[2] end)
    local n = math.tointeger(sizes[d])
    local parts = {}
    for i = 1, math.min(3, #row) do
        if row[i][2] > 0 then
            parts[#parts + 1] = string.format("%s %.0f%%", row[i][1], 100 * row[i][2] / n)
        end
    end
    print(string.format("  %4d %8d  %s", d, n, table.concat(parts, ", ")))
end
s:close()

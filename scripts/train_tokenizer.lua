-- Trains a byte-level BPE tokenizer on a sample of a corpus and saves it as tokenizer.json.
--
--   dgalua scripts/train_tokenizer.lua --corpus DIR --vocab 8192 --sample-mb 20 --out tok.json
--
-- The sample is spread evenly over the corpus's top-level subdirectories (its domains): each
-- gets sample-mb / #domains MB, taken from its documents in walk order (sorted paths), so a
-- small domain is not drowned by a big one. A DIR without subdirectories (or a single file) is
-- one domain. Skipped lines (bad JSON, no "text", invalid UTF-8) are reported on stderr.
-- Progress goes to stderr; a summary (vocabulary, bytes per token on the sample) to stdout.
local argparse = require "argparse"
require "cli.args"   -- usage errors exit with status 2

local p = argparse("train_tokenizer.lua", "Train a byte-level BPE tokenizer (Hugging Face tokenizer.json).")
p:option("--corpus", "Corpus directory (one subdirectory per domain), or a .jsonl / .txt file."):count(1)
p:option("--vocab", "Vocabulary size: 256 bytes + merges + <|endoftext|>.", "8192")
p:option("--sample-mb", "Megabytes of text to train on, split evenly over the domains (0: all).", "20")
p:option("--out", "Where to write tokenizer.json."):count(1)
p:flag("--quiet", "No progress output.")
local a = p:parse(arg)
dga.check_output(a.out, {["--corpus"] = a.corpus})

local vocab = math.tointeger(tonumber(a.vocab))
if not vocab or vocab < 257 then p:error("--vocab: expected an integer >= 257, got '" .. a.vocab .. "'") end
local sample_mb = tonumber(a.sample_mb)
if not sample_mb or sample_mb < 0 then p:error("--sample-mb: expected a number >= 0, got '" .. a.sample_mb .. "'") end

local function log(fmt, ...)
    if not a.quiet then io.stderr:write(string.format(fmt, ...), "\n") end
end

-- The domains: the top-level subdirectories holding text files (sorted), plus the top level
-- itself when files sit there directly; a single file is one domain.
local function domains_of(path)
    local root = path:gsub("/+$", "")
    local list, seen = {}, {}
    for _, f in ipairs(dga.text_files(path)) do
        local rest = f:sub(#root + 2)
        local first = rest:match("^([^/]+)/")
        local d = first and (root .. "/" .. first) or nil
        if not d then d = (f == path) and f or root end
        if not seen[d] then seen[d] = true; list[#list + 1] = d end
    end
    return list
end

local domains = domains_of(a.corpus)   -- raises a clear error for a missing path
if #domains == 0 then
    error("no .jsonl or .txt files under " .. a.corpus, 0)   -- dgalua prints it as "dgalua: ...", status 1
end
local budget = sample_mb > 0 and math.floor(sample_mb * 1e6 / #domains) or math.huge
local texts, total = {}, 0
local skipped, messages = 0, {}
for _, dir in ipairs(domains) do
    local got, docs = 0, 0
    local reader = dga.read_jsonl(dir)
    for text in reader do
        if got >= budget then break end
        if got + #text > budget then text = text:sub(1, budget - got) end   -- keep the cap exact
        texts[#texts + 1] = text
        got, docs = got + #text, docs + 1
    end
    local st = reader:stats()
    reader:close()
    skipped = skipped + st.skipped
    for _, m in ipairs(st.messages) do if #messages < 10 then messages[#messages + 1] = m end end
    total = total + got
    log("sampled %-40s %6d docs %8.2f MB", dir, docs, got / 1e6)
end
require("data.corpus").warn_skipped{skipped = skipped, messages = messages}
if total == 0 then
    error("no text found under " .. a.corpus, 0)
end

log("training %d-token vocabulary on %.2f MB (%d documents)...", vocab, total / 1e6, #texts)
local c0 = os.clock()
local tok = dga.tokenizer_train(texts, {vocab = vocab})
log("trained in %.1f s CPU", os.clock() - c0)
tok:save(a.out)

-- Bytes per token on every k-th sampled document (about 4 MB from all domains): a quick
-- sanity number.
local n_bytes, n_tokens = 0, 0
local step = math.max(1, math.ceil(total / 4e6))
for i = 1, #texts, step do
    n_bytes = n_bytes + #texts[i]
    n_tokens = n_tokens + #tok:encode(texts[i])
end
print(string.format("%s: vocab %d (%d merges, <|endoftext|> = %d); %.2f bytes/token on the sample",
                    a.out, tok:vocab_size(), tok:num_merges(), tok:eot(), n_bytes / math.max(n_tokens, 1)))
if tok:vocab_size() < vocab then
    io.stderr:write(string.format("note: the sample only supported %d of the %d requested tokens\n",
                                  tok:vocab_size(), vocab))
end

-- Encodes a corpus into one llm.c-style token shard.
--
--   dgalua scripts/tokenize.lua --corpus DIR --tokenizer tok.json --out shard.bin [--max-docs N]
--
-- Every .jsonl / .txt document under DIR (sorted walk) is encoded and the documents are joined
-- with <|endoftext|>: each one is preceded by it, as llm.c's shards do. The shard holds uint16
-- tokens when the vocabulary fits (<= 65536), uint32 otherwise. Progress on stderr, a summary
-- on stdout.
local argparse = require "argparse"
require "cli.args"   -- usage errors exit with status 2

local p = argparse("tokenize.lua", "Encode a corpus into a token shard (llm.c format).")
p:option("--corpus", "Corpus directory or a .jsonl / .txt file."):count(1)
p:option("--tokenizer", "tokenizer.json (scripts/train_tokenizer.lua writes one)."):count(1)
p:option("--out", "Shard file to write."):count(1)
p:option("--max-docs", "Encode at most this many documents (default: all).")
p:flag("--quiet", "No progress output.")
local a = p:parse(arg)
dga.check_output(a.out, {["--corpus"] = a.corpus, ["--tokenizer"] = a.tokenizer})
local max_docs
if a.max_docs then
    max_docs = math.tointeger(tonumber(a.max_docs))
    if not max_docs or max_docs < 0 then p:error("--max-docs: expected an integer >= 0, got '" .. a.max_docs .. "'") end
end
-- One writer per output: a second run writing the same shard fails here, naming the first's pid.
-- Taken after the usage checks (their os.exit would skip the release that removes the file).
local lock <close> = dga.lock(a.out .. ".lock")   -- luacheck: no unused

local tok = dga.tokenizer_load(a.tokenizer)
if not a.quiet then io.stderr:write(tostring(tok), "\n") end

local c0 = os.clock()
local ids, st = tok:encode_corpus(a.corpus, {
    max_docs = max_docs,
    progress = not a.quiet and function(docs, bytes, tokens)
        io.stderr:write(string.format("  %8d docs %9.1f MB -> %10d tokens (%.1f MB/s)\n",
                                      docs, bytes / 1e6, tokens, bytes / 1e6 / math.max(os.clock() - c0, 1e-9)))
    end or nil,
})
local secs = os.clock() - c0
require("data.corpus").warn_skipped(st)
-- An empty shard would only fail later, in whatever trains on it; so would one holding only
-- the separators of empty documents.
if (st.docs == 0 or st.bytes == 0) and max_docs ~= 0 then
    local why
    if st.docs > 0 then
        why = string.format("%d document%s in %d file%s, every one empty", st.docs, st.docs == 1 and "" or "s",
                            st.files, st.files == 1 and "" or "s")
    elseif st.files == 0 then
        why = "no .jsonl or .txt files"
    elseif st.skipped > 0 then
        why = string.format("%d files, every line skipped (%d malformed, the first: %s)", st.files,
                            st.skipped, st.messages[1])
    else
        why = string.format("%d files, all empty", st.files)
    end
    error(string.format("%s: no document to encode (%s); %s not written", a.corpus, why, a.out), 0)
end
dga.shard_write(a.out, ids, tok:vocab_size())
local n = #ids
print(string.format("%s: %d documents, %.2f MB of text -> %d tokens (%.2f bytes/token), uint%d, %.1f s CPU",
                    a.out, st.docs, st.bytes / 1e6, n, st.bytes / math.max(n, 1),
                    tok:vocab_size() <= 65536 and 16 or 32, secs))

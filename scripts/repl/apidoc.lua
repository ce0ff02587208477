-- The documentation of the `dga` module: every function and every method, with its
-- arguments, what it returns and a one-line example. help() in the REPL reads it, and
-- `./dgalua scripts/gen_api_doc.lua` turns it into docs/api.md; tests/lua/repl_spec.lua
-- checks that everything the module exposes has an entry here.
--
-- An entry: {name, args = "(...)", returns = "...", doc = "one or two sentences",
-- example = "one line of Lua"}. Optional arguments are in brackets, option tables list
-- their keys with the defaults.
local M = {}

M.intro = [[
`dga` is the C core seen from Lua: tensors, the GPT model and its optimizer, checkpoints,
text and tokenizers, the domain store and k-means, MMLU, the sampler and the alignment
primitive. Indices are 1-based everywhere (token ids are numbers, so they start at 0).
Errors are Lua errors whose message names the argument, file or field at fault.]]

-- Module functions, grouped as in docs/api.md.
M.groups = {
    {title = "Tensors", functions = {
        {"tensor", args = "(data [, dtype])", returns = "dga.tensor",
         doc = "A float32 (default) or int32 tensor from a Lua table (nested for 2-D and more) or a copy of a tensor.",
         example = 'local t = dga.tensor({{1, 2, 3}, {4, 5, 6}})'},
        {"zeros", args = "(d1 [, d2, d3, d4])", returns = "dga.tensor",
         doc = "A float32 tensor of zeros with the given dimensions (up to 4).",
         example = "local z = dga.zeros(2, 3)"},
        {"vec", args = "(n [, value]) or (table)", returns = "dga.tensor",
         doc = "A 1-D float32 tensor: n copies of value (default 0), or the numbers of a flat table.",
         example = "local w = dga.vec{0.2, 0.3, 0.5}"},
        {"full", args = "(n, value)", returns = "dga.tensor",
         doc = "A 1-D float32 tensor of n copies of value.",
         example = "local u = dga.full(4, 0.25)"},
        {"arange", args = "(n)", returns = "dga.tensor",
         doc = "The int32 vector 0, 1, ..., n-1.",
         example = "local ids = dga.arange(10)"},
        {"check_distribution", args = "(w [, what])", returns = "true",
         doc = "Raises an error naming `what` unless w is finite, >= 0 and sums to 1 (to a small tolerance).",
         example = 'dga.check_distribution(dga.vec{0.5, 0.5}, "weights")'},
    }},
    {title = "Random numbers", functions = {
        {"rng", args = "([seed])", returns = "dga.rng",
         doc = "A seedable xoshiro256** generator; its state is a 32-byte string for checkpoints.",
         example = "local r = dga.rng(42)"},
    }},
    {title = "Model and optimizer", functions = {
        {"gpt", args = "{layers, width, heads, context, vocab, batch = 8, seed = 0, precision = \"fp32\"}",
         returns = "dga.gpt",
         doc = "A GPT-2 decoder with freshly initialised weights; batch is the largest batch forward/backward take. "
             .. "precision: the linear layers' and head's products in fp32 (OpenBLAS), bf16 (bf16 inputs, fp32 "
             .. "accumulation; where oneDNN has no native bf16 matmul it runs fp32 and says so on stderr) or fp32-onednn.",
         example = "local m = dga.gpt{layers = 2, width = 64, heads = 4, context = 32, vocab = 256}"},
        {"adamw", args = "(model [, {lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1, decay = \"matrices\"}])",
         returns = "dga.adamw",
         doc = "AdamW over the model's flat parameters; decay is matrices, linear, all or none.",
         example = "local opt = dga.adamw(m, {lr = 3e-3})"},
        {"set_threads", args = "(n)", returns = "nothing",
         doc = "Sets the OpenBLAS thread count (also --threads N on the command line).",
         example = "dga.set_threads(1)"},
        {"get_threads", args = "()", returns = "integer",
         doc = "The OpenBLAS thread count in use.",
         example = "print(dga.get_threads())"},
    }},
    {title = "Checkpoints and files", functions = {
        {"save_checkpoint", args = "(path, {model, optimizer, tensors, blobs, meta})", returns = "nothing",
         doc = "Writes a safetensors checkpoint (Hugging Face GPT-2 names, GPT2Config keys, a CRC-32) atomically.",
         example = 'dga.save_checkpoint("ck.safetensors", {model = m, optimizer = opt, meta = {step = 100}})'},
        {"load_checkpoint", args = "(path [, {model, optimizer}])",
         returns = "{model, config, tensors, blobs, meta, steps}",
         doc = "Reads a checkpoint, into a new model (or the one given) and optionally an optimizer.",
         example = 'local m = dga.load_checkpoint("ck.safetensors").model'},
        {"write_file_atomic", args = "(path, text)", returns = "nothing",
         doc = "Writes text to a temporary file, fsyncs and renames it, so a crash leaves the old or the new file.",
         example = 'dga.write_file_atomic("notes.txt", "hello\\n")'},
        {"lock", args = "(path)", returns = "lock (a userdata; release(), held(), to-be-closed)",
         doc = "Takes an exclusive flock on path: an existing directory itself (nothing created), else a lock "
               .. "file holding this pid, removed at release. A second holder fails at once naming the first "
               .. "one's pid. The kernel releases it when the process dies.",
         example = 'local lk <close> = dga.lock("runs/x/.lock")'},
        {"path_kind", args = "(path)", returns = "\"file\", \"directory\", \"fifo\", ... or nil, message",
         doc = "What is at path (links followed), without opening it: opening a FIFO would block.",
         example = 'if dga.path_kind("tok.json") == "file" then print("there") end'},
        {"check_output", args = "(out, {[option] = path or {paths}})", returns = "nothing",
         doc = "Errors, naming both, when out is one of the inputs (through links), an existing file inside "
               .. "an input directory, or a directory holding an input. Every tool calls it before writing.",
         example = 'dga.check_output("runs/x/shard.bin", {["--corpus"] = "corpus"})'},
        {"isatty", args = "([fd = 1])", returns = "boolean",
         doc = "Whether stdin (0), stdout (1) or stderr (2) is a terminal.",
         example = "if dga.isatty(2) then io.stderr:write('\\r') end"},
        {"getpid", args = "()", returns = "integer", doc = "This process's id.", example = "print(dga.getpid())"},
        {"getppid", args = "()", returns = "integer",
         doc = "The parent process's id (a --jobs worker checks that its launcher still runs).",
         example = "print(dga.getppid())"},
        {"kill", args = "(pid, \"TERM\" | \"INT\" | \"KILL\" | \"HUP\" | \"0\")", returns = "true, or false and a message",
         doc = "Sends a signal, by name, to process pid (> 1: never a group); \"0\" only checks that it exists.",
         example = 'if dga.kill(dga.getppid(), "0") then print("the parent runs") end'},
    }},
    {title = "Ranks (MPI)", functions = {
        {"rank", args = "()", returns = "integer", doc = "This process's rank (0 without MPI).",
         example = "if dga.rank() == 0 then print('writer') end"},
        {"size", args = "()", returns = "integer", doc = "The number of ranks (1 without MPI).", example = "print(dga.size())"},
        {"has_mpi", args = "()", returns = "boolean", doc = "Whether this dgalua was built with MPI (make MPI=1).",
         example = "dga.has_mpi()"},
        {"allreduce", args = "(t [, \"sum\" | \"mean\"])", returns = "t",
         doc = "Sums (or averages) a float32 tensor over the ranks, in place; every rank gets the same bits.",
         example = "dga.allreduce(g, \"mean\")"},
        {"bcast", args = "(t_or_string, root)", returns = "t, or root's string",
         doc = "A tensor takes root's values in place; a string is returned from root to every rank.",
         example = "local cfg = dga.bcast(text, 0)"},
        {"allgather", args = "(t)", returns = "float32 [sum of counts], counts",
         doc = "Every rank's float32 tensor, flattened and concatenated in rank order, with each rank's count.",
         example = "local all, counts = dga.allgather(a)"},
    }},
    {title = "Text, tokenizers and shards", functions = {
        {"read_jsonl", args = "(path_or_dir)", returns = "reader (a generic-for iterator of text, file, line)",
         doc = "Streams the documents of a .jsonl/.txt file or directory; malformed lines are skipped and counted.",
         example = 'for text, file, line in dga.read_jsonl("corpus/latex") do print(#text) end'},
        {"read_texts", args = "(path_or_dir [, max_docs])", returns = "{text, ...}, stats",
         doc = "All documents (at most max_docs) as a list of strings, and the reader's counters.",
         example = 'local texts = dga.read_texts("../shared/data/corpus/latex", 100)'},
        {"text_files", args = "(path_or_dir)", returns = "{path, ...}",
         doc = "The .jsonl and .txt files a directory walk reads, in order.",
         example = 'for _, f in ipairs(dga.text_files("corpus")) do print(f) end'},
        {"tokenizer_train", args = "(texts [, {vocab = 8192}])", returns = "dga.tokenizer",
         doc = "Trains a byte-level BPE on a list of strings (or a function returning the next one).",
         example = "local tok = dga.tokenizer_train(texts, {vocab = 512})"},
        {"tokenizer_load", args = "(path)", returns = "dga.tokenizer",
         doc = "Loads a Hugging Face tokenizer.json written by tok:save.",
         example = 'local tok = dga.tokenizer_load("tok.json")'},
        {"shard_write", args = "(path, ids, vocab_size)", returns = "nothing",
         doc = "Writes an llm.c-format token shard from an int32 tensor or a table of ids.",
         example = 'dga.shard_write("train.bin", ids, tok:vocab_size())'},
        {"shard_read", args = "(path)", returns = "int32 tensor, {version, n_tokens, vocab_size, token_bytes}",
         doc = "Reads an llm.c-format token shard.",
         example = 'local ids, info = dga.shard_read("train.bin")'},
    }},
    {title = "Domain store, embeddings and k-means", functions = {
        {"store_build", args = "{corpus, out, levels = {64}, seq_len = 129, tokenizer, vocab = 8192, max_mb = 0, "
                            .. "train_mb = 0, spherical = true, iters = 25, seed = 1, embedder = \"hash384\", "
                            .. "save_embeddings = false, verbose = false}",
         returns = "out, stats",
         doc = "Tokenizes a corpus, cuts it into sequences, embeds and clusters them hierarchically into a store directory.",
         example = 'dga.store_build{corpus = "corpus", out = "store", levels = {16}}'},
        {"store_open", args = "(dir)", returns = "dga.store",
         doc = "Opens a domain store (memory-mapped .npy files).",
         example = 'local s = dga.store_open("store")'},
        {"embed", args = "(texts [, store])", returns = "float32 [n, dim]",
         doc = "Hashed unigram/bigram embeddings of texts (idf from the store, else fitted on texts).",
         example = 'local e = dga.embed({"a cat", "a dog"})'},
        {"kmeans", args = "(points, k [, {seed = 0, iters = 25, spherical = false, seed_sample = 0}])",
         returns = "centroids float32 [k', d], assignment int32 [n]",
         doc = "k-means (k-means++ seeding); k' <= k when points run out. Assignments are 1-based.",
         example = "local c, a = dga.kmeans(e, 2)"},
        {"kmeans_hierarchical", args = "(points, {k1, k2, ...} [, {seed = 0, iters = 25, spherical = true}])",
         returns = "{k, leaf, ranges, centroids}",
         doc = "Nested k-means: every domain of a level is split into up to k_{l+1} leaves, numbered contiguously.",
         example = "local h = dga.kmeans_hierarchical(e, {4, 4})"},
        {"npy_save", args = "(path, tensor)", returns = "nothing",
         doc = "Writes a float32 or int32 tensor as a NumPy .npy file (atomically).",
         example = 'dga.npy_save("w.npy", dga.vec{1, 2})'},
        {"npy_load", args = "(path)", returns = "dga.tensor",
         doc = "Reads a float32 or int32 .npy file.",
         example = 'local w = dga.npy_load("w.npy")'},
    }},
    {title = "MMLU", functions = {
        {"mmlu_load", args = "(dir)", returns = "dga.mmlu",
         doc = "Reads MMLU's dev/val/test CSV files (the official release layout).",
         example = 'local mm = dga.mmlu_load("../shared/data/mmlu")'},
        {"mmlu_render", args = "(question [, {with_answer = false, shots = list}])", returns = "string",
         doc = "The prompt text of a question, lm-evaluation-harness style, with optional few-shot examples.",
         example = 'print(dga.mmlu_render(mm:split("val")[1]))'},
        {"mmlu_score", args = "(model, tok, questions [, {shots = 0, dev = list_or_mmlu, batch}])",
         returns = "{accuracy, answer_loss, n, correct, loglik, shots, shortened, truncated, by_subject}",
         doc = "Scores each question by the log-likelihood of the four answer letters. A prompt too long for the "
               .. "context loses shots from its end (shots: int32 [n], those kept), else is cut from the left; "
               .. "shortened and truncated count them.",
         example = 'local r = dga.mmlu_score(m, tok, mm:split("val"), {shots = 0})'},
        {"eval_loss_seqs", args = "(model, seqs, batch)", returns = "number",
         doc = "Mean next-token loss over int32 sequences [N, L], batch rows at a time.",
         example = "local loss = dga.eval_loss_seqs(m, seqs, 16)"},
        {"eval_row_losses", args = "(model, seqs, batch)", returns = "table, table",
         doc = "What eval_loss_seqs sums, row by row: each sequence's summed next-token loss and its target "
               .. "count (summed in row order and divided: eval_loss_seqs, bit for bit).",
         example = "local nll, cnt = dga.eval_row_losses(m, seqs, 16)"},
    }},
    {title = "Mixing: sampler, basis, alignment", functions = {
        {"sampler", args = "(sizes [, {seed = 0, budget, epoch_cap = 0}])", returns = "dga.sampler",
         doc = "A mixture sampler over k domains of the given sizes (sequences), with budgets and epoch caps.",
         example = "local smp = dga.sampler({100, 50, 20}, {seed = 1})"},
        {"basis", args = "(k, columns)", returns = "dga.basis",
         doc = "N histograms over k domains (stored sparse): distribution reweighting's P.",
         example = "local P = dga.basis(3, {dga.vec{1, 0, 0}, dga.vec{0, 0.5, 0.5}})"},
        {"align", args = "(model, t_inputs, t_targets, batches [, {normalize = \"none\", lr, method = \"exact\", fd_eps = 1e-3}])",
         returns = "{align, loss, grad_norm, dot, target_norm, target_loss, normalize, method, lr, k}",
         doc = "DGA's alignment: the target gradient's inner product with each domain batch's gradient (exact, fd or jvp).",
         example = "local r = dga.align(m, tx, ty, {{x1, y1}, {x2, y2}})"},
        {"eval_loss", args = "(model, inputs, targets [, batch])", returns = "number",
         doc = "Token-mean next-token loss of B x T batches, batch rows at a time.",
         example = "local loss = dga.eval_loss(m, x, y)"},
    }},
}

-- The objects and their methods: repl/apidoc_objects.lua.
M.classes = require "repl.apidoc_objects"

-- Lookup tables built once: "gpt" / "dga.gpt" -> entry, "dga.gpt:forward" -> entry.
local by_name
local function index()
    if by_name then return by_name end
    by_name = {}
    for _, g in ipairs(M.groups) do
        for _, f in ipairs(g.functions) do
            f.kind, f.full = "function", "dga." .. f[1]
            by_name[f.full], by_name[f[1]] = f, by_name[f[1]] or f
        end
    end
    for _, c in ipairs(M.classes) do
        c.kind, c.full = "class", c.name
        by_name[c.name] = by_name[c.name] or c
        by_name[c.name:gsub("^dga%.", "")] = by_name[c.name:gsub("^dga%.", "")] or c
        for _, mth in ipairs(c.methods) do
            mth.kind, mth.full, mth.class = "method", c.var .. ":" .. mth[1], c
            by_name[c.name .. ":" .. mth[1]] = mth
            by_name[c.var .. ":" .. mth[1]] = by_name[c.var .. ":" .. mth[1]] or mth
            by_name[mth[1]] = by_name[mth[1]] or mth
        end
    end
    return by_name
end

-- The entry for a name: "gpt", "dga.gpt", "dga.gpt:forward", "m:forward", "forward".
function M.find(name) return index()[name] end

-- The class entry for a metatable name ("dga.gpt").
function M.class(tname)
    for _, c in ipairs(M.classes) do if c.name == tname then return c end end
    return nil
end

-- One entry as text: signature, returns, the sentence and the example.
function M.format(e)
    if e.kind == nil then index() end
    if e.kind == "class" then
        local lines = {e.name .. ": " .. e.doc, "methods:"}
        for _, mth in ipairs(e.methods) do
            lines[#lines + 1] = string.format("  %s:%s%s -> %s", e.var, mth[1], mth.args, mth.returns)
        end
        lines[#lines + 1] = "help(" .. e.var .. ".method) or help(\"" .. e.var .. ":method\") for one of them."
        return table.concat(lines, "\n")
    end
    return string.format("%s%s -> %s\n  %s\n  example: %s", e.full, e.args, e.returns, e.doc, e.example)
end

return M

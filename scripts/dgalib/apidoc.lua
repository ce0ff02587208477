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
         doc = "Takes an exclusive flock on path (created, holding this pid); a second holder fails at once "
               .. "naming the first one's pid. The kernel releases it when the process dies.",
         example = 'local lk <close> = dga.lock("runs/x/.lock")'},
        {"isatty", args = "([fd = 1])", returns = "boolean",
         doc = "Whether stdin (0), stdout (1) or stderr (2) is a terminal.",
         example = "if dga.isatty(2) then io.stderr:write('\\r') end"},
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
         returns = "{accuracy, answer_loss, n, correct, loglik, by_subject}",
         doc = "Scores each question by the log-likelihood of the four answer letters.",
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

-- Classes: the metatable name, the usual variable name, and the methods.
M.classes = {
    {name = "dga.tensor", var = "t",
     doc = "A float32 or int32 array of up to 4 dimensions, 1-based. t[i] reads and writes flat element i; "
           .. "+ - * / work elementwise with tensors or numbers.",
     methods = {
        {"shape", args = "()", returns = "{d1, ...}", doc = "The dimensions.", example = "t:shape()"},
        {"numel", args = "()", returns = "integer", doc = "The number of elements (also #t).", example = "t:numel()"},
        {"dtype", args = "()", returns = '"float32" or "int32"', doc = "The element type.", example = "t:dtype()"},
        {"at", args = "(i [, j, ...])", returns = "number", doc = "The element at a multi-dimensional (1-based) index.",
         example = "t:at(2, 3)"},
        {"totable", args = "()", returns = "table", doc = "A nested Lua table of the values.", example = "t:totable()"},
        {"clone", args = "()", returns = "dga.tensor", doc = "A copy that shares nothing.", example = "local u = t:clone()"},
        {"float", args = "()", returns = "dga.tensor", doc = "A float32 copy.", example = "dga.arange(3):float()"},
        {"int", args = "()", returns = "dga.tensor", doc = "An int32 copy (values truncated).", example = "t:int()"},
        {"reshape", args = "(d1 [, d2, ...])", returns = "dga.tensor", doc = "A view with new dimensions (same data).",
         example = "t:reshape(3, 2)"},
        {"narrow", args = "(first, count)", returns = "dga.tensor", doc = "A view of rows first .. first+count-1 (1-based).",
         example = "t:narrow(1, 1)"},
        {"close", args = "()", returns = "nothing", doc = "Frees the data now rather than at garbage collection.",
         example = "t:close()"},
        {"exp", args = "()", returns = "dga.tensor", doc = "Elementwise exp, into a new tensor.", example = "t:exp()"},
        {"log", args = "()", returns = "dga.tensor", doc = "Elementwise natural log, into a new tensor.", example = "t:log()"},
        {"add", args = "(u)", returns = "dga.tensor", doc = "t + u (tensor or number), into a new tensor.", example = "t:add(1)"},
        {"sub", args = "(u)", returns = "dga.tensor", doc = "t - u, into a new tensor.", example = "t:sub(u)"},
        {"mul", args = "(u)", returns = "dga.tensor", doc = "Elementwise t * u, into a new tensor.", example = "t:mul(2)"},
        {"div", args = "(u)", returns = "dga.tensor", doc = "Elementwise t / u, into a new tensor.", example = "t:div(t:sum())"},
        {"scale", args = "(a)", returns = "dga.tensor", doc = "a * t, into a new tensor.", example = "t:scale(0.5)"},
        {"normalize", args = "()", returns = "dga.tensor", doc = "t / sum(t): a distribution (new tensor).",
         example = "dga.vec{1, 3}:normalize()"},
        {"exp_", args = "()", returns = "t", doc = "In-place exp.", example = "t:exp_()"},
        {"log_", args = "()", returns = "t", doc = "In-place log.", example = "t:log_()"},
        {"add_", args = "(u)", returns = "t", doc = "In-place t + u.", example = "t:add_(1)"},
        {"sub_", args = "(u)", returns = "t", doc = "In-place t - u.", example = "t:sub_(1)"},
        {"mul_", args = "(u)", returns = "t", doc = "In-place elementwise t * u.", example = "t:mul_(2)"},
        {"div_", args = "(u)", returns = "t", doc = "In-place elementwise t / u.", example = "t:div_(2)"},
        {"scale_", args = "(a)", returns = "t", doc = "In-place a * t.", example = "t:scale_(0.5)"},
        {"fill_", args = "(value)", returns = "t", doc = "Sets every element to value.", example = "t:fill_(0)"},
        {"copy_", args = "(u)", returns = "t", doc = "Copies u's values (same number of elements) into t.",
         example = "t:copy_(u)"},
        {"normalize_", args = "()", returns = "t", doc = "In-place t / sum(t).", example = "w:normalize_()"},
        {"sum", args = "()", returns = "number", doc = "The sum (in double precision).", example = "t:sum()"},
        {"mean", args = "()", returns = "number", doc = "The mean.", example = "t:mean()"},
        {"std", args = "()", returns = "number", doc = "The population standard deviation.", example = "t:std()"},
        {"min", args = "()", returns = "number", doc = "The smallest element.", example = "t:min()"},
        {"max", args = "()", returns = "number", doc = "The largest element.", example = "t:max()"},
        {"argmax", args = "()", returns = "integer", doc = "The 1-based flat index of the largest element (first on ties).",
         example = "t:argmax()"},
        {"dot", args = "(u)", returns = "number", doc = "The inner product with u (same number of elements).",
         example = "t:dot(u)"},
        {"norm", args = "()", returns = "number", doc = "The Euclidean norm.", example = "t:norm()"},
     }},
    {name = "dga.rng", var = "r", doc = "A xoshiro256** generator (dga.rng).", methods = {
        {"uniform", args = "()", returns = "number", doc = "A uniform number in [0, 1).", example = "r:uniform()"},
        {"normal", args = "()", returns = "number", doc = "A standard normal number.", example = "r:normal()"},
        {"below", args = "(n)", returns = "integer", doc = "A uniform integer in [0, n).", example = "r:below(6)"},
        {"shuffle", args = "(list)", returns = "list", doc = "Shuffles a Lua list in place (Fisher-Yates), reproducibly.",
         example = "r:shuffle({1, 2, 3})"},
        {"state", args = "()", returns = "string", doc = "The 32-byte state, for a checkpoint blob.", example = "local s = r:state()"},
        {"set_state", args = "(s)", returns = "nothing", doc = "Restores a state from r:state().", example = "r:set_state(s)"},
    }},
    {name = "dga.gpt", var = "m",
     doc = "A GPT-2 decoder (dga.gpt, or load_checkpoint's model). Batches are B x T int32 tensors or nested tables.",
     methods = {
        {"config", args = "()", returns = "{layers, width, heads, context, vocab, batch}", doc = "The shape of the model.",
         example = "m:config().context"},
        {"num_params", args = "()", returns = "integer", doc = "The number of parameters.", example = "m:num_params()"},
        {"precision", args = "()", returns = "string", doc = "The precision the products run in (after any fallback).",
         example = "m:precision()"},
        {"set_precision", args = "(name)", returns = "nothing", doc = "Sets it, as dga.gpt's precision option.",
         example = "m:set_precision(\"bf16\")"},
        {"forward", args = "(inputs, targets)", returns = "number",
         doc = "Mean next-token loss of the batch; keeps the activations for backward.", example = "local loss = m:forward(x, y)"},
        {"backward", args = "()", returns = "nothing", doc = "Accumulates the gradient of the last forward's loss.",
         example = "m:backward()"},
        {"zero_grad", args = "()", returns = "nothing", doc = "Sets the gradients to zero.", example = "m:zero_grad()"},
        {"grad_norm", args = "()", returns = "number", doc = "The Euclidean norm of the whole gradient.",
         example = "m:grad_norm()"},
        {"seq_losses", args = "()", returns = "float32 [B]",
         doc = "The mean loss of each sequence of the last m:forward (computed by that forward; no extra pass).",
         example = "m:forward(x, y); local per_seq = m:seq_losses()"},
        {"clip_grad", args = "(max_norm)", returns = "number", doc = "Scales the gradient to norm <= max_norm; returns the norm before.",
         example = "m:clip_grad(1.0)"},
        {"params", args = "()", returns = "float32 tensor", doc = "A copy of all parameters as one flat vector.",
         example = "local p = m:params()"},
        {"grads", args = "()", returns = "float32 tensor", doc = "A copy of the flat gradient.", example = "local g = m:grads()"},
        {"allreduce_grads", args = "([scale])", returns = "the model",
         doc = "Data parallelism: the gradient buffer becomes the sum over ranks of scale times each rank's, "
               .. "in place, the same bits on every rank.",
         example = "m:allreduce_grads(rows / B)"},
        {"backward_allreduce", args = "([scale])", returns = "the model",
         doc = "Data parallelism: m:backward() and m:allreduce_grads(scale) in one, each block's gradient sent to "
               .. "rank 0 as soon as the backward has finished it; the same bits on every rank, and the bits of "
               .. "the two calls at one or two ranks (README, Scaling out).",
         example = "m:forward(x, y); m:backward_allreduce(rows / B)"},
        {"checksum", args = "()", returns = "string", doc = "A 64-bit FNV-1a hash of the parameters' bytes, in hex (replica checks).",
         example = "print(m:checksum())"},
        {"set_params", args = "(flat)", returns = "nothing", doc = "Overwrites all parameters from a flat float32 vector.",
         example = "m:set_params(p)"},
        {"get", args = "(name)", returns = "float32 tensor", doc = "A copy of one named parameter tensor (m:tensors() lists the names).",
         example = 'm:get("wte.weight")'},
        {"set", args = "(name, tensor)", returns = "nothing", doc = "Overwrites one named parameter tensor (same shape).",
         example = 'm:set("ln_f.bias", dga.zeros(64))'},
        {"tensors", args = "()", returns = "{{name, shape, numel, first, is_matrix}, ...}",
         doc = "The parameter tensors, in the flat buffer's order.", example = "for _, t in ipairs(m:tensors()) do print(t.name) end"},
        {"eval", args = "(inputs, targets)", returns = "loss, seq_nll float32 [B], seq_count int32 [B]",
         doc = "Loss without gradients, for any number of sequences, with per-sequence sums.",
         example = "local loss = m:eval(x, y)"},
        {"logits", args = "(tokens)", returns = "float32 [vocab]", doc = "The next-token logits after a 1-D sequence.",
         example = "local z = m:logits({1, 2, 3})"},
        {"generate", args = "(prompt, n [, {temperature = 0, top_k = 0, top_p = 1, seed = 0}])", returns = "{id, ...}",
         doc = "n new token ids: greedy at temperature 0, else sampled (optionally from the top k / nucleus top p).",
         example = "m:generate({1, 2}, 10, {temperature = 0.8, top_k = 40, seed = 1})"},
        {"init", args = "([seed = 0])", returns = "nothing", doc = "Re-initialises the weights (GPT-2's scheme).",
         example = "m:init(1)"},
        {"flops_per_token", args = "([T = context])", returns = "number", doc = "Training FLOPs per token: 6 N + 12 L T d.",
         example = "m:flops_per_token()"},
        {"close", args = "()", returns = "nothing", doc = "Frees the model now.", example = "m:close()"},
     }},
    {name = "dga.adamw", var = "opt", doc = "AdamW on a model (dga.adamw).", methods = {
        {"step", args = "([lr])", returns = "integer", doc = "One update from the current gradient (at lr if given); the step count.",
         example = "opt:step(1e-3)"},
        {"steps", args = "()", returns = "integer", doc = "Updates taken so far.", example = "opt:steps()"},
        {"config", args = "()", returns = "{lr, beta1, beta2, eps, weight_decay, decay}", doc = "The hyper-parameters.",
         example = "opt:config().lr"},
        {"model", args = "()", returns = "dga.gpt", doc = "The model it updates.", example = "opt:model()"},
        {"close", args = "()", returns = "nothing", doc = "Frees the moments now.", example = "opt:close()"},
    }},
    {name = "dga.tokenizer", var = "tok", doc = "A byte-level BPE tokenizer.", methods = {
        {"encode", args = "(text)", returns = "int32 tensor", doc = "The token ids of a string.", example = 'tok:encode("It was a")'},
        {"decode", args = "(ids)", returns = "string", doc = "The text of ids (a tensor, a table or one id).",
         example = "tok:decode({72, 105})"},
        {"save", args = "(path)", returns = "nothing", doc = "Writes a Hugging Face tokenizer.json.", example = 'tok:save("tok.json")'},
        {"vocab_size", args = "()", returns = "integer", doc = "256 bytes + merges + <|endoftext|>.", example = "tok:vocab_size()"},
        {"eot", args = "()", returns = "integer", doc = "The id of <|endoftext|>.", example = "tok:eot()"},
        {"num_merges", args = "()", returns = "integer", doc = "The number of BPE merges.", example = "tok:num_merges()"},
        {"merge", args = "(r)", returns = "left_id, right_id", doc = "The pair merged by merge r (0-based; it makes id 256 + r).",
         example = "tok:merge(0)"},
        {"encode_corpus", args = "(path_or_dir [, {max_docs, progress}])", returns = "int32 tensor, stats",
         doc = "Every document of a corpus, each after <|endoftext|>, encoded in C.",
         example = 'local ids = tok:encode_corpus("corpus/latex")'},
        {"close", args = "()", returns = "nothing", doc = "Frees the tokenizer now.", example = "tok:close()"},
    }},
    {name = "dga.text_reader", var = "reader", doc = "The iterator dga.read_jsonl returns.", methods = {
        {"next", args = "()", returns = "text, file, line (nil at the end)", doc = "The next document.",
         example = "local text = reader:next()"},
        {"stats", args = "()", returns = "{docs, bytes, skipped, messages, ...}", doc = "Counters, malformed lines included.",
         example = "reader:stats().skipped"},
        {"close", args = "()", returns = "nothing", doc = "Stops reading and closes the file.", example = "reader:close()"},
    }},
    {name = "dga.store", var = "s", doc = "A domain store (dga.store_open). Domains and sequences are 1-based.", methods = {
        {"levels", args = "()", returns = "integer", doc = "The number of clustering levels.", example = "s:levels()"},
        {"k", args = "(level)", returns = "integer", doc = "The number of domains at a level.", example = "s:k(1)"},
        {"seq_len", args = "()", returns = "integer", doc = "Tokens per stored sequence.", example = "s:seq_len()"},
        {"vocab_size", args = "()", returns = "integer", doc = "The tokenizer's vocabulary size.", example = "s:vocab_size()"},
        {"num_sequences", args = "()", returns = "integer", doc = "Sequences in the store.", example = "s:num_sequences()"},
        {"dir", args = "()", returns = "string", doc = "The store's directory.", example = "s:dir()"},
        {"domain_sizes", args = "(level)", returns = "int32 [k]", doc = "Sequences per domain.", example = "s:domain_sizes(1)"},
        {"domain_tokens", args = "(level)", returns = "float32 [k]", doc = "Tokens per domain.", example = "s:domain_tokens(1)"},
        {"sequence", args = "(level, d, i)", returns = "int32 [seq_len]", doc = "Sequence i of domain d.",
         example = "s:sequence(1, 1, 1)"},
        {"info", args = "(level, d, i)", returns = "{row, doc, source}", doc = "Where sequence i of domain d comes from.",
         example = "s:info(1, 1, 1).source"},
        {"gather", args = "(level, domains, indices)", returns = "inputs, targets",
         doc = "A training batch: int32 [B, seq_len - 1] shifted by one.", example = "local x, y = s:gather(1, doms, idx)"},
        {"leaves", args = "(level, d)", returns = "first, count", doc = "The range of leaves under domain d.",
         example = "s:leaves(1, 3)"},
        {"centroids", args = "(level)", returns = "float32 [k, dim]", doc = "The cluster centroids.", example = "s:centroids(1)"},
        {"sources", args = "(level)", returns = "names, counts int32 [k, #names]", doc = "Corpus sources per domain.",
         example = "local names, counts = s:sources(1)"},
        {"histogram", args = "(texts, level)", returns = "float32 [k], n", doc = "The importance-sampling histogram of texts.",
         example = "local h = s:histogram(texts, 1)"},
        {"nearest", args = "(text, level, n)", returns = "ids, scores", doc = "The n domains closest to a text, best first.",
         example = 's:nearest("def main():", 1, 3)'},
        {"tokenizer", args = "()", returns = "dga.tokenizer", doc = "The store's tokenizer (cached).", example = "s:tokenizer()"},
        {"manifest", args = "()", returns = "string", doc = "manifest.json as text.", example = "print(s:manifest())"},
        {"close", args = "()", returns = "nothing", doc = "Unmaps the store.", example = "s:close()"},
    }},
    {name = "dga.mmlu", var = "mm", doc = "MMLU questions (dga.mmlu_load).", methods = {
        {"split", args = "(name [, seed = 0])", returns = "{question, ...}",
         doc = "Questions of test, val, dev, or the seeded halves a / b of test; each {subject, question, choices, answer}.",
         example = 'local qs = mm:split("val")'},
        {"subjects", args = "()", returns = "{name, ...}", doc = "The subject names.", example = "mm:subjects()"},
        {"count", args = "(name)", returns = "integer", doc = "Questions in a split.", example = 'mm:count("test")'},
        {"close", args = "()", returns = "nothing", doc = "Frees the questions.", example = "mm:close()"},
    }},
    {name = "dga.sampler", var = "smp", doc = "A mixture sampler (dga.sampler). Domains are 1-based.", methods = {
        {"set_weights", args = "(w)", returns = "nothing", doc = "k weights >= 0, normalised.", example = "smp:set_weights({1, 1, 2})"},
        {"weights", args = "()", returns = "float32 [k]", doc = "The mixture sampled now (capped domains zeroed).",
         example = "smp:weights()"},
        {"draw", args = "(n)", returns = "domains int32 [n], indices int32 [n]", doc = "Training draws.",
         example = "local d, i = smp:draw(16)"},
        {"draw_from", args = "(domain, n)", returns = "indices int32 [n]", doc = "Probe draws that advance no counter.",
         example = "smp:draw_from(2, 8)"},
        {"epochs", args = "()", returns = "int32 [k]", doc = "Completed epochs per domain.", example = "smp:epochs()"},
        {"drawn", args = "()", returns = "int32 [k]", doc = "Sequences drawn per domain.", example = "smp:drawn()"},
        {"available", args = "()", returns = "int32 [k]", doc = "Sequences available per domain (after budgets).",
         example = "smp:available()"},
        {"capped", args = "()", returns = "{domain, ...}", doc = "Capped domains in capping order.", example = "smp:capped()"},
        {"num_capped", args = "()", returns = "integer", doc = "How many domains are capped.", example = "smp:num_capped()"},
        {"state", args = "()", returns = "string", doc = "The state, for an exact resume.", example = "local st = smp:state()"},
        {"set_state", args = "(s)", returns = "nothing", doc = "Restores smp:state().", example = "smp:set_state(st)"},
        {"k", args = "()", returns = "integer", doc = "The number of domains.", example = "smp:k()"},
        {"epoch_cap", args = "()", returns = "integer", doc = "The epoch cap (0: none).", example = "smp:epoch_cap()"},
        {"seed", args = "()", returns = "integer", doc = "The seed.", example = "smp:seed()"},
        {"close", args = "()", returns = "nothing", doc = "Frees the sampler.", example = "smp:close()"},
    }},
    {name = "dga.lock", var = "lk", doc = "An exclusive lock on a file (dga.lock).", methods = {
        {"release", args = "()", returns = "nothing", doc = "Releases the lock (idempotent; also at __close and __gc).",
         example = "lk:release()"},
        {"held", args = "()", returns = "boolean", doc = "Whether this object still holds the lock.", example = "lk:held()"},
    }},
    {name = "dga.basis", var = "P", doc = "N basis histograms over k domains (dga.basis).", methods = {
        {"mix", args = "(alpha)", returns = "float32 [k]", doc = "P alpha: the training mixture.", example = "P:mix({0.5, 0.5})"},
        {"draw", args = "(j, n, smp)", returns = "domains, indices", doc = "n draws from column j, with smp's probe generator.",
         example = "P:draw(1, 8, smp)"},
        {"column", args = "(j)", returns = "float32 [k]", doc = "Histogram j.", example = "P:column(1)"},
        {"k", args = "()", returns = "integer", doc = "Domains.", example = "P:k()"},
        {"n", args = "()", returns = "integer", doc = "Columns.", example = "P:n()"},
        {"nnz", args = "()", returns = "integer", doc = "Stored non-zeros.", example = "P:nnz()"},
        {"close", args = "()", returns = "nothing", doc = "Frees the basis.", example = "P:close()"},
    }},
}

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

-- Checkpoints as directories in Hugging Face's layout, which the tools take directly:
--
--   DIR/model.safetensors   weights (GPT-2 names), optimizer moments and run state
--                           (dga.save_checkpoint's format)
--   DIR/config.json         the architecture under GPT2Config's keys
--   DIR/tokenizer.json      the BPE tokenizer, when the run knew it
--
--   local model_dir = require "data.model_dir"
--   local paths = model_dir.resolve("ckpt/")              -- or "ckpt.safetensors"
--   local ck, tok = model_dir.load("ckpt/", {tokenizer = true})
--   model_dir.save("ckpt/", {model = m, optimizer = opt, tokenizer = tok_or_path, meta = {...}})
--
-- A single .safetensors file still works everywhere: its tokenizer is the tokenizer.json
-- beside it, if there is one.
local runinfo = require "util.runinfo"

local M = {}

M.MODEL, M.CONFIG, M.TOKENIZER = "model.safetensors", "config.json", "tokenizer.json"

-- Not by opening it: a FIFO there would block; the loaders refuse what is not a file.
local function exists(path)
    return dga.path_kind(path) ~= nil
end

-- {dir, model, tokenizer (nil when absent), is_dir} for a directory or a .safetensors file.
-- Errors (plain strings, one line) name the path when it is neither.
function M.resolve(path)
    if type(path) ~= "string" or path == "" then error("checkpoint: expected a directory or a .safetensors file", 2) end
    if runinfo.is_dir(path) then
        local dir = path:gsub("/+$", "")
        if dir == "" then dir = "/" end
        local model = dir .. "/" .. M.MODEL
        if not exists(model) then
            error(string.format("%s: no %s in this directory (not a checkpoint directory?)", path, M.MODEL), 0)
        end
        local tok = dir .. "/" .. M.TOKENIZER
        return {dir = dir, model = model, tokenizer = exists(tok) and tok or nil, is_dir = true}
    end
    if not exists(path) then error(path .. ": no such checkpoint file or directory", 0) end
    local dir = path:match("^(.*)/[^/]*$") or "."
    local tok = dir .. "/" .. M.TOKENIZER
    return {dir = dir, model = path, tokenizer = exists(tok) and tok or nil, is_dir = false}
end

-- dga.load_checkpoint of the model file, and the tokenizer when opts.tokenizer is true and
-- there is one (opts.tokenizer_path overrides where it is read from). Also returns the paths.
function M.load(path, opts)
    opts = opts or {}
    local p = M.resolve(path)
    local ck = dga.load_checkpoint(p.model, opts.into)
    local tok
    local tpath = opts.tokenizer_path or p.tokenizer
    if opts.tokenizer and tpath then tok = dga.tokenizer_load(tpath) end
    return ck, tok, p
end

-- config.json's text: GPT2Config's keys for a dgalua model (GELU with tanh, pre-norm, tied
-- embeddings, no dropout), as Hugging Face's GPT2LMHeadModel reads them.
function M.config_json(model, tok)
    local c = model:config()
    local eot = tok and type(tok) ~= "string" and tok:eot() or nil
    local fields = {
        {"architectures", '["GPT2LMHeadModel"]'},
        {"model_type", '"gpt2"'},
        {"vocab_size", c.vocab},
        {"n_positions", c.context},
        {"n_ctx", c.context},
        {"n_embd", c.width},
        {"n_layer", c.layers},
        {"n_head", c.heads},
        {"n_inner", "null"},
        {"activation_function", '"gelu_new"'},
        {"layer_norm_epsilon", "1e-05"},
        {"resid_pdrop", "0.0"},
        {"embd_pdrop", "0.0"},
        {"attn_pdrop", "0.0"},
        {"initializer_range", "0.02"},
        {"tie_word_embeddings", "true"},
        {"bos_token_id", eot or "null"},
        {"eos_token_id", eot or "null"},
    }
    local lines = {}
    for i, f in ipairs(fields) do
        lines[i] = string.format('  "%s": %s%s', f[1], tostring(f[2]), i < #fields and "," or "")
    end
    return "{\n" .. table.concat(lines, "\n") .. "\n}\n"
end

-- Writes a checkpoint directory (created if needed). spec: model, optimizer, tensors, blobs,
-- meta as for dga.save_checkpoint, and tokenizer: a dga.tokenizer or the path of a
-- tokenizer.json to copy. Every file is written atomically; the weights go last, so a
-- directory with model.safetensors is complete.
function M.save(dir, spec)
    runinfo.mkdir_p(dir)
    local tok = spec.tokenizer
    if type(tok) == "string" then
        local f = io.open(tok, "rb")
        if not f then error(tok .. ": cannot read the tokenizer to copy into " .. dir, 0) end
        local text = f:read("a")
        f:close()
        -- the same file again (resuming into the directory it came from) needs no copy
        if tok ~= dir .. "/" .. M.TOKENIZER then dga.write_file_atomic(dir .. "/" .. M.TOKENIZER, text) end
        tok = dga.tokenizer_load(dir .. "/" .. M.TOKENIZER)
    elseif tok then
        tok:save(dir .. "/" .. M.TOKENIZER)
    end
    dga.write_file_atomic(dir .. "/" .. M.CONFIG, M.config_json(spec.model, tok))
    dga.save_checkpoint(dir .. "/" .. M.MODEL, {model = spec.model, optimizer = spec.optimizer,
                                                tensors = spec.tensors, blobs = spec.blobs, meta = spec.meta})
end

-- Whether dir already holds a checkpoint.
function M.exists(dir) return exists(dir .. "/" .. M.MODEL) end

return M

-- Writes a dgalua checkpoint of a briefly trained GPT-2 and a JSON file with tokens and the
-- losses/logits dgalua computes on them, for torch_check.py to reproduce in PyTorch.
--   dgalua tests/interop/make_checkpoint.lua OUT.safetensors OUT.json
local dga = require "dga"
local ckpt_path, json_path = arg[1], arg[2]
assert(ckpt_path and json_path, "usage: make_checkpoint.lua OUT.safetensors OUT.json")

local cfg = {layers = 2, width = 48, heads = 3, context = 16, vocab = 97, batch = 2, seed = 11}
local m = dga.gpt(cfg)
local opt = dga.adamw(m, {lr = 3e-3})
local r = dga.rng(4)

local function random_batch()
    local inp, tgt = {}, {}
    for b = 1, cfg.batch do
        inp[b], tgt[b] = {}, {}
        for t = 1, cfg.context do
            inp[b][t] = r:below(cfg.vocab)
            tgt[b][t] = r:below(cfg.vocab)
        end
    end
    return inp, tgt
end

-- A few steps, so biases and layer norms move away from their initial values.
for _ = 1, 5 do
    local inp, tgt = random_batch()
    m:zero_grad()
    m:forward(dga.tensor(inp, "int32"), dga.tensor(tgt, "int32"))
    m:backward()
    opt:step()
end

local inp, tgt = random_batch()
tgt[1][1], tgt[2][5] = -1, -1   -- ignored targets
local loss = m:forward(dga.tensor(inp, "int32"), dga.tensor(tgt, "int32"))
local logits = m:logits(dga.tensor(inp[1], "int32"))

dga.save_checkpoint(ckpt_path, {model = m, optimizer = opt, meta = {purpose = "interop"}})

local function list(t)
    local parts = {}
    for i = 1, #t do
        parts[i] = type(t[i]) == "table" and list(t[i]) or string.format("%.9g", t[i])
    end
    return "[" .. table.concat(parts, ",") .. "]"
end

local f = assert(io.open(json_path, "w"))
f:write(string.format('{"inputs": %s, "targets": %s, "loss": %.9g, "logits_last_seq1": %s}\n',
                      list(inp), list(tgt), loss, list(logits:totable())))
f:close()
print(string.format("dgalua: loss %.6f, %d params -> %s", loss, m:num_params(), ckpt_path))

-- Generates tokens from a checkpoint.
--
--   dgalua scripts/generate.lua --checkpoint ckpt.safetensors --prompt-ids "1 2 3" --tokens 20 \
--       [--temperature 0.8] [--seed 1] [--tokenizer tok.json [--prompt "text"]]
--
-- Prints the generated ids (the new ones only) on one line; with --tokenizer also the decoded
-- text on a second line, "text: ...". Temperature 0 (the default) is greedy decoding; above 0
-- tokens are sampled from softmax(logits / temperature) with a generator seeded from --seed.
local argparse = require "argparse"
local args = require "dgalib.args"

local parser = argparse("generate.lua", "Generate tokens from a checkpoint.")
parser:option("--checkpoint", "Checkpoint (safetensors, from train.lua)."):count(1)
parser:option("--prompt-ids", "Prompt token ids, e.g. \"1 2 3\".")
parser:option("--prompt", "Prompt text (needs --tokenizer).")
parser:option("--tokenizer", "Tokenizer file (dga.tokenizer_load) to encode / decode text.")
parser:option("--tokens", "Number of tokens to generate.", "20"):convert(args.int(0))
parser:option("--temperature", "0: greedy; > 0: sampling.", "0"):convert(args.number(0))
parser:option("--seed", "Seed of the sampling generator.", "0"):convert(args.int())
parser:option("--threads", "OpenBLAS threads."):convert(args.int(1))
local opt = parser:parse()

if opt.threads then dga.set_threads(opt.threads) end
local tok
if opt.tokenizer then
    if not dga.tokenizer_load then error("this dgalua has no dga.tokenizer_load") end
    tok = dga.tokenizer_load(opt.tokenizer)
end

local prompt
if opt.prompt_ids then
    local ids, err = args.ids(opt.prompt_ids)
    if not ids then args.fail(parser, "--prompt-ids: " .. err) end
    prompt = ids
elseif opt.prompt then
    if not tok then args.fail(parser, "--prompt needs --tokenizer (or give --prompt-ids)") end
    prompt = tok:encode(opt.prompt)
else
    args.fail(parser, "give --prompt-ids (or --prompt with --tokenizer)")
end

if not dga.load_checkpoint then error("this dgalua has no dga.load_checkpoint") end
local model = dga.load_checkpoint(opt.checkpoint).model
local out = model:generate(prompt, opt.tokens, {temperature = opt.temperature, seed = opt.seed})
local parts = {}
for i, id in ipairs(out) do parts[i] = tostring(id) end
print(table.concat(parts, " "))
if tok then print("text: " .. tok:decode(out)) end

-- Generates tokens from a checkpoint.
--
--   dgalua scripts/generate.lua --checkpoint CKPT_DIR_OR_FILE --prompt-ids "1 2 3" --tokens 20 \
--       [--temperature 0.8] [--top-k 40] [--top-p 0.9] [--seed 1] [--tokenizer tok.json] [--prompt "text"]
--
-- Prints the prompt's ids, " | " and the generated ids on one line (--no-echo: the new ones
-- only); with a tokenizer (--tokenizer, or the checkpoint's tokenizer.json) also the decoded
-- text of prompt and continuation on a second line, "text: ...".
-- Temperature 0 (the default) is greedy decoding; above 0 tokens are sampled from
-- softmax(logits / temperature), restricted to the k most likely tokens (--top-k) and to the
-- smallest set whose probability reaches p (--top-p, nucleus sampling), with a generator
-- seeded from --seed.
local argparse = require "argparse"
local args = require "cli.args"

local parser = argparse("generate.lua", "Generate tokens from a checkpoint.")
parser:option("--checkpoint", "Checkpoint directory (from train.lua --save) or .safetensors file."):count(1)
parser:option("--prompt-ids", "Prompt token ids, e.g. \"1 2 3\".")
parser:option("--prompt", "Prompt text (needs --tokenizer).")
parser:option("--tokenizer", "Tokenizer file (dga.tokenizer_load) to encode / decode text "
              .. "(default: the checkpoint's tokenizer.json, if any).")
parser:option("--tokens", "Number of tokens to generate.", "20"):convert(args.int(0))
parser:option("--temperature", "0: greedy; > 0: sampling.", "0"):convert(args.number(0))
parser:option("--top-k", "Sample among the k most likely tokens only (0: all).", "0"):convert(args.int(0))
parser:option("--top-p", "Sample from the smallest set of tokens whose probability reaches p (1: all).", "1")
      :convert(args.number(0, 1))
parser:option("--seed", "Seed of the sampling generator.", "0"):convert(args.int())
parser:option("--threads", "OpenBLAS threads."):convert(args.int(1))
parser:flag("--no-echo", "Print only the generated part, not the prompt before it."):target("echo"):action("store_false")
      :init(true)
local opt = parser:parse()

if opt.threads then dga.set_threads(opt.threads) end
if opt.top_p == 0 then args.fail(parser, "--top-p must be above 0 (1 keeps every token)") end
if (opt.top_k > 0 or opt.top_p < 1) and opt.temperature == 0 then
    args.fail(parser, "--top-k and --top-p restrict sampling: give a --temperature above 0")
end
local ck, tok, paths = require("data.model_dir").load(opt.checkpoint, {tokenizer = true, tokenizer_path = opt.tokenizer})
local tok_path = opt.tokenizer or paths.tokenizer
local vocab = ck.model:config().vocab
-- A smaller tokenizer (another run's) decodes the ids it happens to know and fails on the
-- others, after the generation; a larger one is checked on the prompt it encodes.
if tok and tok:vocab_size() < vocab then
    error(string.format("the tokenizer %s has %d tokens, but the checkpoint %s has a vocabulary of %d: "
                        .. "they do not belong together", tok_path, tok:vocab_size(), paths.model, vocab), 0)
end

local prompt
if opt.prompt_ids then
    local ids, err = args.ids(opt.prompt_ids)
    if not ids then args.fail(parser, "--prompt-ids: " .. err) end
    for _, id in ipairs(ids) do
        if id >= vocab then
            args.fail(parser, string.format("--prompt-ids: token id %d outside the vocabulary [0, %d) of the checkpoint %s",
                                            id, vocab, paths.model))
        end
    end
    prompt = ids
elseif opt.prompt then
    if not tok then args.fail(parser, "--prompt needs --tokenizer (or give --prompt-ids)") end
    prompt = tok:encode(opt.prompt)
    for i = 1, #prompt do   -- a tensor: ipairs would index past its end
        local id = prompt[i]
        if id >= vocab then
            error(string.format("--prompt: the tokenizer %s gives token id %d, outside the vocabulary [0, %d) of the "
                                .. "checkpoint %s: they do not belong together", tok_path, id, vocab, paths.model), 0)
        end
    end
else
    args.fail(parser, "give --prompt-ids (or --prompt with --tokenizer)")
end

local model = ck.model
local out = model:generate(prompt, opt.tokens, {temperature = opt.temperature, top_k = opt.top_k,
                                                top_p = opt.top_p, seed = opt.seed})
-- The prompt is echoed first (as a reader checks what was continued): "1 2 3 | 7 8" and the
-- text of prompt and continuation decoded together; --no-echo prints the new part only.
local function ids_text(ids)
    local parts = {}
    for i, id in ipairs(ids) do parts[i] = tostring(id) end
    return table.concat(parts, " ")
end
local prompt_ids = type(prompt) == "table" and prompt or prompt:totable()
local whole = {}
if opt.echo then for _, id in ipairs(prompt_ids) do whole[#whole + 1] = id end end
for _, id in ipairs(out) do whole[#whole + 1] = id end
print(opt.echo and ids_text(prompt_ids) .. " | " .. ids_text(out) or ids_text(out))
if tok then
    local ok, text = pcall(tok.decode, tok, whole)
    if not ok then error(string.format("%s (tokenizer %s, checkpoint %s)", tostring(text), tok_path, paths.model), 0) end
    print("text: " .. text)
end

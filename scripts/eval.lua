-- Mean next-token loss of a checkpoint over a token shard.
--
--   dgalua scripts/eval.lua --checkpoint CKPT_DIR_OR_FILE --data SHARD.bin [--batch 16]
--
-- The shard is cut into consecutive windows of context+1 tokens at stride `context` (every
-- token but the first is predicted exactly once, with the context available inside its
-- window); a partial last window is left out. The loss is the token-weighted mean NLL
-- (natural log) over all predicted tokens, as m:eval computes it. Prints one line:
--   loss 3.456789 ppl 31.71 windows 12 tokens 1536
-- or, with --json, one JSON object with those numbers (the loss unrounded), the context and
-- the two paths.
local argparse = require "argparse"
local args = require "cli.args"
local windows = require "data.windows"

local parser = argparse("eval.lua", "Mean next-token loss of a checkpoint over a token shard.")
parser:option("--checkpoint", "Checkpoint directory (from train.lua --save) or .safetensors file."):count(1)
parser:option("--data", "Token shard (llm.c format)."):count(1)
parser:option("--batch", "Windows per evaluation call.", "16"):convert(args.int(1))
parser:option("--max-windows", "Evaluate at most this many windows (0: all).", "0")
      :convert(args.int(0))
parser:option("--threads", "OpenBLAS threads."):convert(args.int(1))
parser:flag("--json", "Print one JSON object (loss, ppl, windows, tokens, context, checkpoint, data) instead.")
local opt = parser:parse()

if opt.threads then dga.set_threads(opt.threads) end
if not dga.load_checkpoint then error("this dgalua has no dga.load_checkpoint") end
if not dga.shard_read then error("this dgalua has no dga.shard_read (text bindings missing)") end
local ck = require("data.model_dir").load(opt.checkpoint)
local model = ck.model
local cfg = model:config()
local tokens, info = dga.shard_read(opt.data)
local shard_vocab = args.shard_vocab(info)
if shard_vocab and shard_vocab ~= cfg.vocab then
    error(string.format("%s has a vocabulary of %d, but %s has %d", opt.data, shard_vocab,
                        opt.checkpoint, cfg.vocab), 0)
end
if info.max_id >= cfg.vocab then
    error(string.format("%s holds token id %d, outside the vocabulary of %s (%d)", opt.data,
                        info.max_id, opt.checkpoint, cfg.vocab), 0)
end
local T = cfg.context
local n = windows.count(tokens, T)
if n == 0 then
    args.fail(parser, string.format("%s holds %d tokens, fewer than context + 1 = %d", opt.data,
                                    tokens:numel(), T + 1))
end
if opt.max_windows > 0 and n > opt.max_windows then n = opt.max_windows end

local nll, count = 0, 0
for first = 1, n, opt.batch do
    local b = math.min(opt.batch, n - first + 1)
    local inputs, targets = windows.sequential(tokens, T, first, b)
    local _, seq_nll, seq_count = model:eval(inputs, targets)
    nll = nll + seq_nll:sum()
    count = count + seq_count:sum()
end
local loss = count > 0 and nll / count or 0
if opt.json then
    -- the same numbers for a program to read: loss at full precision, and what was measured
    print(require("util.json").encode{loss = loss, ppl = math.exp(loss), windows = n, tokens = count,
                                        context = T, checkpoint = opt.checkpoint, data = opt.data})
else
    print(string.format("loss %.6f ppl %.2f windows %d tokens %d", loss, math.exp(loss), n, count))
end

-- Trains a GPT on one llm.c-format token shard and saves a safetensors checkpoint.
--
--   dgalua scripts/train.lua --data SHARD.bin --layers 2 --width 128 --heads 4 --context 128 \
--       --vocab 4096 --batch 16 --steps 1000 --lr 1e-3 --warmup 100 --seed 1 --save ckpt.safetensors
--
-- Each step draws `batch` windows of context+1 tokens at random (a dga.rng seeded from
-- --seed, separate from the weight-init generator), runs forward / backward / gradient
-- clipping / AdamW with a warmup + cosine learning rate, and prints a progress line on
-- stderr. Same seed, same data, same thread count: the same losses, bit for bit.
local argparse = require "argparse"
local args = require "dgalib.args"
local progress = require "dgalib.progress"
local schedule = require "dgalib.schedule"
local windows = require "dgalib.windows"

local parser = argparse("train.lua", "Train a GPT on an llm.c token shard.")
parser:option("--data", "Token shard (llm.c format, from dga.shard_write)."):count(1)
parser:option("--layers", "Transformer blocks.", "2"):convert(args.int(1))
parser:option("--width", "Embedding width.", "128"):convert(args.int(1))
parser:option("--heads", "Attention heads (divide the width).", "4"):convert(args.int(1))
parser:option("--context", "Context length T.", "128"):convert(args.int(1))
parser:option("--vocab", "Vocabulary size (default: the shard's, else max id + 1)."):convert(args.int(1))
parser:option("--batch", "Sequences per step.", "16"):convert(args.int(1))
parser:option("--steps", "Optimizer steps.", "100"):convert(args.int(1))
parser:option("--lr", "Peak learning rate.", "1e-3"):convert(args.number(0))
parser:option("--min-lr", "Final learning rate (default lr / 10)."):convert(args.number(0))
parser:option("--schedule", "cosine, linear or constant.", "cosine")
      :choices{"cosine", "linear", "constant"}
parser:option("--warmup", "Linear warmup steps.", "0"):convert(args.int(0))
parser:option("--weight-decay", "AdamW weight decay.", "0.1"):convert(args.number(0))
parser:option("--decay", "What weight decay applies to: matrices (linear weights and embeddings), "
              .. "linear (linear weights only: embeddings, biases and layernorm exempt), all, none.",
              "matrices"):choices{"matrices", "linear", "all", "none"}
parser:option("--clip", "Clip the gradient norm to this (0: off).", "1.0"):convert(args.number(0))
parser:option("--seed", "Seed of the weight init and of the window draws.", "0"):convert(args.int())
parser:option("--save", "Write the final checkpoint (safetensors) here.")
parser:option("--log", "Write step,loss,grad_norm,lr (CSV, %.9g) here.")
parser:option("--every", "Print the progress line every N steps.", "1"):convert(args.int(1))
parser:option("--threads", "OpenBLAS threads."):convert(args.int(1))
parser:flag("--quiet", "No progress lines.")
local opt = parser:parse()

if opt.threads then dga.set_threads(opt.threads) end
if opt.save then
    -- fail now, not after the training, when the checkpoint cannot be written there
    local dir = opt.save:match("^(.*)/[^/]*$") or "."
    if dir ~= "" and not require("dgalib.runinfo").is_dir(dir) then
        args.fail(parser, string.format("--save %s: directory %s does not exist", opt.save, dir))
    end
end
local tokens, info = dga.shard_read(opt.data)
local shard_vocab = args.shard_vocab(info)
-- Checked now rather than at the first batch that happens to hold an id the model lacks.
if opt.vocab and shard_vocab and opt.vocab ~= shard_vocab then
    error(string.format("--vocab %d, but %s has a vocabulary of %d", opt.vocab, opt.data, shard_vocab), 0)
end
local vocab = opt.vocab or shard_vocab
if not vocab then vocab = math.max(info.max_id, 0) + 1 end
if info.max_id >= vocab then
    error(string.format("%s holds token id %d, outside --vocab %d", opt.data, info.max_id, vocab), 0)
end
local T = opt.context
if tokens:numel() < T + 1 then
    args.fail(parser, string.format("%s holds %d tokens, fewer than context + 1 = %d", opt.data,
                                    tokens:numel(), T + 1))
end

local model = dga.gpt{layers = opt.layers, width = opt.width, heads = opt.heads,
                      context = T, vocab = vocab, batch = opt.batch, seed = opt.seed}
local optim = dga.adamw(model, {lr = opt.lr, weight_decay = opt.weight_decay, decay = opt.decay})
local lr_at = schedule.make{kind = opt.schedule, lr = opt.lr, warmup = opt.warmup,
                            total = opt.steps, min_lr = opt.min_lr or opt.lr * 0.1}
-- The window generator gets its own stream so that changing the init never moves the data.
local rng = dga.rng(opt.seed * 2 + 1)

local log
if opt.log then
    log = assert(io.open(opt.log, "w"))
    log:write("step,loss,grad_norm,lr\n")
end

if not opt.quiet then
    io.stderr:write(string.format("train: %s, %d tokens, vocab %d; %s; batch %d x %d\n", opt.data,
                                  tokens:numel(), vocab, tostring(model), opt.batch, T))
end
local prog = not opt.quiet and progress.new{total = opt.steps, label = "train", every = opt.every}
if prog then prog:start(0) end

local loss, recent = 0, {}
for step = 1, opt.steps do
    local lr = lr_at(step)
    local inputs, targets = windows.random(tokens, opt.batch, T, rng)
    model:zero_grad()
    loss = model:forward(inputs, targets)
    model:backward()
    local norm = opt.clip > 0 and model:clip_grad(opt.clip) or model:grad_norm()
    optim:step(lr)
    recent[#recent + 1] = loss
    if #recent > 10 then table.remove(recent, 1) end
    if log then log:write(string.format("%d,%.9g,%.9g,%.9g\n", step, loss, norm, lr)) end
    if prog then prog:update(step, {loss = loss, lr = lr, tokens = opt.batch * T}) end
end
if prog then prog:finish() end
if log then log:close() end

local mean = 0
for _, l in ipairs(recent) do mean = mean + l end
mean = #recent > 0 and mean / #recent or 0
print(string.format("final loss %.6f (mean of last %d steps %.6f)", loss, #recent, mean))

if opt.save then
    if not dga.save_checkpoint then error("this dgalua has no dga.save_checkpoint") end
    dga.save_checkpoint(opt.save, {
        model = model, optimizer = optim,
        blobs = {window_rng = rng:state()},   -- where the window draws would go on from
        meta = {tool = "train.lua", data = opt.data, steps = opt.steps, seed = opt.seed,
                lr = opt.lr, warmup = opt.warmup, batch = opt.batch, final_loss = loss},
    })
    print("saved " .. opt.save)
end

-- Trains a GPT on one llm.c-format token shard and saves a checkpoint.
--
--   dgalua scripts/train.lua --data SHARD.bin --layers 2 --width 128 --heads 4 --context 128 \
--       --vocab 4096 --batch 16 --steps 1000 --lr 1e-3 --warmup 100 --seed 1 --save ckpt/ \
--       [--tokenizer tok.json] [--val VAL.bin --val-every 100] [--checkpoint-every 200] [--resume]
--       [--precision fp32|bf16|fp32-onednn]
--
-- Each step draws `batch` windows of context+1 tokens at random (a dga.rng seeded from
-- --seed, separate from the weight-init generator), runs forward / backward / gradient
-- clipping / AdamW with a warmup + cosine learning rate, and prints a progress line on
-- stderr. Same seed, same data, same thread count: the same losses, bit for bit.
--
-- --save DIR writes a checkpoint directory in Hugging Face's layout (model.safetensors,
-- config.json, tokenizer.json: see data/model_dir.lua); a --save path ending in
-- .safetensors writes that one file instead. --checkpoint-every N also saves every N steps,
-- and --resume continues from the saved step exactly as if the run had not stopped (the
-- optimizer moments and the window generator are in the checkpoint). A directory that
-- already holds a checkpoint is only overwritten with --overwrite.
local argparse = require "argparse"
local args = require "cli.args"
local model_dir = require "data.model_dir"
local progress = require "util.progress"
local schedule = require "trainer.schedule"
local windows = require "data.windows"

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
parser:option("--save", "Checkpoint directory (model.safetensors, config.json, tokenizer.json), "
              .. "or a single .safetensors file.")
parser:option("--tokenizer", "The shard's tokenizer.json, copied into the checkpoint directory "
              .. "(default: tokenizer.json beside the shard, if any).")
parser:option("--checkpoint-every", "Also save every N steps (0: only at the end).", "0"):convert(args.int(0))
parser:flag("--resume", "Continue the run saved in --save from its last checkpoint.")
parser:flag("--overwrite", "Start over even though --save already holds a checkpoint.")
parser:option("--stop-at", "Stop after this step, as an interruption would (resume with --resume)."):convert(args.int(1))
parser:option("--val", "Validation shard: its loss is measured every --val-every steps and at the end.")
parser:option("--val-every", "Steps between validation losses.", "100"):convert(args.int(1))
parser:option("--val-windows", "Windows of the validation shard evaluated (0: all).", "64"):convert(args.int(0))
parser:option("--log", "Write step,loss,grad_norm,lr[,val_loss] (CSV, %.9g) here.")
parser:option("--every", "Print the progress line every N steps.", "1"):convert(args.int(1))
parser:option("--threads", "OpenBLAS threads."):convert(args.int(1))
parser:option("--precision", "Matrix products: fp32 (OpenBLAS), bf16 (bf16 inputs, fp32 accumulation, where "
              .. "oneDNN has a native bf16 matmul; else fp32, said on stderr) or fp32-onednn.", "fp32")
      :choices{"fp32", "bf16", "fp32-onednn"}
parser:flag("--quiet", "No progress lines.")
local opt = parser:parse()

if opt.threads then dga.set_threads(opt.threads) end
local save_dir = opt.save and not opt.save:match("%.safetensors$")
if opt.resume and not opt.save then args.fail(parser, "--resume needs --save (the checkpoint to continue)") end
if opt.checkpoint_every > 0 and not opt.save then args.fail(parser, "--checkpoint-every needs --save") end
if opt.save and not opt.resume and not opt.overwrite then
    local there = save_dir and model_dir.exists(opt.save) or (not save_dir and io.open(opt.save, "rb"))
    if there then
        if type(there) == "userdata" then there:close() end
        args.fail(parser, string.format("--save %s already holds a checkpoint: add --resume to continue it, "
                                        .. "or --overwrite to start over", opt.save))
    end
end
if opt.save and not save_dir then
    -- fail now, not after the training, when the checkpoint cannot be written there
    local dir = opt.save:match("^(.*)/[^/]*$") or "."
    if dir ~= "" and not require("util.runinfo").is_dir(dir) then
        args.fail(parser, string.format("--save %s: directory %s does not exist", opt.save, dir))
    end
end
do
    -- nothing this run writes may be one of the files it reads
    local inputs = {["--data"] = opt.data, ["--val"] = opt.val, ["--tokenizer"] = opt.tokenizer}
    local saved = opt.save and (save_dir and {opt.save .. "/" .. model_dir.MODEL, opt.save .. "/" .. model_dir.CONFIG}
                                          or {opt.save}) or {}
    for _, f in ipairs(saved) do dga.check_output(f, inputs) end
    if opt.log then
        inputs["--save"] = saved
        dga.check_output(opt.log, inputs)
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
                      context = T, vocab = vocab, batch = opt.batch, seed = opt.seed,
                      precision = opt.precision}
local optim = dga.adamw(model, {lr = opt.lr, weight_decay = opt.weight_decay, decay = opt.decay})
local lr_at = schedule.make{kind = opt.schedule, lr = opt.lr, warmup = opt.warmup,
                            total = opt.steps, min_lr = opt.min_lr or opt.lr * 0.1}
-- The window generator gets its own stream so that changing the init never moves the data.
local rng = dga.rng(opt.seed * 2 + 1)

local val_tokens, val_n
if opt.val then
    val_tokens = dga.shard_read(opt.val)
    val_n = windows.count(val_tokens, T)
    if val_n == 0 then
        args.fail(parser, string.format("--val %s holds %d tokens, fewer than context + 1 = %d", opt.val,
                                        val_tokens:numel(), T + 1))
    end
    if opt.val_windows > 0 then val_n = math.min(val_n, opt.val_windows) end
end

-- Token-weighted mean loss over the first val_n windows of the validation shard.
local function val_loss()
    local nll, count = 0, 0
    for first = 1, val_n, opt.batch do
        local b = math.min(opt.batch, val_n - first + 1)
        local inputs, targets = windows.sequential(val_tokens, T, first, b)
        local _, seq_nll, seq_count = model:eval(inputs, targets)
        nll, count = nll + seq_nll:sum(), count + seq_count:sum()
    end
    return count > 0 and nll / count or 0 / 0
end

local tokenizer = opt.tokenizer
if not tokenizer then
    local beside = (opt.data:match("^(.*)/[^/]*$") or ".") .. "/tokenizer.json"
    if dga.path_kind(beside) then tokenizer = beside end   -- not opened: a FIFO would block
end
-- Checked now, not when the first checkpoint copies it (io.open would block on a FIFO).
if tokenizer and dga.path_kind(tokenizer) ~= "file" then
    error(string.format("%s: the tokenizer is %s, expected a regular file", tokenizer,
                        dga.path_kind(tokenizer) or "missing"), 0)
end

-- Resuming: the weights, the AdamW moments, the window generator and the step.
local start, recent_saved = 0, nil
if opt.resume then
    local paths = model_dir.resolve(opt.save)
    local ck = dga.load_checkpoint(paths.model, {model = model, optimizer = optim})
    start = math.tointeger(tonumber(ck.meta.step) or tonumber(ck.meta.steps)) or 0
    -- A fresh generator would draw other windows than the uninterrupted run: not a resume.
    if not ck.blobs.window_rng then
        error(string.format("%s: the checkpoint holds no window generator state (blob 'window_rng'), so the run "
                            .. "cannot continue as it would have; start over with --overwrite", paths.model), 0)
    end
    rng:set_state(ck.blobs.window_rng)
    recent_saved = {loss = tonumber(ck.meta.final_loss), mean = tonumber(ck.meta.recent_mean),
                    n = math.tointeger(tonumber(ck.meta.recent_n)), val = tonumber(ck.meta.val_loss),
                    recent = ck.tensors.recent_losses}
    if not tokenizer and paths.tokenizer then tokenizer = paths.tokenizer end
    if not opt.quiet then
        io.stderr:write(string.format("train: resuming %s at step %d of %d\n", opt.save, start, opt.steps))
    end
end

-- The log's writes are checked, each one: a full disk must stop the run, not leave a log that
-- silently ends early.
local log
local function log_check(ok, err)
    if not ok then error(string.format("--log %s: cannot write: %s", opt.log, tostring(err)), 0) end
    return ok
end
local function log_write(...)
    log_check(log:write(...))
    log_check(log:flush())
end
if opt.log then
    local header = "step,loss,grad_norm,lr" .. (opt.val and ",val_loss" or "")
    local old = opt.resume and require("util.runinfo").read_file(opt.log)
    if old then
        -- keep the rows up to the checkpoint's step; a torn last line has no newline
        local kept = {}
        for line in old:gmatch("([^\n]*)\n") do
            local step = tonumber(line:match("^(%d+),"))
            if #kept == 0 or (step and step <= start) then kept[#kept + 1] = line end
        end
        dga.write_file_atomic(opt.log, table.concat(kept, "\n") .. "\n")
        log = log_check(io.open(opt.log, "a"))
    else
        log = log_check(io.open(opt.log, "w"))
        log_write(header, "\n")
    end
end

if not opt.quiet then
    io.stderr:write(string.format("train: %s, %d tokens, vocab %d; %s; batch %d x %d\n", opt.data,
                                  tokens:numel(), vocab, tostring(model), opt.batch, T))
end
local prog = not opt.quiet and progress.new{total = opt.steps, label = "train", every = opt.every}
if prog then prog:start(start) end

local loss, recent, last_val = 0, {}, nil
local last_step = start
if recent_saved then
    -- the last losses before the checkpoint, so the summary's mean is the uninterrupted run's
    if recent_saved.recent then
        for i = 1, recent_saved.recent:numel() do recent[i] = recent_saved.recent[i] end
    end
    loss, last_val = recent_saved.loss or 0, recent_saved.val
end

local function mean_recent()
    local mean = 0
    for _, l in ipairs(recent) do mean = mean + l end
    return #recent > 0 and mean / #recent or 0
end

local function save(step)
    local spec = {
        model = model, optimizer = optim,
        blobs = {window_rng = rng:state()},   -- where the window draws would go on from
        tensors = #recent > 0 and {recent_losses = dga.vec(recent)} or nil,
        meta = {tool = "train.lua", data = opt.data, steps = opt.steps, step = step, seed = opt.seed,
                lr = opt.lr, warmup = opt.warmup, batch = opt.batch, final_loss = loss,
                recent_mean = mean_recent(), recent_n = #recent, val_loss = last_val},
    }
    if save_dir then
        spec.tokenizer = tokenizer
        model_dir.save(opt.save, spec)
    else
        dga.save_checkpoint(opt.save, spec)
    end
end

for step = start + 1, opt.steps do
    local lr = lr_at(step)
    local inputs, targets = windows.random(tokens, opt.batch, T, rng)
    model:zero_grad()
    loss = model:forward(inputs, targets)
    model:backward()
    local norm = opt.clip > 0 and model:clip_grad(opt.clip) or model:grad_norm()
    optim:step(lr)
    recent[#recent + 1] = loss
    if #recent > 10 then table.remove(recent, 1) end
    local this_val
    if val_tokens and (step % opt.val_every == 0 or step == opt.steps) then
        this_val = val_loss()
        last_val = this_val
    end
    if log then
        log_write(string.format("%d,%.9g,%.9g,%.9g", step, loss, norm, lr),
                  opt.val and (this_val and string.format(",%.9g", this_val) or ",") or "", "\n")
    end
    if prog then prog:update(step, {loss = loss, lr = lr, tokens = opt.batch * T, val = last_val}) end
    last_step = step
    local stop = opt.stop_at == step
    if opt.save and (step == opt.steps or stop or (opt.checkpoint_every > 0 and step % opt.checkpoint_every == 0)) then
        save(step)
    end
    if stop then break end
end
if prog then prog:finish() end
if log then log_check(log:close()) end

if last_step == start and recent_saved then
    -- Nothing left to train: the run's own summary, from the checkpoint.
    print(string.format("final loss %.6f (mean of last %d steps %.6f); the checkpoint is at step %d of %d",
                        recent_saved.loss or 0 / 0, recent_saved.n or 0, recent_saved.mean or 0 / 0, start, opt.steps))
    if recent_saved.val then print(string.format("val loss %.6f", recent_saved.val)) end
else
    print(string.format("final loss %.6f (mean of last %d steps %.6f)", loss, #recent, mean_recent()))
    if last_val then print(string.format("val loss %.6f (%d windows of %s)", last_val, val_n, opt.val)) end
    if opt.save then print("saved " .. opt.save .. (last_step < opt.steps and string.format(" at step %d", last_step) or "")) end
end

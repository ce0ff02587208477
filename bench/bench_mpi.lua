-- Data-parallel speed (make bench runs it under mpirun with 1 and 2 ranks, one thread each;
-- it asserts nothing):
--   - training tokens/s on bench_train's `small` config (4 layers, width 256, context 256,
--     vocabulary 8192, global batch 8): each rank forward/backward on its rows, the gradient
--     all-reduce, AdamW, as the trainer's step does (scripts/trainer/data_parallel.lua), with the
--     all-reduce overlapped with the backward (the default) or after it
--     (DGA_OVERLAP_ALLREDUCE=0); the result's "overlap" field says which;
--   - one alignment round at k = 64 probes of 4 sequences on the same model, split over the
--     ranks as the trainer splits it, and the held-out evaluation of 64 sequences in batches
--     of 8, split as the trainer splits it (DGA_BENCH_ALIGN=0 skips both).
--   mpirun -np R build/mpi/dgalua --threads 1 bench/bench_mpi.lua
-- DGA_BENCH_STEPS (default 8): timed steps. Rank 0 prints "RESULT {json}" lines for
-- bench/run; times are wall clock, medians.
local runinfo = require "util.runinfo"
local dp = require("trainer.data_parallel").new({})
local rank, size = dp.rank, dp.size

local function median(t)
    table.sort(t)
    local n = #t
    return n % 2 == 1 and t[(n + 1) // 2] or (t[n // 2] + t[n // 2 + 1]) / 2
end

local function result(fields)
    if rank ~= 0 then return end
    local parts = {}
    for _, kv in ipairs(fields) do
        local v = kv[2]
        parts[#parts + 1] = string.format('"%s":%s', kv[1],
            type(v) == "string" and string.format('"%s"', v)
            or math.type(v) == "integer" and tostring(v) or string.format("%.6g", v))
    end
    print("RESULT {" .. table.concat(parts, ",") .. "}")
end

local B, T, V = 8, 256, 8192
local model = dga.gpt{layers = 4, width = 256, heads = 4, context = T, vocab = V, batch = B, seed = 1}
local opt = dga.adamw(model, {lr = 1e-3, weight_decay = 0.1})
local rng = dga.rng(7)
local function batch(n)
    local x, y = dga.zeros(n, T, "int32"), dga.zeros(n, T, "int32")
    for i = 1, n * T do
        x[i] = rng:below(V)
        y[i] = rng:below(V)
    end
    return x, y
end
local X, Y = batch(B)
local first, rows = dp:rows(B)
local x, y = X:narrow(first, rows), Y:narrow(first, rows)

local function step()
    model:zero_grad()
    model:forward(x, y)
    if size > 1 then dp:backward_step(model, rows, B) else model:backward() end
    model:clip_grad(1.0)
    opt:step()
end

local n_steps = tonumber(os.getenv("DGA_BENCH_STEPS") or "") or 8
for _ = 1, 2 do step() end
local times, comm = {}, {}
for _ = 1, n_steps do
    if size > 1 then dga.allgather(dga.zeros(1)) end   -- start the steps together
    local t0 = runinfo.now()
    step()
    times[#times + 1] = runinfo.now() - t0
end
-- the all-reduce alone, on the same buffer
for _ = 1, n_steps do
    if size > 1 then dga.allgather(dga.zeros(1)) end
    local t0 = runinfo.now()
    model:allreduce_grads(1.0)
    comm[#comm + 1] = runinfo.now() - t0
end
local st, ct = median(times), median(comm)
result{{"kind", "dp_train"}, {"config", "small"}, {"threads", 1}, {"ranks", size},
       {"overlap", dp.overlap and 1 or 0}, {"tokens_per_s", B * T / st},
       {"step_ms", st * 1e3}, {"allreduce_ms", ct * 1e3}, {"params", model:num_params()}}
if os.getenv("DGA_BENCH_ALIGN") == "0" then return end

-- The alignment round: k = 64 probes of 4 sequences.
local K, nb = 64, 4
local tx, ty = batch(nb)
local probes = {}
for j = 1, K do probes[j] = {batch(nb)} end
local opts = {method = "exact"}
local rounds = {}
for _ = 1, 2 do
    if size > 1 then dga.allgather(dga.zeros(1)) end
    local t0 = runinfo.now()
    dp:align(model, {tx, ty}, probes, opts)
    rounds[#rounds + 1] = runinfo.now() - t0
end
result{{"kind", "align_round"}, {"config", "small"}, {"threads", 1}, {"ranks", size}, {"k", K},
       {"probe_batch", nb}, {"round_s", median(rounds)}}

-- The held-out evaluation: 64 sequences of T + 1 tokens in batches of B.
local held = dga.zeros(64, T + 1, "int32")
for i = 1, 64 * (T + 1) do held[i] = rng:below(V) end
local evals = {}
for _ = 1, 3 do
    if size > 1 then dga.allgather(dga.zeros(1)) end
    local t0 = runinfo.now()
    dp:eval_seqs(model, held, B)
    evals[#evals + 1] = runinfo.now() - t0
end
result{{"kind", "eval"}, {"config", "small"}, {"threads", 1}, {"ranks", size}, {"seqs", 64},
       {"batch", B}, {"eval_s", median(evals)}}

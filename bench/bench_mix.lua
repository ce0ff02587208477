-- Speed of the mixing machinery outside training (make bench runs it; it asserts nothing):
--   the sampler at the paper's largest k (alias-table rebuild, draws), and MMLU scoring.
--   dgalua bench/bench_mix.lua [mmlu_dir]
-- Each measurement is printed as "RESULT {json}" for bench/run.
local clock = os.clock   -- CPU time of this process: the runs are single-threaded
local function result(fields)
    local parts = {}
    for _, kv in ipairs(fields) do
        local v = kv[2]
        parts[#parts + 1] = string.format('"%s":%s', kv[1],
            type(v) == "string" and string.format('"%s"', v)
            or math.type(v) == "integer" and tostring(v) or string.format("%.4g", v))
    end
    print("RESULT {" .. table.concat(parts, ",") .. "}")
end

-- Sampler: k = 262,144 domains of 1..7 sequences; new weights, then draws in batches of 1000.
local k = 262144
local sizes = {}
for i = 1, k do sizes[i] = 1 + i % 7 end
local smp = dga.sampler(sizes, {seed = 1})
local w = dga.vec(k, 1.0):normalize()
local t0 = clock()
for _ = 1, 20 do smp:set_weights(w) end
local rebuild_ms = (clock() - t0) / 20 * 1e3
t0 = clock()
for _ = 1, 1000 do smp:draw(1000) end
local draw_s = clock() - t0
print(string.format("sampler k=%d: alias table rebuild %.2f ms, 1,000,000 draws %.2f s", k, rebuild_ms, draw_s))
result{{"kind", "sampler"}, {"k", k}, {"rebuild_ms", rebuild_ms}, {"million_draws_s", draw_s}}

-- MMLU scoring: a 4-layer, 128-wide model (random init: the speed does not depend on the
-- weights), context 512, 300 MMLU_b questions 0-shot and 100 5-shot.
local dir = arg[1] or (require("data.corpus").find_mmlu())
if not dir then print("MMLU not found: scoring skipped") return end
local mm = dga.mmlu_load(dir)
local qs, dev = mm:split("b", 1), mm:split("dev")
local sub = {}
for i = 1, 300 do sub[i] = qs[1 + (i - 1) * (#qs // 300)] end
local texts = {}
for i, q in ipairs(sub) do texts[i] = dga.mmlu_render(q, {with_answer = true}) end
local tok = dga.tokenizer_train(texts, {vocab = 1024})
local m = dga.gpt{layers = 4, width = 128, heads = 4, context = 512, vocab = tok:vocab_size(), batch = 16}
t0 = clock()
dga.mmlu_score(m, tok, sub, {shots = 0})
local q0 = #sub / (clock() - t0)
local five = {table.unpack(sub, 1, 100)}
t0 = clock()
dga.mmlu_score(m, tok, five, {shots = 5, dev = dev})
local q5 = #five / (clock() - t0)
print(string.format("MMLU scoring (4L/128w, context 512): %.0f questions/s 0-shot, %.0f 5-shot", q0, q5))
result{{"kind", "mmlu_score"}, {"questions_per_s_0shot", q0}, {"questions_per_s_5shot", q5}}

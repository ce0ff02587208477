-- Theorem 1 as an experiment: when the specific set is itself a mixture of generic domains,
-- DGA's weights move towards that mixture.
--
--   dgalua experiments/recover.lua [--quick] [--mix 0.7,0.3] [--domains 1,2]
--
-- The generic pool is a domain store over the corpus (k coarse domains). The specific set is
-- drawn from two of its domains in the proportions --mix (held-out sequences: the last ones
-- of each domain, removed from sampling), so the target mixture alpha* puts mix[1] on the
-- first domain, mix[2] on the second, 0 elsewhere. DGA (with EMA) starts from the natural
-- mixture; the script prints the total-variation distance TV(alpha_t, alpha*) at every
-- update, and the same distance for the natural mixture as the reference.
local argparse = require "argparse"
local exp = require "dgalib.experiment"
local data = require "dgalib.data"
local csvlog = require "dgalib.csvlog"

local p = argparse("recover.lua", "DGA recovers a known target mixture (Theorem 1).")
exp.add_common_options(p, {out = "runs/recover"})
p:option("--mix", "Proportions of the two source domains in the specific set.", "0.7,0.3")
p:option("--domains", "The two store domains (1-based, level 1) the specific set is made of; "
         .. "default: the two largest.")
p:option("--k", "Domains of the generic pool.", "8"):convert(tonumber)
p:option("--eta", "Fixed DGA step size (default: set against std(a), the policy's eta_mode 'std').")
    :convert(tonumber)
p:option("--target-change", "Log-weight change per update when eta is set against std(a).", "0.1")
    :convert(tonumber)
p:option("--beta", "EMA coefficient of DGA.", "0.1"):convert(tonumber)
local a = p:parse(arg)
if a.threads and dga.set_threads then dga.set_threads(a.threads) end

local preset = a.quick and {
    max_mb = 0.3, seq_len = 65, vocab = 2048, steps = 1200, batch = 16, T_r = 10,
    eval_every = 40, layers = 2, width = 64, heads = 4, align_batch = 16, lr = 3e-3, n_spec = 160,
} or {
    max_mb = 2, seq_len = 129, vocab = 4096, steps = 3000, batch = 16, T_r = 25,
    eval_every = 100, layers = 4, width = 128, heads = 4, align_batch = 32, lr = 2e-3, n_spec = 512,
}
local steps = a.steps or preset.steps
local mix = {}
for v in a.mix:gmatch("[%d.]+") do mix[#mix + 1] = tonumber(v) end
assert(#mix == 2 and math.abs(mix[1] + mix[2] - 1) < 1e-6, "--mix: two proportions summing to 1")

local corpus = data.require_corpus(a.corpus)
local store_dir = exp.store{corpus = corpus, levels = {a.k}, seq_len = preset.seq_len,
                            vocab = preset.vocab, max_mb = preset.max_mb, cache = a.cache,
                            seed = a.seed}
local store = dga.store_open(store_dir)
local k, L = store:k(1), store:seq_len()
local sizes = {}
do
    local st = store:domain_sizes(1)
    for d = 1, k do sizes[d] = math.tointeger(st[d]) or math.floor(st[d]) end
end

local pair = {}
if a.domains then
    for v in a.domains:gmatch("%d+") do pair[#pair + 1] = tonumber(v) end
else
    local order = {}
    for d = 1, k do order[d] = d end
    table.sort(order, function(x, y) return sizes[x] > sizes[y] end)
    pair = {order[1], order[2]}
end

-- Specific set: the last n_d sequences of each of the two domains (n_d = mix_d * n_spec),
-- taken out of sampling with the budget; train / held-out split inside each.
local n_of = {math.floor(mix[1] * preset.n_spec + 0.5), math.floor(mix[2] * preset.n_spec + 0.5)}
for i = 1, 2 do
    if n_of[i] * 3 > sizes[pair[i]] then
        n_of[i] = math.floor(sizes[pair[i]] / 3)
    end
end
-- Keep the proportions exact after capping.
if n_of[1] / mix[1] > n_of[2] / mix[2] then
    n_of[1] = math.floor(n_of[2] / mix[2] * mix[1] + 0.5)
else
    n_of[2] = math.floor(n_of[1] / mix[1] * mix[2] + 0.5)
end
local spec_rows = {}
local budget = {}
for d = 1, k do budget[d] = sizes[d] end
for i = 1, 2 do
    local d = pair[i]
    for j = 1, n_of[i] do spec_rows[#spec_rows + 1] = {d, sizes[d] - j + 1} end
    budget[d] = sizes[d] - n_of[i]
end
-- Interleave so both the training part and the held-out part keep the proportions.
local n = #spec_rows
local seqs = dga.zeros(n, L, "int32")
local rng = dga.rng(a.seed + 100)
for i = n, 2, -1 do
    local j = rng:below(i) + 1
    spec_rows[i], spec_rows[j] = spec_rows[j], spec_rows[i]
end
for r, pr in ipairs(spec_rows) do
    seqs:narrow(r, 1):copy_(store:sequence(1, pr[1], pr[2]):reshape(1, L))
end
local spec_train, spec_heldout = exp.split(seqs, math.max(8, n // 5))

local target = {}
for d = 1, k do target[d] = 0 end
target[pair[1]], target[pair[2]] = mix[1], mix[2]
local function tv(w)
    local s = 0
    for d = 1, k do s = s + math.abs(w[d] - target[d]) end
    return s / 2
end

local policy = {name = "dga", beta = a.beta, target_change = a.target_change}
if a.eta then policy.eta, policy.eta_mode, policy.target_change = a.eta, "fixed", nil end
local cfg = exp.run_config(a, preset, steps, "dga", {
    store = {dir = store_dir, level = 1}, budget = budget,
    specific = {train = spec_train, heldout = spec_heldout},
    policy = policy,
})
io.stderr:write(string.format("specific set: %d sequences of domain %d + %d of domain %d\n",
                              n_of[1], pair[1], n_of[2], pair[2]))
local s = exp.run(cfg, a)

-- Distances at every logged update.
local by_step = {}
for _, r in ipairs(csvlog.read_records(cfg.run_dir .. "/weights.csv")) do
    by_step[r.step] = by_step[r.step] or {}
    by_step[r.step][r.domain] = r.weight
end
local steps_list = {}
for st in pairs(by_step) do steps_list[#steps_list + 1] = st end
table.sort(steps_list)
local natural = {}
local total = 0
for d = 1, k do total = total + budget[d] end
for d = 1, k do natural[d] = budget[d] / total end

print(string.format("\nrecover: target mixture %.2f x domain %d + %.2f x domain %d (k = %d)",
                    mix[1], pair[1], mix[2], pair[2], k))
print(string.format("TV(natural mixture, target) = %.4f", tv(natural)))
local rows = {}
for _, st in ipairs(steps_list) do
    local w = by_step[st]
    local w1, w2 = w[pair[1]], w[pair[2]]
    rows[#rows + 1] = {step = st, tv = tv(w), w1 = w1, w2 = w2, support = w1 + w2,
                       share = w1 / (w1 + w2)}
end
-- Besides TV: the mass on the two source domains (target: 1) and the first one's share of
-- it (target: mix[1]).
exp.print_table(rows, {{"step", "%d"}, {"tv", "%.4f", "TV(alpha, target)"},
                       {"w1", "%.4f", "w[" .. pair[1] .. "]"}, {"w2", "%.4f", "w[" .. pair[2] .. "]"},
                       {"support", "%.3f", "mass on both (-> 1)"},
                       {"share", "%.3f", string.format("share of %d (-> %.2f)", pair[1], mix[1])}},
                a.out .. "/distance.csv")
print(string.format("final specific loss %.4f; TV went %.4f -> %.4f", s.specific_loss or 0/0,
                    rows[1].tv, rows[#rows].tv))
if not a.no_plot then
    local plot = require "plot"
    local g = plot.weights_figure(plot.read_run(cfg.run_dir), a.out .. "/plots", {top = 8})
    if g then print("figure: " .. g.png) end
end

-- The trainer's configuration, described once. Each entry names a key (a dotted path into the
-- cfg table), its type, its default and its range; from this one table come
--   config.defaults          the defaults (trainer/config.lua fills them in),
--   schema.check(cfg)        the type, range and choice checks, and unknown keys (with close
--                            matches) refused before anything is built,
--   schema.settable()        the keys `--set key=value` accepts (data keys are not settable),
--   schema.doc_markdown()    the configuration section of docs/api.md and help("config").
-- What a run records is the cfg after defaults (config.lua in the run directory), with the
-- policy's resolved options (trainer/run.lua): the same names as here.
--
-- An entry: {key, type, default, doc, min =, max =, above =, choices =, derived =, data =}
--   type     "int" | "number" | "boolean" | "string" | "tensor" | "list" | "table" |
--            "budget" (a number, or a list of numbers per domain)
--   default  nil where the trainer derives the value (the doc says from what)
--   min/max  inclusive bounds; above: exclusive lower bound
--   data     the key holds data (tensors, lists, directories): part of the cfg, never --set
--   derived  set by the trainer from the data (model.context): not a --set key; a cfg that
--            gives it (a recorded one) must agree with the data (trainer/run.lua)
local M = {}

local E = {}
local function entry(key, type_, default, doc, extra)
    local e = {key = key, type = type_, default = default, doc = doc}
    for k, v in pairs(extra or {}) do e[k] = v end
    E[#E + 1] = e
end

-- ---- the run ----------------------------------------------------------------------------
entry("run_dir", "string", nil, "the run directory (required)", {data = true})
entry("name", "string", "run", "the run's name in progress lines and messages")
entry("seed", "int", 1, "model init, sampling and alignment probes", {min = 0})
entry("steps", "int", 200, "training steps", {min = 1})
entry("batch", "int", 8, "sequences per step (the global batch under data parallelism)", {min = 1})
entry("T_r", "int", 100, "steps between policy updates", {min = 1})
entry("eval_every", "int", 50, "steps between metrics rows (held-out evaluation)", {min = 1})
entry("checkpoint_every", "int", 0, "steps between checkpoints, a multiple of eval_every (0: only at the end)",
      {min = 0})
entry("eval_batch", "int", 16, "sequences per evaluation forward pass", {min = 1})
entry("eval_max", "int", 256, "at most this many held-out sequences per evaluated set", {min = 1})
entry("align_batch", "int", nil, "sequences per probe and target batch of an alignment round (default: batch)",
      {min = 1})
entry("heldout_per_domain", "int", 4, "generic held-out sequences taken from the end of each domain when "
      .. "no generic_heldout is given", {min = 0})
entry("generic_max", "int", 256, "at most this many generic held-out sequences", {min = 0})
entry("sparse_k", "int", 2048, "beyond this many domains, weights.csv and epochs.csv keep only "
      .. "the entries that matter", {min = 1})
entry("weights_min", "number", nil, "beyond sparse_k domains, weights.csv keeps weights above this "
      .. "(default: 1e-3 / k)", {min = 0})
entry("clip", "number", nil, "gradient-norm clipping (default: optimizer.clip)", {min = 0})
entry("threads", "int", nil, "OpenBLAS and pool threads (default: as started)", {min = 1})
entry("progress", "boolean", true, "a progress line on stderr")
entry("progress_every", "int", nil, "steps between progress updates (default: steps / 100)", {min = 1})
entry("eval_progress_min", "int", 2048, "the final evaluation says each held-out set it evaluates "
      .. "when they hold at least this many sequences in all", {min = 0})
entry("data_parallel", "boolean", true, "under mpirun, train one model over the ranks (false: each rank alone)")
entry("check_replicas", "boolean", false, "under mpirun, compare the ranks' parameters and weights at every "
      .. "metrics row")
entry("overlap_allreduce", "boolean", true, "data parallel: sum each block's gradient over the ranks as "
      .. "backward finishes it")

-- ---- the data ---------------------------------------------------------------------------
entry("store", "table", nil, "a domain store: {dir =, level =}", {data = true})
entry("store.dir", "string", nil, "the store directory (scripts/build_store.lua)", {data = true})
entry("store.level", "int", nil, "the store's clustering level (1 = its first)", {min = 1})
entry("domains", "list", nil, "instead of a store: int32 [n_i, L] tensors, one per domain", {data = true})
entry("domain_names", "list", nil, "names of the tensor domains", {data = true})
entry("budget", "budget", nil, "sequences each domain offers: a number, or a list per domain", {min = 0})
entry("budget_tokens", "budget", nil, "the same in tokens, rounded down to whole sequences", {min = 1})
entry("epoch_cap", "number", nil, "a domain leaves the mixture once it has started this many epochs "
      .. "(0: no cap)", {min = 0})
entry("generic_heldout", "tensor", nil, "int32 [m, L] generic held-out sequences", {data = true})
entry("specific", "table", nil, "{train = int32 [n, L], heldout = int32 [m, L]}: the target task",
      {data = true})
entry("specific.train", "tensor", nil, "the specific training set (alignment targets)", {data = true})
entry("specific.heldout", "tensor", nil, "the specific held-out set", {data = true})
entry("basis", "list", nil, "basis sets {name =, heldout =, histogram =}", {data = true})
entry("dist", "boolean", nil, "distribution reweighting over the basis histograms")
entry("is_histogram", "tensor", nil, "float32 k: the importance policy's histogram", {data = true})

-- ---- the model, the optimizer, the schedule, the alignment rounds -----------------------
entry("model", "table", nil, "the model")
entry("model.layers", "int", 2, "transformer blocks", {min = 1})
entry("model.width", "int", 64, "embedding width (a multiple of heads)", {min = 1})
entry("model.heads", "int", 4, "attention heads", {min = 1})
entry("model.vocab", "int", nil, "vocabulary size (default: the data's)", {min = 1})
entry("model.context", "int", nil, "the data's sequence length minus 1", {derived = true})
entry("model.precision", "string", "fp32", "the matrix products: fp32 (OpenBLAS), bf16 (oneDNN, bf16 inputs and fp32 "
      .. "accumulation, where the CPU has it; else fp32, said once) or fp32-onednn",
      {choices = {"fp32", "bf16", "fp32-onednn"}})
entry("optimizer", "table", nil, "AdamW")
entry("optimizer.lr", "number", 1e-3, "peak learning rate", {above = 0})
entry("optimizer.weight_decay", "number", 0.1, "decoupled weight decay", {min = 0})
entry("optimizer.beta1", "number", 0.9, "first-moment decay", {min = 0, max = 1})
entry("optimizer.beta2", "number", 0.95, "second-moment decay", {min = 0, max = 1})
entry("optimizer.eps", "number", 1e-8, "denominator floor", {above = 0})
entry("optimizer.decay", "string", "matrices", "which parameters are decayed",
      {choices = {"matrices", "linear", "all", "none"}})
entry("optimizer.clip", "number", 1.0, "gradient-norm clipping (0: none)", {min = 0})
entry("schedule", "table", nil, "the learning-rate schedule")
entry("schedule.kind", "string", "cosine", "the decay after warmup", {choices = {"cosine", "linear", "constant"}})
entry("schedule.warmup", "int", 0, "linear warmup steps", {min = 0})
entry("schedule.total", "int", nil, "the schedule's horizon (default: steps; recorded, so a run extended "
      .. "later keeps its curve)", {min = 1})
entry("schedule.min_lr", "number", nil, "the lr at the horizon (default: lr / 10)", {min = 0})
entry("align", "table", nil, "alignment rounds")
entry("align.normalize", "string", "none", "alignments as raw dot products, cosines, or divided by the mean norm",
      {choices = {"none", "cosine", "mean_norm"}})
entry("align.method", "string", "exact", "one backward per domain, central differences, or forward mode",
      {choices = {"exact", "fd", "jvp"}})
entry("align.lr_scale", "boolean", false, "alignments times the current lr")
entry("align.fd_eps", "number", 1e-3, "step of the central differences (method fd)", {above = 0})
entry("policy", "table", nil, "the mixing policy: {name =, <its options>} (scripts/policies/)")
entry("policy.name", "string", "uniform", "a registry name or a policy file")

M.entries = E
M.by_key = {}
for _, e in ipairs(E) do M.by_key[e.key] = e end

-- ---- defaults -----------------------------------------------------------------------------

local function set_path(t, key, v)
    local node = t
    local parts = {}
    for part in key:gmatch("[^%.]+") do parts[#parts + 1] = part end
    for i = 1, #parts - 1 do
        node[parts[i]] = node[parts[i]] or {}
        node = node[parts[i]]
    end
    node[parts[#parts]] = v
end

local function get_path(t, key)
    local node = t
    for part in key:gmatch("[^%.]+") do
        if type(node) ~= "table" then return nil end
        node = node[part]
    end
    return node
end
M.get_path, M.set_path = get_path, set_path

-- A fresh table of every default (groups as nested tables).
function M.defaults()
    local d = {}
    for _, e in ipairs(E) do
        if e.type == "table" and e.default == nil and not e.data then
            if get_path(d, e.key) == nil then set_path(d, e.key, {}) end
        elseif e.default ~= nil then
            set_path(d, e.key, e.default)
        end
    end
    return d
end

-- ---- checks ------------------------------------------------------------------------------

local function is_tensor(v) return type(v) == "userdata" and type(v.shape) == "function" end

-- Is v of the entry's type? An integer-valued float is an int (a config file's 1e2).
local function type_ok(e, v)
    local t = e.type
    if t == "int" then return math.type(v) == "integer" end
    if t == "number" then return type(v) == "number" end
    if t == "boolean" then return type(v) == "boolean" end
    if t == "string" then return type(v) == "string" end
    if t == "tensor" then return is_tensor(v) end
    if t == "list" or t == "table" then return type(v) == "table" end
    if t == "budget" then return type(v) == "number" or type(v) == "table" end
    return true
end

local TYPE_WORD = {int = "an integer", number = "a number", boolean = "true or false", string = "a string",
                   tensor = "a tensor", list = "a list", table = "a table",
                   budget = "a number or a list of numbers"}

-- '"a", "b" or "c"'
local function choice_list(choices)
    local q = {}
    for i, c in ipairs(choices) do q[i] = string.format("%q", c) end
    if #q == 1 then return q[1] end
    return table.concat(q, ", ", 1, #q - 1) .. " or " .. q[#q]
end

-- What a value of the entry must be: "an integer >= 1", '"none", "cosine" or "mean_norm"'.
function M.expected(e)
    if e.choices then return choice_list(e.choices) end
    local parts = {TYPE_WORD[e.type]}
    if e.above then parts[#parts + 1] = "> " .. e.above end
    if e.min then parts[#parts + 1] = ">= " .. e.min end
    if e.max then parts[#parts + 1] = "<= " .. e.max end
    return table.concat(parts, " ", 1, math.min(#parts, 2)) .. (#parts > 2 and (" and " .. parts[3]) or "")
end

-- nil when v satisfies the entry, else what it must be. `false` stands for "not given" in an
-- optional entry (one without a default), as configuration files write it.
function M.check_value(e, v)
    if v == false and e.default == nil and e.type ~= "boolean" then return nil end
    if not type_ok(e, v) then return M.expected(e) end
    if type(v) == "number" then
        if v ~= v or v == math.huge or v == -math.huge then return "a finite number" end
        if (e.min and v < e.min) or (e.max and v > e.max) or (e.above and v <= e.above) then
            return M.expected(e)
        end
    end
    if e.choices then
        for _, c in ipairs(e.choices) do if c == v then return nil end end
        return M.expected(e)
    end
    return nil
end

local function distance(a, b)
    local prev = {}
    for j = 0, #b do prev[j] = j end
    for i = 1, #a do
        local cur = {[0] = i}
        for j = 1, #b do
            local cost = a:sub(i, i) == b:sub(j, j) and 0 or 1
            cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
        end
        prev = cur
    end
    return prev[#b]
end

-- Keys of `known` (a list) close to `key`: within a small edit distance, or sharing its last
-- component, or containing it; at most six, closest first.
function M.close_matches(key, known)
    local last = key:match("([^%.]+)$")
    local scored = {}
    for _, k in ipairs(known) do
        local klast = k:match("([^%.]+)$")
        local d, dl = distance(key, k), distance(last, klast)
        local score
        if last == klast then score = 0
        elseif d <= math.max(2, #key // 3) then score = d
        elseif dl <= math.max(1, #last // 4) then score = 10 + dl
        elseif #last >= 3 and k:find(last, 1, true) then score = 20 end
        if score then scored[#scored + 1] = {k, score} end
    end
    table.sort(scored, function(x, y) return x[2] < y[2] or (x[2] == y[2] and x[1] < y[1]) end)
    local out = {}
    for i = 1, math.min(6, #scored) do out[i] = scored[i][1] end
    return out
end

local function sorted(list) table.sort(list); return list end

-- The keys directly under `group` ("" for the top level).
local function children(group)
    local out = {}
    for _, e in ipairs(E) do
        local parent, leaf = e.key:match("^(.*)%.([^%.]+)$")
        if (parent or "") == group then out[#out + 1] = leaf or e.key end
    end
    return sorted(out)
end

-- Raises "<where>: unknown key 'k' (close matches: ...)" for any key of cfg the schema does
-- not know (the policy's own options are its business: policies.options checks them), and
-- "<where>: k = v, expected ..." for a value of the wrong type or out of range.
function M.check(cfg, where, level)
    level = (level or 1) + 1
    where = where or "trainer"
    local all = {}
    for _, e in ipairs(E) do
        if e.type ~= "table" then all[#all + 1] = e.key end
    end
    local problem
    local function walk(t, prefix)
        for key, v in pairs(t) do
            local path = prefix == "" and tostring(key) or (prefix .. "." .. tostring(key))
            local e = M.by_key[path]
            if type(key) ~= "string" or not e then
                local close = M.close_matches(path, all)
                local known = children(prefix)
                return string.format("%s: unknown key '%s' (%s)", where, path,
                                     #close > 0 and ("close matches: " .. table.concat(close, ", "))
                                         or ("known " .. (prefix == "" and "keys" or prefix .. " keys")
                                             .. ": " .. table.concat(known, ", ")))
            end
            local bad = M.check_value(e, v)
            if bad then
                return string.format("%s: cfg.%s = %s, expected %s", where, path,
                                     is_tensor(v) and "a tensor" or tostring(v), bad)
            end
            if e.type == "table" and path ~= "policy" and type(v) == "table" then
                local err = walk(v, path)
                if err then return err end
            end
        end
    end
    problem = walk(cfg, "")
    if problem then error(problem, level) end
end

-- ---- --set ---------------------------------------------------------------------------------

-- The keys --set accepts: key -> entry (no data, no derived, no group; policy.name is the
-- sweep's to set, and policy options come from the policies, cli/overrides.lua).
function M.settable()
    local out = {}
    for _, e in ipairs(E) do
        if not e.data and not e.derived and e.type ~= "table" and e.type ~= "list"
           and e.type ~= "tensor" then
            out[e.key] = e
        end
    end
    return out
end

-- ---- documentation ------------------------------------------------------------------------

local function show(v)
    if v == nil then return "" end
    if type(v) == "string" then return string.format("%q", v) end
    return tostring(v)
end

local function range_text(e)
    local parts = {}
    if e.choices then parts[#parts + 1] = table.concat(e.choices, " \\| ") end
    if e.above then parts[#parts + 1] = "> " .. e.above end
    if e.min then parts[#parts + 1] = ">= " .. e.min end
    if e.max then parts[#parts + 1] = "<= " .. e.max end
    return table.concat(parts, ", ")
end

-- The configuration as a Markdown table (docs/api.md, help("config")).
function M.doc_markdown()
    local lines = {"| key | type | default | range | what it is |", "|---|---|---|---|---|"}
    for _, e in ipairs(E) do
        if e.type ~= "table" or e.default ~= nil then
            local t = e.type .. (e.data and " (data)" or "")
            lines[#lines + 1] = string.format("| `%s` | %s | %s | %s | %s |", e.key, t, show(e.default),
                                              range_text(e), e.doc)
        end
    end
    return table.concat(lines, "\n")
end

-- The same as plain text lines for the REPL.
function M.doc_text()
    local lines = {}
    for _, e in ipairs(E) do
        if e.type ~= "table" or e.default ~= nil then
            local r = range_text(e):gsub("\\|", "|")
            lines[#lines + 1] = string.format("  %-24s %-8s %-10s %s%s", e.key, e.type, show(e.default), e.doc,
                                              r ~= "" and (" [" .. r .. "]") or "")
        end
    end
    return table.concat(lines, "\n")
end

return M

-- Where a run's sequences come from: the generic data (a domain store, or a list of int32
-- [n_i, L] tensors for tests and small runs), the budgets, the generic hold-out, the
-- specific set and the basis held-out sets.
--
--   local data = sources.prepare(cfg)
--   data.src        {kind, k, seq_len, vocab, sizes, names?, gather(domains, indices),
--                    sequence(d, i)}
--   data.budget     sequences available for training per domain (hold-out removed)
--   data.spec_train, data.spec_heldout, data.generic_heldout, data.basis_eval[j]
local M = {}

local is_tensor = require("rundir.config").is_tensor
M.is_tensor = is_tensor

local function check_seqs(t, what, L)
    if not is_tensor(t) then error(what .. ": expected an int32 tensor of sequences [n, L]", 3) end
    local shape = t:shape()
    if #shape ~= 2 or t:dtype() ~= "int32" then
        error(string.format("%s: expected an int32 tensor [n, L], got %s %s", what, t:dtype(),
                            table.concat(shape, "x")), 3)
    end
    if L and shape[2] ~= L then
        error(string.format("%s: sequences of %d tokens, the data has %d", what, shape[2], L), 3)
    end
    if shape[1] < 1 then error(what .. ": no sequences", 3) end
    return shape[1], shape[2]
end
M.check_seqs = check_seqs

-- Every token id of the run's own tensors within the vocabulary, checked up front (an id out
-- of range would otherwise fail the first alignment round or evaluation that reads it).
local function check_ids(t, what, vocab)
    local lo, hi = t:min(), t:max()
    if lo >= 0 and hi < vocab then return end
    local bad = lo < 0 and lo or hi
    local flat, n = t:reshape(#t), #t
    local at = 1
    for i = 1, n do if flat[i] == bad then at = i break end end
    local L = t:shape()[2]
    error(string.format("trainer: %s holds token id %d at [%d,%d], outside the vocabulary [0, %d) of the "
                        .. "training data", what, math.tointeger(bad) or bad, (at - 1) // L + 1, (at - 1) % L + 1,
                        vocab), 3)
end

-- Copies tokens [first, first + T) of the flat view `flat` into row b of out (B x T).
local function put_row(out, b, flat, first, T)
    out:narrow(b, 1):copy_(flat:narrow(first, T):reshape(1, T))
end

-- inputs/targets (B x (L-1)) from the rows `rows` (list of 1-based row numbers) of seqs.
function M.rows_to_io(seqs, rows)
    local shape = seqs:shape()
    local n, L = shape[1], shape[2]
    local flat = seqs:reshape(n * L)
    local B, T = #rows, L - 1
    local inputs = dga.zeros(B, T, "int32")
    local targets = dga.zeros(B, T, "int32")
    for b, r in ipairs(rows) do
        local base = (r - 1) * L
        put_row(inputs, b, flat, base + 1, T)
        put_row(targets, b, flat, base + 2, T)
    end
    return inputs, targets
end

-- A batch of n rows of seqs drawn with replacement by rng (the alignment's target batch).
function M.random_rows(seqs, n, rng)
    local total = seqs:shape()[1]
    local rows = {}
    for b = 1, n do rows[b] = rng:below(total) + 1 end
    return M.rows_to_io(seqs, rows)
end

-- The first `n` rows of seqs (a view) when it has more.
local function head(seqs, n)
    local rows = seqs:shape()[1]
    if n and rows > n then return seqs:narrow(1, n) end
    return seqs
end

-- Mean next-token loss of a set of sequences at the current parameters.
function M.eval_seqs(model, seqs, batch)
    return dga.eval_loss_seqs(model, seqs, batch)
end

local function store_source(cfg)
    local s = dga.store_open(cfg.store.dir)
    local level = cfg.store.level or 1
    local k = s:k(level)
    local sizes = s:domain_sizes(level)
    local src = {kind = "store", store = s, level = level, k = k, seq_len = s:seq_len()}
    src.sizes = {}
    for d = 1, k do src.sizes[d] = math.tointeger(sizes[d]) or math.floor(sizes[d]) end
    function src.gather(domains, indices) return s:gather(level, domains, indices) end
    function src.sequence(d, i) return s:sequence(level, d, i) end
    src.vocab = s:vocab_size()
    -- Domain names for logs and figures: the number and the corpus directory most of the
    -- domain's sequences came from, e.g. "12:latex 83%".
    src.names = {}
    local ok, names, counts = pcall(s.sources, s, level)
    for d = 1, k do
        local best, total, top = 0, 0, nil
        if ok then
            for j = 1, #names do
                local c = counts:at(d, j)
                total = total + c
                if c > best then best, top = c, names[j] end
            end
        end
        src.names[d] = top and string.format("%d:%s %d%%", d, top, math.floor(100 * best / total + 0.5))
                       or tostring(d)
    end
    return src
end

local function tensor_source(cfg)
    local doms = cfg.domains
    local src = {kind = "tensors", k = #doms, sizes = {}}
    for d, t in ipairs(doms) do
        local n, L = check_seqs(t, "domains[" .. d .. "]", src.seq_len)
        src.seq_len = L
        src.sizes[d] = n
    end
    local vmax = 0
    for _, t in ipairs(doms) do vmax = math.max(vmax, t:max()) end
    src.vocab = cfg.model.vocab or (math.tointeger(vmax) + 1)
    local flats = {}
    for d, t in ipairs(doms) do flats[d] = t:reshape(src.sizes[d] * src.seq_len) end
    function src.gather(domains, indices)
        local B, L = #domains, src.seq_len
        local T = L - 1
        local inputs = dga.zeros(B, T, "int32")
        local targets = dga.zeros(B, T, "int32")
        for b = 1, B do
            local flat = flats[domains[b]]
            local base = (indices[b] - 1) * L
            put_row(inputs, b, flat, base + 1, T)
            put_row(targets, b, flat, base + 2, T)
        end
        return inputs, targets
    end
    function src.sequence(d, i)
        local L = src.seq_len
        local out = dga.zeros(L, "int32")
        local t = doms[d]
        for j = 1, L do out[j] = t[(i - 1) * L + j] end
        return out
    end
    return src
end

-- Generic held-out set: sequences taken from the ends of the domains, never more than a
-- quarter of a domain; those sequences are excluded from sampling (budget). Domains are
-- visited in a fixed shuffled order, so a cap on the total (large k) still spreads the set
-- over the whole corpus instead of the first domains.
local function holdout_generic(src, per_domain, max_total)
    local k, L = src.k, src.seq_len
    local taken, order = {}, {}
    for d = 1, k do taken[d], order[d] = 0, d end
    dga.rng(20240520):shuffle(order)
    local picks = {}
    local room = true
    for _ = 1, per_domain do
        if not room or #picks >= max_total then break end
        room = false
        for _, d in ipairs(order) do
            if #picks >= max_total then break end
            if (taken[d] + 1) * 4 <= src.sizes[d] then
                taken[d] = taken[d] + 1
                picks[#picks + 1] = {d, src.sizes[d] - taken[d] + 1}
                room = true
            end
        end
    end
    if #picks == 0 then return nil, taken end
    local out = dga.zeros(#picks, L, "int32")
    for r, p in ipairs(picks) do
        local seq = src.sequence(p[1], p[2])
        local o = (r - 1) * L
        for j = 1, L do out[o + j] = seq[j] end
    end
    return out, taken
end

-- Everything the run reads, checked against the data's sequence length.
function M.prepare(cfg)
    local src
    if cfg.store then
        src = store_source(cfg)
    elseif cfg.domains then
        src = tensor_source(cfg)
    else
        error("trainer: give cfg.store = {dir=, level=} or cfg.domains = {int32 [n, L], ...}", 3)
    end
    local data = {src = src}
    local L = src.seq_len
    local spec = cfg.specific or {}
    check_seqs(spec.train, "specific.train", L)
    check_seqs(spec.heldout, "specific.heldout", L)
    data.spec_train = spec.train
    data.spec_heldout = head(spec.heldout, cfg.eval_max)

    -- budget: per domain, minus the generic held-out sequences. budget_tokens is the paper's
    -- unit ("the first N tokens of each domain"), rounded down to whole sequences of L tokens.
    local function budget_of(d)
        local b = cfg.budget or cfg.budget_tokens
        if type(b) == "table" then b = b[d] end
        if b and cfg.budget_tokens then b = b // L end
        return b
    end
    local budget = {}
    for d = 1, src.k do
        local b = budget_of(d)
        budget[d] = b and math.min(b, src.sizes[d]) or src.sizes[d]
    end
    if cfg.generic_heldout then
        check_seqs(cfg.generic_heldout, "generic_heldout", L)
        data.generic_heldout = head(cfg.generic_heldout, cfg.eval_max)
    elseif cfg.heldout_per_domain > 0 then
        local held, taken = holdout_generic(src, cfg.heldout_per_domain, cfg.generic_max)
        data.generic_heldout = held
        for d = 1, src.k do budget[d] = math.min(budget[d], src.sizes[d] - taken[d]) end
    end
    data.budget = budget

    -- basis sets: per-basis held-out losses (their histograms belong to the mixture space)
    data.basis = cfg.basis or {}
    data.basis_eval = {}
    for j, b in ipairs(data.basis) do
        if b.heldout then
            check_seqs(b.heldout, "basis[" .. j .. "].heldout", L)
            data.basis_eval[j] = head(b.heldout, cfg.eval_max)
        end
    end
    local vocab = (cfg.model and cfg.model.vocab) or src.vocab
    check_ids(spec.train, "specific.train", vocab)
    check_ids(spec.heldout, "specific.heldout", vocab)
    if cfg.generic_heldout then check_ids(cfg.generic_heldout, "generic_heldout", vocab) end
    for j, b in ipairs(data.basis) do
        if b.heldout then check_ids(b.heldout, "basis[" .. j .. "].heldout", vocab) end
    end
    return data
end

return M

-- The mixture space: what the policy's weights are weights over. Two kinds:
--   leaves  the k domains of the data; the sampler draws from the weights themselves;
--   basis   N basis distributions over the k domains (distribution reweighting, cfg.dist:
--           the columns of P are the basis histograms); the sampler draws leaves from
--           P:mix(weights), and component j's probe batch is drawn from p_j.
-- The loop asks the space, never the mode:
--   space.K, space.names, space.sizes (float32 K), space.basis (dga.basis P or nil)
--   space:mix(w)            -> the leaf weights for the sampler
--   space:probe(j, n)       -> n sequences of component j as (inputs, targets), nil without data
--   space:probes(n)         -> one probe batch {inputs, targets} per component, false for a
--                              component without data (its alignment is 0)
--   space:epochs()          -> float32 K: epochs started per component
--   space:logged_weights(w) -> the (component, weight) pairs weights.csv records
--   space:domain_rows()     -> rows of domains.csv: {component, name, size, available}
--   space:leaf_name(d)      -> how a leaf domain is named in messages
--   space:train_losses(sum, count) -> float32 K mean training loss and float32 K sequence counts per
--                              component, from per-leaf float32 sums and counts (trainer/losses.lua)
--   space:mixture_probe(w, n, rng) -> n sequences drawn from the training mixture of weights
--                              w (inputs, targets), as probes (not training draws)
local M = {}

local Leaves = {}
Leaves.__index = Leaves

local Basis = {}
Basis.__index = Basis

-- Fields both kinds share; `names` maps a component to its name (nil: the next source).
local function base(cfg, data, sampler, K, names)
    local src = data.src
    local space = {cfg = cfg, src = src, budget = data.budget, sampler = sampler, K = K,
                   names = {}}
    for d = 1, K do
        local name = names(d) or (cfg.domain_names and cfg.domain_names[d])
                     or (src.names and src.names[d])
        space.names[d] = name or tostring(d)
    end
    return space
end

local function new_leaves(cfg, data, sampler)
    local self = base(cfg, data, sampler, data.src.k, function() return nil end)
    self.sizes = dga.tensor(data.src.sizes, "float32")
    return setmetatable(self, Leaves)
end

function Leaves:mix(w) return w end

-- n sequences of domain j (inputs, targets), or nil when j has no data.
function Leaves:probe(j, n)
    if self.budget[j] <= 0 then return nil end
    local indices = self.sampler:draw_from(j, n)
    local ids = {}
    for b = 1, n do ids[b] = j end
    return self.src.gather(dga.tensor(ids, "int32"), indices)
end

function Leaves:epochs()
    local ep = self.sampler:epochs()
    local e = dga.zeros(self.K)
    for d = 1, self.K do e[d] = ep[d] end
    return e
end

-- Beyond sparse_k domains only the weights above weights_min (default a thousandth of the
-- uniform share) are written, so DGA's floor weights are not written k times a round.
function Leaves:logged_weights(w)
    local sparse = self.K > self.cfg.sparse_k
    local min_w = self.cfg.weights_min or 1e-3 / self.K
    local vals, out = w:totable(), {}
    for d = 1, #vals do
        if not sparse or vals[d] > min_w then out[#out + 1] = {d, vals[d]} end
    end
    return out
end

function Leaves:domain_rows()
    local rows = {}
    for d = 1, self.K do rows[d] = {d, self.names[d], self.src.sizes[d], self.budget[d]} end
    return rows
end

function Leaves:leaf_name(d) return self.names[d] end

function Leaves:train_losses(sum, count)
    local loss = dga.zeros(self.K)
    for d = 1, self.K do
        if count[d] > 0 then loss[d] = sum[d] / count[d] end
    end
    return loss, count:clone()
end

local function new_basis(cfg, data, sampler)
    local cols = {}
    for j, b in ipairs(data.basis) do
        if not b.histogram then error("trainer: dist mode needs basis[" .. j .. "].histogram", 3) end
        cols[j] = b.histogram
    end
    local self = base(cfg, data, sampler, #cols, function(d) return data.basis[d].name end)
    self.hist = cols
    self.basis = dga.basis(data.src.k, cols)
    -- A basis' "size": its histogram-weighted number of available sequences.
    local s = dga.zeros(self.K)
    for j, h in ipairs(cols) do s[j] = h:dot(dga.tensor(self.budget, "float32")) end
    self.sizes = s
    return setmetatable(self, Basis)
end

function Basis:mix(w) return self.basis:mix(w) end

-- n sequences drawn from p_j (inputs, targets), or nil when p_j has no data.
function Basis:probe(j, n)
    local domains, indices = self.basis:draw(j, n, self.sampler)
    if not indices then return nil end
    return self.src.gather(domains, indices)
end

-- Per basis: the histogram-weighted mean of the leaves' epochs.
function Basis:epochs()
    local ep = self.sampler:epochs()
    local e = dga.zeros(self.K)
    local ep_f = dga.zeros(self.src.k)
    for d = 1, self.src.k do ep_f[d] = ep[d] end
    for j, h in ipairs(self.hist) do e[j] = h:dot(ep_f) / h:sum() end
    return e
end

function Basis:logged_weights(w)
    local vals, out = w:totable(), {}
    for d = 1, #vals do out[d] = {d, vals[d]} end
    return out
end

function Basis:domain_rows()
    local rows = {}
    for d = 1, self.K do rows[d] = {d, self.names[d], self.sizes[d], self.sizes[d]} end
    return rows
end

function Basis:leaf_name(d) return self.src.names and self.src.names[d] or tostring(d) end

-- Per basis: the histogram-weighted mean over the leaves' sequences.
function Basis:train_losses(sum, count)
    local loss, n = dga.zeros(self.K), dga.zeros(self.K)
    for j, h in ipairs(self.hist) do
        local c = h:dot(count)
        n[j] = c
        if c > 0 then loss[j] = h:dot(sum) / c end
    end
    return loss, n
end

-- The space cfg asks for: basis distributions when cfg.dist is set, else the leaf domains.
-- One probe batch per component, in component order (the sampler's probe generator draws
-- them in that order, so a run is reproducible).
local function probes(self, n)
    local out = {}
    for j = 1, self.K do
        local inputs, targets = self:probe(j, n)
        out[j] = inputs and {inputs, targets} or false
    end
    return out
end
Leaves.probes, Basis.probes = probes, probes

-- n sequences drawn from the leaf mixture self:mix(w) with rng (inverse CDF), each the next
-- probe sequence of its domain.
local function mixture_probe(self, w, n, rng)
    local lw = self:mix(w):totable()
    local cdf, acc = {}, 0
    for d = 1, #lw do
        acc = acc + lw[d]
        cdf[d] = acc
    end
    local domains, indices = {}, {}
    for b = 1, n do
        local u, lo, hi = rng:uniform() * acc, 1, #cdf
        while lo < hi do
            local mid = (lo + hi) // 2
            if cdf[mid] < u then lo = mid + 1 else hi = mid end
        end
        while lw[lo] <= 0 do lo = lo + 1 end   -- u = 0 lands before the first weight
        domains[b] = lo
        indices[b] = self.sampler:draw_from(lo, 1)[1]
    end
    return self.src.gather(dga.tensor(domains, "int32"), dga.tensor(indices, "int32"))
end
Leaves.mixture_probe, Basis.mixture_probe = mixture_probe, mixture_probe

function M.new(cfg, data, sampler)
    if cfg.dist then return new_basis(cfg, data, sampler) end
    return new_leaves(cfg, data, sampler)
end

return M

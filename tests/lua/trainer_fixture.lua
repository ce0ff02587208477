-- Shared by trainer_spec.lua and resume_spec.lua (and the subprocesses resume_spec starts):
-- a tiny synthetic data set and a tiny run configuration. Not a spec itself.
--
-- Three domains over a 32-token vocabulary, sequences of 17 tokens:
--   1: counting patterns in tokens 0..15 (t, t+s, t+2s, ... mod 16)
--   2: uniform random tokens in 16..31
--   3: alternating pairs from both halves
-- The specific set is drawn from domain 1's generator (other seed), so DGA should favour it.
local M = {}

M.V, M.L = 32, 17

local function seqs(rng, n, kind)
    local L = M.L
    local t = dga.zeros(n, L, "int32")
    for r = 1, n do
        local o = (r - 1) * L
        local start, stride = rng:below(16), 1 + rng:below(3)
        for j = 1, L do
            local v
            if kind == 1 then
                v = (start + (j - 1) * stride) % 16
            elseif kind == 2 then
                v = 16 + rng:below(16)
            else
                v = (j % 2 == 1) and rng:below(16) or (16 + (start + j) % 16)
            end
            t[o + j] = v
        end
    end
    return t
end

function M.data(seed)
    local rng = dga.rng(seed or 7)
    return {
        domains = {seqs(rng, 48, 1), seqs(rng, 64, 2), seqs(rng, 40, 3)},
        specific_train = seqs(rng, 24, 1),
        specific_heldout = seqs(rng, 8, 1),
        generic_heldout = dga.tensor((function()
            local a, b, c = seqs(rng, 3, 1), seqs(rng, 3, 2), seqs(rng, 3, 3)
            local out = {}
            for _, t in ipairs{a, b, c} do
                for _, row in ipairs(t:totable()) do out[#out + 1] = row end
            end
            return out
        end)(), "int32"),
        basis_heldout = {seqs(rng, 4, 1), seqs(rng, 4, 2)},
    }
end

-- A run configuration: `over` entries replace the defaults (shallow, per key).
function M.config(run_dir, over)
    local d = M.data(7)
    local cfg = {
        name = "tiny", run_dir = run_dir, seed = 3,
        steps = 24, batch = 4, T_r = 4, eval_every = 4, checkpoint_every = 8,
        eval_batch = 8, align_batch = 4,
        model = {layers = 1, width = 16, heads = 2},
        optimizer = {lr = 3e-3, weight_decay = 0.1, clip = 1.0},
        schedule = {kind = "cosine", warmup = 2, min_lr = 3e-4},
        domains = d.domains, domain_names = {"count", "random", "mixed"},
        generic_heldout = d.generic_heldout,
        specific = {train = d.specific_train, heldout = d.specific_heldout},
        basis = {{name = "count", heldout = d.basis_heldout[1]},
                 {name = "random", heldout = d.basis_heldout[2]}},
        policy = {name = "dga", beta = 0.5, eta = 1.0},
        progress = false,
    }
    for key, v in pairs(over or {}) do cfg[key] = v end
    return cfg
end

return M

-- dga_dist: distribution reweighting (Fan, Grangier & Ablin, 2024, section 3.2). DGA run over the N basis
-- distributions p_1..p_N (columns of P = ctx.basis, k x N) instead of the k leaf domains:
-- each mix(p_j) is one "domain", ctx:align() draws its probe batch j from mix(p_j), and
-- alpha_dist lives in the N-simplex. The weights returned are over the N bases (ctx.k = N
-- in distribution mode); the training mixture over the leaves is P alpha_dist, which the
-- trainer's basis mixture space (scripts/trainer/space.lua) applies to the weights returned
-- here with ctx.basis:mix(weights); mixture() below gives the same mixture to callers outside
-- the trainer (tests, analyses). Everything else --
-- the +eta a mirror step, EMA, eta against std(a), the floor -- is dga's (policies/dga.lua).
local dga_policy = require "policies.dga"

local M = setmetatable({}, {__index = dga_policy})
M.__index = M

function M.new(opts)
    return setmetatable({name = "dga_dist", opts = dga_policy.options("dga_dist", opts)}, M)
end

local function check_basis(ctx)
    local P = ctx.basis
    if not P then error("policy 'dga_dist': ctx.basis (the k x N histograms) is missing: run in distribution mode", 3) end
    if P:n() ~= ctx.k then
        error(string.format("policy 'dga_dist': ctx.k = %d but the basis has N = %d columns", ctx.k, P:n()), 3)
    end
    return P
end

function M:init(ctx)
    check_basis(ctx)
    return dga_policy.init(self, ctx)
end

function M:update(ctx, step)
    check_basis(ctx)
    return self:apply(ctx, ctx:align())
end

-- The training mixture over the k leaf domains: P alpha_dist (the EMA'd weights).
function M:mixture(ctx)
    return check_basis(ctx):mix(self.ema)
end

return M

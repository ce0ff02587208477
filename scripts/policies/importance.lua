-- importance: importance sampling (DESIGN.md section 1). alpha_i = share of the specific
-- examples whose nearest domain centroid is i: the IS histogram, given as ctx.is_histogram
-- (the store computes it: s:histogram(texts, level)). Fixed for the run; sparse when the
-- specific set is small, which is why it repeats its few domains in the token-limited regime.
local policies = require "policies"

local M = {}
M.__index = M

function M.new(opts)
    policies.options("importance", {}, opts)
    return setmetatable({name = "importance", fixed = true}, M)
end

function M:init(ctx)
    local h = ctx.is_histogram
    if not h then error("policy 'importance': ctx.is_histogram is missing (the trainer's is_histogram)", 2) end
    if #h ~= ctx.k then
        error(string.format("policy 'importance': is_histogram has %d entries, expected ctx.k = %d", #h, ctx.k), 2)
    end
    self.weights = h:clone():normalize_()
    return self.weights:clone()
end

function M:update(ctx, step)
    return self.weights:clone()
end

function M:state() return {tensors = {}, values = {}} end
function M:set_state(st) end

return M

-- uniform: the same weight 1/k on every domain (domains without data get 0, since the
-- sampler refuses weight on them). Fixed for the run.
local policies = require "policies"

local M = {}
M.__index = M

function M.new(opts)
    policies.options("uniform", {}, opts)
    return setmetatable({name = "uniform", fixed = true}, M)
end

function M:init(ctx)
    self.weights = policies.uniform(ctx)
    return self.weights:clone()
end

function M:update(ctx, step)
    return self.weights:clone()
end

function M:state() return {tensors = {}, values = {}} end
function M:set_state(st) end

return M

-- natural: weights proportional to the data each domain holds, i.e. the distribution of
-- the concatenated corpus. With a token budget, the available (budgeted) sequences count:
-- that is the corpus the model can see. Fixed for the run.
local policies = require "policies"

local M = {}
M.__index = M

function M.new(opts)
    policies.options("natural", {}, opts)
    return setmetatable({name = "natural", fixed = true}, M)
end

function M:init(ctx)
    self.weights = policies.available(ctx):normalize_()
    return self.weights:clone()
end

function M:update(ctx, step)
    return self.weights:clone()
end

function M:state() return {tensors = {}, values = {}} end
function M:set_state(st) end

return M

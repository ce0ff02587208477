-- importance: importance sampling, the paper's baseline. alpha_i = share of the specific
-- examples whose nearest domain centroid is i: the IS histogram, given as ctx.is_histogram
-- (the store computes it: s:histogram(texts, level)). Fixed for the run; sparse when the
-- specific set is small, which is why it repeats its few domains in the token-limited regime.
local policies = require "policies"

local TENSOR = getmetatable(dga.zeros(1))

-- What h is, in a message: "a 2-D float32 tensor [2x3]", "an int32 tensor", "a table".
local function what(h)
    if getmetatable(h) ~= TENSOR then return "a " .. type(h) end
    local shape = h:shape()
    local dims = {}
    for i, d in ipairs(shape) do dims[i] = tostring(d) end
    return string.format("a %d-D %s tensor [%s]", #shape, h:dtype(), table.concat(dims, "x"))
end

-- Errors at level 3: the caller of the policy's init.
return policies.fixed("importance", function(ctx)
    local h = ctx.is_histogram
    if not h then error("policy 'importance': ctx.is_histogram is missing (the trainer's is_histogram)", 3) end
    if getmetatable(h) ~= TENSOR or h:dtype() ~= "float32" or #h:shape() ~= 1 then
        error(string.format("policy 'importance': is_histogram (the IS histogram) is %s; it must be a 1-D float32 "
                            .. "tensor of ctx.k = %d domain weights (s:histogram(texts, level), or "
                            .. "dga.npy_load of is_histogram.lua --out)", what(h), ctx.k), 3)
    end
    if #h ~= ctx.k then
        error(string.format("policy 'importance': is_histogram has %d entries, expected ctx.k = %d", #h, ctx.k), 3)
    end
    return h:clone():normalize_()
end)

-- importance: importance sampling (DESIGN.md section 1). alpha_i = share of the specific
-- examples whose nearest domain centroid is i: the IS histogram, given as ctx.is_histogram
-- (the store computes it: s:histogram(texts, level)). Fixed for the run; sparse when the
-- specific set is small, which is why it repeats its few domains in the token-limited regime.
local policies = require "policies"

-- Errors at level 3: the caller of the policy's init.
return policies.fixed("importance", function(ctx)
    local h = ctx.is_histogram
    if not h then error("policy 'importance': ctx.is_histogram is missing (the trainer's is_histogram)", 3) end
    if #h ~= ctx.k then
        error(string.format("policy 'importance': is_histogram has %d entries, expected ctx.k = %d", #h, ctx.k), 3)
    end
    return h:clone():normalize_()
end)

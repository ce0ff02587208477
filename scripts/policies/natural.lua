-- natural: weights proportional to the data each domain holds, i.e. the distribution of
-- the concatenated corpus. With a token budget, the available (budgeted) sequences count:
-- that is the corpus the model can see. Fixed for the run.
local policies = require "policies"

return policies.fixed("natural", function(ctx)
    return policies.available(ctx):normalize_()
end)

-- The executor of a sweep without --jobs or MPI ranks, and of a --jobs worker's one pair:
-- the pairs one after the other in this process. Returns whether this process holds the
-- sweep's results (false in a worker: its coordinator reads its summary.json).
local pair = require "harness.exec.pair"

local M = {}

function M.run(plan)
    for i, p in ipairs(plan.todo) do
        local s, err = pair.run(plan, p)
        plan:report(i, s, err)
    end
    return not plan.worker
end

return M

-- The executor under mpirun with one pair to run (or DGA_SWEEP_SPLIT=0): every pair is one
-- data-parallel run over all the ranks, rank 0 writing its summary.json. A failed pair
-- ends the job (an error on every rank that saw it): the ranks must not drift apart
-- between pairs. Rank 0 holds the results; the other ranks return false.
local pair = require "harness.exec.pair"

local M = {}

function M.run(plan, ranks)
    for i, p in ipairs(plan.todo) do
        local s, err = pair.run(plan, p, {ranks = true})
        if not s then
            error(string.format("sweep: %s, seed %d failed on rank %d (data parallel over %d ranks: the job "
                                .. "stops):\n%s", p.cell.id, p.seed, dga.rank(), ranks, tostring(err)), 0)
        end
        plan:report(i, s)
    end
    if dga.rank() ~= 0 then
        io.stdout:flush()
        return false
    end
    return true
end

return M

-- The executor under mpirun with more than one pair to run: the ranks share the pairs, rank
-- r of R running pairs i (1-based, in plan order) with (i - 1) % R == r, each a one-rank
-- training run (topts.independent: no collective inside a pair). When every rank is done,
-- rank 0 reads the others' summary.json files (a file system the ranks share) and holds
-- the results; the other ranks return false, and their scripts end there.
local pair = require "harness.exec.pair"
local summary = require "harness.summary"

local M = {}

function M.run(plan, ranks)
    local me = dga.rank()
    local nfail = 0
    for i, p in ipairs(plan.todo) do
        if (i - 1) % ranks == me then
            local s, err = pair.run(plan, p, {independent = true})
            if not s then nfail = nfail + 1 end
            plan:report(i, s, err)
        end
    end
    -- Every rank waits here for the others: then every summary.json is written.
    dga.allgather(dga.tensor({nfail}))
    if me ~= 0 then
        io.stdout:flush()
        return false
    end
    for _, p in ipairs(plan.todo) do
        if not p.done and not p.failed_here then
            if summary.exists(p.dir) then
                p.done = summary.read(summary.path(p.dir))
            else
                plan:failed_elsewhere(p, "failed on another rank (see its stderr)")
            end
        end
    end
    return true
end

return M

-- Statistics over the seeds of a finished (or partly finished) sweep, from its run
-- directories alone: writes <out>/aggregate.csv and aggregate.json and prints the tables.
--
--   dgalua scripts/aggregate.lua runs/lowdata --reference natural --metrics specific_final
--
-- harness/aggregate.lua says what every column means.
local argparse = require "argparse"
require "cli.args"   -- usage errors exit with status 2
local aggregate = require "harness.aggregate"

local p = argparse("aggregate.lua", "Mean, 95% interval, paired differences against a reference "
                   .. "policy, and the reference's seed-to-seed noise, for every cell of a sweep.")
p:argument("out", "The sweep's directory (<cell>/seed-<s>/summary.json under it).")
p:option("--reference", "The reference policy of each group (a cell's policy, or the last part of its id).")
p:option("--metrics", "Metrics to report, comma separated (default: all).")
p:flag("--quiet", "Write the files, print nothing.")
local a = p:parse(arg)

local metrics
if a.metrics then
    metrics = {}
    for m in a.metrics:gmatch("[^,%s]+") do metrics[#metrics + 1] = m end
end
local ok, err = pcall(aggregate, {out = a.out, reference = a.reference, metrics = metrics, quiet = a.quiet})
if not ok then p:error(tostring(err)) end

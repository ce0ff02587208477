-- Checks a rerun against the runs it repeats: every run the two trees share must be the same
-- bit for bit (harness/compare.lua says what "the same" covers), and the ratio of their run
-- times says how much faster or slower the rerun was.
--
--   dgalua scripts/compare_runs.lua results/study/lowdata /tmp/rerun/lowdata [--out FILE.md]
--
-- Exits non-zero when a shared run differs, naming it and its first difference.
local argparse = require "argparse"
require "cli.args"   -- usage errors exit with status 2
local compare = require "harness.compare"
local runinfo = require "util.runinfo"

local p = argparse("compare_runs.lua", "Whether the runs two trees share are the same, bit for bit, "
                   .. "and their run times.")
p:argument("a", "The first tree of run directories (<cell>/seed-<s>/summary.json under it).")
p:argument("b", "The second tree (the same command, run again).")
p:option("--out", "Also write the summary to this markdown file.")
local a = p:parse(arg)
if a.out then dga.check_output(a.out, {a = a.a, b = a.b}) end

local ok, res = pcall(compare.trees, a.a, a.b)
if not ok then p:error(tostring(res)) end
local md = compare.markdown(a.a, a.b, res)
io.write(md)
if a.out then runinfo.write_atomic(a.out, md) end
if #res.different > 0 then os.exit(1) end
if res.compared == 0 then
    io.stderr:write("compare_runs: no run is in both trees\n")
    os.exit(1)
end

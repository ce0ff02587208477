-- Calibrates DGA's fixed step size once: a small sweep of eta on one target and one seed,
-- short runs of lowdata's quick model. The chosen value is frozen as ETA in lowdata.lua,
-- recover.lua and mmlu_dist.lua (with the sweep's result in a comment there).
--
--   dgalua scripts/calibrate_eta.lua [--etas 0.3,1,3,10,30] [--jobs 2] [--csv docs/calibrate_eta.csv]
--
-- Runs `lowdata.lua --quick --targets us_legislation --seeds 1 --calibrate ETAS` (DGA with
-- beta = 1 and each fixed eta, plus the adaptive eta for reference), then writes one CSV row per
-- eta: final, best and final-minus-best specific loss, spikes, mean L1 change of the weights per
-- update and mean effective eta, read from the runs' summaries. The choice rule: the lowest
-- final specific loss; ties within 0.01 go to the smaller eta (the weights move less).
local C = require "harness.cells"
local argparse = require "argparse"
local runinfo = require "util.runinfo"
local csvlog = require "util.csvlog"

local p = argparse("calibrate_eta.lua", "Calibrate DGA's fixed step size (one target, one seed, short runs).")
p:option("--etas", "Fixed step sizes to try.", "0.3,1,3,10,30")
p:option("--target", "Specific domain.", "us_legislation")
p:option("--seed", "Training seed.", "1")
p:option("--jobs", "Processes.", "2")
p:option("--threads", "OpenBLAS threads per process.", "1")
p:option("--out", "Run directory.", "runs/calibrate_eta")
p:option("--cache", "Store cache.")
p:option("--corpus", "Corpus directory.")
p:option("--csv", "The result table.", "docs/calibrate_eta.csv")
local a = p:parse(arg)

local here = arg[0]:match("^(.*)/[^/]*$") or "."
local exe = arg[-1] or "dgalua"
local cmd = {exe, here .. "/../experiments/lowdata.lua", "--quick", "--no-plot", "--targets", a.target, "--seeds", a.seed,
             "--jobs", a.jobs, "--threads", a.threads, "--out", a.out, "--calibrate", a.etas}
if a.cache then cmd[#cmd + 1] = "--cache"; cmd[#cmd + 1] = a.cache end
if a.corpus then cmd[#cmd + 1] = "--corpus"; cmd[#cmd + 1] = a.corpus end
local quoted = {}
for i, c in ipairs(cmd) do quoted[i] = "'" .. c:gsub("'", "'\\''") .. "'" end
io.stderr:write(table.concat(quoted, " "), "\n")
local ok = os.execute(table.concat(quoted, " "))
if not ok then error("calibrate_eta: lowdata.lua failed", 0) end

local report = require "harness.report"
local col = report.collect(a.out)
local rows, best = {}, nil
for _, id in ipairs(col.order) do
    local c = col.cells[id]
    for _, m in pairs(c.seeds) do
        local r = {policy = c.label, eta = m.eta_fixed or "std", specific_final = m.specific_final,
                   specific_best = m.specific_best, specific_gap = m.specific_gap, spikes = m.spikes,
                   l1_mean = m.l1_mean, eta_mean = m.eta_mean, epochs_max = m.epochs_max}
        rows[#rows + 1] = r
        if m.eta_fixed and m.specific_final then
            if not best or m.specific_final < best.specific_final - 0.01
               or (math.abs(m.specific_final - best.specific_final) <= 0.01 and m.eta_fixed < best.eta) then
                best = r
            end
        end
    end
end
table.sort(rows, function(x, y)
    local ex, ey = type(x.eta) == "number" and x.eta or math.huge, type(y.eta) == "number" and y.eta or math.huge
    return ex < ey
end)
runinfo.mkdir_p((a.csv:match("^(.*)/[^/]*$")) or ".")
local tmp = a.csv .. ".tmp"
os.remove(tmp)
local cols = {"policy", "eta", "specific_final", "specific_best", "specific_gap", "spikes", "l1_mean",
              "eta_mean", "epochs_max"}
local log = csvlog.open(tmp, cols)
for _, r in ipairs(rows) do log:write(r) end
log:close()
os.rename(tmp, a.csv)
local exp = require "harness.experiment"
exp.print_table(rows, {{"policy", "%s"}, {"eta", "%s"}, {"specific_final", "%.4f"}, {"specific_gap", "%.4f"},
                       {"spikes", "%d"}, {"l1_mean", "%.4f"}, {"eta_mean", "%.3g"}})
print(string.format("chosen: eta = %s (lowest final specific loss; ties within 0.01 to the smaller eta); "
                    .. "table: %s", best and tostring(best.eta) or "none", a.csv))
C.note(a.out .. "/chosen.txt", (best and tostring(best.eta) or "none") .. "\n")

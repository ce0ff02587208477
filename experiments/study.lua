-- The whole study in one command: every experiment's cells as resumable sweeps, then the
-- report (docs/results.md, generated from the run directories).
--
--   dgalua experiments/study.lua [--jobs 2] [--seeds 1,2,3] [--quick] [--out runs/study]
--
-- Runs, in this order, each into <out>/<experiment>: lowdata, mmlu_dist, recover, quickstart,
-- with the same --seeds, --data-seed, --jobs and --threads; --quick passes through. An
-- interrupted study resumes where it stopped when run again (finished cells are skipped).
-- Then scripts/report.lua writes <docs>/results.md and its figures (default docs/; with
-- --quick <out>/docs, so a smoke run never replaces the committed results).
--
-- Time, estimated from timed cells (CPU seconds, /usr/bin/time, one thread each, measured on
-- 2026-11-24 while the machine was shared, so per-op times are if anything high): a full-size
-- lowdata cell at 120 of its 600 steps took 7.2 s (natural) and 10.6 s (DGA + EMA, k = 64) after
-- 2.3 s of setup, i.e. 36 s and 53 s for a whole cell. From those, by steps, alignment batches
-- and evaluation size:
--   lowdata    63 runs (3 targets x 7 policies x 3 seeds)                   ~3,000 s
--   mmlu_dist  90 runs (2 specific sets x 15 rows x 3 seeds; ~10 s setup each) ~5,400 s
--   recover    42 runs (3 DGA + 11 static mixtures x 3 seeds; 1,200 steps)   ~3,300 s
--   quickstart  9 runs (demo size), store builds, report                      ~  400 s
-- about 12,100 CPU seconds: 1.7 hours on 2 cores with --jobs 2, 1.9 hours with the serial
-- parts (setup in each parent, the last cell of each experiment alone), under the 2.5 hours
-- allowed. --quick: a few minutes on an idle machine.
-- Measured (docs/results.md, "How long it took", from the runs' own times) on 2026-11-25, a
-- 2-core Zen 3 VM without AVX-512: the runs' times add up to 8,071 s (lowdata), 11,345 s
-- (mmlu_dist), 4,164 s (recover) and 126 s (quickstart), but 143 of the 204 runs were made by a
-- build whose exp loops GCC left scalar on AVX2 (fixed since: -fno-trapping-math in the
-- Makefile, same bits), which made them 1.3-2.3x slower. With the fixed build lowdata took 0.70 h
-- from scratch (docs/reproduction.md: all 63 runs the same bit for bit), recover 0.59 h and
-- quickstart 0.02 h; mmlu_dist, scaled, about 1.0 h: about 2.3 hours in all. It resumes across
-- sessions (--out results/study keeps the committed records).
local argparse = require "argparse"
local runinfo = require "dgalib.runinfo"

local p = argparse("study.lua", "Run the whole study (every experiment, every seed) and write the report.")
p:flag("--quick", "Every experiment's small configuration.")
p:option("--out", "Directory of the study's runs.", "runs/study")
p:option("--docs", "Where results.md and the figures go (default: docs, or <out>/docs with --quick).")
p:option("--seeds", "Training seeds.", "1,2,3")
p:option("--data-seed", "Data seed (store, clustering, splits).", "1")
p:option("--jobs", "Cells run in parallel.", "2")
p:option("--threads", "OpenBLAS threads per process.", "1")
p:option("--cache", "Store cache.")
p:option("--corpus", "Corpus directory.")
p:option("--only", "Run only these experiments (comma separated).")
p:flag("--no-report", "Skip the report.")
local a = p:parse(arg)

local here = arg[0]:match("^(.*)/[^/]*$") or "."
local exe = arg[-1] or "dgalua"
local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local EXPERIMENTS = {"lowdata", "mmlu_dist", "recover", "quickstart"}
local only
if a.only then
    only = {}
    for v in a.only:gmatch("[^,]+") do only[v] = true end
end
local failed = {}
local t_all = runinfo.now()
for _, name in ipairs(EXPERIMENTS) do
    if not only or only[name] then
        local cmd = {exe, here .. "/" .. name .. ".lua", "--out", a.out .. "/" .. name, "--seeds", a.seeds,
                     "--data-seed", a.data_seed, "--jobs", a.jobs, "--threads", a.threads, "--no-plot"}
        -- quickstart is the short demo: its small configuration in the study too.
        if a.quick or name == "quickstart" then cmd[#cmd + 1] = "--quick" end
        if a.cache then cmd[#cmd + 1] = "--cache"; cmd[#cmd + 1] = a.cache end
        if a.corpus then cmd[#cmd + 1] = "--corpus"; cmd[#cmd + 1] = a.corpus end
        local parts = {}
        for i, c in ipairs(cmd) do parts[i] = q(c) end
        local line = table.concat(parts, " ")
        io.stderr:write(string.format("== study: %s\n%s\n", name, line))
        local t0 = runinfo.now()
        local ok = os.execute(line)
        io.stderr:write(string.format("== study: %s %s in %.0f s\n", name, ok and "finished" or "FAILED",
                                      runinfo.now() - t0))
        if not ok then failed[#failed + 1] = name end
    end
end
if not a.no_report then
    local report = require "report"
    report.results(a.out, a.docs or (a.quick and (a.out .. "/docs") or "docs"),
                   {plot = true, note = a.quick and "A --quick smoke run: small models, short runs; its numbers "
                                                    .. "exercise the pipeline and support no finding." or nil})
end
io.stderr:write(string.format("== study: %.0f s in all\n", runinfo.now() - t_all))
if #failed > 0 then
    io.stderr:write("study: failed: " .. table.concat(failed, ", ") .. "\n")
    os.exit(1)
end

-- The whole study in one command: every experiment's cells as resumable sweeps, then the
-- report (docs/results.md, generated from the run directories).
--
--   dgalua scripts/study.lua [--jobs 2] [--seeds 1,2,3] [--quick] [--out runs/study]
--
-- Runs every experiment descriptor under experiments/ (harness/descriptor.lua) that takes part
-- in the study, in their `order`, each into <out>/<experiment>, with the same --seeds,
-- --data-seed, --jobs and --threads and the descriptor's own study.args (quickstart: --quick;
-- under --quick its study.quick_args when it has them); --quick passes through, and runs one
-- seed unless --seeds says otherwise. A new experiment file joins the study with no edit here. An
-- interrupted study resumes where it stopped when run again (finished cells are skipped).
-- Then scripts/report.lua writes <docs>/results.md and its figures (default docs/; with
-- --quick <out>/docs, so a smoke run never replaces the committed results).
--
-- How long it takes, measured (never estimated here, so this comment cannot go stale): the
-- committed study's time from its sittings' logs and run records, and --quick's, are in
-- docs/reproduction.md (scripts/reproduction.lua --a-log/--quick-log); docs/study.md says
-- what each experiment costs per run and why the whole study takes what it does.
local argparse = require "argparse"
require "cli.args"   -- usage errors exit with status 2
local runinfo = require "util.runinfo"

local p = argparse("study.lua", "Run the whole study (every experiment, every seed) and write the report.")
p:flag("--quick", "Every experiment's small configuration.")
p:option("--out", "Directory of the study's runs.", "runs/study")
p:option("--docs", "Where results.md and the figures go (default: docs, or <out>/docs with --quick).")
p:option("--seeds", "Training seeds (default 1,2,3; with --quick, 1: a smoke run of the pipeline).")
p:option("--data-seed", "Data seed (store, clustering, splits).", "1")
p:option("--jobs", "Cells run in parallel.", "2")
p:option("--threads", "OpenBLAS threads per process.", "1")
p:option("--cache", "Store cache.")
p:option("--corpus", "Corpus directory (default: data/corpus or ../shared/data/corpus).")
p:option("--mmlu", "MMLU directory, for the experiments that read it (default: data/mmlu or ../shared/data/mmlu).")
p:option("--only", "Run only these experiments (comma separated).")
p:option("--experiments", "Directory of experiment descriptors (default: the repository's experiments/).")
p:flag("--no-report", "Skip the report.")
local a = p:parse(arg)
a.seeds = a.seeds or (a.quick and "1" or "1,2,3")

local here = arg[0]:match("^(.*)/[^/]*$") or "."
local exe = arg[-1] or "dgalua"
local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- Every experiment under --experiments whose descriptor takes part in the study, in its order.
local descriptor = require "harness.descriptor"
local experiments = {}
for _, d in ipairs(descriptor.list(a.experiments or (here .. "/../experiments"))) do
    if d.study ~= false then experiments[#experiments + 1] = d end
end
local only
if a.only then
    only = {}
    for v in a.only:gmatch("[^,]+") do only[v] = true end
end
local failed = {}
local t_all = runinfo.now()
for _, d in ipairs(experiments) do
    local name = d.name
    if not only or only[name] then
        local cmd = {exe, d.path, "--out", a.out .. "/" .. name, "--seeds", a.seeds,
                     "--data-seed", a.data_seed, "--jobs", a.jobs, "--threads", a.threads, "--no-plot"}
        -- the descriptor's own arguments for the study (its quick_args under --quick)
        local extra = type(d.study) == "table" and ((a.quick and d.study.quick_args) or d.study.args) or {}
        local quick = a.quick
        for _, v in ipairs(extra) do
            if v == "--quick" then quick = true else cmd[#cmd + 1] = v end
        end
        if quick then cmd[#cmd + 1] = "--quick" end
        if a.cache then cmd[#cmd + 1] = "--cache"; cmd[#cmd + 1] = a.cache end
        if a.corpus then cmd[#cmd + 1] = "--corpus"; cmd[#cmd + 1] = a.corpus end
        if a.mmlu then cmd[#cmd + 1] = "--mmlu"; cmd[#cmd + 1] = a.mmlu end
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
if a.no_report then
    io.stderr:write("== study: no report\n")
else
    local report = require "harness.report"
    local t0 = runinfo.now()
    report.results(a.out, a.docs or (a.quick and (a.out .. "/docs") or "docs"),
                   {plot = true, note = a.quick and "A --quick smoke run: small models, short runs; its numbers "
                                                    .. "exercise the pipeline and support no finding." or nil})
    io.stderr:write(string.format("== study: report in %.0f s\n", runinfo.now() - t0))
end
io.stderr:write(string.format("== study: %.0f s in all\n", runinfo.now() - t_all))
if #failed > 0 then
    io.stderr:write("study: failed: " .. table.concat(failed, ", ") .. "\n")
    os.exit(1)
end

-- The study's report, generated from the run directories alone: docs/results.md and its
-- figures, or the README's results digest (harness/report.lua holds the code).
--
--   dgalua scripts/report.lua [--study runs/study] [--docs docs] [--no-plot] [--note TEXT]
--   dgalua scripts/report.lua --study results/study --readme README.md
--   dgalua scripts/report.lua --study results/study --against results/study_v4096 --against-note TEXT
--     (results.md also says where the other study's verdicts agree, claim by claim)
-- Required as a module (require "report") it is harness/report.lua and runs nothing.
if ... == "report" then return require "harness.report" end
require("harness.report").main({...})

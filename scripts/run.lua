-- A generic runner: one trainer configuration from a Lua file, with --set overrides.
--
--   dgalua scripts/run.lua CONFIG.lua [--set key=value ...] [--out DIR] [--resume] [--overwrite]
--
-- CONFIG.lua returns a trainer configuration table (scripts/trainer.lua documents its
-- fields; experiments/configs/example.lua is a small one), or a function(args) returning
-- one (args: the parsed options). The run goes through require("trainer").run. The run
-- directory is --out, else the config's run_dir, else runs/<config file name>.
-- --set applies cli.overrides to the table (unknown keys and wrong types are errors).
local argparse = require "argparse"
local overrides = require "cli.overrides"
local args = require "cli.args"

local p = argparse("run.lua", "Train one configuration given as a Lua file.")
p:argument("config", "A Lua file returning a trainer configuration table.")
p:option("--set", "Override a config field by dotted path (optimizer.lr=3e-3, steps=100, "
         .. "policy.beta=0.1, ...). Repeatable."):count("*"):argname("<key=value>")
    :convert(overrides.parse)
p:option("--out", "The run directory (default: the config's run_dir, else runs/<config name>).")
p:flag("--resume", "Continue the run directory's last checkpoint.")
p:flag("--overwrite", "Replace a run the directory already holds.")
p:option("--threads", "OpenBLAS threads."):convert(args.int(1))
p:flag("--quiet", "No progress line.")
local a = p:parse(arg)
if a.threads and dga.set_threads then dga.set_threads(a.threads) end

local chunk, err = loadfile(a.config)
if not chunk then p:error("cannot load " .. a.config .. ": " .. tostring(err)) end
local ok, cfg = pcall(chunk)
if not ok then p:error(a.config .. ": " .. tostring(cfg)) end
if type(cfg) == "function" then
    ok, cfg = pcall(cfg, a)
    if not ok then p:error(a.config .. ": " .. tostring(cfg)) end
end
if type(cfg) ~= "table" then
    p:error(a.config .. ": expected the file to return a configuration table, got " .. type(cfg))
end

local name = a.config:match("([^/]+)%.lua$") or a.config:match("([^/]+)$")
cfg.run_dir = a.out or cfg.run_dir or ("runs/" .. name)
cfg.name = cfg.name or name
local oks, e = pcall(overrides.apply, cfg, a.set)
if not oks then p:error(tostring(e)) end
-- A misspelt key in the file is refused here, naming the file, before anything is built.
local config = require "trainer.config"
local okc, ec = pcall(config.check_keys, cfg)
if not okc then p:error(a.config .. ": " .. tostring(ec):gsub("^trainer: ", "")) end

local trainer = require "trainer"
local topts = {resume = a.resume or nil, overwrite = a.overwrite or nil, quiet = a.quiet or nil}
if a.resume and not trainer.latest_checkpoint(cfg.run_dir) then
    p:error("--resume: no checkpoint in " .. cfg.run_dir)
end
local s = trainer.run(cfg, topts)
-- Under mpirun the ranks of a data-parallel run hold the same summary: rank 0 prints it.
if require("trainer.data_parallel").new(cfg).rank ~= 0 then return end
print(string.format("%s: step %d, specific loss %s, generic loss %s  (%s)", s.name or cfg.name,
                    s.step or -1,
                    s.specific_loss and string.format("%.4f", s.specific_loss) or "-",
                    s.generic_loss and string.format("%.4f", s.generic_loss) or "-", cfg.run_dir))

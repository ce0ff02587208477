-- The trainer of an online data-mixing run.
--
--   local trainer = require "trainer"
--   local summary = trainer.run(cfg)                    -- a fresh run
--   local summary = trainer.run(cfg, {resume = true})   -- continue cfg.run_dir's last checkpoint
--   local summary = trainer.resume(run_dir)             -- the same from the run directory alone
--   dgalua scripts/trainer.lua --resume RUN_DIR [--steps N] [--quiet]     (command line)
--
-- The parts, one job each, under scripts/trainer/:
--   run.lua         the run and its loop (train)
--   config.lua      defaults and checks
--   sources.lua     the data: domains, budgets, hold-outs, the specific and basis sets
--   space.lua       the mixture space the policy weighs: leaf domains or basis distributions
--   align.lua       an alignment round and its normalisation
--   checkpoint.lua  the checkpoint schema
-- The run directory it writes (config.lua and data/, metrics.csv, weights.csv,
-- alignments.csv, policy.csv, epochs.csv, domains.csv, events.log, checkpoints and "latest")
-- is the run-directory module's, scripts/rundir/init.lua, which describes every file and
-- reads them back. Only `seconds` differs between an interrupted-and-resumed run and an
-- uninterrupted one (same seed, same thread count): resume truncates the CSVs to the
-- checkpoint's step (a torn last line included) and appends. The sampling weights in
-- weights.csv are, for k > sparse_k, only the entries above weights_min (default 1e-3 / k:
-- a thousandth of the uniform share, so DGA's floor weights are not written k times a round).
--
-- Configuration (defaults in trainer/config.lua):
--   run_dir, name, seed, steps, batch, T_r, eval_every, checkpoint_every (multiple of
--   eval_every; 0 = only at the end), eval_batch, align_batch, clip, threads
--   model     {layers, width, heads}     (context = seq_len - 1 and vocab come from the data)
--   optimizer {lr, weight_decay, beta1, beta2, eps, decay, clip}
--   schedule  {kind = "cosine"|"linear"|"constant", warmup, total (default steps), min_lr}
--   data:  store = {dir=, level=} (a domain store)  OR  domains = {int32 [n_i, L], ...}
--          domain_names (optional list), budget (sequences: a number or a list per domain)
--          or budget_tokens (the same in tokens, rounded down to whole sequences), epoch_cap
--          generic_heldout = int32 [m, L] (optional; otherwise `heldout_per_domain` sequences
--          from the end of domains are held out of training, up to generic_max)
--   specific  {train = int32 [n, L], heldout = int32 [m, L]}
--   basis     list of {name=, heldout = int32 [m, L], histogram = float32 k (dist mode)}
--   dist      true: distribution reweighting over the basis histograms (P = their columns)
--   policy    {name = "uniform"|"natural"|"importance"|"dga"|"dga_dist"|..., <options>}
--   is_histogram  float32 k (the importance policy's histogram; ctx.is_histogram)
--   eval_progress_min  the final evaluation prints a line per held-out set when they hold at
--             least this many sequences in all (default 2048)
--   align     {normalize = "none"|"cosine"|"mean_norm", method = "exact"|"fd"|"jvp", fd_eps,
--             lr_scale = false (true: alignments times the current lr)}
--   data_parallel  under mpirun, train one model over the ranks (default true; batch is the
--             global batch; README "Scaling out"); false, or env DGA_DATA_PARALLEL=0: every
--             rank runs alone
--   check_replicas  compare the ranks' parameters at every metrics row, fail on a mismatch
--             (default false; env DGA_CHECK_REPLICAS=1)
--   overlap_allreduce  data parallel: start summing each block's gradient over the ranks as
--             soon as backward finishes it (default true; false, or env DGA_OVERLAP_ALLREDUCE=0:
--             one all-reduce after the backward; the same losses at two ranks)
-- Options (opts): resume, overwrite (replace a run already in run_dir), quiet, stop_at (a metrics step: stop there cleanly, with a
-- checkpoint), hooks = {after_step = fn(step, run), before_pointer = fn(step, run)}.
local config = require "trainer.config"
local run = require "trainer.run"
local rundir = require "rundir"
local sources = require "trainer.sources"

local M = {}

M.defaults = config.defaults
M.new = run.new
M.run = run.run
M.resume = run.resume
M.list_checkpoints = rundir.list_checkpoints
M.latest_checkpoint = rundir.latest_checkpoint
M.save_run_config = rundir.save_config
M.load_run_config = rundir.load_config
M.is_tensor = sources.is_tensor
M.rows_to_io = sources.rows_to_io
M.eval_seqs = sources.eval_seqs

local function main(args)
    require "cli.args"   -- argparse errors exit with status 2, like every tool
    local argparse = require "argparse"
    local p = argparse("trainer.lua", "Continue a training run from its last checkpoint.")
    p:option("--resume", "The run directory (config.lua, data/, ckpt-*.safetensors, latest).")
        :count(1)
    p:option("--steps", "Train up to this many steps (default: the configured number).")
        :convert(math.tointeger)
    p:option("--threads", "OpenBLAS threads."):convert(math.tointeger)
    p:flag("--quiet", "No progress line.")
    local a = p:parse(args)
    if a.threads and dga.set_threads then dga.set_threads(a.threads) end
    local s = M.resume(a.resume, {steps = a.steps}, {quiet = a.quiet})
    if s.note and a.quiet then io.stderr:write(s.note, "\n") end
    print(string.format("%s: step %d, specific loss %.4f, generic loss %s", s.name,
                        s.step or -1, s.specific_loss or 0 / 0,
                        s.generic_loss and string.format("%.4f", s.generic_loss) or "-"))
end

local modname = ...
if modname ~= "trainer" and type(arg) == "table" and arg[0] and arg[0]:match("trainer%.lua$") then
    main({...})
end

return M

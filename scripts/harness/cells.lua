-- What the experiments (experiments/*.lua, harness/descriptor.lua) share: the command line,
-- the DGA variants, one trained cell, and the metrics read back from a run directory, with
-- what each metric means (METRIC_DOC, the notes.md of every experiment).
--   local C = require "harness.cells"
--
-- The protocol (harness/sweep.lua): every (cell, seed) runs in <out>/<cell>/seed-<s> and ends
-- with a summary.json holding the flat metrics below, so the report (scripts/report.lua)
-- reads everything from the run directories.
local exp = require "harness.experiment"
local rundir = require "rundir"
local runinfo = require "util.runinfo"

local C = {}

-- What the metrics of C.metrics mean (notes.md's column table).
C.METRIC_DOC = {
    specific_final = "specific held-out loss at the last evaluation (nats per token)",
    specific_best = "lowest specific held-out loss over the run's evaluations",
    specific_gap = "specific_final - specific_best: how much the loss rose after its best (overfitting)",
    spikes = "evaluations whose specific loss rose above the previous one by more than 1% of the running minimum",
    generic_final = "generic held-out loss at the last evaluation (documents kept out of the store)",
    basis_mean = "mean held-out loss of the basis sets at the last evaluation",
    updates = "policy updates (weights.csv rows after step 0)",
    l1_mean = "mean L1 change of the sampling weights per update (0 for fixed policies)",
    eta_mean = "mean step size DGA used per update",
    epochs_max = "most epochs any domain started",
    epochs_mean = "mean epochs over the domains drawn from",
}

-- The range a metric's value can take, where it has one ({lo, hi}, either may be nil): a
-- printed interval is clipped to it (util/stats.format). Differences have no range.
C.METRIC_RANGE = {
    specific_final = {0}, specific_best = {0}, specific_gap = {0}, spikes = {0}, generic_final = {0},
    basis_mean = {0}, updates = {0}, l1_mean = {0, 2}, eta_mean = {0}, epochs_max = {0}, epochs_mean = {0},
    mmlu_b_loss = {0}, answer_nll = {0}, accuracy = {0, 100}, accuracy_top_letter_share = {0, 100},
    tv_planted = {0, 1}, tv_natural = {0, 1}, w_first = {0, 1}, mass_both = {0, 1},
}

-- A loss spike: an evaluation whose specific held-out loss rose, since the previous
-- evaluation, by more than SPIKE_TAU times the running minimum of the evaluations before it.
-- 1% of a loss near 6 is 0.06 nats: above the eval-to-eval noise of a 64-sequence held-out set
-- late in training (a few thousandths), below the rises that repeated data causes.
C.SPIKE_TAU = 0.01

function C.count_spikes(values, tau)
    tau = tau or C.SPIKE_TAU
    local n, run_min = 0, math.huge
    for i = 2, #values do
        run_min = math.min(run_min, values[i - 1])
        if values[i] - values[i - 1] > tau * run_min then n = n + 1 end
    end
    return n
end

-- The argparse parser of an experiment: the shared options, then the protocol's.
function C.parser(name, description, out)
    local argparse = require "argparse"
    local p = argparse(name, description)
    exp.add_common_options(p, {out = out})
    require("harness.sweep").add_options(p)
    return p
end

function C.parse(p, argv)
    local a = p:parse(argv or arg)
    if a.threads and dga.set_threads then dga.set_threads(a.threads) end
    a.data_seed = a.data_seed or 1
    return a
end

-- The DGA rows of an experiment: for each beta, the fixed step (the paper's form, `eta`
-- calibrated once by scripts/calibrate_eta.lua) and the adaptive one (eta = 0.5 / std(a)).
-- Each spec carries `label`, the name of its cells; the trainer never sees it.
function C.dga_variants(name, betas, eta, extra)
    local out = {}
    for _, beta in ipairs(betas) do
        local tag = beta == 1 and "" or "_ema"
        for _, mode in ipairs{"fixed", "std"} do
            local spec = {name = name, beta = beta, eta_mode = mode, label = name .. tag .. "_" .. mode}
            if mode == "fixed" then spec.eta = eta end
            for key, v in pairs(extra or {}) do spec[key] = v end
            out[#out + 1] = spec
        end
    end
    return out
end

-- The label of a policy spec (from the defaults or --policy) and the spec the trainer gets.
function C.label(spec) return spec.label or spec.name end

function C.policy_config(spec) return require("harness.sweep").policy_config(spec) end

-- The policy specs to run: --policy's list when given (harness/sweep), else the defaults.
function C.policies(a, defaults) return require("harness.sweep").policies(a, defaults) end

-- Trains one cell in `dir` from `seed` with the trainer options the sweep gives (topts:
-- resume from a checkpoint, overwrite a partial run), after the --set overrides; returns its
-- flat metrics (C.metrics plus `extra`) and the trainer's summary.
function C.train(cfg, seed, dir, a, topts, extra)
    local sweep = require "harness.sweep"
    cfg.run_dir, cfg.seed = dir, seed
    cfg.progress = (a.jobs or 1) <= 1
    sweep.overrides(a, cfg)
    local s = require("trainer").run(cfg, topts or {})
    local m = C.metrics(dir)
    for key, v in pairs(extra or {}) do m[key] = v end
    return m, s
end

local function numbers(recs, column)
    local out = {}
    for _, r in ipairs(recs or {}) do
        local v = r[column]
        if type(v) == "number" and v == v then out[#out + 1] = v end
    end
    return out
end

-- Flat metrics of a finished run directory:
--   specific_final, specific_best, specific_gap (final - best), spikes (C.count_spikes over
--   the specific losses of every evaluation), generic_final, basis_mean (mean basis loss,
--   when there are bases), updates (policy updates), l1_mean (mean L1 change of the
--   sampling weights per update; 0 for fixed policies), eta_mean (mean effective eta),
--   epochs_max (most epochs any domain started), epochs_mean (mean over the domains drawn
--   from), epochs_<domain> for the domains listed in `track` (e.g. the one IS favours).
function C.metrics(dir)
    local run = rundir.open(dir)
    local recs = run:metrics()
    local spec = numbers(recs, "specific_loss")
    local m = {}
    if #spec > 0 then
        local best = math.huge
        for _, v in ipairs(spec) do best = math.min(best, v) end
        m.specific_final, m.specific_best = spec[#spec], best
        m.specific_gap = spec[#spec] - best
        m.spikes = C.count_spikes(spec)
    end
    local gen = numbers(recs, "generic_loss")
    if #gen > 0 then m.generic_final = gen[#gen] end
    local last = run:last_eval()
    m.basis_mean = last and last.basis_mean
    m.updates, m.l1_mean = C.weight_changes(run:weights())
    -- The policy's logged eta at each update (policy.csv; alignments.csv in older runs).
    local eta, n_eta = 0, 0
    for _, r in ipairs(run:policy_log()) do
        if tonumber(r.eta) then eta, n_eta = eta + tonumber(r.eta), n_eta + 1 end
    end
    if n_eta > 0 then m.eta_mean = eta / n_eta end
    m.epochs_max, m.epochs_mean = C.final_epochs(run:epochs())
    return m
end

-- Policy updates and the mean L1 change of the sampling weights per update, from weights.csv
-- (the weights applied at step 0 and at every update), so it is measured the same way for
-- every policy, whatever it logs. Beyond sparse_k domains weights.csv keeps only weights
-- above a thousandth of the uniform share; the rest count as 0.
function C.weight_changes(rows)
    local by_step, steps = {}, {}
    for _, r in ipairs(rows) do
        if not by_step[r.step] then by_step[r.step] = {}; steps[#steps + 1] = r.step end
        by_step[r.step][r.domain] = r.weight
    end
    table.sort(steps)
    local l1 = 0
    for i = 2, #steps do
        local a, b = by_step[steps[i - 1]], by_step[steps[i]]
        for d, w in pairs(b) do l1 = l1 + math.abs(w - (a[d] or 0)) end
        for d, w in pairs(a) do if b[d] == nil then l1 = l1 + math.abs(w) end end
    end
    local updates = math.max(0, #steps - 1)
    return updates, updates > 0 and l1 / updates or 0
end

-- The most epochs any domain started, and the mean over the domains drawn from, at the last
-- step of epochs.csv.
function C.final_epochs(rows)
    local final = 0
    for _, r in ipairs(rows) do if r.step > final then final = r.step end end
    local emax, esum, en = 0, 0, 0
    for _, r in ipairs(rows) do
        if r.step == final and (r.drawn or 0) > 0 then
            emax = math.max(emax, r.epochs)
            esum, en = esum + r.epochs, en + 1
        end
    end
    return emax, en > 0 and esum / en or 0
end

-- int32 [n, L] sequences from texts, or nil when they hold less than one sequence.
function C.seqs(tok, texts, L, max_seqs)
    if #texts == 0 then return nil end
    local ok, t = pcall(exp.text_seqs, tok, texts, L, max_seqs)
    if ok then return t end
    if tostring(t):find("not enough text", 1, true) then return nil end
    error(t, 0)
end

-- The leakage check on an experiment's real data path, before any training. Held-out rows
-- that share a stretch of text with an input (boilerplate the corpus repeats across
-- documents: licence headers, generated code) are dropped first (splits.decontaminate), and
-- the count is said; then splits.check_disjoint must find no held-out sequence in any input.
-- heldout: {name = int32 [n, L]}; inputs: {name = tensor or texts}. Returns the kept sets.
function C.check_leaks(heldout, inputs, tok)
    local splits = require "data.splits"
    local kept, dropped = splits.decontaminate{heldout = heldout, inputs = inputs, tok = tok}
    local names = {}
    for name in pairs(dropped) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do
        if dropped[name] > 0 then
            io.stderr:write(string.format("decontaminate: %d rows of held-out '%s' share text with a "
                                          .. "training input, dropped (%d kept)\n", dropped[name], name,
                                          kept[name]:shape()[1]))
        end
    end
    local r = splits.check_disjoint{heldout = kept, inputs = inputs, tok = tok}
    io.stderr:write(string.format("leakage check: %d held-out windows, %d input rows: no shared sequence\n",
                                  r.heldout_windows, r.input_rows))
    return kept, dropped
end

-- Rows of several [n_i, L] tensors stacked into one.
function C.cat(list)
    local n, L = 0, nil
    for _, t in ipairs(list) do
        local sh = t:shape()
        n, L = n + sh[1], sh[2]
    end
    local out = dga.zeros(n, L, "int32")
    local r = 1
    for _, t in ipairs(list) do
        local m = t:shape()[1]
        out:narrow(r, m):copy_(t)
        r = r + m
    end
    return out
end

-- Writes a small text file atomically (README of an output directory).
function C.note(path, text)
    runinfo.mkdir_p((path:match("^(.*)/[^/]*$")) or ".")
    runinfo.write_atomic(path, text)
end

return C

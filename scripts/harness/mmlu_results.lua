-- MMLU scores as lm-evaluation-harness reports them: accuracy and its standard error per
-- subject, per category and overall, as JSON and as a printed table.
--
--   local R = require "harness.mmlu_results"
--   local score = dga.mmlu_score(model, tok, questions, {shots = 5, dev = mm:split("dev")})
--   local summary = R.summarize(score.by_subject)       -- or {[subject] = {n=, correct=}}
--   local doc = R.document({[5] = summary}, {model = "ckpt/", split = "test"})
--   R.write("results.json", doc)
--   print(R.table(summary))
--
-- The document has the harness's top-level keys: "results" maps task names to metrics
-- ("mmlu", "mmlu_stem", ..., "mmlu_<subject>", each with "acc,none", "acc_stderr,none",
-- "alias" and, beyond the harness, "n"), "groups" the overall score and the four categories,
-- "group_subtasks" which subjects make each category, "n-shot" and "n-samples" per task, and
-- "config" (with, when the summary carries M.fit's record, how many prompts were shortened to
-- fit the context and the shots actually used). Several shot counts go in one file: the document is then keyed "<k>-shot", each
-- value shaped as above.
--
-- acc_stderr is the sample standard error of a mean of 0/1 outcomes, sqrt(p (1 - p) / (n - 1)),
-- as the harness computes it; it is null (JSON) for n < 2. A category's and the overall
-- accuracy are over all their questions (the harness's size-weighted mean), and their
-- standard error is the same formula over those questions.
local json = require "util.json"

local M = {}

-- The four categories and each subject's, as lm-evaluation-harness groups its mmlu_* tasks
-- (Gao et al., "A framework for few-shot language model evaluation", EleutherAI), so that
-- the numbers compare with its output. They come from the MMLU release's own table
-- (Hendrycks et al., 2021, "Measuring Massive Multitask Language Understanding", ICLR):
-- STEM, humanities, social sciences, and other (business, health, miscellaneous), with one
-- difference: the harness counts anatomy as STEM where the release counts it under health
-- (other). Hence 19 STEM, 13 humanities, 12 social-science and 13 other subjects.
M.CATEGORIES = {"stem", "humanities", "social_sciences", "other"}
M.CATEGORY_TITLES = {stem = "STEM", humanities = "humanities", social_sciences = "social sciences",
                     other = "other"}

M.SUBJECT_CATEGORY = {
    abstract_algebra = "stem", anatomy = "stem", astronomy = "stem", business_ethics = "other",
    clinical_knowledge = "other", college_biology = "stem", college_chemistry = "stem",
    college_computer_science = "stem", college_mathematics = "stem", college_medicine = "other",
    college_physics = "stem", computer_security = "stem", conceptual_physics = "stem",
    econometrics = "social_sciences", electrical_engineering = "stem", elementary_mathematics = "stem",
    formal_logic = "humanities", global_facts = "other", high_school_biology = "stem",
    high_school_chemistry = "stem", high_school_computer_science = "stem",
    high_school_european_history = "humanities", high_school_geography = "social_sciences",
    high_school_government_and_politics = "social_sciences", high_school_macroeconomics = "social_sciences",
    high_school_mathematics = "stem", high_school_microeconomics = "social_sciences",
    high_school_physics = "stem", high_school_psychology = "social_sciences",
    high_school_statistics = "stem", high_school_us_history = "humanities",
    high_school_world_history = "humanities", human_aging = "other", human_sexuality = "social_sciences",
    international_law = "humanities", jurisprudence = "humanities", logical_fallacies = "humanities",
    machine_learning = "stem", management = "other", marketing = "other", medical_genetics = "other",
    miscellaneous = "other", moral_disputes = "humanities", moral_scenarios = "humanities",
    nutrition = "other", philosophy = "humanities", prehistory = "humanities",
    professional_accounting = "other", professional_law = "humanities", professional_medicine = "other",
    professional_psychology = "social_sciences", public_relations = "social_sciences",
    security_studies = "social_sciences", sociology = "social_sciences", us_foreign_policy = "social_sciences",
    virology = "other", world_religions = "humanities",
}

-- The category of a subject; "other" for a subject outside the 57 (a custom CSV).
function M.category(subject) return M.SUBJECT_CATEGORY[subject] or "other" end

-- sqrt(p (1 - p) / (n - 1)), the sample standard error of a mean of n 0/1 outcomes; nil if n < 2.
function M.stderr(p, n)
    if n < 2 then return nil end
    return math.sqrt(p * (1 - p) / (n - 1))
end

local function metric(correct, n)
    local acc = n > 0 and correct / n or 0 / 0
    return {acc = acc, acc_stderr = n > 0 and M.stderr(acc, n) or nil, n = n, correct = correct}
end

-- by_subject: {[subject] = {n = , correct = }} (dga.mmlu_score's by_subject). Returns
-- {subjects = {[s] = metric}, categories = {[c] = metric}, overall = metric}, where a metric
-- is {acc, acc_stderr (nil when n < 2), n, correct}. Categories without questions are absent.
function M.summarize(by_subject)
    local out = {subjects = {}, categories = {}}
    local cat_n, cat_c, total_n, total_c = {}, {}, 0, 0
    for subject, r in pairs(by_subject) do
        local n, c = math.tointeger(r.n) or r.n, math.tointeger(r.correct) or r.correct
        if type(n) ~= "number" or type(c) ~= "number" or n < 0 or c < 0 or c > n then
            error(string.format("mmlu results: subject %s: expected 0 <= correct <= n, got correct=%s n=%s",
                                tostring(subject), tostring(r.correct), tostring(r.n)), 2)
        end
        out.subjects[subject] = metric(c, n)
        local cat = M.category(subject)
        cat_n[cat], cat_c[cat] = (cat_n[cat] or 0) + n, (cat_c[cat] or 0) + c
        total_n, total_c = total_n + n, total_c + c
    end
    for cat, n in pairs(cat_n) do out.categories[cat] = metric(cat_c[cat], n) end
    out.overall = metric(total_c, total_n)
    return out
end

-- How the prompts of one dga.mmlu_score call fitted the model's context: {shots (asked),
-- prompts, shortened (fewer shots than asked, or cut), truncated (cut from the left with no
-- shot left), shots_used (mean over the prompts), shots_used_min, shots_used_by_subject
-- ({[subject] = mean})}. The fields go into the document's config (via summary.fit).
function M.fit(score, shots)
    local by_subject, used_min = {}, shots
    for subject, r in pairs(score.by_subject) do
        by_subject[subject] = r.n > 0 and (r.shots_used or 0) / r.n or 0
    end
    local total = 0
    local per = score.shots
    for i = 1, score.n do
        local k = math.tointeger(per[i])
        total = total + k
        if k < used_min then used_min = k end
    end
    return {shots = shots, prompts = score.n, shortened = score.shortened or 0, truncated = score.truncated or 0,
            shots_used = score.n > 0 and total / score.n or shots, shots_used_min = used_min,
            shots_used_by_subject = by_subject}
end

-- The line that says a measurement is not what was asked for, or nil when every prompt fitted.
function M.fit_note(fit, context)
    if fit.shortened == 0 then return nil end
    local parts = {string.format("note: %d of %d %d-shot prompts did not fit the model's context of %d tokens",
                                 fit.shortened, fit.prompts, fit.shots, context)}
    if fit.shots > 0 then
        parts[#parts + 1] = string.format("shots were dropped from the end (%.2f used on average, %d at least)",
                                          fit.shots_used, fit.shots_used_min)
    end
    if fit.truncated > 0 then
        parts[#parts + 1] = string.format("%d prompts %swere cut from the left", fit.truncated,
                                          fit.shots > 0 and "still too long with no shot " or "")
    end
    return table.concat(parts, "; ")
end

local function sorted_keys(t)
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    table.sort(keys)
    return keys
end

-- The harness-shaped document for one shot count.
local function harness_doc(summary, shots, config)
    local results, groups, subtasks, nshot, nsamples = {}, {}, {}, {}, {}
    local function entry(m, alias)
        return {["acc,none"] = m.acc, ["acc_stderr,none"] = m.acc_stderr or M.NULL, n = m.n, alias = alias}
    end
    results.mmlu = entry(summary.overall, "mmlu")
    groups.mmlu = entry(summary.overall, "mmlu")
    subtasks.mmlu = {}
    for _, cat in ipairs(M.CATEGORIES) do
        local m = summary.categories[cat]
        if m then
            local name = "mmlu_" .. cat
            results[name] = entry(m, " - " .. M.CATEGORY_TITLES[cat])
            groups[name] = results[name]
            subtasks.mmlu[#subtasks.mmlu + 1] = name
            subtasks[name] = {}
        end
    end
    for _, subject in ipairs(sorted_keys(summary.subjects)) do
        local m = summary.subjects[subject]
        local name = "mmlu_" .. subject
        results[name] = entry(m, "  - " .. subject)
        local group = "mmlu_" .. M.category(subject)
        subtasks[group] = subtasks[group] or {}
        subtasks[group][#subtasks[group] + 1] = name
        nshot[name] = shots
        nsamples[name] = {original = m.n, effective = m.n}
    end
    nshot.mmlu = shots
    local cfg = {num_fewshot = shots}
    for k, v in pairs(config or {}) do cfg[k] = v end
    local fit = summary.fit
    if fit then
        cfg.prompts_shortened, cfg.prompts_truncated = fit.shortened, fit.truncated
        cfg.shots_used, cfg.shots_used_by_subject = fit.shots_used, fit.shots_used_by_subject
    end
    return {results = results, groups = groups, group_subtasks = subtasks, ["n-shot"] = nshot,
            ["n-samples"] = nsamples, config = cfg}
end

-- by_shots: {[shots] = summary}. One shot count: the harness document itself; several: a
-- document keyed "<k>-shot". config: extra fields for "config" (model, split, ...).
function M.document(by_shots, config)
    local shots = sorted_keys(by_shots)
    if #shots == 1 then return harness_doc(by_shots[shots[1]], shots[1], config) end
    local doc = {}
    for _, k in ipairs(shots) do doc[k .. "-shot"] = harness_doc(by_shots[k], k, config) end
    return doc
end

-- ------------------------------------------------------------------ JSON

-- JSON null (a Lua nil would drop the key), and the mark of an array that may be empty.
M.NULL, M.ARRAY = json.null, json.ARRAY

-- JSON text with sorted keys (the same results give the same bytes), written by util/json.lua
-- (the project's one JSON writer) with numbers in their shortest exact form.
function M.json(v) return json.encode(v, {indent = true, numbers = "shortest"}) .. "\n" end

-- Writes the document atomically.
function M.write(path, doc) dga.write_file_atomic(path, M.json(doc)) end

-- ------------------------------------------------------------------ the printed table

local function row(name, m)
    local se = m.acc_stderr and string.format("%6.2f", 100 * m.acc_stderr) or "     -"
    return string.format("%-40s %7d %7.2f %s", name, m.n, 100 * m.acc, se)
end

-- The overall score, the categories, then (unless opts.subjects == false) every subject.
function M.table(summary, opts)
    opts = opts or {}
    local lines = {string.format("%-40s %7s %7s %6s", opts.title or "MMLU", "n", "acc %", "+- %"),
                   row("all subjects", summary.overall)}
    for _, cat in ipairs(M.CATEGORIES) do
        local m = summary.categories[cat]
        if m then lines[#lines + 1] = row("  " .. M.CATEGORY_TITLES[cat], m) end
    end
    if opts.subjects ~= false then
        for _, subject in ipairs(sorted_keys(summary.subjects)) do
            lines[#lines + 1] = row("    " .. subject, summary.subjects[subject])
        end
    end
    return table.concat(lines, "\n")
end

return M

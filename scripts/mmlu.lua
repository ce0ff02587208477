-- MMLU accuracy of a checkpoint, per subject, per category and overall, written as
-- lm-evaluation-harness-shaped JSON (harness/mmlu_results.lua) and printed as a table.
--
--   dgalua scripts/mmlu.lua --checkpoint CKPT_DIR_OR_FILE [--shots 0,5] [--subjects a,b] \
--       [--split test] [--limit N] [--out results.json] [--mmlu DIR] [--tokenizer tok.json]
--
-- Each question is scored by the log-likelihood of the four answer letters after the prompt
-- (dga.mmlu_score); k-shot prompts take their examples from the subject's dev split. A prompt
-- longer than the model's context loses shots from its end until it fits, and one too long
-- even with no shot is cut from the left, as the harness cuts; either way a note line says how
-- many, and the JSON's config records prompts_shortened, prompts_truncated and the shots used. The tokenizer is the
-- checkpoint directory's tokenizer.json (or the one beside a .safetensors file) unless
-- --tokenizer is given.
local argparse = require "argparse"
local args = require "cli.args"
local R = require "harness.mmlu_results"

local parser = argparse("mmlu.lua", "MMLU accuracy of a checkpoint, per subject and category.")
parser:option("--checkpoint", "Checkpoint directory (from train.lua --save) or .safetensors file."):count(1)
parser:option("--shots", "Comma-separated few-shot counts, e.g. 0,5.", "0")
parser:option("--subjects", "Comma-separated subjects (default: all).")
parser:option("--split", "Questions scored: test, val, dev, or the halves a / b of test.", "test")
      :choices{"test", "val", "dev", "a", "b"}
parser:option("--seed", "Seed of the a / b halves.", "0"):convert(args.int())
parser:option("--limit", "At most this many questions per subject (0: all).", "0"):convert(args.int(0))
parser:option("--out", "Write the results here (JSON).")
parser:option("--mmlu", "MMLU directory (the release's dev/ val/ test/ CSVs; default: found as the experiments find it).")
parser:option("--tokenizer", "tokenizer.json (default: the checkpoint's).")
parser:option("--batch", "Prompts per forward pass (default: the model's batch).")
      :convert(args.int(1))
parser:option("--threads", "OpenBLAS threads."):convert(args.int(1))
parser:flag("--all-subjects", "Print every subject's row, not only the categories (with few subjects they are always printed).")
local opt = parser:parse()
if opt.out then
    dga.check_output(opt.out, {["--checkpoint"] = opt.checkpoint, ["--mmlu"] = opt.mmlu, ["--tokenizer"] = opt.tokenizer})
end

if opt.threads then dga.set_threads(opt.threads) end

local shots = {}
for item in opt.shots:gmatch("[^,]+") do
    local k = args.check_int(parser, item, "--shots", 0)
    if k > 5 then args.fail(parser, "--shots: at most 5 (the dev split has five questions per subject)") end
    shots[#shots + 1] = k
end
if #shots == 0 then args.fail(parser, "--shots: expected a comma-separated list such as 0,5") end

local data = require "data.corpus"
local mmlu_dir = data.require_mmlu(opt.mmlu)
local mm = dga.mmlu_load(mmlu_dir)

local known = {}
for _, s in ipairs(mm:subjects()) do known[s] = true end
local wanted
if opt.subjects then
    wanted = {}
    for s in opt.subjects:gmatch("[^,%s]+") do
        if not known[s] then
            args.fail(parser, string.format("--subjects: no subject '%s' in %s (subjects: %s)", s, mmlu_dir,
                                            table.concat(mm:subjects(), ", ")))
        end
        wanted[s] = true
    end
end

local questions, per_subject = {}, {}
for _, q in ipairs(mm:split(opt.split, opt.seed)) do
    if not wanted or wanted[q.subject] then
        per_subject[q.subject] = (per_subject[q.subject] or 0) + 1
        if opt.limit == 0 or per_subject[q.subject] <= opt.limit then questions[#questions + 1] = q end
    end
end
if #questions == 0 then error(string.format("%s: no %s questions for the subjects asked", mmlu_dir, opt.split), 0) end

local ck, tok, paths = require("data.model_dir").load(opt.checkpoint, {tokenizer = true, tokenizer_path = opt.tokenizer})
if not tok then
    error(string.format("%s has no tokenizer.json: give --tokenizer", opt.checkpoint), 0)
end
local model = ck.model
if tok:vocab_size() > model:config().vocab then
    error(string.format("the tokenizer has %d tokens, the model %s only %d", tok:vocab_size(), paths.model,
                        model:config().vocab), 0)
end

local dev = mm:split("dev")
local by_shots = {}
for _, k in ipairs(shots) do
    local score = dga.mmlu_score(model, tok, questions, {shots = k, dev = k > 0 and dev or nil, batch = opt.batch})
    local summary = R.summarize(score.by_subject)
    summary.fit = R.fit(score, k)
    by_shots[k] = summary
    local note = R.fit_note(summary.fit, model:config().context)
    if note then print(note) end
    local few = 0
    for _ in pairs(summary.subjects) do few = few + 1 end
    print(R.table(summary, {title = string.format("MMLU %s, %d-shot", opt.split, k),
                            subjects = opt.all_subjects or few <= 8}))
    print()
end

if opt.out then
    R.write(opt.out, R.document(by_shots, {model = opt.checkpoint, split = opt.split, limit = opt.limit,
                                           mmlu = mmlu_dir}))
    print("wrote " .. opt.out)
end

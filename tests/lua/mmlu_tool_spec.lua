-- scripts/mmlu.lua and harness/mmlu_results.lua: the harness's standard error, the subject ->
-- category table, the aggregation, the JSON document, and the tool end to end on a tiny
-- checkpoint directory (MMLU from DGA_SHARED_DATA; pending without it).
local dga = require "dga"
local h = require "tests.lua.helpers"
local R = require "harness.mmlu_results"

local shell_quote, read, contains = h.shell_quote, h.read, h.contains
local DGALUA = h.DGALUA
local ROOT = h.cwd()

local function near(a, b) return math.abs(a - b) <= 1e-12 end

describe("mmlu_results", function()
    it("acc_stderr is the sample standard error sqrt(p(1-p)/(n-1))", function()
        assert.is_true(near(R.stderr(0.4, 10), math.sqrt(0.4 * 0.6 / 9)))
        assert.is_true(near(R.stderr(0.25, 100), math.sqrt(0.25 * 0.75 / 99)))
        assert.are.equal(0, R.stderr(1, 5))
        assert.is_nil(R.stderr(1, 1))
    end)

    it("maps the 57 subjects to the four categories", function()
        local counts, n = {}, 0
        for _, cat in pairs(R.SUBJECT_CATEGORY) do
            counts[cat] = (counts[cat] or 0) + 1
            n = n + 1
        end
        assert.are.equal(57, n)
        assert.are.same({stem = 19, humanities = 13, social_sciences = 12, other = 13}, counts)
        assert.are.equal("stem", R.category("anatomy"))   -- the harness's grouping
        assert.are.equal("stem", R.category("abstract_algebra"))
        assert.are.equal("humanities", R.category("professional_law"))
        assert.are.equal("social_sciences", R.category("econometrics"))
        assert.are.equal("other", R.category("clinical_knowledge"))
        local dir = (os.getenv("DGA_SHARED_DATA") or (ROOT .. "/../shared/data")) .. "/mmlu"
        local ok, mm = pcall(dga.mmlu_load, dir)
        if ok then
            for _, s in ipairs(mm:subjects()) do assert.truthy(R.SUBJECT_CATEGORY[s], s) end
        end
    end)

    it("pools a category's and the overall score over their questions", function()
        local s = R.summarize{abstract_algebra = {n = 10, correct = 4}, anatomy = {n = 30, correct = 15},
                              philosophy = {n = 1, correct = 1}}
        assert.is_true(near(s.subjects.abstract_algebra.acc, 0.4))
        assert.are.equal(40, s.categories.stem.n)
        assert.is_true(near(s.categories.stem.acc, 19 / 40))
        assert.is_true(near(s.categories.stem.acc_stderr, math.sqrt((19 / 40) * (21 / 40) / 39)))
        assert.is_nil(s.categories.humanities.acc_stderr)          -- one question
        assert.is_nil(s.categories.other)
        assert.are.equal(41, s.overall.n)
        assert.is_true(near(s.overall.acc, 20 / 41))
        assert.has_error(function() R.summarize{anatomy = {n = 3, correct = 4}} end,
                         "mmlu results: subject anatomy: expected 0 <= correct <= n, got correct=4 n=3")
    end)

    it("writes the harness's layout, one document per shot count", function()
        local s = R.summarize{abstract_algebra = {n = 10, correct = 4}, philosophy = {n = 4, correct = 1}}
        local doc = R.document({[0] = s}, {model = "m"})
        assert.is_true(near(doc.results.mmlu["acc,none"], 5 / 14))
        assert.is_true(near(doc.results.mmlu_abstract_algebra["acc_stderr,none"], math.sqrt(0.24 / 9)))
        assert.are.equal(10, doc.results.mmlu_abstract_algebra.n)
        assert.are.same({"mmlu_stem", "mmlu_humanities"}, doc.group_subtasks.mmlu)
        assert.are.same({"mmlu_philosophy"}, doc.group_subtasks.mmlu_humanities)
        assert.are.equal(0, doc["n-shot"].mmlu_philosophy)
        assert.are.equal("m", doc.config.model)
        local two = R.document({[0] = s, [5] = s})
        assert.truthy(two["0-shot"].results.mmlu)
        assert.are.equal(5, two["5-shot"].config.num_fewshot)
        local text = R.json(doc)
        contains(text, '"acc,none": 0.4,')
        contains(text, '"mmlu_stem": [')
        assert.are.equal(text, R.json(doc))                          -- sorted keys: stable bytes
        assert.are.equal('{\n  "a": null,\n  "b": "x\\"y\\n"\n}\n', R.json{a = R.NULL, b = 'x"y\n'})
        local t = R.table(s)
        contains(t, "all subjects")
        contains(t, "  STEM")
        contains(t, "    philosophy")
    end)
end)

describe("mmlu.lua", function()
    local tmpdir
    local function tmp(name) return tmpdir .. "/" .. name end
    local function dgalua(a) return h.run(shell_quote(DGALUA) .. " " .. a, tmp("err.txt")) end
    local mmlu_dir = (os.getenv("DGA_SHARED_DATA") or (ROOT .. "/../shared/data")) .. "/mmlu"

    setup(function() tmpdir = h.tmpdir() end)
    teardown(function() h.rm(tmpdir) end)
    before_each(function()
        if not DGALUA then pending("DGALUA is not set (run through tests/run)") end
        if not pcall(dga.mmlu_load, mmlu_dir) then pending("no MMLU in " .. mmlu_dir) end
    end)

    it("scores a checkpoint directory and writes the harness JSON", function()
        -- a tiny model and a byte-level tokenizer (every MMLU text encodes)
        local tok = dga.tokenizer_train({"the answer is A B C D"}, {vocab = 260})
        local m = dga.gpt{layers = 1, width = 16, heads = 2, context = 64, vocab = tok:vocab_size(), batch = 4, seed = 1}
        require("data.model_dir").save(tmp("ck"), {model = m, tokenizer = tok})
        local tool = shell_quote(ROOT .. "/scripts/mmlu.lua")
        local code, out, err = dgalua(tool .. " --checkpoint " .. shell_quote(tmp("ck")) .. " --mmlu " ..
                                      shell_quote(mmlu_dir) .. " --subjects anatomy,philosophy --limit 6" ..
                                      " --shots 0,5 --out " .. shell_quote(tmp("r.json")))
        assert.are.equal(0, code, err)
        contains(out, "MMLU test, 0-shot")
        contains(out, "MMLU test, 5-shot")
        contains(out, "  humanities ")
        local text = read(tmp("r.json"))
        contains(text, '"0-shot": {')
        contains(text, '"mmlu_anatomy": {')
        -- the same numbers as dga.mmlu_score on the same questions
        local mm = dga.mmlu_load(mmlu_dir)
        local qs, seen = {}, {}
        for _, q in ipairs(mm:split("test")) do
            if q.subject == "anatomy" or q.subject == "philosophy" then
                seen[q.subject] = (seen[q.subject] or 0) + 1
                if seen[q.subject] <= 6 then qs[#qs + 1] = q end
            end
        end
        local score = dga.mmlu_score(m, tok, qs, {shots = 0})
        local acc = text:match('"0%-shot".-"mmlu": {%s*"acc,none": ([%d.e-]+)')
        assert.truthy(acc, text)
        assert.is_true(near(tonumber(acc), score.correct / 12))
        -- the JSON parses (where python3 is at hand)
        if os.execute("command -v python3 >/dev/null 2>&1") == true then
            local ok = os.execute("python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); " ..
                                  "assert d[\"5-shot\"][\"results\"][\"mmlu_philosophy\"][\"n\"] == 6' " ..
                                  shell_quote(tmp("r.json")))
            assert.is_true(ok == true)
        end
    end)

    it("says when k-shot prompts do not fit the context, in the output and in the JSON's config", function()
        local tok = dga.tokenizer_train({"the answer is A B C D"}, {vocab = 260})
        local m = dga.gpt{layers = 1, width = 16, heads = 2, context = 64, vocab = tok:vocab_size(), batch = 4}
        require("data.model_dir").save(tmp("ck64"), {model = m, tokenizer = tok})
        local code, out, err = dgalua(shell_quote(ROOT .. "/scripts/mmlu.lua") .. " --checkpoint " ..
                                      shell_quote(tmp("ck64")) .. " --mmlu " .. shell_quote(mmlu_dir) ..
                                      " --subjects anatomy --limit 3 --shots 0,5 --out " .. shell_quote(tmp("fit.json")))
        assert.are.equal(0, code, err)
        contains(out, "note: 3 of 3 5-shot prompts did not fit the model's context of 64 tokens; shots were dropped")
        contains(out, "note: 3 of 3 0-shot prompts did not fit the model's context of 64 tokens; 3 prompts were cut")
        local doc = require("util.json").decode(read(tmp("fit.json")), "fit.json")
        local cfg = doc["5-shot"].config
        assert.are.equal(5, cfg.num_fewshot)
        assert.are.equal(3, cfg.prompts_shortened)
        assert.are.equal(3, cfg.prompts_truncated)   -- 64 tokens hold no anatomy prompt even with no shot
        assert.are.equal(0, cfg.shots_used)
        assert.are.equal(0, cfg.shots_used_by_subject.anatomy)
        assert.are.equal(3, doc["0-shot"].config.prompts_shortened)
    end)

    it("refuses an unknown subject (usage, 2) and a checkpoint without a tokenizer (1)", function()
        local m = dga.gpt{layers = 1, width = 16, heads = 2, context = 16, vocab = 300, batch = 2}
        dga.save_checkpoint(tmp("bare.safetensors"), {model = m})
        local tool = shell_quote(ROOT .. "/scripts/mmlu.lua")
        local code, _, err = dgalua(tool .. " --checkpoint " .. shell_quote(tmp("bare.safetensors")) ..
                                    " --mmlu " .. shell_quote(mmlu_dir) .. " --subjects astrology")
        assert.are.equal(2, code)
        contains(err, "no subject 'astrology'")
        code, _, err = dgalua(tool .. " --checkpoint " .. shell_quote(tmp("bare.safetensors")) ..
                              " --mmlu " .. shell_quote(mmlu_dir) .. " --subjects anatomy --limit 2")
        assert.are.equal(1, code)
        contains(err, "give --tokenizer")
    end)
end)

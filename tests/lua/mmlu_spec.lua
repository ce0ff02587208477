-- MMLU from Lua: loading, splits, rendering, scoring against a direct computation with
-- m:logits, and dga.eval_loss_seqs against m:forward.
local dga = require "dga"

local DATA = os.getenv("DGA_SHARED_DATA") or "../shared/data"
local MMLU = DATA .. "/mmlu"

local h = require "tests.lua.helpers"
local function have_mmlu() return h.exists(MMLU .. "/test/abstract_algebra_test.csv") end
local raises, write, rmrf = h.raises, h.write, h.rm

-- A byte-level tokenizer (id = byte value): any object with :encode works for mmlu_score.
local bytes_tok = {
    encode = function(_, s)
        local ids = {}
        for i = 1, #s do ids[i] = s:byte(i) end
        return dga.tensor(ids, "int32")
    end,
}

local function tmpdir() return h.tmpdir("dev", "val", "test") end

-- One subject "toy" whose test file holds `csv`.
local function toy_release(csv)
    local d = tmpdir()
    write(d .. "/dev/toy_dev.csv", "d1,a,b,c,d,A\nd2,e,f,g,h,B\n")
    write(d .. "/val/toy_val.csv", "v,a,b,c,d,C\n")
    write(d .. "/test/toy_test.csv", csv)
    return d
end

describe("dga.mmlu_load", function()
    it("reads the real release: counts, subjects, a/b halves", function()
        if not have_mmlu() then pending("MMLU data absent") return end
        local mm = dga.mmlu_load(MMLU)
        assert.are.equal(14042, #mm:split("test"))
        assert.are.equal(1531, mm:count("val"))
        assert.are.equal(285, #mm:split("dev"))
        local subjects = mm:subjects()
        assert.are.equal(57, #subjects)
        for i = 2, #subjects do assert.is_true(subjects[i - 1] < subjects[i]) end
        assert.is_truthy(tostring(mm):find("57 subjects", 1, true))

        local a, b = mm:split("a", 3), mm:split("b", 3)
        assert.are.equal(14042, #a + #b)
        local seen = {}
        for _, q in ipairs(a) do seen[q.index] = "a" end
        for _, q in ipairs(b) do
            assert.is_nil(seen[q.index])
            seen[q.index] = "b"
        end
        for i = 1, 14042 do assert.is_not_nil(seen[i]) end
        local a2, a9 = mm:split("a", 3), mm:split("a", 9)
        local same9 = 0
        for i, q in ipairs(a) do
            assert.are.equal(q.index, a2[i].index)
            if q.index == a9[i].index then same9 = same9 + 1 end
        end
        assert.is_true(same9 < #a)
        local q = a[1]
        assert.are.equal("string", type(q.question))
        assert.are.equal(4, #q.choices)
        assert.is_truthy(("ABCD"):find(q.answer, 1, true))
        mm:close()
        raises("closed", function() return mm:subjects() end)
    end)

    it("names the file and line of a malformed row", function()
        local d = toy_release('"q1\nsecond line",a,b,c,d,A\nq2,a,b,c,d,E\n')
        raises("toy_test.csv: line 3: answer must be one of A, B, C, D", dga.mmlu_load, d)
        rmrf(d)
        d = toy_release("q1,a,b,c,d,A\nq2,a,b,c,d\n")
        raises("toy_test.csv: line 2: expected 6 columns", dga.mmlu_load, d)
        rmrf(d)
        raises("/no/such/mmlu/test", dga.mmlu_load, "/no/such/mmlu")
    end)
end)

describe("dga.mmlu_render", function()
    local q = {subject = "college_physics", question = " Why? \n", choices = {"a", "b", "c", "d"},
               answer = "C"}
    local shot = {subject = "college_physics", question = "How?", choices = {"1", "2", "3", "4"},
                  answer = "A"}
    local head = "The following are multiple choice questions (with answers) about college physics.\n\n"

    it("renders as lm-evaluation-harness", function()
        assert.are.equal(head .. "Why?\nA. a\nB. b\nC. c\nD. d\nAnswer:", dga.mmlu_render(q))
        assert.are.equal(head .. "Why?\nA. a\nB. b\nC. c\nD. d\nAnswer: C",
                         dga.mmlu_render(q, {with_answer = true}))
        assert.are.equal(head .. "How?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer: A\n\n"
                         .. "Why?\nA. a\nB. b\nC. c\nD. d\nAnswer:",
                         dga.mmlu_render(q, {shots = {shot}}))
    end)

    it("rejects malformed questions by field", function()
        raises("field 'choices' must be a list of 4 strings",
               dga.mmlu_render, {subject = "x", question = "q", choices = {"a"}, answer = "A"})
        raises("answer must be one of", dga.mmlu_render,
               {subject = "x", question = "q", choices = {"a", "b", "c", "d"}, answer = "E"})
        raises("shots[1]: field 'question' must be a string", dga.mmlu_render, q,
               {shots = {{subject = "x"}}})
        raises("bad argument #2 to 'dga.mmlu_render' (option 'with_answer' must be a boolean, got 1)",
               dga.mmlu_render, q, {with_answer = 1})
    end)
end)

describe("dga.mmlu_score", function()
    local qs = {
        {subject = "astronomy", question = "Which is a planet?",
         choices = {"Mars", "Sirius", "Vega", "Orion"}, answer = "A"},
        {subject = "astronomy", question = "Nearest star?",
         choices = {"Sun", "Vega", "Rigel", "Deneb"}, answer = "C"},
        {subject = "virology", question = "Which is a virus?",
         choices = {"E. coli", "HIV", "yeast", "mold"}, answer = "B"},
    }
    local dev = {
        {subject = "virology", question = "Dev V?", choices = {"t", "u", "v", "w"}, answer = "A"},
        {subject = "astronomy", question = "Dev A?", choices = {"p", "q", "r", "s"}, answer = "D"},
    }

    local function log_softmax(logits, k)
        local mx = logits:max()
        local s = 0
        for i = 1, #logits do s = s + math.exp(logits[i] - mx) end
        return logits[k + 1] - mx - math.log(s)
    end

    -- log p(" X" | context) with one m:logits call per continuation token
    local function direct(m, context, letter)
        local ids = {}
        for i = 1, #context do ids[i] = context:byte(i) end
        local ll = 0
        for _, byte in ipairs({32, letter:byte()}) do
            ll = ll + log_softmax(m:logits(ids), byte)
            ids[#ids + 1] = byte
        end
        return ll
    end

    it("agrees with a direct computation (0 and 1 shot)", function()
        local m = dga.gpt{layers = 1, width = 16, heads = 2, context = 256, vocab = 256, batch = 3,
                          seed = 7}
        m:set_params(m:params():scale(5))   -- far from uniform predictions
        for _, shots in ipairs({0, 1}) do
            local r = dga.mmlu_score(m, bytes_tok, qs, {shots = shots, dev = dev, batch = 3})
            assert.are.equal(3, r.n)
            local correct, loss = 0, 0
            for i, q in ipairs(qs) do
                local picked = {}
                for _, d in ipairs(dev) do
                    if d.subject == q.subject and #picked < shots then picked[#picked + 1] = d end
                end
                local ctx = dga.mmlu_render(q, {shots = picked})
                local best, lls = 1, {}
                for c, letter in ipairs({"A", "B", "C", "D"}) do
                    lls[c] = direct(m, ctx, letter)
                    assert.is_true(math.abs(lls[c] - r.loglik:at(i, c)) < 1e-3)
                    if lls[c] > lls[best] then best = c end
                end
                local ans = ("ABCD"):find(q.answer, 1, true)
                if best == ans then correct = correct + 1 end
                loss = loss - lls[ans] / 2
            end
            assert.are.equal(correct, r.correct)
            local sum = 0
            for subject, st in pairs(r.by_subject) do
                assert.is_true(subject == "astronomy" or subject == "virology")
                assert.are.equal(st.correct / st.n, st.accuracy)
                sum = sum + st.correct
            end
            assert.are.equal(2, r.by_subject.astronomy.n)
            -- every prompt fits the context of 256: nothing shortened
            assert.are.equal(0, r.shortened)
            assert.are.equal(0, r.truncated)
            assert.are.same({shots, shots, shots}, r.shots:totable())
            assert.are.equal(2 * shots, r.by_subject.astronomy.shots_used)
            assert.are.equal(correct, sum)
            assert.is_true(math.abs(r.accuracy - correct / 3) < 1e-12)
            assert.is_true(math.abs(r.answer_loss - loss / 3) < 1e-3)
        end
    end)

    it("drops the shots of a prompt that does not fit, and says so", function()
        -- byte tokens: the 0-shot prompt of question 1 is exactly the context, its 1-shot one longer
        local n0 = #dga.mmlu_render(qs[1]) + 1
        assert.is_true(#dga.mmlu_render(qs[1], {shots = {dev[2]}}) + 1 > n0)
        local m = dga.gpt{layers = 1, width = 16, heads = 2, context = n0, vocab = 256, batch = 3, seed = 7}
        local r0 = dga.mmlu_score(m, bytes_tok, qs, {shots = 0})
        local r1 = dga.mmlu_score(m, bytes_tok, qs, {shots = 1, dev = dev})
        assert.are.equal(0, r1.shots[1])
        for c = 1, 4 do assert.are.equal(r0.loglik:at(1, c), r1.loglik:at(1, c)) end   -- the 0-shot prompt
        assert.is_true(r1.shortened >= 1)
        assert.are.equal(r1.shortened, r1.by_subject.astronomy.shortened + r1.by_subject.virology.shortened)
        local cut = 0
        for i = 1, 3 do if #dga.mmlu_render(qs[i]) + 1 > n0 then cut = cut + 1 end end
        assert.are.equal(cut, r0.truncated)
        assert.are.equal(cut, r0.shortened)
    end)

    it("reports bad arguments", function()
        local m = dga.gpt{layers = 1, width = 16, heads = 2, context = 64, vocab = 256, batch = 2}
        raises("subject 'astronomy', found 1", dga.mmlu_score, m, bytes_tok, qs, {shots = 2, dev = dev})
        raises("option 'dev'", dga.mmlu_score, m, bytes_tok, qs, {shots = 1})
        raises("option 'batch'", dga.mmlu_score, m, bytes_tok, qs, {batch = 3})
        raises("questions[2]", dga.mmlu_score, m, bytes_tok, {qs[1], {subject = 1}})
        raises("tokenizer failed: boom", dga.mmlu_score, m,
               {encode = function() error("boom", 0) end}, qs)
        local small = dga.gpt{layers = 1, width = 16, heads = 2, context = 64, vocab = 100, batch = 2}
        assert.is_false(pcall(dga.mmlu_score, small, bytes_tok, qs))   -- 'x' = 120 >= 100
    end)

    it("scores with the real tokenizer and real questions", function()
        if not have_mmlu() or not dga.tokenizer_train then pending("needs MMLU and dga.tokenizer_train") return end
        local mm = dga.mmlu_load(MMLU)
        local dev_q = mm:split("dev")
        local texts = {}
        for i, q in ipairs(dev_q) do texts[i] = dga.mmlu_render(q, {with_answer = true}) end
        local tok = dga.tokenizer_train(texts, {vocab = 300})
        local m = dga.gpt{layers = 1, width = 16, heads = 2, context = 128,
                          vocab = tok:vocab_size(), batch = 8, seed = 1}
        local few = {}
        for i = 1, 10 do few[i] = mm:split("val")[i] end
        m:set_params(m:params():scale(5))
        local r = dga.mmlu_score(m, tok, few, {shots = 5, dev = mm})
        assert.are.equal(10, r.n)
        assert.is_true(r.accuracy >= 0 and r.accuracy <= 1)
        assert.is_true(r.answer_loss > 0)
        -- 5-shot prompts are longer than 128 tokens here: each loses its last shots until it
        -- fits (r.shots says how many it kept), and is cut from the left only with none left
        local shortened, truncated = 0, 0
        for i = 1, 10 do
            local k = math.tointeger(r.shots[i])
            assert.is_true(k >= 0 and k < 5, "question " .. i .. " kept " .. k .. " shots")
            local kept = {}
            for _, d in ipairs(dev_q) do
                if d.subject == few[i].subject and #kept < k + 1 then kept[#kept + 1] = d end
            end
            local fits = #tok:encode(dga.mmlu_render(few[i], {shots = kept})) + 1 <= 128
            assert.is_false(fits, "one shot more would have fitted")   -- k is the most that fit
            shortened = shortened + 1
            if k == 0 and #tok:encode(dga.mmlu_render(few[i])) + 1 > 128 then truncated = truncated + 1 end
        end
        assert.are.equal(shortened, r.shortened)
        assert.are.equal(truncated, r.truncated)
        -- the harness rule by hand for three questions: continuation = the tokens of
        -- context .. " X" after those of the context; keep the last context+1 tokens
        for i = 1, 3 do
            local shots = {}
            for _, d in ipairs(dev_q) do
                if d.subject == few[i].subject and #shots < r.shots[i] then shots[#shots + 1] = d end
            end
            local ctx = dga.mmlu_render(few[i], {shots = shots})
            local n_ctx = #tok:encode(ctx)
            for c, letter in ipairs({"A", "B", "C", "D"}) do
                local whole = tok:encode(ctx .. " " .. letter):totable()
                assert.is_true(#whole > n_ctx)
                local start = math.max(1, #whole - 128)
                local ll = 0
                for p = n_ctx + 1, #whole do
                    local window = {}
                    for j = start, p - 1 do window[#window + 1] = whole[j] end
                    ll = ll + log_softmax(m:logits(window), whole[p])
                end
                assert.is_true(math.abs(ll - r.loglik:at(i, c)) < 1e-3)
            end
        end
    end)
end)

describe("dga.eval_loss_seqs", function()
    it("equals forward's mean loss on the same sequences", function()
        local m = dga.gpt{layers = 1, width = 16, heads = 2, context = 8, vocab = 32, batch = 5,
                          seed = 3}
        local seqs, x, y = {}, {}, {}
        for b = 1, 5 do
            seqs[b], x[b], y[b] = {}, {}, {}
            for t = 1, 9 do seqs[b][t] = (b * 7 + t * t) % 32 end
            for t = 1, 8 do x[b][t], y[b][t] = seqs[b][t], seqs[b][t + 1] end
        end
        local want = m:forward(x, y)
        for _, batch in ipairs({1, 2, 5}) do
            assert.is_true(math.abs(dga.eval_loss_seqs(m, seqs, batch) - want) < 1e-4 * want)
        end
        assert.is_true(math.abs(dga.eval_loss_seqs(m, dga.tensor(seqs, "int32")) - want) < 1e-4 * want)
        raises("outside vocabulary", dga.eval_loss_seqs, m, {{1, 2, 40}}, 1)
        raises("sequence length 10", dga.eval_loss_seqs, m, {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}, 1)
        raises("batch must be in", dga.eval_loss_seqs, m, seqs, 6)
    end)

    it("is, bit for bit, the row sums of eval_row_losses over their counts, also when whole batches are evaluated apart", function()
        local m = dga.gpt{layers = 1, width = 16, heads = 2, context = 8, vocab = 32, batch = 3,
                          seed = 5}
        local seqs = {}
        for b = 1, 7 do
            seqs[b] = {}
            for t = 1, 9 do seqs[b][t] = (b * 5 + t * t * 3) % 32 end
        end
        local t = dga.tensor(seqs, "int32")
        local nll, cnt = dga.eval_row_losses(m, t, 3)
        assert.are.equal(7, #nll)
        assert.are.equal(7, #cnt)
        assert.are.equal(8, cnt[4])
        local total, count = 0.0, 0
        for i = 1, 7 do total, count = total + nll[i], count + cnt[i] end
        assert.are.equal(dga.eval_loss_seqs(m, t, 3), total / count)
        -- whole batches of 3 from rows 4 and 7: the same rows' values
        local tail = {dga.eval_row_losses(m, t:narrow(4, 4), 3)}
        for i = 1, 4 do
            assert.are.equal(nll[3 + i], tail[1][i])
            assert.are.equal(cnt[3 + i], tail[2][i])
        end
        raises("outside vocabulary", dga.eval_row_losses, m, {{1, 2, 40}}, 1)
        raises("batch must be in", dga.eval_row_losses, m, t, 4)
    end)
end)

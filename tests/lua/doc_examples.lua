-- Runs every example of the dga documentation (scripts/repl/apidoc.lua, which help() prints
-- and docs/api.md is generated from) and prints one line per example:
--   ok <TAB> name            or            FAIL <TAB> name <TAB> message
-- tests/lua/repl_spec.lua runs it as `dgalua tests/lua/doc_examples.lua` in a scratch
-- directory that holds ../shared/data (a link to the real data), so that the examples' own
-- paths ("corpus/latex", "tok.json", "../shared/data/mmlu") work as written.
--
-- Each example runs in a fresh environment whose free names (m, t, tok, s, mm, ...) are
-- built on first use from the fixtures below, as a reader who had run the example of the
-- constructor would have them: an example that closes its object leaves the next one alone.
local apidoc = require "repl.apidoc"
local json = require "util.json"

local DATA = "../shared/data"

-- ------------------------------------------------------------------ files the examples read

local function sh(cmd) assert(os.execute(cmd), cmd) end

-- A small corpus of two domains, from the real data (a few documents each).
local function write_corpus()
    sh("mkdir -p corpus/latex corpus/code runs/x")
    for dir, src in pairs{latex = "latex", code = "code_python"} do
        local f = assert(io.open("corpus/" .. dir .. "/part.jsonl", "w"))
        for _, text in ipairs(dga.read_texts(DATA .. "/corpus/" .. src, 40)) do
            f:write(json.encode{text = text:sub(1, 3000)}, "\n")
        end
        f:close()
    end
end

write_corpus()
local corpus_texts = dga.read_texts("corpus")
dga.tokenizer_train(corpus_texts, {vocab = 300}):save("tok.json")
local TOK_VOCAB = dga.tokenizer_load("tok.json"):vocab_size()

-- ------------------------------------------------------------------ fixtures

local function ints(rows, cols, seed)
    local t = {}
    for i = 1, rows do
        t[i] = {}
        for j = 1, cols do t[i][j] = (i * 31 + j * 7 + seed) % TOK_VOCAB end
    end
    return dga.tensor(t, "int32")
end

-- name -> function(env) returning the value; env gives access to the other fixtures.
local fixtures = {
    t = function() return dga.tensor({{1, 2, 3}, {4, 5, 6}}) end,
    u = function() return dga.tensor({{6, 5, 4}, {3, 2, 1}}) end,
    w = function() return dga.vec{0.2, 0.3, 0.5} end,
    g = function() return dga.vec{1, 2, 3} end,
    a = function() return dga.vec{1, 2} end,
    text = function() return "a configuration" end,
    r = function() return dga.rng(42) end,
    m = function() return dga.gpt{layers = 2, width = 64, heads = 4, context = 32, vocab = TOK_VOCAB, batch = 16} end,
    opt = function(env) return dga.adamw(env.m, {lr = 3e-3}) end,
    x = function() return ints(2, 8, 1) end,
    y = function() return ints(2, 8, 2) end,
    tx = function() return ints(2, 8, 3) end,
    ty = function() return ints(2, 8, 4) end,
    x1 = function() return ints(2, 8, 5) end,
    y1 = function() return ints(2, 8, 6) end,
    x2 = function() return ints(2, 8, 7) end,
    y2 = function() return ints(2, 8, 8) end,
    seqs = function() return ints(4, 9, 9) end,
    rows = function() return 2 end,
    B = function() return 2 end,
    p = function(env) return env.m:params() end,
    tok = function() return dga.tokenizer_load("tok.json") end,
    texts = function() return corpus_texts end,
    ids = function(env) return env.tok:encode(corpus_texts[1]) end,
    reader = function() return dga.read_jsonl("corpus/latex") end,
    lk = (function()
        local n = 0
        return function()
            n = n + 1
            sh("mkdir -p runs/lk" .. n)
            return dga.lock("runs/lk" .. n .. "/.lock")
        end
    end)(),
    s = function() return dga.store_open("store") end,
    doms = function() return {1, 1} end,
    idx = function() return {1, 2} end,
    e = function() return dga.embed(corpus_texts) end,
    mm = function() return dga.mmlu_load(DATA .. "/mmlu") end,
    smp = function() return dga.sampler({100, 50, 20}, {seed = 1}) end,
    P = function() return dga.basis(3, {dga.vec{1, 0, 0}, dga.vec{0, 0.5, 0.5}}) end,
}

-- The same names meaning something else for one class's examples.
local class_fixtures = {
    ["dga.rng"] = {s = function(env) return env.r:state() end},
    ["dga.sampler"] = {st = function(env) return env.smp:state() end},
}

-- What an example takes for granted that its line does not show.
local before = {
    ["dga.gpt:backward"] = "m:forward(x, y)",
}

local function environment(class)
    local own = class and class_fixtures[class] or {}
    local env
    env = setmetatable({print = function() end}, {__index = function(t, k)
        local make = own[k] or fixtures[k]
        if make then
            local v = make(env)
            rawset(t, k, v)
            return v
        end
        return _G[k]
    end})
    return env
end

local function run(name, code, class)
    local env = environment(class)
    local ok, err = true, nil
    for _, chunk in ipairs{before[name] or "", code} do
        -- as the REPL reads a line: an expression (m:config().context) or a statement
        local f, msg = load("return " .. chunk .. ";", "=" .. name, "t", env)
        if not f then f, msg = load(chunk, "=" .. name, "t", env) end
        if not f then ok, err = false, msg break end
        ok, err = pcall(f)
        if not ok then break end
    end
    if ok then
        io.write("ok\t", name, "\n")
    else
        io.write("FAIL\t", name, "\t", (tostring(err):gsub("\n", " ")), "\n")
    end
    io.flush()
    collectgarbage()   -- closes what the example left open (locks, readers) before the next one
end

-- store_build's example makes the store the class examples open; it runs first.
for _, g in ipairs(apidoc.groups) do
    for _, f in ipairs(g.functions) do
        if f[1] == "store_build" then run("dga." .. f[1], f.example) end
    end
end
for _, g in ipairs(apidoc.groups) do
    for _, f in ipairs(g.functions) do
        if f[1] ~= "store_build" then run("dga." .. f[1], f.example) end
    end
end
for _, c in ipairs(apidoc.classes) do
    for _, mth in ipairs(c.methods) do run(c.name .. ":" .. mth[1], mth.example, c.name) end
end

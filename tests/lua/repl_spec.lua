-- The REPL and its documentation: every function and method of `dga` has an apidoc entry,
-- docs/api.md matches the table, and the REPL (driven through stdin with -i, and through a
-- pty for tab completion) prints, helps, completes and keeps top-level locals.
local dga = require "dga"
local h = require "tests.lua.helpers"
local apidoc = require "repl.apidoc"
local repl = require "repl.repl"

local shell_quote, write, read, contains = h.shell_quote, h.write, h.read, h.contains
local DGALUA = h.DGALUA
local ROOT = h.cwd()

local tmpdir
local function tmp(name) return tmpdir .. "/" .. name end

-- Feeds `input` to `dgalua -i [script]` on stdin; returns code, stdout, stderr.
local function session(input, script)
    write(tmp("input.txt"), input)
    return h.run("DGALUA_HISTORY=" .. shell_quote(tmp("history")) .. " " .. shell_quote(DGALUA) .. " -i " ..
                 (script and shell_quote(script) or "") .. " < " .. shell_quote(tmp("input.txt")), tmp("err.txt"))
end

describe("apidoc", function()
    it("documents every function and method the module exposes, and nothing else", function()
        local missing, documented = {}, {}
        for k, v in pairs(dga) do
            if type(v) == "function" then
                documented["dga." .. k] = true
                if not apidoc.find("dga." .. k) then missing[#missing + 1] = "dga." .. k end
            end
        end
        for tname, mt in pairs(debug.getregistry()) do
            if type(tname) == "string" and tname:match("^dga%.") and type(mt) == "table" then
                for k, v in pairs(repl.methods_of(mt) or {}) do
                    if type(v) == "function" then
                        documented[tname .. ":" .. k] = true
                        if not apidoc.find(tname .. ":" .. k) then missing[#missing + 1] = tname .. ":" .. k end
                    end
                end
            end
        end
        table.sort(missing)
        assert.are.same({}, missing)
        local stale = {}
        for _, g in ipairs(apidoc.groups) do
            for _, f in ipairs(g.functions) do
                if not documented["dga." .. f[1]] then stale[#stale + 1] = "dga." .. f[1] end
                assert.is_true(f.args ~= nil and f.returns ~= nil and f.doc ~= nil and f.example ~= nil, f[1])
            end
        end
        for _, c in ipairs(apidoc.classes) do
            for _, m in ipairs(c.methods) do
                if not documented[c.name .. ":" .. m[1]] then stale[#stale + 1] = c.name .. ":" .. m[1] end
                assert.is_true(m.args ~= nil and m.returns ~= nil and m.doc ~= nil and m.example ~= nil, m[1])
            end
        end
        assert.are.same({}, stale)
    end)

    it("every example runs, as help() and docs/api.md show it", function()
        if not DGALUA then pending("DGALUA is not set (run through tests/run)") end
        local data = os.getenv("DGA_SHARED_DATA") or (ROOT .. "/../shared/data")
        if not h.exists(data .. "/mmlu/test/anatomy_test.csv") then pending("no shared data in " .. data) end
        -- a scratch directory with ../shared/data beside it, so that the examples' paths work as written
        local dir = h.tmpdir("work", "shared")
        assert(os.execute("ln -s " .. shell_quote(data) .. " " .. shell_quote(dir .. "/shared/data")))
        local code, out, err = h.run("cd " .. shell_quote(dir .. "/work") .. " && " .. shell_quote(DGALUA) .. " " ..
                                     shell_quote(ROOT .. "/tests/lua/doc_examples.lua"), dir .. "/err.txt")
        h.rm(dir)
        assert.are.equal(0, code, err)
        local want, ran, failed = {}, {}, {}
        for _, g in ipairs(apidoc.groups) do
            for _, f in ipairs(g.functions) do want[#want + 1] = "dga." .. f[1] end
        end
        for _, c in ipairs(apidoc.classes) do
            for _, m in ipairs(c.methods) do want[#want + 1] = c.name .. ":" .. m[1] end
        end
        for status, name, msg in out:gmatch("(%a+)\t([^\t\n]+)\t?([^\n]*)") do
            ran[#ran + 1] = name
            if status ~= "ok" then failed[#failed + 1] = name .. ": " .. msg end
        end
        assert.are.same({}, failed)
        table.sort(want)
        table.sort(ran)
        assert.are.same(want, ran)
    end)

    it("docs/api.md is what gen_api_doc.lua makes of the table", function()
        if not DGALUA then pending("DGALUA is not set (run through tests/run)") end
        local out = os.tmpname()
        local code = h.run(shell_quote(DGALUA) .. " scripts/gen_api_doc.lua --out " .. shell_quote(out), out .. ".err")
        assert.are.equal(0, code)
        local want = read(out)
        os.remove(out)
        os.remove(out .. ".err")
        assert.is_true(want == read("docs/api.md"),
                       "docs/api.md is out of date: run ./dgalua scripts/gen_api_doc.lua")
    end)
end)

describe("REPL helpers", function()
    it("pretty-prints tables, and dga as its list of functions", function()
        assert.are.equal('{1, 2, a = 1, b = {"x", true}}', repl.format({1, 2, a = 1, b = {"x", true}}))
        local t = {}
        t.self = t
        assert.are.equal("{self = <cycle>}", repl.format(t))
        local shown = repl.format(dga)
        assert.is_nil(shown:find("table: 0x", 1, true))
        contains(shown, "dga.gpt{layers, width, heads, context, vocab")
        assert.are.equal("function dga.gpt", repl.format(dga.gpt))
        -- `help` without parentheses says how to call it (inside a table it is just a function)
        contains(repl.format(repl.help), "help is a function: type help().\nhelp([x]): what x is")
        assert.is_nil(repl.format({repl.help}):find("type help()", 1, true))
        assert.are.equal("dga.tensor([1, 2], float32[2])", repl.format(dga.vec{1, 2}))
    end)

    it("help finds functions, methods and objects", function()
        contains(repl.help_text(dga.gpt), "example: local m = dga.gpt{")
        contains(repl.help_text("gpt"), "dga.gpt{layers")
        -- the trainer's configuration, from its schema
        contains(repl.help_text("config"), "optimizer.lr")
        contains(repl.help_text("config"), "weights_min")
        local m = dga.gpt{layers = 1, width = 16, heads = 2, context = 8, vocab = 32, batch = 2}
        contains(repl.help_text(m), "m:forward(inputs, targets)")
        contains(repl.help_text(m.forward), "m:forward(inputs, targets) -> number")
        local t = dga.vec(2)
        contains(repl.help_text(t.normalize), "t:normalize()")
        contains(repl.help_text("m:generate"), "top_k")
        contains(repl.help_text(), "Functions of dga:")
        contains(repl.help_text("no_such_thing"), "no entry for 'no_such_thing'")
    end)

    it("help answers for Lua's own functions and libraries, help itself and any value", function()
        repl.install()
        local function has(x, ...)
            local text = repl.help_text(x)
            for _, want in ipairs{...} do contains(text, want) end
        end
        has(print, "print(...)", "Lua 5.4 manual §6.1")
        has(string.format, "string.format(fmt, ...) -> string", "§6.4")
        has(io.open, "io.open(filename [, mode])", "§6.8")
        has(table.concat, "table.concat(list", "§6.6")
        has(table, "Lua's tables library (Lua 5.4 manual §6.6)", "table.sort(list [, comp])")
        has(string, "string.gsub(s, pattern, repl")
        has("io.open", "§6.8")
        has("next", "next(t [, key])")                  -- Lua's, not dga.text_reader:next
        has(io.stdout, "a file handle", "file:read(...)")
        has(io.stdout.read, "file:read(...) -> values")
        has(rawget(_G, "help"), "help([x])", "help(print)")
        has(42, "a number (integer): 42")
        has(0.5, "a number (float): 0.5")
        has(true, "a boolean: true")
        has({1, 2, name = "x"}, "a table: 2 list items, 1 other keys (name)")
        local function user_fn(a, b, ...) return a, b end
        local line = debug.getinfo(user_fn, "S").linedefined
        has(user_fn, "a Lua function (a, b, ...), defined at tests/lua/repl_spec.lua:" .. line)
        -- every library of the standard one has its section
        for _, lib in ipairs{"coroutine", "package", "utf8", "math", "os", "debug"} do
            has(_G[lib], "Lua 5.4 manual §6.")
        end
    end)

    it("help resolves method names on real objects", function()
        local x = dga.vec{1, 2, 3}
        contains(repl.help_text(x.shape), "t:shape() -> {d1, ...}")
        contains(repl.help_text("tensor:shape"), "t:shape() -> {d1, ...}")
        contains(repl.help_text("dga.tensor:shape"), "t:shape() -> {d1, ...}")
        rawset(_G, "repl_spec_x", x)
        contains(repl.help_text("repl_spec_x:shape"), "t:shape() -> {d1, ...}")
        contains(repl.help_text("repl_spec_x:nope"), "dga.tensor has no method 'nope'")
        rawset(_G, "repl_spec_x", nil)
        contains(repl.help_text("gpt:forward"), "m:forward(inputs, targets)")
    end)

    it("completes globals, fields and methods through metatables", function()
        assert.are.same({"dga.tokenizer_load", "dga.tokenizer_train"}, repl.complete("dga.tokenizer_"))
        rawset(_G, "repl_spec_model", dga.gpt{layers = 1, width = 16, heads = 2, context = 8, vocab = 32, batch = 2})
        assert.are.same({"repl_spec_model:forward"}, repl.complete("repl_spec_model:for"))
        rawset(_G, "repl_spec_vec", dga.vec(2))
        assert.are.same({"repl_spec_vec:norm", "repl_spec_vec:normalize", "repl_spec_vec:normalize_"},
                        repl.complete("repl_spec_vec:norm"))
        assert.are.same({"string.format"}, repl.complete("string.form"))
        contains(table.concat(repl.complete("pri"), " "), "print")
        assert.are.same({}, repl.complete("no_such_global.x"))
        rawset(_G, "repl_spec_model", nil)
        rawset(_G, "repl_spec_vec", nil)
    end)

    it("finds the string literal the cursor is in and completes file names in it", function()
        assert.are.same({"../shared/da", 6}, {repl.open_string('f = "../shared/da')})
        assert.are.same({"x/", 17}, {repl.open_string([[g("a\"b", 'c', 'x/]])})
        assert.is_nil(repl.open_string('f = "closed" .. x'))
        assert.is_nil(repl.open_string('x = 1 -- "not a string'))
        local dir = h.tmpdir("compl/data_dir", "compl/dance")
        write(dir .. "/compl/data_dir/file_one.txt", "")
        write(dir .. "/compl/.hidden", "")
        local line = 'x = "' .. dir .. "/compl/da"
        -- readline's word starts after the last "/": the candidates are cut to start there
        assert.are.same({"dance/", "data_dir/"}, repl.complete_string(line, #line - 2))
        assert.are.same({dir .. "/compl/dance/", dir .. "/compl/data_dir/"}, repl.complete_path(dir .. "/compl/da"))
        assert.are.same({dir .. "/compl/.hidden"}, repl.complete_path(dir .. "/compl/."))
        assert.are.same({}, repl.complete_path(dir .. "/no_such_dir/x"))
        assert.is_nil(repl.complete_string("x = 1 + da", 8))
        h.rm(dir)
    end)

    it("makes top-level locals global and leaves the others alone", function()
        assert.are.equal("a, b = 1, 2", repl.rewrite("local a, b = 1, 2"))
        assert.are.equal("a, b = nil; c = 1", repl.rewrite("local a, b; local c = 1"))
        assert.are.equal("x = nil", repl.rewrite("local x"))
        assert.are.equal("function f() local z = 1 end", repl.rewrite("local function f() local z = 1 end"))
        local inner = "for i = 1, 2 do local q = i end; if x then local w = 1 else local u = 2 end"
        assert.are.equal(inner, repl.rewrite(inner))
        assert.are.equal('s = "local x" -- local y', repl.rewrite('local s = "local x" -- local y'))
        assert.are.equal("t.local_x = [[local]]", repl.rewrite("t.local_x = [[local]]"))
        assert.are.equal("local c <close> = x", repl.rewrite("local c <close> = x"))
    end)
end)

describe("the REPL", function()
    setup(function() tmpdir = h.tmpdir() end)
    teardown(function() h.rm(tmpdir) end)
    before_each(function()
        if not DGALUA then pending("DGALUA is not set (run through tests/run)") end
    end)

    it("keeps locals across lines, prints results and answers help", function()
        local code, out, err = session("local x = 20\nlocal t = {a = 1}\nx + t.a\n" ..
                                       "local m = dga.gpt{layers = 1, width = 16, heads = 2, context = 8, vocab = 32}\n" ..
                                       "help(m.forward)\ndga.tensor{{1, 2, 3}, {4, 5, 6}}\nt\n")
        assert.are.equal(0, code, err)
        assert.are.equal("", err)
        contains(out, "> 21\n")
        contains(out, "m:forward(inputs, targets) -> number")
        contains(out, "dga.tensor([[1, 2, 3],\n            [4, 5, 6]], float32[2x3])")
        contains(out, "{a = 1}")
    end)

    it("runs the README's ten lines typed one by one", function()
        local readme = assert(read("README.md"))
        local block = readme:match("## Ten lines of Lua.-```lua\n(.-)```")
        assert.is_truthy(block, "no Lua block under 'Ten lines of Lua'")
        -- the same lines, shorter: 2 steps, 20 documents, a 300-token vocabulary
        local lines = block:gsub("for step = 1, 300 do", "for step = 1, 2 do")
                           :gsub('books_public_domain", 200%)', 'books_public_domain", 20)')
                           :gsub("vocab = 2048", "vocab = 300")
                           :gsub("%.%./shared/data", os.getenv("DGA_SHARED_DATA") or (ROOT .. "/../shared/data"))
        assert.is_truthy(lines:find("for step = 1, 2 do", 1, true))
        local code, out, err = session(lines)
        assert.are.equal(0, code, err)
        assert.are.equal("", err)
        contains(out, "It was a")
    end)

    it("answers help on Lua's own functions, on help and on a global object's method without an error", function()
        local code, out, err = session("help(print)\nhelp(string.format)\nhelp(help)\nx = dga.vec{1, 2}\n" ..
                                       "help(\"x:shape\")\nhelp(x.shape)\nhelp(42)\n")
        assert.are.equal(0, code, err)
        assert.are.equal("", err)
        contains(out, "print(...)\n  Writes its arguments")
        contains(out, "string.format(fmt, ...) -> string")
        contains(out, "help([x]): what x is")
        local _, shapes = out:gsub("t:shape%(%) %-> {d1, ...}", "")
        assert.are.equal(2, shapes)
        contains(out, "a number (integer): 42")
    end)

    it("keeps the globals of a script run with -i", function()
        write(tmp("setup.lua"), "answer = 41\nlocal hidden = 1\n")
        local code, out, err = session("answer + 1\n", tmp("setup.lua"))
        assert.are.equal(0, code, err)
        contains(out, "> 42\n")
    end)

    it("completes Lua names with Tab on a terminal", function()
        if os.execute("command -v script >/dev/null 2>&1") ~= true then pending("no 'script' to make a pty") end
        write(tmp("keys.txt"), "dga.tokenizer_l\t\nlocal m = dga.gpt{layers = 1, width = 16, heads = 2, " ..
                               "context = 8, vocab = 32}\nm:num_p\t()\n")
        local cmd = string.format("DGALUA_HISTORY=%s script -qfec %s /dev/null < %s", shell_quote(tmp("history")),
                                  shell_quote(shell_quote(DGALUA)), shell_quote(tmp("keys.txt")))
        local code, out = h.run(cmd, tmp("err.txt"))
        assert.are.equal(0, code, out)
        contains(out, "function dga.tokenizer_load")
        contains(out, "m:num_params()")
        assert.is_truthy(out:find("3952\r?\n"), out)   -- the model's parameter count, the result
    end)

    -- Types keys into dgalua on a pty (script), from directory cwd; returns its output.
    local function on_pty(keys, cwd)
        write(tmp("keys.txt"), keys)
        local cmd = string.format("cd %s && DGALUA_HISTORY=%s script -qfec %s /dev/null < %s", shell_quote(cwd or ROOT),
                                  shell_quote(tmp("history")), shell_quote(shell_quote(DGALUA)),
                                  shell_quote(tmp("keys.txt")))
        local code, out = h.run(cmd, tmp("err.txt"))
        assert.are.equal(0, code, out)
        return out
    end

    it("completes file names inside a string past every /, relative and absolute", function()
        if os.execute("command -v script >/dev/null 2>&1") ~= true then pending("no 'script' to make a pty") end
        os.execute("mkdir -p " .. shell_quote(tmp("shared/data_dir")) .. " " .. shell_quote(tmp("work")))
        write(tmp("shared/data_dir/file_one.txt"), "")
        local out = on_pty('print(("x"):rep(0) .. "' .. tmp("shared/da") .. '\tfi\t")\n' ..
                           'print("../shared/da\tfi\t")\n', tmp("work"))
        -- what print wrote (the typed line shows the same path inside quotes)
        assert.is_truthy(out:find("[\r\n]" .. tmp("shared/data_dir/file_one.txt"):gsub("%p", "%%%0") .. "\r?\n"), out)
        assert.is_truthy(out:find("[\r\n]%.%./shared/data_dir/file_one%.txt\r?\n"), out)
    end)

    it("keeps a multi-line entry as one history entry across restarts", function()
        if os.execute("command -v script >/dev/null 2>&1") ~= true then pending("no 'script' to make a pty") end
        os.remove(tmp("history"))
        on_pty("for i = 1, 2 do\nprint(i * 11)\nend\n")
        local hist = read(tmp("history"))
        assert.is_truthy(hist:find("\nfor i = 1, 2 do\nprint%(i %* 11%)\nend\n"), hist)
        -- a new session: the Up arrow brings the whole loop back, and Enter runs it
        local out = on_pty("\27[A\n")
        assert.is_truthy(out:find("11\r?\n22\r?\n"), out)
        -- a history file of the old form (a line an entry) keeps its lines as entries
        write(tmp("history"), "old_a = 1\nold_b = 2\n")
        out = on_pty("\27[A\nprint('seen', old_a, old_b)\n")   -- the last entry alone
        assert.is_truthy(out:find("[\r\n]seen\tnil\t2\r?\n"), out)
        hist = read(tmp("history"))
        assert.is_truthy(hist:find("^#%d+\nold_a = 1\n#%d+\nold_b = 2\n"), hist)
    end)
end)

-- The CSV reader of the run logs (util.csvlog) is total: every input parses or fails with
-- "<file>:<line>: <what>", and what it parses the writer writes back the same.
local csvlog = require "util.csvlog"
local h = require "tests.lua.helpers"

-- Runs fn(...) under a VM instruction budget, so a scanner that stops advancing fails the
-- test instead of hanging the suite. Returns pcall's results.
local function bounded(budget, fn, ...)
    debug.sethook(function() error("instruction budget exhausted: the parser does not advance", 0) end,
                  "", budget)
    local res = table.pack(pcall(fn, ...))
    debug.sethook()
    return table.unpack(res, 1, res.n)
end

describe("csvlog.parse", function()
    it("fails on a lone carriage return with the line, instead of spinning", function()
        local ok, err = bounded(1e6, csvlog.parse, "a,b\r\n1\r,2\r\n")
        assert.is_false(ok)
        assert.are.equal("csv:2: carriage return not followed by a line feed", err)
    end)

    it("fails on a stray quote with the line", function()
        local ok, err = bounded(1e6, csvlog.parse, "a,b\r\n1,2\r\n3,x\"y\r\n", "m.csv")
        assert.is_false(ok)
        assert.are.equal("m.csv:3: quote inside an unquoted field (quote the whole field)", err)
        ok, err = bounded(1e6, csvlog.parse, 'a,b\n"1"2,3\n', "m.csv")
        assert.is_false(ok)
        assert.matches("^m%.csv:2: \"2\" after the closing quote", err)
        -- an unterminated quote names the line it opened on
        ok, err = bounded(1e6, csvlog.parse, 'a,b\n1,"x\n\ny\n', "m.csv")
        assert.is_false(ok)
        assert.are.equal("m.csv:2: quoted field not closed before the end of the input", err)
    end)

    it("counts lines through quoted newlines", function()
        local recs, lines = csvlog.parse('a,b\r\n"x\ny\nz",2\r\n3,4\r\n')
        assert.are.same({{"a", "b"}, {"x\ny\nz", "2"}, {"3", "4"}}, recs)
        assert.are.same({1, 2, 5}, lines)
    end)

    it("parses or fails with a line on random bytes, and round-trips what it parses", function()
        local rng = dga.rng(4242)
        local alphabet = {",", '"', "\r", "\n", "a", "1", " ", "\0", "\255"}
        for case = 1, 3000 do
            local len = rng:below(40)
            local bytes = {}
            for i = 1, len do
                -- mostly the characters that steer the scanner, sometimes any byte
                bytes[i] = rng:below(4) == 0 and string.char(rng:below(256))
                           or alphabet[rng:below(#alphabet) + 1]
            end
            local text = table.concat(bytes)
            local ok, recs = bounded(1e6, csvlog.parse, text, "r.csv")
            if ok then
                local out = {}
                for r, rec in ipairs(recs) do out[r] = csvlog.format_record(rec) end
                local ok2, again = bounded(1e6, csvlog.parse, table.concat(out), "w.csv")
                assert.is_true(ok2, string.format("case %d %q: %s", case, text, tostring(again)))
                assert.are.same(recs, again, string.format("case %d %q", case, text))
            else
                assert.matches("^r%.csv:%d+: ", recs, nil, false, string.format("case %d %q", case, text))
            end
        end
    end)
end)

describe("csvlog.read", function()
    it("names the file and line of a malformed log", function()
        local d = h.tmpdir()
        finally(function() h.rm(d) end)
        local path = d .. "/metrics.csv"
        h.write(path, "step,loss\r\n0,1\r\n4,2,9\r\n")
        h.raises(path .. ":3: expected 2 fields, found 3", csvlog.read, path)
        h.write(path, "step,loss\r\n0,1\r\n4\r,2\r\n")
        h.raises(path .. ":3: carriage return not followed by a line feed", csvlog.read, path)
        h.raises(path .. ":3: carriage return", csvlog.truncate_after, path, "step", 0)
    end)
end)

describe("csvlog writing", function()
    it("raises on a failed write or flush, naming the file (a full disk: /dev/full)", function()
        h.raises("/dev/full: cannot write: No space left on device", csvlog.open, "/dev/full", {"step", "loss"})
        -- a disk that fills up after the header: the log's file is swapped for /dev/full
        local d = h.tmpdir()
        finally(function() h.rm(d) end)
        local log = csvlog.open(d .. "/m.csv", {"step"})
        log.file:close()
        log.file = assert(io.open("/dev/full", "wb"))
        log.path = "/dev/full"
        log:write_list{1}
        h.raises("/dev/full: cannot write: No space left on device", log.flush, log)
        log:write{step = 2}
        h.raises("/dev/full: cannot write: No space left on device", log.close, log)
        log:close()   -- idempotent once closed
    end)
end)

-- Helpers shared by the busted specs: files, temporary directories, the dgalua executable,
-- error assertions. Specs run from the repository top, so they load this file with
--   local h = require "tests.lua.helpers"
local assert = require "luassert"

local M = {}

function M.shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- The current directory (busted runs from the repository top).
function M.cwd()
    local p = io.popen("pwd")
    local d = p:read("l")
    p:close()
    return d
end

-- $DGALUA (set by tests/run) as an absolute path, so it works after a `cd`; nil when unset.
M.DGALUA = os.getenv("DGALUA")
if M.DGALUA and M.DGALUA:sub(1, 1) ~= "/" then M.DGALUA = M.cwd() .. "/" .. M.DGALUA end

function M.write(path, text)
    local f = assert(io.open(path, "wb"))
    f:write(text)
    f:close()
end

-- The contents of a file, or nil when it cannot be opened.
function M.read(path)
    local f = io.open(path, "rb")
    if not f then return nil end
    local s = f:read("a")
    f:close()
    return s
end

function M.exists(path)
    local f = io.open(path, "rb")
    if f then f:close() end
    return f ~= nil
end

-- A fresh directory under /tmp, with the given subdirectories created in it.
function M.tmpdir(...)
    local p = os.tmpname()
    os.remove(p)
    local dirs = {M.shell_quote(p)}
    for _, sub in ipairs({...}) do dirs[#dirs + 1] = M.shell_quote(p .. "/" .. sub) end
    assert(os.execute("mkdir -p " .. table.concat(dirs, " ")))
    return p
end

-- Removes a tree made by tmpdir (anything outside /tmp is left alone).
function M.rm(path)
    if path and path:match("^/tmp/") then os.execute("rm -rf " .. M.shell_quote(path)) end
end

-- Runs a shell command with its stderr sent to the file errf; returns the exit code, stdout
-- and stderr.
function M.run(cmd, errf)
    local p = io.popen(cmd .. " 2>" .. M.shell_quote(errf))
    local out = p:read("a")
    local _, _, code = p:close()
    return code, out, M.read(errf) or ""
end

-- Runs fn(...) and returns its error message; fails the test if fn succeeds.
function M.err_of(fn, ...)
    local ok, e = pcall(fn, ...)
    assert.is_false(ok, "expected an error")
    return tostring(e)
end

-- Asserts that s contains text (a plain match, not a pattern).
function M.contains(s, text)
    assert(s:find(text, 1, true), string.format("%q does not contain %q", s, text))
end

-- Asserts that fn(...) raises an error whose message contains text (plain match).
function M.raises(text, fn, ...)
    local err = M.err_of(fn, ...)
    M.contains(err, text)
    return err
end

-- A policy's ctx for unit tests: components of the given sizes (all available), step 0, and a
-- log that keeps the last fields logged in ctx.logged. `extra` fields are copied in.
function M.policy_ctx(sizes, extra)
    local ctx = {k = #sizes, sizes = dga.tensor(sizes, "float32"), budget = sizes, step = 0,
                 history = {}, logged = {}}
    function ctx.log(a, b)
        local f = (a == ctx) and b or a
        for key, v in pairs(f) do ctx.logged[key] = v end
    end
    for key, v in pairs(extra or {}) do ctx[key] = v end
    return ctx
end

-- Removes a directory tree under /tmp (a guard against removing anything else).
function M.rmtree(d)
    if d and d:match("^/tmp/") then os.execute("rm -rf '" .. d .. "'") end
end

-- The rows of a CSV as text with the `seconds` column (the only wall-clock value) removed.
function M.rows_without_seconds(path)
    local header, rows, index = require("util.csvlog").read(path)
    assert.is_not_nil(header, path)
    local out = {}
    for r, row in ipairs(rows) do
        local keep = {}
        for j, v in ipairs(row) do if j ~= index.seconds then keep[#keep + 1] = v end end
        out[r] = table.concat(keep, ",")
    end
    return out
end

-- The two-rank launcher of the MPI build beside DGALUA: the mpirun prefix (under a timeout,
-- so a hung rank fails the test instead of the suite) and the executable; or nil and why not.
function M.mpi_two_ranks()
    if not M.DGALUA then return nil, "DGALUA is not set" end
    local exe = M.DGALUA:gsub("/[^/]*$", "") .. "/mpi/dgalua"
    if not M.exists(exe) then return nil, "no MPI build at " .. exe .. " (make MPI=1)" end
    local p = io.popen("command -v mpirun")
    local mpirun = p:read("l")
    p:close()
    if not mpirun or mpirun == "" then return nil, "mpirun is not installed" end
    return "timeout -k 5 180 " .. mpirun .. " --allow-run-as-root --oversubscribe -np 2 ", exe
end

return M

-- Finding the data sets: MMLU (the original CSV release layout) and the multi-domain JSONL
-- corpus. Order of search, first hit wins:
--   1. the directory given on the command line (--mmlu DIR / --corpus DIR): must be valid;
--   2. env DGA_SHARED_DATA/<mmlu|corpus>;
--   3. <repo>/data/<mmlu|corpus>   (what `make data` creates);
--   4. <repo>/../shared/data/<mmlu|corpus>.
-- When MMLU is nowhere, `require_mmlu` prints exactly where to put it and exits non-zero.
local runinfo = require "util.runinfo"

local M = {}

-- Tells on stderr how many malformed input lines a text reader skipped, with the first
-- "file:line: reason" messages; `stats` is what dga.read_texts, reader:stats() or
-- dga.store_build return. Returns the count.
function M.warn_skipped(stats)
    local n = stats and stats.skipped or 0
    if n > 0 then
        io.stderr:write(string.format("warning: %d malformed lines skipped, e.g.:\n", n))
        for _, m in ipairs(stats.messages or {}) do io.stderr:write("  ", m, "\n") end
    end
    return n
end

-- dev/ and test/ holding at least one <subject>_<split>.csv each
local function is_mmlu(dir)
    for _, split in ipairs{"dev", "test"} do
        local sub, found = dir .. "/" .. split, false
        if not runinfo.is_dir(sub) then return false end
        for _, name in ipairs(runinfo.list(sub)) do
            if name:match("_" .. split .. "%.csv$") then found = true break end
        end
        if not found then return false end
    end
    return true
end

local function is_corpus(dir)
    if not runinfo.is_dir(dir) then return false end
    for _, name in ipairs(runinfo.list(dir)) do
        if runinfo.is_dir(dir .. "/" .. name) then return true end
    end
    return false
end

-- Candidate directories for `what` ("mmlu" or "corpus"), in search order.
function M.candidates(what)
    local root = runinfo.repo_root()
    local out = {}
    local env = os.getenv("DGA_SHARED_DATA")
    if env and env ~= "" then out[#out + 1] = env .. "/" .. what end
    out[#out + 1] = root .. "/data/" .. what
    out[#out + 1] = root .. "/../shared/data/" .. what
    return out
end

local function find(what, given, check)
    if given then
        if check(given) then return given end
        return nil, string.format("%s directory %s not found or not in the expected layout", what, given)
    end
    for _, dir in ipairs(M.candidates(what)) do
        if check(dir) then return dir end
    end
    return nil, what .. " not found"
end

function M.find_mmlu(given) return find("mmlu", given, is_mmlu) end
function M.find_corpus(given) return find("corpus", given, is_corpus) end

-- The corpus domains (sub-directories), sorted.
function M.corpus_domains(dir)
    local out = {}
    for _, name in ipairs(runinfo.list(dir)) do
        if runinfo.is_dir(dir .. "/" .. name) then out[#out + 1] = name end
    end
    return out
end

local function die(lines)
    io.stderr:write(table.concat(lines, "\n"), "\n")
    os.exit(2)
end

function M.require_mmlu(given)
    local dir, err = M.find_mmlu(given)
    if dir then return dir end
    local where = M.candidates("mmlu")
    die{
        "error: " .. err .. ".",
        "MMLU is needed in the original release layout (hendrycks/test data.tar):",
        "    <DIR>/dev/<subject>_dev.csv  <DIR>/val/<subject>_val.csv  <DIR>/test/<subject>_test.csv",
        "(no header; columns question,A,B,C,D,answer). Put it at one of:",
        "    " .. where[#where - 1] .. "      (e.g. `make data`, or unpack data.tar there)",
        "    " .. where[#where],
        "or pass --mmlu DIR (or set DGA_SHARED_DATA to a directory holding mmlu/).",
    }
end

function M.require_corpus(given)
    local dir, err = M.find_corpus(given)
    if dir then return dir end
    local where = M.candidates("corpus")
    die{
        "error: " .. err .. ".",
        "A corpus is a directory of domains: <DIR>/<domain>/*.jsonl (one {\"text\": ...} per line).",
        "Create one with `make data` (-> " .. where[#where - 1] .. "), or put it at",
        "    " .. where[#where],
        "or pass --corpus DIR.",
    }
end

return M

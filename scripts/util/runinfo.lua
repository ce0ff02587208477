-- Run-directory helpers: directories, atomic small-file writes, the config file, the
-- process id, and the repository root.
--
-- Files go through lfs (Debian lua-filesystem). Pure Lua cannot fsync: small files written
-- here (config, the "latest" pointer, rewritten CSVs) are written to <path>.tmp.<pid> and
-- renamed, which is atomic against a crash of this process (the case resume must survive);
-- the checkpoints themselves are written and fsynced by the C core.
local lfs = require "lfs"

local M = {}

function M.exists(path) return lfs.attributes(path, "mode") ~= nil end
function M.is_dir(path) return lfs.attributes(path, "mode") == "directory" end
function M.is_file(path) return lfs.attributes(path, "mode") == "file" end

-- path as an absolute path (relative ones against the working directory).
function M.abspath(path)
    if path:sub(1, 1) == "/" then return path end
    return lfs.currentdir() .. "/" .. path
end

-- mkdir -p. Raises with the failing path.
function M.mkdir_p(path)
    if M.is_dir(path) then return path end
    local acc = path:sub(1, 1) == "/" and "/" or ""
    for part in path:gmatch("[^/]+") do
        acc = acc == "" and part or (acc:sub(-1) == "/" and acc .. part or acc .. "/" .. part)
        if not M.is_dir(acc) then
            local ok, err = lfs.mkdir(acc)
            if not ok and not M.is_dir(acc) then
                error("cannot create directory " .. acc .. ": " .. tostring(err), 2)
            end
        end
    end
    return path
end

-- Sorted names in a directory (without . and ..); {} when it does not exist.
function M.list(dir)
    local out = {}
    if not M.is_dir(dir) then return out end
    for name in lfs.dir(dir) do
        if name ~= "." and name ~= ".." then out[#out + 1] = name end
    end
    table.sort(out)
    return out
end

-- Every summary.json under dir, one per run directory (depth first, names sorted), not looking
-- into plots/ and data/ (figures and token windows, never runs). A missing dir gives {}.
function M.find_summaries(dir, out)
    out = out or {}
    if not M.is_dir(dir) then return out end
    local names = {}
    for name in lfs.dir(dir) do
        if name ~= "." and name ~= ".." then names[#names + 1] = name end
    end
    table.sort(names)
    for _, name in ipairs(names) do
        local path = dir .. "/" .. name
        if name == "summary.json" then
            out[#out + 1] = path
        elseif M.is_dir(path) and name ~= "plots" and name ~= "data" then
            M.find_summaries(path, out)
        end
    end
    return out
end

function M.read_file(path)
    -- not a regular file (a FIFO would block the open): nothing to read here
    local kind = dga and dga.path_kind and dga.path_kind(path)
    if kind and kind ~= "file" then return nil, path .. ": is a " .. kind .. ", not a file" end
    local f, err = io.open(path, "rb")
    if not f then return nil, err end
    local s = f:read("a")
    f:close()
    return s
end

-- Writes text to path atomically: the core's temporary file + fsync + rename, so a crash
-- leaves the old file or the new one, never a torn one.
function M.write_atomic(path, text)
    local ok, err = pcall(dga.write_file_atomic, path, text)
    if not ok then error(err, 2) end
end

-- ---- serialising a config table as a Lua chunk ("return {...}") ----------------------
local function is_ident(s) return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil end

local function ser(v, indent, out, seen)
    local t = type(v)
    if t == "number" then
        if math.type(v) == "integer" then
            out[#out + 1] = string.format("%d", v)
        elseif v ~= v then
            out[#out + 1] = "0/0"
        elseif v == math.huge then
            out[#out + 1] = "math.huge"
        elseif v == -math.huge then
            out[#out + 1] = "-math.huge"
        else
            out[#out + 1] = string.format("%.17g", v)
        end
    elseif t == "string" then
        out[#out + 1] = string.format("%q", v)
    elseif t == "boolean" then
        out[#out + 1] = tostring(v)
    elseif t == "table" then
        if seen[v] then error("config: cycle in table", 0) end
        seen[v] = true
        local keys, n = {}, #v
        for key in pairs(v) do
            if not (math.type(key) == "integer" and key >= 1 and key <= n) then
                keys[#keys + 1] = key
            end
        end
        table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
        local pad = indent .. "  "
        out[#out + 1] = "{\n"
        for i = 1, n do
            out[#out + 1] = pad
            ser(v[i], pad, out, seen)
            out[#out + 1] = ",\n"
        end
        for _, key in ipairs(keys) do
            out[#out + 1] = pad
            if is_ident(key) then
                out[#out + 1] = key
            else
                out[#out + 1] = "["
                ser(key, pad, out, seen)
                out[#out + 1] = "]"
            end
            out[#out + 1] = " = "
            ser(v[key], pad, out, seen)
            out[#out + 1] = ",\n"
        end
        out[#out + 1] = indent .. "}"
        seen[v] = nil
    else
        -- Tensors, functions, userdata: described, not serialised (the config records where
        -- data came from; the data itself lives in the store / files).
        out[#out + 1] = string.format("%q", "<" .. tostring(v) .. ">")
    end
end

function M.serialize(v)
    local out = {}
    ser(v, "", out, {})
    return table.concat(out)
end

-- Deep copy of the plain-data part of a config (userdata replaced by their description).
function M.plain(v, seen)
    seen = seen or {}
    local t = type(v)
    if t == "table" then
        if seen[v] then return seen[v] end
        local out = {}
        seen[v] = out
        for key, val in pairs(v) do
            if type(key) == "string" or type(key) == "number" then out[key] = M.plain(val, seen) end
        end
        return out
    elseif t == "number" or t == "string" or t == "boolean" then
        return v
    else
        return "<" .. tostring(v) .. ">"
    end
end

function M.write_config(path, cfg)
    M.write_atomic(path, "-- dgalua run configuration (written by the trainer)\nreturn "
                          .. M.serialize(M.plain(cfg)) .. "\n")
end

function M.read_config(path)
    local chunk, err = loadfile(path, "t", {math = {huge = math.huge}})
    if not chunk then error("cannot read config " .. path .. ": " .. tostring(err), 2) end
    return chunk()
end

-- ---- where the repository is ---------------------------------------------------------
-- The directory holding scripts/util/ (found from this file's own path).
function M.repo_root()
    if M._root then return M._root end
    local src = debug.getinfo(1, "S").source
    local dir = src:sub(1, 1) == "@" and src:sub(2):match("^(.*)/scripts/util/[^/]*$")
    if not dir or dir == "" then dir = "." end
    -- Make it absolute so runs started from elsewhere resolve the same paths.
    if dir:sub(1, 1) ~= "/" then
        local cwd = lfs.currentdir()
        dir = (dir == ".") and cwd or (cwd .. "/" .. dir)
    end
    M._root = dir
    return dir
end

-- Wall clock seconds with sub-second resolution when available (progress / metrics only;
-- nothing depends on it).
function M.now()
    local ok, sys = pcall(require, "system")
    if ok and sys.gettime then return sys.gettime() end
    return os.time()
end

return M

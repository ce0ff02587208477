-- config.lua of a run directory and the tensors of its configuration as NumPy side files
-- under data/, so a run directory resumes alone (part of the run-directory module,
-- scripts/rundir/init.lua).
local runinfo = require "util.runinfo"

local M = {}

-- Whether v is a dga tensor (trainer/sources.lua uses this one too).
function M.is_tensor(v)
    if type(v) ~= "userdata" then return false end
    local mt = getmetatable(v)
    return type(mt) == "table" and mt.__name == "dga.tensor"
end
local is_tensor = M.is_tensor

-- Tensors inside the config, with their dotted paths ("specific.train", "basis.2.heldout").
local function collect_tensors(v, path, out, seen)
    if is_tensor(v) then
        out[#out + 1] = {path = path, tensor = v}
    elseif type(v) == "table" and not seen[v] then
        seen[v] = true
        for key, val in pairs(v) do
            if type(key) == "string" or math.type(key) == "integer" then
                collect_tensors(val, path == "" and tostring(key) or (path .. "." .. tostring(key)),
                                out, seen)
            end
        end
    end
    return out
end

-- A copy of the config where each tensor is replaced by its file reference.
local function with_file_refs(v, files, seen)
    if is_tensor(v) then return {tensor_file = files[v]} end
    if type(v) ~= "table" then return v end
    if seen[v] then return seen[v] end
    local out = {}
    seen[v] = out
    for key, val in pairs(v) do out[key] = with_file_refs(val, files, seen) end
    return out
end

-- Writes config.lua, and each tensor of cfg (int32 or float32) once as data/<path>.npy.
function M.save_config(dir, cfg)
    local files = {}
    local list = collect_tensors(cfg, "", {}, {})
    if #list > 0 then runinfo.mkdir_p(dir .. "/data") end
    for _, e in ipairs(list) do
        if not files[e.tensor] then
            local rel = "data/" .. e.path:gsub("[^%w%-_.]", "_") .. ".npy"
            local t = e.tensor
            if t:dtype() == "int32" or t:dtype() == "float32" then
                dga.npy_save(dir .. "/" .. rel, t:clone())
            end
            files[e.tensor] = rel
        end
    end
    runinfo.write_config(dir .. "/config.lua", with_file_refs(cfg, files, {}))
end

-- The configuration of a run directory, its tensors loaded back from data/ (opts.tensors =
-- false: the table as written, each tensor left as its {tensor_file = ...} reference).
function M.load_config(dir, opts)
    local cfg = runinfo.read_config(dir .. "/config.lua")
    if opts and opts.tensors == false then return cfg end
    local cache = {}
    local function walk(v)
        if type(v) ~= "table" then return v end
        if v.tensor_file then
            if not cache[v.tensor_file] then cache[v.tensor_file] = dga.npy_load(dir .. "/" .. v.tensor_file) end
            return cache[v.tensor_file]
        end
        for key, val in pairs(v) do v[key] = walk(val) end
        return v
    end
    cfg = walk(cfg)
    cfg.run_dir = dir
    return cfg
end

return M

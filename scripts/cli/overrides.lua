-- `--set key=value` overrides of a trainer configuration, by dotted path.
--
--   local overrides = require "cli.overrides"
--   local s = overrides.parse("optimizer.lr=3e-3")   -- {key = "optimizer.lr", value = 0.003, raw = ...}
--   overrides.apply(cfg, {s, ...}, extra_known)        -- checks every key, then sets it in cfg
--
-- A key is known when trainer/schema.lua describes it as settable, or it is one of
-- `extra_known` (a list of dotted keys, or a map key -> example value). An unknown key is an
-- error that lists the close matches. The value is read as a boolean (true / false), a
-- number, or else a string ('quoted' or "quoted" forces a string). A value of another type
-- than the schema's, out of its range or not one of its choices is an error; an integer
-- field refuses a fraction.
--
-- policy.<option> keys are the policy's own options (beta, eta, target_change, ...). A key
-- is known when some built-in policy, or the cfg's policy, declares the option in its
-- `defaults`; it is applied to a cfg whose policy takes that option, and skipped (said once
-- on stderr) for the others. The policy itself checks the value (policies.get). A sweep
-- applies policy options to its cells' policy specs before anything runs instead
-- (harness/sweep.lua), so the cells record them and a key no policy knows stops it there.
local M = {}

-- Fields a sweep sets itself (apply's `reserved` argument): --set must not move a run out
-- of its directory or give every seed the same training seed.
M.SWEEP_RESERVED = {run_dir = "the sweep names each run's directory (use --out)",
                    seed = "the sweep sets each run's seed (use --seeds)",
                    ["policy.name"] = "each cell runs its own policy (use --policy)"}

local usage_error = require("util.errors").usage
M.usage_error = usage_error

-- "key=value" -> {key=, value=, raw=}; nil and a message when malformed.
function M.parse(s)
    local key, val = tostring(s):match("^%s*([%w_%.]+)%s*=(.*)$")
    if not key or key:match("^%.") or key:match("%.$") or key:match("%.%.") then
        return nil, string.format("'%s': expected key=value with a dotted key, e.g. optimizer.lr=3e-3", tostring(s))
    end
    local v
    local q = val:match("^'(.*)'$") or val:match('^"(.*)"$')
    if q then v = q
    elseif val == "true" then v = true
    elseif val == "false" then v = false
    elseif tonumber(val) and not val:match("^%s*0[xX]") then
        v = tonumber(val)
        if v ~= v or v == math.huge or v == -math.huge then
            return nil, string.format("'%s': %s is not a finite number", s, val)
        end
    elseif val == "" then
        return nil, string.format("'%s': no value after '='", s)
    else v = val end
    return {key = key, value = v, raw = s}
end

local function kind_of(v)
    if math.type(v) == "integer" then return "int" end
    local t = type(v)
    if t == "number" or t == "boolean" or t == "string" or t == "table" then return t end
    return nil
end

-- Options the built-in policies (and `extra_policy`) declare: name -> true.
local function policy_options(extra_policy)
    local ok_p, policies = pcall(require, "policies")
    local out = {}
    if not ok_p then return out end
    local names = {}
    for _, n in ipairs(policies.builtin) do names[#names + 1] = n end
    if extra_policy then names[#names + 1] = extra_policy end
    for _, n in ipairs(names) do
        local ok, mod = pcall(policies.module, n)
        if ok and type(mod.defaults) == "table" then
            for key in pairs(mod.defaults) do out[key] = true end
        end
    end
    return out
end

-- The known keys: path -> type ("int", "number", "boolean", "string", or "any" for a policy
-- option or an experiment's own key, which their owners check). The trainer's keys come
-- from trainer/schema.lua (its settable ones); cfg's policy adds its own options.
function M.known(cfg, extra_known)
    local schema = require "trainer.schema"
    local known = {}
    for key, e in pairs(schema.settable()) do known[key] = e.type end
    for _, group in ipairs{"model", "optimizer", "schedule", "align", "store", "policy"} do known[group] = "table" end
    for key, v in pairs(extra_known or {}) do
        if math.type(key) == "integer" then known[v] = known[v] or "any"
        else known[key] = known[key] or kind_of(v) or "any" end
    end
    known["policy.name"] = "string"
    for opt in pairs(policy_options(cfg and cfg.policy and cfg.policy.name)) do
        known["policy." .. opt] = known["policy." .. opt] or "any"
    end
    return known
end

-- Known keys close to `key` (trainer/schema.lua's matching).
function M.close_matches(key, known)
    local list = {}
    for k, kind in pairs(known) do
        if kind ~= "table" then list[#list + 1] = k end
    end
    return require("trainer.schema").close_matches(key, list)
end

local function sorted_keys(known)
    local out = {}
    for k, kind in pairs(known) do if kind ~= "table" then out[#out + 1] = k end end
    table.sort(out)
    return out
end

-- Checks one parsed override against the known keys; returns the value to set (an integer
-- field's 1e2 becomes 100) or raises a usage error.
function M.check(s, known, reserved)
    local key, v = s.key, s.value
    local where = "--set " .. s.raw
    if reserved and reserved[key] then
        error(usage_error(string.format("%s: '%s' cannot be set here: %s", where, key, reserved[key])), 0)
    end
    local kind = known[key]
    if not kind then
        local close = M.close_matches(key, known)
        local hint = #close > 0 and ("close matches: " .. table.concat(close, ", "))
                     or ("known keys: " .. table.concat(sorted_keys(known), ", "))
        error(usage_error(string.format("%s: unknown key '%s' (%s)", where, key, hint)), 0)
    end
    if kind == "table" then
        local subs = {}
        for k, kk in pairs(known) do
            if kk ~= "table" and k:sub(1, #key + 1) == key .. "." then subs[#subs + 1] = k end
        end
        table.sort(subs)
        error(usage_error(string.format("%s: '%s' is a group of settings; set one of its fields: %s",
                                        where, key, table.concat(subs, ", "))), 0)
    end
    local got = kind_of(v)
    local function bad(expected)
        error(usage_error(string.format("%s: '%s' expects %s, got %s '%s'", where, key, expected,
                                        got == "int" and "the integer" or (got == "number" and "the number" or "the " .. got),
                                        tostring(v))), 0)
    end
    if kind == "int" then
        if got == "number" and v == math.floor(v) then v = math.tointeger(v)
        elseif got ~= "int" then bad("an integer") end
    elseif kind == "number" then
        if got ~= "int" and got ~= "number" then bad("a number") end
    elseif kind == "boolean" then
        if got ~= "boolean" then bad("true or false") end
    elseif kind == "string" then
        if got ~= "string" then bad("a string") end
    end
    local e = require("trainer.schema").by_key[key]
    if e then
        local want = require("trainer.schema").check_value(e, v)
        if want then bad(want) end
    end
    return v
end

-- Does the policy `name` take option `opt`? true, false, or nil (cannot tell: it declares
-- no defaults and is not one of the fixed policies).
function M.policy_takes(name, opt)
    local ok_p, policies = pcall(require, "policies")
    if not ok_p then return nil end
    local ok, mod = pcall(policies.module, name)
    if not ok then return nil end
    if type(mod.defaults) == "table" then return mod.defaults[opt] ~= nil end
    local ok2, obj = pcall(mod.new, {})
    if ok2 and type(obj) == "table" and obj.fixed then return false end
    return nil
end

local skipped_said = {}

local function set_path(cfg, key, v, where)
    local node, parts = cfg, {}
    for part in key:gmatch("[^%.]+") do parts[#parts + 1] = part end
    for i = 1, #parts - 1 do
        local p = parts[i]
        if node[p] == nil then node[p] = {} end
        if type(node[p]) ~= "table" then
            error(usage_error(string.format("%s: '%s' is not a table in this configuration",
                                            where, table.concat(parts, ".", 1, i))), 0)
        end
        node = node[p]
    end
    node[parts[#parts]] = v
end

-- Checks every override, then applies them to cfg in order (the last of a key wins).
-- `sets` holds parsed overrides (parse's tables) or "key=value" strings; `reserved` maps
-- keys that may not be set to the reason (M.SWEEP_RESERVED in a sweep). Returns cfg.
function M.apply(cfg, sets, extra_known, reserved)
    if not sets or #sets == 0 then return cfg end
    local known = M.known(cfg, extra_known)
    local checked = {}
    for i, s in ipairs(sets) do
        if type(s) == "string" then
            local p, err = M.parse(s)
            if not p then error(usage_error("--set " .. err), 0) end
            s = p
        end
        checked[i] = {s = s, value = M.check(s, known, reserved)}
    end
    for _, c in ipairs(checked) do
        local key, where = c.s.key, "--set " .. c.s.raw
        local opt = key:match("^policy%.(.+)$")
        if opt and opt ~= "name" then
            local pname = cfg.policy and cfg.policy.name or "uniform"
            local takes = M.policy_takes(pname, opt)
            if takes == false then
                local said = pname .. "\0" .. opt
                if not skipped_said[said] then
                    skipped_said[said] = true
                    io.stderr:write(string.format("%s: policy '%s' has no option '%s'; not applied to its runs\n",
                                                  where, pname, opt))
                end
            else
                set_path(cfg, key, c.value, where)
                local policies = require "policies"
                local ok, err = pcall(policies.get, pname, cfg.policy)
                if not ok then
                    error(usage_error(string.format("%s: %s", where, tostring(err))), 0)
                end
            end
        else
            set_path(cfg, key, c.value, where)
        end
    end
    return cfg
end

return M

-- The policy specs of a sweep (re-exported by harness/sweep.lua): the --policy entries
-- (registry names, labels of the experiment's list, policy files, each with options given to
-- that policy alone: dga:eta=5), the --set policy.KEY options applied to the cells' specs
-- before anything runs, and the --set overrides of a trainer cfg.
local runinfo = require "util.runinfo"
local overrides = require "cli.overrides"

local M = {}

-- The name a policy file declares: the module's `name`, else the `name` of the object its
-- new({}) returns.
function M.policy_file_name(path)
    local policies = require "policies"
    local ok, mod = pcall(policies.module, path)
    if not ok then error(overrides.usage_error("--policy " .. path .. ": " .. tostring(mod)), 0) end
    local name = type(mod.name) == "string" and mod.name or nil
    if not name then
        local ok2, obj = pcall(mod.new, {})
        if ok2 and type(obj) == "table" and type(obj.name) == "string" then name = obj.name end
    end
    if not name or name == "" then
        error(overrides.usage_error("--policy " .. path .. ": the policy declares no name (give its "
                                    .. "module, or the object new() returns, a `name` field)"), 0)
    end
    if not name:match("^[%w_%-%.]+$") or name:match("^%.") then
        error(overrides.usage_error(string.format("--policy %s: declared name '%s' cannot name a run "
                                    .. "directory (letters, digits, _ - .)", path, name)), 0)
    end
    return name
end

local function copy(t)
    local out = {}
    for key, v in pairs(t) do out[key] = v end
    return out
end

-- "dga:eta=5,beta=1" -> "dga", {{key = "eta", value = 5, raw = "eta=5"}, ...}; an entry
-- without options -> entry, {}. A file path may hold ':' only before its ".lua".
function M.split_policy_entry(entry)
    local head, opts = entry:match("^(.-):([%w_]+=.*)$")
    if not head or head == "" then return entry, {} end
    local list = {}
    for part in opts:gmatch("[^,]+") do
        local s, err = overrides.parse(part)
        if not s then error(overrides.usage_error("--policy " .. entry .. ": " .. err), 0) end
        if s.key:find(".", 1, true) or s.key == "name" then
            error(overrides.usage_error(string.format("--policy %s: '%s' is not a policy option name",
                                                      entry, s.key)), 0)
        end
        list[#list + 1] = s
    end
    return head, list
end

-- The label suffix of an option: "_eta5", "_beta0.1", "_initnatural".
local function option_tag(s)
    local v = s.value
    if math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2^53 then v = math.tointeger(v) end
    return "_" .. s.key .. tostring(v):gsub("[^%w%-%.]", "_")
end

-- The base spec of a --policy entry (no options): a file, a label of default_list, or a
-- policy name.
local function base_spec(entry, default_list)
    if entry:match("%.lua$") or (entry:find("/", 1, true) and runinfo.is_file(entry)) then
        local path = runinfo.abspath(entry)
        return {name = path, label = M.policy_file_name(path)}
    end
    for _, spec in ipairs(default_list or {}) do
        if (spec.label or spec.name) == entry then
            local s = copy(spec)
            s.label = entry
            return s
        end
    end
    local ok, err = pcall(require("policies").module, entry)
    if not ok then
        local labels = {}
        for _, spec in ipairs(default_list or {}) do labels[#labels + 1] = spec.label or spec.name end
        error(overrides.usage_error(string.format("--policy %s: %s%s", entry,
            tostring(err):gsub("^policies: ", ""),
            #labels > 0 and ("; this experiment's policies: " .. table.concat(labels, ", ")) or "")), 0)
    end
    return {name = entry, label = entry}
end

-- Raises a usage error naming the entry when the policy refuses its options.
local function check_spec(spec, where)
    local ok, err = pcall(require("policies").get, spec.name, M.policy_config(spec))
    if not ok then
        -- the policy's message without its file:line (the user's mistake is in the option)
        local msg = tostring(err):gsub("^[^\n]-%.lua:%d+: ", ""):gsub("^policies: ", "")
        error(overrides.usage_error(string.format("%s: %s", where, msg)), 0)
    end
end

-- The policy specs to run: each a trainer policy table plus `label` (the name of its run
-- directory). Without --policy: default_list (labels default to the names). With it, each
-- entry is one of
--   - a file (ends in .lua, or is a path with a "/"): {name = <absolute path>, label = <declared name>};
--   - a label of default_list: that entry (with its options);
--   - a policy name: {name = NAME, label = NAME};
-- each optionally followed by ":key=value[,key=value...]", options given to that policy
-- only; the label then shows them (dga:eta=5 -> dga_eta5), so two settings of one policy
-- run side by side in their own directories.
function M.policies(a, default_list)
    local list = {}
    local chosen = a.policy or {}
    if #chosen == 0 then
        for _, spec in ipairs(default_list or {}) do
            local s = copy(spec)
            s.label = s.label or s.name
            list[#list + 1] = s
        end
    else
        for _, entry in ipairs(chosen) do
            local head, opts = M.split_policy_entry(entry)
            local s = base_spec(head, default_list)
            for _, o in ipairs(opts) do
                s[o.key] = o.value
                s.label = s.label .. option_tag(o)
                -- an option given to this policy alone wins over a --set for every policy
                s.pinned = s.pinned or {}
                s.pinned[o.key] = true
            end
            if #opts > 0 then check_spec(s, "--policy " .. entry) end
            list[#list + 1] = s
        end
    end
    local seen = {}
    for _, s in ipairs(list) do
        if seen[s.label] then
            error(overrides.usage_error("--policy: two policies would share the run name '" .. s.label .. "'"), 0)
        end
        seen[s.label] = true
    end
    return list
end

-- The trainer's cfg.policy of a spec: the spec without `label` and `pinned` (the options
-- --policy NAME:key=value gave it, which a --set policy.key does not override).
function M.policy_config(spec)
    local out = {}
    for key, v in pairs(spec) do
        if key ~= "label" and key ~= "pinned" then out[key] = v end
    end
    return out
end

-- The --set policy.<option> entries of parsed options, applied to the policy specs of the
-- cells (cell.policy) before anything runs, so each cell records the options it runs with.
-- An option that no policy of the sweep takes is refused, naming the policies; one that
-- only some take is applied to those, and said once.
function M.apply_policy_sets(a, cells, say)
    local specs, order = {}, {}
    for _, cell in ipairs(cells) do
        local spec = type(cell.policy) == "table" and cell.policy or cell.spec
        if type(spec) == "table" and spec.name and not specs[spec] then
            specs[spec] = true
            order[#order + 1] = spec
        end
    end
    -- Cells without policy specs: the trainer applies the options to each run (M.overrides).
    if #order == 0 then return end
    for _, s in ipairs(a.set or {}) do
        local opt = s.key:match("^policy%.(.+)$")
        if opt and opt ~= "name" then
            s.in_cells = true
            local takers, others, pinned = {}, {}, {}
            for _, spec in ipairs(order) do
                local label = spec.label or spec.name
                if overrides.policy_takes(spec.name, opt) == false then others[#others + 1] = label
                elseif spec.pinned and spec.pinned[opt] then pinned[#pinned + 1] = label
                else takers[#takers + 1] = spec end
            end
            if #pinned > 0 and say then
                say("--set %s: not applied to %s (its --policy option wins)", s.raw, table.concat(pinned, ", "))
            end
            if #takers == 0 and #pinned > 0 then goto next_set end
            if #takers == 0 then
                error(overrides.usage_error(string.format(
                    "--set %s: no policy of this sweep has the option '%s' (%s); give an option to one "
                    .. "policy with --policy NAME:%s=VALUE", s.raw, opt,
                    #others > 0 and table.concat(others, ", ") or "no policies", opt)), 0)
            end
            if #others > 0 and say then
                local names = {}
                for _, spec in ipairs(takers) do names[#names + 1] = spec.label or spec.name end
                say("--set %s: applied to %s only (%s %s no option '%s')", s.raw, table.concat(names, ", "),
                    table.concat(others, ", "), #others == 1 and "has" or "have", opt)
            end
            for _, spec in ipairs(takers) do
                spec[opt] = s.value
                check_spec(spec, "--set " .. s.raw .. " (policy " .. (spec.label or spec.name) .. ")")
            end
        end
        ::next_set::
    end
end

-- Applies the --set list of parsed options `a` to a trainer cfg (see cli/overrides.lua for
-- the checks); extra_known: the experiment's own fields. Policy options that
-- apply_policy_sets put into the cells' specs are not applied again. Returns cfg.
function M.overrides(a, cfg, extra_known)
    local sets = {}
    for _, s in ipairs(a.set or {}) do
        if not s.in_cells then sets[#sets + 1] = s end
    end
    return overrides.apply(cfg, sets, extra_known, overrides.SWEEP_RESERVED)
end

return M

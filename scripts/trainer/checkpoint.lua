-- The checkpoint schema of a run: everything a resume needs, in one safetensors file
-- written by the core (dga.save_checkpoint: temporary name, fsync, rename). Names as they
-- are in the file (the binding adds the extra./blob./user./user_number. prefixes):
--
--   the core's entries        transformer.* (the model under Hugging Face's GPT-2 names),
--                             optimizer.m.* / optimizer.v.* (AdamW moments) and the
--                             metadata the core writes (GPT2Config keys, dgalua.format,
--                             dgalua.crc32, optimizer.steps, optimizer.lr, ...:
--                             core/checkpoint.h)
--   blob.sampler              U8: the sampler's state (permutations, positions, caps)
--   blob.rng                  U8: the generator of the alignment's target batches
--   extra.weights             F32 [K]: the policy's weights now applied
--   extra.policy.<key>        F32/I32: a tensor of the policy's state
--   extra.history.<i>         F32 [K]: the i-th weights applied, i = 1..history
--   extra.train_loss.<acc>    F32 [k leaves]: the training-loss accumulators (trainer/losses.lua:
--                             sum, count since the last update; total_sum, total_count)
--   user_number.step          integer: the last step trained
--   user.name                 string: the run's name
--   user.policy               string: the policy's registry name
--   user_number.elapsed       float: seconds of training before this save
--   user_number.history       integer: the number of extra.history.<i> tensors
--   user_number.ranks         integer: the ranks of the data-parallel run that wrote it (the
--                             state is the same whatever the rank count: trainer/data_parallel.lua)
--   user.policy.<key>         a plain value of the policy's state, type-tagged as a string:
--                             "i:<integer>", "f:<%a float>", "b:true|false", "s:<string>",
--                             so a restore gives back the same Lua value
-- A policy's state is its own state()/set_state() when it has them, else its string-keyed
-- tensors and numbers, strings and booleans. Through the binding (dga.load_checkpoint) the
-- prefixes are gone: ck.tensors.weights, ck.blobs.sampler, ck.meta.step, ...
local is_tensor = require("trainer.sources").is_tensor

local M = {}

local function policy_state(policy)
    if policy.state and type(policy.state) == "function" then return policy:state() end
    local tensors, values = {}, {}
    for key, v in pairs(policy) do
        if type(key) == "string" then
            if is_tensor(v) then
                tensors[key] = v
            elseif type(v) == "number" or type(v) == "string" or type(v) == "boolean" then
                values[key] = v
            end
        end
    end
    return {tensors = tensors, values = values}
end

local function policy_restore(policy, st)
    if policy.set_state and type(policy.set_state) == "function" then
        return policy:set_state(st)
    end
    for key, t in pairs(st.tensors or {}) do policy[key] = t end
    for key, v in pairs(st.values or {}) do policy[key] = v end
end

function M.tag(v)
    if type(v) == "number" then
        if math.type(v) == "integer" then return "i:" .. string.format("%d", v) end
        return "f:" .. string.format("%a", v)
    elseif type(v) == "boolean" then
        return "b:" .. tostring(v)
    end
    return "s:" .. v
end

function M.untag(s)
    local t, rest = s:sub(1, 2), s:sub(3)
    if t == "i:" then return math.tointeger(tonumber(rest)) end
    if t == "f:" then return tonumber(rest) end
    if t == "b:" then return rest == "true" end
    return rest
end

-- Writes the checkpoint of s = {step, name, policy_name, elapsed, model, optimizer, weights,
-- policy, history, sampler, rng, train_losses, ranks} to path.
function M.save(path, s)
    local tensors = {weights = s.weights}
    local meta = {step = s.step, name = s.name, policy = s.policy_name, elapsed = s.elapsed,
                  history = #s.history, ranks = s.ranks}
    local st = policy_state(s.policy)
    for key, t in pairs(st.tensors or {}) do tensors["policy." .. key] = t end
    for key, v in pairs(st.values or {}) do meta["policy." .. key] = M.tag(v) end
    for i, h in ipairs(s.history) do
        if is_tensor(h) then tensors["history." .. i] = h end
    end
    for key, t in pairs(s.train_losses and s.train_losses:tensors() or {}) do tensors[key] = t end
    dga.save_checkpoint(path, {
        model = s.model, optimizer = s.optimizer, tensors = tensors,
        blobs = {sampler = s.sampler:state(), rng = s.rng:state()},
        meta = meta,
    })
end

-- Loads path into s.model and s.optimizer, restores s.policy's state (and s.train_losses's
-- accumulators, when the checkpoint has them), and returns
-- {step, weights, history, sampler (blob), rng (blob), elapsed, ranks}.
function M.load(path, s)
    local ck = dga.load_checkpoint(path, {model = s.model, optimizer = s.optimizer})
    local step = math.tointeger(tonumber(ck.meta.step))
    if not step then error(path .. ": no step in the checkpoint metadata", 3) end
    local st = {tensors = {}, values = {}}
    for name, t in pairs(ck.tensors or {}) do
        local key = name:match("^policy%.(.+)$")
        if key then st.tensors[key] = t end
    end
    for name, v in pairs(ck.meta) do
        local key = name:match("^policy%.(.+)$")
        if key then st.values[key] = M.untag(v) end
    end
    policy_restore(s.policy, st)
    if s.train_losses then s.train_losses:restore(ck.tensors) end
    local nh = math.tointeger(tonumber(ck.meta.history or 0)) or 0
    local hist = {}
    for i = 1, nh do hist[i] = ck.tensors["history." .. i] end
    return {step = step, weights = ck.tensors.weights, history = hist, sampler = ck.blobs.sampler,
            rng = ck.blobs.rng, elapsed = tonumber(ck.meta.elapsed) or 0,
            ranks = math.tointeger(tonumber(ck.meta.ranks or 1)) or 1}
end

return M

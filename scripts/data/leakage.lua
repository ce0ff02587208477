-- The leakage check: no held-out sequence (or document) reaches a training, IS or basis
-- input, and held-out rows that share a stretch of text with an input are dropped first
-- (decontaminate). Part of the splits API (data/splits.lua re-exports it); its own file
-- because it is a job of its own: a rolling-hash scan over token streams.
--
--   leakage.check_disjoint{heldout = {name = seqs_or_texts, ...}, inputs = {...}, tok =, seq_len =}
--   leakage.check_docs_disjoint{heldout = {name = texts}, inputs = {name = texts}}
--   leakage.decontaminate{heldout = {name = int32 [n, L]}, inputs = {...}, tok =}
--   leakage.store_seqs(store_or_dir)
local M = {}

-- Every sequence of a store (a dga.store or its directory), int32 [n, seq_len], for
-- check_disjoint's inputs.
function M.store_seqs(store)
    local dir = type(store) == "string" and store or store:dir()
    return dga.npy_load(dir .. "/tokens.npy")
end

-- Token streams of one named set: a 2-D int32 tensor (rows in order, as one stream: rows cut
-- consecutively from a stream rebuild it) or a list of texts (each encoded, then
-- <|endoftext|>). Calls fn(stream, n) with a flat Lua array of ids; rows as given.
local function as_rows(name, v, tok, seq_len, what)
    if type(v) == "table" then
        if not tok then
            error(string.format("check_disjoint: %s '%s' is a list of texts: give tok (a tokenizer) to "
                                .. "compare it", what, name), 3)
        end
        local stream, eot = {}, tok:eot()
        for i, text in ipairs(v) do
            if type(text) ~= "string" then
                error(string.format("check_disjoint: %s '%s'[%d] is a %s, expected a text", what, name,
                                    i, type(text)), 3)
            end
            local ids = tok:encode(text):totable()
            for j = 1, #ids do stream[#stream + 1] = ids[j] end
            stream[#stream + 1] = eot
        end
        return stream, nil
    end
    local ok, shape = pcall(function() return v:shape() end)
    if not ok or #shape ~= 2 or v:dtype() ~= "int32" then
        error(string.format("check_disjoint: %s '%s' must be an int32 [n, seq_len] tensor or a list "
                            .. "of texts", what, name), 3)
    end
    if seq_len and shape[2] ~= seq_len then
        error(string.format("check_disjoint: %s '%s' has rows of %d tokens, expected %d", what, name,
                            shape[2], seq_len), 3)
    end
    return v, shape
end

local B = 1000003   -- the polynomial hash base; products wrap modulo 2^64

-- B^(L-1), to remove the token leaving a rolling window.
local function top_power(L)
    local p = 1
    for _ = 1, L - 1 do p = p * B end
    return p
end

-- A flat Lua array of ids from a tensor's rows first..last (1-based, inclusive).
local function flat_rows(t, first, last)
    local L = t:shape()[2]
    local out, n = {}, 0
    local rows = t:narrow(first, last - first + 1):totable()
    for _, row in ipairs(rows) do
        for j = 1, L do n = n + 1; out[n] = row[j] end
    end
    return out
end

local function sorted_names(t)
    local out = {}
    for k in pairs(t) do out[#out + 1] = k end
    table.sort(out, function(a, b) return tostring(a) < tostring(b) end)
    return out
end

-- The row length from the first tensor (in name order) when not given.
local function infer_len(groups)
    for _, group in ipairs(groups) do
        for _, k in ipairs(sorted_names(group)) do
            local v = group[k]
            if type(v) ~= "table" then
                local ok, shape = pcall(function() return v:shape() end)
                if ok and #shape == 2 then return shape[2] end
            end
        end
    end
end

-- Indexes every L-window of the held-out streams, then looks every input row up. For each
-- confirmed hit calls hit(heldout_name, start, input_name, row); a true result stops the scan.
-- Returns the held-out streams and the counts.
local SET_SHIFT = 1 << 40   -- index entries are set_number * SET_SHIFT + start
local function scan(heldout, inputs, tok, L, hit)
    local P = top_power(L)
    local index, streams, set_names, n_windows = {}, {}, {}, 0
    for si, name in ipairs(sorted_names(heldout)) do
        local v, shape = as_rows(name, heldout[name], tok, L, "held-out set")
        local s = shape and (shape[1] > 0 and flat_rows(v, 1, shape[1]) or {}) or v
        streams[name], set_names[si] = s, name
        if #s >= L then
            local h = 0
            for j = 1, L do h = h * B + s[j] end
            for start = 1, #s - L + 1 do
                if start > 1 then h = (h - s[start - 1] * P) * B + s[start + L - 1] end
                local code, e = si * SET_SHIFT + start, index[h]
                if not e then index[h] = code
                elseif math.type(e) == "integer" then index[h] = {e, code}
                else e[#e + 1] = code end
            end
            n_windows = n_windows + #s - L + 1
        end
    end
    local stop = false
    local function confirm(iname, ids, off, row, code)
        local s = streams[set_names[code // SET_SHIFT]]
        local start = code % SET_SHIFT
        for j = 1, L do
            if s[start + j - 1] ~= ids[off + j] then return end
        end
        if hit(set_names[code // SET_SHIFT], start, iname, row) then stop = true end
    end
    local function lookup(iname, ids, off, row)
        local h = 0
        for j = off + 1, off + L do h = h * B + ids[j] end
        local e = index[h]
        if not e then return end
        if math.type(e) == "integer" then return confirm(iname, ids, off, row, e) end
        for _, code in ipairs(e) do
            confirm(iname, ids, off, row, code)
            if stop then return end
        end
    end
    local n_rows = 0
    for _, name in ipairs(sorted_names(inputs)) do
        local v, shape = as_rows(name, inputs[name], tok, L, "input")
        if shape then
            local chunk = math.max(1, 65536 // L)
            for first = 1, shape[1], chunk do
                local last = math.min(shape[1], first + chunk - 1)
                local ids = flat_rows(v, first, last)
                for r = 0, last - first do
                    lookup(name, ids, r * L, first + r)
                    if stop then break end
                end
                if stop then break end
            end
            n_rows = n_rows + shape[1]
        else
            for r = 0, #v // L - 1 do
                lookup(name, v, r * L, r + 1)
                if stop then break end
            end
            n_rows = n_rows + #v // L
        end
        if stop then break end
    end
    return streams, n_windows, n_rows
end

-- Raises an error naming the first held-out sequence that occurs in an input.
--   o.heldout, o.inputs: {name = int32 [n, L] tensor or list of texts}
--   o.tok: tokenizer for the text sets (and to quote the leaked text)
--   o.seq_len: L (default: the tensors' row length)
-- Every window of L consecutive tokens of a held-out set's stream (its rows joined in order;
-- its texts encoded and joined with <|endoftext|>) is hashed, so a held-out text is found
-- whatever phase its rows were cut at; every row of an input (its texts cut into rows of L)
-- is looked up, and a hash hit is confirmed token by token. Every held-out row is one of those
-- windows, and a stretch of 2L - 1 tokens shared by a held-out stream and an input always
-- fails the check.
-- Returns {heldout_windows =, input_rows =} when nothing leaked.
function M.check_disjoint(o)
    if type(o) ~= "table" or type(o.heldout) ~= "table" or type(o.inputs) ~= "table" then
        error("check_disjoint: expected {heldout = {name = set}, inputs = {name = set}}", 2)
    end
    local L = o.seq_len or infer_len{o.heldout, o.inputs}
    if not L or L < 1 then error("check_disjoint: give seq_len when every set is a list of texts", 2) end
    local found
    local streams, nw, nr = scan(o.heldout, o.inputs, o.tok, L, function(h, start, i, row)
        found = {h, start, i, row}
        return true
    end)
    if found then
        local h, start, i, row = table.unpack(found)
        local msg = string.format("leak: held-out '%s' sequence at token %d (its row %d when cut "
                                  .. "from token 1) occurs in input '%s' as row %d", h, start,
                                  (start - 1) // L + 1, i, row)
        if o.tok then
            local ids = {}
            for j = 0, math.min(L, 24) - 1 do ids[#ids + 1] = streams[h][start + j] end
            local ok, text = pcall(function() return o.tok:decode(ids) end)
            if ok then msg = msg .. string.format(": %q...", text) end
        end
        error(msg, 2)
    end
    return {heldout_windows = nw, input_rows = nr}
end

-- The document-level check: raises an error naming the first held-out text that is also,
-- whole, an input text (MMLU: questions are the documents; its rows share the prompt
-- template, so the row check does not apply to them).
--   o.heldout, o.inputs: {name = list of texts}
function M.check_docs_disjoint(o)
    if type(o) ~= "table" or type(o.heldout) ~= "table" or type(o.inputs) ~= "table" then
        error("check_docs_disjoint: expected {heldout = {name = texts}, inputs = {name = texts}}", 2)
    end
    local where = {}
    for _, name in ipairs(sorted_names(o.inputs)) do
        for i, t in ipairs(o.inputs[name]) do
            if type(t) ~= "string" then
                error(string.format("check_docs_disjoint: input '%s'[%d] is a %s, expected a text",
                                    tostring(name), i, type(t)), 2)
            end
            where[t] = where[t] or {name, i}
        end
    end
    local n = 0
    for _, name in ipairs(sorted_names(o.heldout)) do
        for i, t in ipairs(o.heldout[name]) do
            local w = where[t]
            if w then
                error(string.format("leak: held-out '%s' text %d is input '%s' text %d: %q...",
                                    tostring(name), i, tostring(w[1]), w[2], t:sub(1, 60)), 2)
            end
            n = n + 1
        end
    end
    return {heldout_texts = n}
end

-- Decontamination: drops the rows of held-out tensors (int32 [n, L], rows cut consecutively
-- from a stream) that overlap a stretch found in an input, by the same test as
-- check_disjoint, so that text the corpus repeats across documents (licence headers,
-- boilerplate) never counts as held-out.
--   o.heldout = {name = int32 [n, L]}, o.inputs = {name = tensor or texts}, o.tok
-- Returns {name = kept rows (a new tensor when rows were dropped; order kept)} and
-- {name = rows dropped}. Rows that become neighbours are scanned again, so check_disjoint
-- passes on the result.
function M.decontaminate(o)
    if type(o) ~= "table" or type(o.heldout) ~= "table" or type(o.inputs) ~= "table" then
        error("decontaminate: expected {heldout = {name = int32 [n, L]}, inputs = {name = set}}", 2)
    end
    local sets, dropped, L = {}, {}, nil
    for name, v in pairs(o.heldout) do
        local _, shape = as_rows(name, v, nil, nil, "held-out set")
        if not shape then error("decontaminate: held-out '" .. tostring(name) .. "' must be a tensor", 2) end
        if L and shape[2] ~= L then
            error(string.format("decontaminate: held-out '%s' has rows of %d tokens, others %d",
                                tostring(name), shape[2], L), 2)
        end
        L = shape[2]
        sets[name], dropped[name] = v, 0
    end
    if not L then return sets, dropped end
    for _ = 1, 8 do
        local drop, any = {}, false
        scan(sets, o.inputs, o.tok, L, function(name, start)
            drop[name] = drop[name] or {}
            for r = (start - 1) // L + 1, (start + L - 2) // L + 1 do drop[name][r] = true end
            any = true
        end)
        if not any then return sets, dropped end
        for name, rows_out in pairs(drop) do
            local seqs = sets[name]
            local rows, n = seqs:shape()[1], 0
            for r in pairs(rows_out) do if r <= rows then n = n + 1 end end
            if n >= rows then
                error(string.format("decontaminate: every one of the %d rows of held-out '%s' occurs "
                                    .. "in an input", rows, tostring(name)), 2)
            end
            local out, k = dga.zeros(rows - n, L, "int32"), 0
            for r = 1, rows do
                if not rows_out[r] then
                    k = k + 1
                    out:narrow(k, 1):copy_(seqs:narrow(r, 1))
                end
            end
            sets[name], dropped[name] = out, dropped[name] + n
        end
    end
    error("decontaminate: held-out rows still overlap an input after 8 rounds", 2)
end

return M

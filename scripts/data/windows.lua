-- Training and evaluation windows over a 1-D int32 token tensor (an llm.c shard).
--
-- A window is T+1 consecutive tokens: inputs are its first T, targets its last T.
--   windows.random(tokens, B, T, rng)    -> inputs, targets (B x T int32), starts drawn
--                                           uniformly with rng:below (seeded: reproducible)
--   windows.count(tokens, T)             -> number of full windows at stride T
--   windows.sequential(tokens, T, i, n)  -> windows i .. i+n-1 (1-based) at stride T, so
--                                           every token but the first is predicted once
--   windows.from_texts(tok, texts, L[, n]) -> int32 [n, L]: the texts encoded and joined with
--                                           <|endoftext|>, cut into consecutive sequences
-- Rows are copied with tensor views (narrow/reshape/copy_), not element by element.
local M = {}

local function check(tokens, T)
    if tokens:dtype() ~= "int32" then error("windows: tokens must be an int32 tensor", 3) end
    local n = tokens:numel()
    if n < T + 1 then
        error(string.format("windows: %d tokens, a window needs context + 1 = %d", n, T + 1), 3)
    end
    return n
end

-- Copies tokens[s+1 .. s+T] (0-based start s) into row b of out.
local function put_row(out, b, tokens, s, T)
    out:narrow(b, 1):copy_(tokens:narrow(s + 1, T):reshape(1, T))
end

function M.random(tokens, B, T, rng)
    local n = check(tokens, T)
    local inputs = dga.zeros(B, T, "int32")
    local targets = dga.zeros(B, T, "int32")
    for b = 1, B do
        local s = rng:below(n - T)          -- 0 .. n-T-1: the window ends inside the shard
        put_row(inputs, b, tokens, s, T)
        put_row(targets, b, tokens, s + 1, T)
    end
    return inputs, targets
end

function M.count(tokens, T)
    local n = tokens:numel()
    if n < T + 1 then return 0 end
    return (n - 1) // T
end

function M.sequential(tokens, T, first, count)
    check(tokens, T)
    local total = M.count(tokens, T)
    if first < 1 or count < 1 or first + count - 1 > total then
        error(string.format("windows: windows %d..%d outside 1..%d", first, first + count - 1,
                            total), 2)
    end
    local inputs = dga.zeros(count, T, "int32")
    local targets = dga.zeros(count, T, "int32")
    for r = 1, count do
        local s = (first + r - 2) * T
        put_row(inputs, r, tokens, s, T)
        put_row(targets, r, tokens, s + 1, T)
    end
    return inputs, targets
end

-- Token sequences of exactly seq_len tokens from texts: each text encoded, documents joined
-- with <|endoftext|>, the stream cut into consecutive sequences (the tail dropped).
-- max_seqs stops early.
function M.from_texts(tok, texts, seq_len, max_seqs)
    local eot = tok:eot()
    local stream = {}
    local need = max_seqs and max_seqs * seq_len or math.huge
    for _, text in ipairs(texts) do
        local ids = tok:encode(text)
        for i = 1, #ids do stream[#stream + 1] = ids[i] end
        stream[#stream + 1] = eot
        if #stream >= need then break end
    end
    local n = #stream // seq_len
    if max_seqs then n = math.min(n, max_seqs) end
    if n == 0 then error("text_seqs: not enough text for one sequence of " .. seq_len .. " tokens", 2) end
    local out = dga.zeros(n, seq_len, "int32")
    for i = 1, n * seq_len do out[i] = stream[i] end
    return out
end

return M

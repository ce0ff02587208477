-- Rows embedded as a store embedded its own sequences: IS histograms over a store's domains,
-- each row's nearest domain, and the basis sets of distribution reweighting. Part of the
-- splits API (data/splits.lua re-exports it).
local M = {}

-- One text per row of an int32 [n, L] tensor, as the store embedded its own sequences: the
-- pieces between <|endoftext|> tokens decoded and joined with a blank line.
function M.row_texts(tok, seqs)
    local eot, L = tok:eot(), seqs:shape()[2]
    local out = {}
    local n = seqs:shape()[1]
    for r = 1, n do
        local row = seqs:narrow(r, 1):totable()[1]
        local pieces, cur = {}, {}
        for j = 1, L do
            if row[j] == eot then
                if #cur > 0 then pieces[#pieces + 1] = tok:decode(cur) end
                cur = {}
            else cur[#cur + 1] = row[j] end
        end
        if #cur > 0 then pieces[#pieces + 1] = tok:decode(cur) end
        out[r] = table.concat(pieces, "\n\n")
    end
    return out
end

-- The importance-sampling histogram of a set of rows over the k domains of `level`: each row
-- embedded and assigned as the store's own sequences were (so a source's histogram is
-- comparable with where its sequences landed in the store). Rows without a word are skipped.
function M.histogram(store, level, tok, seqs)
    return store:histogram(M.row_texts(tok, seqs), level)
end

-- The domain (1-based, at `level`) each row of seqs would have landed in had the store held it:
-- its nearest centroid, the row embedded as the store's own sequences were. Lets a specific set
-- be drawn "from store domain d" out of documents the store never saw.
function M.assign(store, level, tok, seqs)
    local out = {}
    for r, text in ipairs(M.row_texts(tok, seqs)) do
        local ids = store:nearest(text, level, 1)
        out[r] = ids[1]
    end
    return out
end

-- The basis sets of distribution reweighting, one per store source, from documents the store
-- never saw: histogram = the IS histogram (M.histogram) of the source's `basis` documents,
-- heldout = rows of its `heldout_role` documents (default "basis_heldout"; none when the plan
-- gives that role no documents).
--   o: tok, seq_len, level, histogram_seqs (rows per histogram, default all),
--      heldout_seqs (rows per held-out set, default 64), heldout_role
-- Returns the list {name =, histogram =, heldout =} in source order.
function M.basis_sets(plan, store, o)
    if not (o and o.tok and o.seq_len and o.level) then
        error("splits: basis_sets needs {tok =, seq_len =, level =}", 2)
    end
    local role = o.heldout_role or "basis_heldout"
    plan:check_role(role)
    local out = {}
    for _, d in ipairs(plan:sources()) do
        if #plan:_domain(d).by_role.basis == 0 then
            error(string.format("splits: basis_sets: %s has no 'basis' documents (basis_docs)", d), 3)
        end
        local b = {name = d}
        b.histogram = M.histogram(store, o.level, o.tok,
                                  plan:seqs(d, "basis", o.tok, o.seq_len, o.histogram_seqs))
        if #plan:_domain(d).by_role[role] > 0 then
            b.heldout = plan:seqs(d, role, o.tok, o.seq_len, o.heldout_seqs or 64)
        end
        out[#out + 1] = b
    end
    return out
end

return M

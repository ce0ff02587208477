-- Looks inside a domain store: per domain its size, the mix of source directories, the most
-- distinctive words and a few decoded samples; or the domains nearest to a text.
--
--   dgalua scripts/inspect_store.lua STORE [--level 1] [--max-domains 64] [--samples 2]
--          [--chars 160] [--words 8] [--nearest "some text"]
--
-- Top words: up to 32 sequences spread evenly over each shown domain are decoded and split
-- into words as the hash384 embedder does (lower-cased runs of letters, digits and UTF-8
-- bytes; words of 3+ bytes); a word scores count_in_domain * ln(D / domains_containing_it)
-- over the D shown domains, so words every domain uses sink.
local argparse = require "argparse"
local args = require "cli.args"

local p = argparse("inspect_store.lua", "Inspect a domain store.")
p:argument("store", "Store directory.")
p:option("--level", "Level to inspect (1 = coarsest).", "1")
p:option("--max-domains", "Show at most this many domains.", "64")
p:option("--samples", "Decoded samples per domain.", "2")
p:option("--chars", "Characters per sample.", "160")
p:option("--words", "Top words per domain.", "8")
p:option("--nearest", "Show the domains nearest to this text instead.")
local a = p:parse(arg)

local s = dga.store_open(a.store)
local level = args.check_int(p, a.level, "--level", 1)
if level > s:levels() then p:error(string.format("--level %d: the store has %d levels", level, s:levels())) end
local nsamples = args.check_int(p, a.samples, "--samples", 0)
local nchars = args.check_int(p, a.chars, "--chars", 10)
local nwords = args.check_int(p, a.words, "--words", 0)
local tok = s:tokenizer()
local eot = tok:eot()
local k = s:k(level)
local sizes = s:domain_sizes(level)
local names, counts = s:sources(level)

print(tostring(s))

-- Decoded text of a sequence; EOT shows as a visible separator.
local function decode(seq)
    local parts, cur = {}, {}
    for i = 1, #seq do
        local id = math.tointeger(seq[i])
        if id == eot then
            parts[#parts + 1] = tok:decode(cur)
            cur = {}
        else
            cur[#cur + 1] = id
        end
    end
    parts[#parts + 1] = tok:decode(cur)
    return table.concat(parts, " <|eot|> ")
end

local function words_of(text, into)
    for w in text:lower():gmatch("[%w\128-\255]+") do
        if #w >= 3 then into[w] = (into[w] or 0) + 1 end
    end
end

local function source_mix(d)
    local row = {}
    for j = 1, #names do row[#row + 1] = {names[j], math.tointeger(counts:at(d, j))} end
    table.sort(row, function(x, y) return x[2] > y[2] end)
    local n = math.tointeger(sizes[d])
    local parts = {}
    for i = 1, math.min(3, #row) do
        if row[i][2] > 0 then parts[#parts + 1] = string.format("%s %.0f%%", row[i][1], 100 * row[i][2] / n) end
    end
    return table.concat(parts, ", ")
end

local function shown_domains()
    if a.nearest then
        local ids, scores = s:nearest(a.nearest, level, math.min(5, k))
        return ids, scores
    end
    local ids = {}
    for d = 1, math.min(k, args.check_int(p, a.max_domains, "--max-domains", 1)) do ids[#ids + 1] = d end
    return ids
end

-- The sequences shown for domain d. A domain's sequences are stored source by source, so
-- evenly spaced positions start with whichever source comes first, often a small one: the
-- samples follow the source mix instead, the majority source first, then each source in
-- proportion to its share (largest remainder), spread evenly within it.
local function sample_indices(d, want)
    local n = math.tointeger(sizes[d])
    want = math.min(want, n)
    if want <= 0 then return {} end
    local of, order = {}, {}
    for i = 1, n do
        local src = s:info(level, d, i).source
        if not of[src] then of[src] = {}; order[#order + 1] = src end
        local list = of[src]
        list[#list + 1] = i
    end
    table.sort(order, function(x, y)
        if #of[x] ~= #of[y] then return #of[x] > #of[y] end
        return x < y
    end)
    local seq, quota = {}, {}
    for j = 1, want do
        local best, best_gap
        for _, src in ipairs(order) do
            local gap = j * #of[src] / n - (quota[src] or 0)
            if (quota[src] or 0) < #of[src] and (not best or gap > best_gap) then best, best_gap = src, gap end
        end
        quota[best] = (quota[best] or 0) + 1
        seq[j] = best
    end
    local picks, used = {}, {}
    for j, src in ipairs(seq) do
        local r = (used[src] or 0) + 1
        used[src] = r
        picks[j] = of[src][1 + ((r - 1) * #of[src]) // quota[src]]
    end
    return picks
end

local ids, scores = shown_domains()
-- Word counts per shown domain (from evenly spread samples), then distinctiveness.
local wc, df = {}, {}
for _, d in ipairs(ids) do
    local n = math.tointeger(sizes[d])
    local m = math.min(32, n)
    local c = {}
    for j = 1, m do
        local i = 1 + ((j - 1) * n) // m
        words_of(decode(s:sequence(level, d, i)), c)
    end
    wc[d] = c
    for w in pairs(c) do df[w] = (df[w] or 0) + 1 end
end
local D = #ids

if a.nearest then
    print(string.format("\nnearest domains at level %d to: %q", level, a.nearest))
end
for r, d in ipairs(ids) do
    local top = {}
    for w, c in pairs(wc[d]) do top[#top + 1] = {w, c * math.log((D + 1) / df[w])} end
    table.sort(top, function(x, y) if x[2] ~= y[2] then return x[2] > y[2] end return x[1] < y[1] end)
    local tw = {}
    for i = 1, math.min(nwords, #top) do tw[i] = top[i][1] end
    local first, nleaves = s:leaves(level, d)
    print(string.format("\n[%d] domain %d: %d sequences, leaves %d..%d%s", r, d, math.tointeger(sizes[d]),
        first, first + nleaves - 1, scores and string.format(", cosine %.3f", scores[r]) or ""))
    print("    sources: " .. source_mix(d))
    if nwords > 0 then print("    words:   " .. table.concat(tw, " ")) end
    for _, i in ipairs(sample_indices(d, nsamples)) do
        local info = s:info(level, d, i)
        local text = decode(s:sequence(level, d, i)):gsub("%s+", " ")
        if #text > nchars then
            -- cut on a character boundary: back off over UTF-8 continuation bytes (10xxxxxx)
            local cut = nchars
            while cut > 0 and (text:byte(cut + 1) or 0) & 0xC0 == 0x80 do cut = cut - 1 end
            text = text:sub(1, cut) .. "..."
        end
        print(string.format("    #%d (%s, doc %d): %s", i, info.source, info.doc, text))
    end
end
s:close()

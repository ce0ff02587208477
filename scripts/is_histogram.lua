-- Importance-sampling histogram of a set of texts over the domains of a store.
--
--   dgalua scripts/is_histogram.lua --store STORE --texts FILE_or_DIR [--level 1]
--          [--out hist.npy] [--lines] [--top 10]
--
-- Texts: a .jsonl file, a .txt file or a directory of them (read as dga.read_texts does: one
-- JSON line or one .txt file = one text); with --lines, every non-empty line of the file is a
-- text. Each text is embedded with the store's embedder and idf and assigned to the nearest
-- centroid at --level (cosine when the store is spherical); the normalised histogram
-- (float32 [k]) is written to --out as .npy, and the heaviest domains are printed.
local argparse = require "argparse"
require "cli.args"   -- usage errors exit with status 2

local p = argparse("is_histogram.lua", "Importance-sampling histogram of texts over store domains.")
p:option("--store", "Store directory."):count(1)
p:option("--texts", "A .jsonl/.txt file or a directory of them."):count(1)
p:option("--level", "Store level (1 = coarsest).", "1")
p:option("--out", "Where to write the histogram (.npy).")
p:flag("--lines", "Every non-empty line of the --texts file is one text.")
p:option("--top", "Print this many of the heaviest domains.", "10")
local a = p:parse(arg)
if a.out then dga.check_output(a.out, {["--store"] = a.store, ["--texts"] = a.texts}) end

local level = math.tointeger(tonumber(a.level))
if not level or level < 1 then p:error("--level: expected an integer >= 1, got '" .. a.level .. "'") end
local top = math.tointeger(tonumber(a.top)) or p:error("--top: expected an integer")

local s = dga.store_open(a.store)
if level > s:levels() then p:error(string.format("--level %d: the store has %d levels", level, s:levels())) end

local texts = {}
if a.lines then
    local kind = dga.path_kind(a.texts)   -- io.open would block on a FIFO
    if kind ~= "file" then error(string.format("%s: %s, expected a regular file", a.texts, kind or "no such file"), 0) end
    local f, err = io.open(a.texts, "rb")
    if not f then error(err, 0) end
    for line in f:lines() do
        if line:find("%S") then texts[#texts + 1] = line end
    end
    f:close()
else
    local stats
    texts, stats = dga.read_texts(a.texts)
    require("data.corpus").warn_skipped(stats)
end
if #texts == 0 then error(a.texts .. ": no texts found", 0) end

local h, used = s:histogram(texts, level)
if a.out then dga.npy_save(a.out, h) end

local k = s:k(level)
local names, counts = s:sources(level)
local sizes = s:domain_sizes(level)
local order, nonzero = {}, 0
for d = 1, k do
    if h[d] > 0 then
        nonzero = nonzero + 1
        order[#order + 1] = d
    end
end
table.sort(order, function(x, y) if h[x] ~= h[y] then return h[x] > h[y] end return x < y end)
print(string.format("%d texts (%d with words) over %d domains at level %d: %d domains used%s",
    #texts, used, k, level, nonzero, a.out and (", written to " .. a.out) or ""))
for i = 1, math.min(top, #order) do
    local d = order[i]
    local best, bn = "?", -1
    for j = 1, #names do
        local c = counts:at(d, j)
        if c > bn then best, bn = names[j], c end
    end
    print(string.format("  domain %5d  %6.2f%%  (%d sequences, mostly %s %.0f%%)", d, 100 * h[d],
        math.tointeger(sizes[d]), best, 100 * bn / sizes[d]))
end
s:close()

-- byte-level shards from the arxiv_abstracts domain: 1.0 MB train, 0.1 MB validation
local root = os.getenv("DGA_SHARED_DATA") .. "/corpus/arxiv_abstracts"
local ids = {}
for text in dga.read_jsonl(root) do
    for i = 1, #text do ids[#ids + 1] = text:byte(i) end
    if #ids > 1100000 then break end
end
local train, val = {}, {}
for i = 1, 1000000 do train[i] = ids[i] end
for i = 1000001, 1100000 do val[#val + 1] = ids[i] end
dga.shard_write((os.getenv("OUT") or "/tmp/curves") .. "/train.bin", train, 256)
dga.shard_write((os.getenv("OUT") or "/tmp/curves") .. "/val.bin", val, 256)
print(#train, #val)

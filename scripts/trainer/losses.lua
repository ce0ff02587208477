-- Per-domain training losses at no extra pass: after each training forward, the mean loss of
-- every sequence of the batch (model:seq_losses(), which the forward computed anyway) is added
-- to the accumulators of the leaf domain it was drawn from. Loss-based policies (odm) read
-- them through ctx; the mixture space turns leaf sums into per-component means.
--
-- Accumulators are float32 tensors, so a checkpoint holds them exactly and a resumed run
-- continues with the same bits:
--   sum, count              since the last policy update (reset after each update)
--   total_sum, total_count  since the start of the run
local M = {}
M.__index = M

function M.new(k)
    return setmetatable({k = k, sum = dga.zeros(k), count = dga.zeros(k),
                         total_sum = dga.zeros(k), total_count = dga.zeros(k)}, M)
end

-- domains: int32 [B] leaf domains (1-based) of the batch; seq_losses: float32 [B].
function M:add(domains, seq_losses)
    local sum, count, tsum, tcount = self.sum, self.count, self.total_sum, self.total_count
    for b = 1, #seq_losses do
        local d, l = domains[b], seq_losses[b]
        sum[d] = sum[d] + l
        count[d] = count[d] + 1
        tsum[d] = tsum[d] + l
        tcount[d] = tcount[d] + 1
    end
end

function M:reset_interval()
    self.sum, self.count = dga.zeros(self.k), dga.zeros(self.k)
end

-- The checkpoint's tensors (names without the "extra." prefix) and their restore.
function M:tensors()
    return {["train_loss.sum"] = self.sum, ["train_loss.count"] = self.count,
            ["train_loss.total_sum"] = self.total_sum, ["train_loss.total_count"] = self.total_count}
end

function M:restore(tensors)
    local t = tensors or {}
    for _, key in ipairs{"sum", "count", "total_sum", "total_count"} do
        local v = t["train_loss." .. key]
        if v then
            if #v ~= self.k then
                error(string.format("checkpoint: train_loss.%s has %d entries, the data has %d domains",
                                    key, #v, self.k), 3)
            end
            self[key] = v:clone()
        end
    end
end

return M

-- One alignment round, and its normalisation.
--
-- dga.align returns the raw inner products a_i = <g_i, g_t> (DGA's alignments as the paper
-- defines them), |g_i|, |g_t| and the losses. The trainer's `align` config may rescale them:
--   normalize = "cosine"     a_i / (|g_i| |g_t|)        (0 when a norm is 0)
--             = "mean_norm"  a_i / mean_j |g_j|          (over the components probed)
--   lr_scale  = true         times the current learning rate
local M = {}

-- r (a dga.align result) with r.align rescaled from the raw r.dot; "none" without lr leaves it
-- as is.
function M.normalize(r, mode, lr)
    r.dot = r.dot or r.align
    if mode == "none" and not lr then return r end
    local a, g, k = r.dot:clone(), r.grad_norm, #r.align
    local sum = 0
    for i = 1, k do sum = sum + g[i] end
    local mean = sum / k
    for i = 1, k do
        local v, den = a[i], mode == "cosine" and g[i] * r.target_norm or mean
        if mode ~= "none" then v = den > 0 and v / den or 0 end
        a[i] = lr and v * lr or v
    end
    r.align = a
    return r
end

-- The alignment of each of K components with the target batch {inputs, targets}, at the
-- model's current parameters. probes[j] is component j's batch, or false when it has no data
-- (its alignment, loss and norm are 0); `dot` keeps the raw inner products. `ac` is the
-- trainer's align config; lr the current learning rate; dp (trainer/data_parallel.lua, optional)
-- splits the probes over the ranks. Clobbers the model's gradients.
function M.round(model, target, probes, K, ac, lr, dp)
    local present, map = {}, {}
    for j = 1, K do
        if probes[j] then
            present[#present + 1] = probes[j]
            map[#present] = j
        end
    end
    local opts = {method = ac.method, fd_eps = ac.fd_eps}
    local r = dp and dp:align(model, target, present, opts)
              or dga.align(model, target[1], target[2], present, opts)
    model:zero_grad()
    r = M.normalize(r, ac.normalize, ac.lr_scale and lr or nil)
    if #present ~= K then
        local full = {align = dga.zeros(K), dot = dga.zeros(K), loss = dga.zeros(K),
                      grad_norm = dga.zeros(K), target_norm = r.target_norm, target_loss = r.target_loss}
        for i, j in pairs(map) do
            full.align[j] = r.align[i]
            full.dot[j] = r.dot[i]
            full.loss[j] = r.loss[i]
            full.grad_norm[j] = r.grad_norm[i]
        end
        r = full
    end
    return r
end

return M

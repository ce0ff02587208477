-- The sentences of the paper (Fan, Grangier & Ablin, 2024, "Dynamic Gradient Alignment for
-- Online Data Mixing", arXiv 2410.02498v1) that the experiments' claims quote. Only the
-- abstract's text was at hand when they were written; a claim about anything else is marked as
-- our own question (harness/descriptor.lua), never attributed to the paper.
local M = {}

M.ABSTRACT_SCENARIOS = "Experimentally, we demonstrate significant improvements over importance sampling in two "
    .. "key scenarios: (i) when the pre-training set is small and importance sampling overfits due to limited "
    .. "data; and (ii) when there is insufficient specialized data, trapping importance sampling on narrow "
    .. "pockets of data."

M.ABSTRACT_ESTIMATES = "DGA dynamically estimates the pre-training data mixture on which the models' gradients "
    .. "align as well as possible with those of the model on the specific task."

return M

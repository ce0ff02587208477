-- dgalua run configuration (written by the trainer)
return {
  T_r = 224,
  align = {
    fd_eps = 0.001,
    lr_scale = false,
    method = "exact",
    normalize = "none",
  },
  align_batch = 2,
  batch = 16,
  budget_tokens = 52000,
  check_replicas = false,
  checkpoint_every = 960,
  data_parallel = true,
  eval_batch = 16,
  eval_every = 480,
  eval_max = 256,
  eval_progress_min = 2048,
  generic_heldout = {
    tensor_file = "data/generic_heldout.npy",
  },
  generic_max = 256,
  heldout_per_domain = 4,
  is_histogram = {
    tensor_file = "data/is_histogram.npy",
  },
  model = {
    context = 64,
    heads = 4,
    layers = 2,
    precision = "fp32",
    vocab = 2048,
    width = 96,
  },
  name = "us_legislation/x16/b3/is",
  optimizer = {
    beta1 = 0.90000000000000002,
    beta2 = 0.94999999999999996,
    clip = 1,
    decay = "matrices",
    eps = 1e-08,
    lr = 0.0030000000000000001,
    weight_decay = 0.10000000000000001,
  },
  overlap_allreduce = true,
  policy = {
    name = "importance",
  },
  progress = true,
  run_dir = "results/study3/lowdata/us_legislation/x16/b3/is/seed-2",
  schedule = {
    kind = "cosine",
    min_lr = 0.00030000000000000003,
    total = 9600,
    warmup = 480,
  },
  seed = 2,
  sparse_k = 2048,
  specific = {
    heldout = {
      tensor_file = "data/specific.heldout.npy",
    },
    train = {
      tensor_file = "data/specific.train.npy",
    },
  },
  steps = 9600,
  store = {
    dir = "/work/study3-wt/runs/cache/store_plan31e0df15856f_L64_s65_v2048_ds1",
    level = 1,
  },
}

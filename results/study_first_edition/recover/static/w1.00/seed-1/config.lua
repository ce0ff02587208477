-- dgalua run configuration (written by the trainer)
return {
  T_r = 20,
  align = {
    fd_eps = 0.001,
    lr_scale = false,
    method = "exact",
    normalize = "none",
  },
  align_batch = 8,
  batch = 16,
  budget = {
    3222,
    4741,
    2152,
    5528,
    5515,
    2564,
    2970,
    6945,
  },
  check_replicas = false,
  checkpoint_every = 120,
  data_parallel = true,
  eval_batch = 16,
  eval_every = 60,
  eval_max = 256,
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
    vocab = 4096,
    width = 96,
  },
  name = "static/w1.00",
  optimizer = {
    beta1 = 0.90000000000000002,
    beta2 = 0.94999999999999996,
    clip = 1,
    decay = "matrices",
    eps = 1e-08,
    lr = 0.0030000000000000001,
    weight_decay = 0.10000000000000001,
  },
  policy = {
    name = "importance",
  },
  progress = true,
  run_dir = "/work/main/results/study/recover/static/w1.00/seed-1",
  schedule = {
    kind = "cosine",
    min_lr = 0.00030000000000000003,
    total = 1200,
    warmup = 60,
  },
  seed = 1,
  sparse_k = 2048,
  specific = {
    heldout = {
      tensor_file = "data/specific.heldout.npy",
    },
    train = {
      tensor_file = "data/specific.train.npy",
    },
  },
  steps = 1200,
  store = {
    dir = "/work/study-runs/cache/store_plan7679991fee8d_L8_s65_v4096_ds1",
    level = 1,
  },
}

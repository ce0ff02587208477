-- dgalua run configuration (written by the trainer)
return {
  T_r = 15,
  align = {
    fd_eps = 0.001,
    lr_scale = false,
    method = "exact",
    normalize = "none",
  },
  align_batch = 2,
  basis = {
    {
      heldout = {
        tensor_file = "data/basis.1.heldout.npy",
      },
      histogram = {
        tensor_file = "data/basis.1.histogram.npy",
      },
      name = "arxiv_abstracts",
    },
    {
      heldout = {
        tensor_file = "data/basis.2.heldout.npy",
      },
      histogram = {
        tensor_file = "data/basis.2.histogram.npy",
      },
      name = "books_public_domain",
    },
    {
      heldout = {
        tensor_file = "data/basis.3.heldout.npy",
      },
      histogram = {
        tensor_file = "data/basis.3.histogram.npy",
      },
      name = "code_python",
    },
    {
      heldout = {
        tensor_file = "data/basis.4.heldout.npy",
      },
      histogram = {
        tensor_file = "data/basis.4.histogram.npy",
      },
      name = "dictionary_gcide",
    },
    {
      heldout = {
        tensor_file = "data/basis.5.heldout.npy",
      },
      histogram = {
        tensor_file = "data/basis.5.histogram.npy",
      },
      name = "dm_mathematics",
    },
    {
      heldout = {
        tensor_file = "data/basis.6.heldout.npy",
      },
      histogram = {
        tensor_file = "data/basis.6.histogram.npy",
      },
      name = "latex",
    },
    {
      heldout = {
        tensor_file = "data/basis.7.heldout.npy",
      },
      histogram = {
        tensor_file = "data/basis.7.histogram.npy",
      },
      name = "licenses",
    },
    {
      heldout = {
        tensor_file = "data/basis.8.heldout.npy",
      },
      histogram = {
        tensor_file = "data/basis.8.histogram.npy",
      },
      name = "manpages",
    },
    {
      heldout = {
        tensor_file = "data/basis.9.heldout.npy",
      },
      histogram = {
        tensor_file = "data/basis.9.histogram.npy",
      },
      name = "pubmed_bmc_fulltext",
    },
    {
      heldout = {
        tensor_file = "data/basis.10.heldout.npy",
      },
      histogram = {
        tensor_file = "data/basis.10.histogram.npy",
      },
      name = "stackexchange",
    },
    {
      heldout = {
        tensor_file = "data/basis.11.heldout.npy",
      },
      histogram = {
        tensor_file = "data/basis.11.histogram.npy",
      },
      name = "us_legislation",
    },
    {
      histogram = {
        tensor_file = "data/is_histogram.npy",
      },
      name = "specific (IS)",
    },
  },
  batch = 16,
  check_replicas = false,
  checkpoint_every = 120,
  data_parallel = true,
  eval_batch = 16,
  eval_every = 60,
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
    vocab = 4096,
    width = 96,
  },
  name = "dev/L1/is",
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
  run_dir = "results/study/mmlu_dist/dev/L1/is/seed-2",
  schedule = {
    kind = "cosine",
    min_lr = 0.00030000000000000003,
    total = 600,
    warmup = 30,
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
  steps = 600,
  store = {
    dir = "/work/mm-wt/runs/cache/store_planf9f8b03f08b5_L64_64_64_s65_v4096_ds1",
    level = 1,
  },
}

"""
What the scripts run on:

  batches  training batches with PoSE windows, synthetic copies, mixed windows (train.py's batch hook)
  sweep    finetune_long.py's arms x seeds: plan, checks, arms.json, resume
  ddp      several processes and Ctrl-C: agreed stops, every rank's RNG, one process group (train.py)
  device   cpu / cuda / mps, the number format (autocast) and torchrun's ranks (every script)
  bench    FLOPs per token, MFU and the timed steps of train.py --bench=True; forward tokens/s of any model
  masked_bench  each masked arm's forward (crop, maps, DCA) against the causal one: time and peak memory
  checks   what the scripts refuse before they run: ranges, out_dir, init_from, vocabulary, windows
  cli      how a script runs its main: one line and exit 2 for a bad input, a traceback for a bug
"""

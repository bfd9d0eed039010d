# make quick's fine-tunes: PI, YaRN and the plain control at 4 x L = 512, a few steps each, one seed.
# python finetune_long.py config/finetune_quick.py
init_from = 'out/quick-base'
out_dir = 'out/quick-ft'
rope_type = 'linear,yarn:beta_fast=8'
plain = True
factor = 4.0
seeds = '1337'
max_iters = 40
batch_size = 8
learning_rate = 1e-3
warmup_iters = 5
eval_interval = 40
eval_iters = 4

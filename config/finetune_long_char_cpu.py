# Extend the CPU copying base (L=128, config/train_shakespeare_char_copy_cpu.py) to 512 with PI and YaRN plus the
# plain control ('default'), 100 steps each on natural text, three seeds per arm (same seeds, data order and steps for
# every arm): 9 runs, about 30 s each on 2 idle CPU cores. Add methods with --rope_type=linear,ntk,yarn,llama3,...
# python finetune_long.py config/finetune_long_char_cpu.py
init_from = 'out/char-base-copy'
out_dir = 'out/char-ft'
rope_type = 'linear,yarn:beta_fast=8'
plain = True
factor = 4.0
seeds = '1337,1338,1339'
max_iters = 100
batch_size = 8
learning_rate = 3e-4
warmup_iters = 20
eval_interval = 20
eval_iters = 8

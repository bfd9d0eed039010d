# Extend the CPU base model (L=128) to 512 with every static method plus the plain control, 100 steps each
# (about a minute per arm on 2 CPU cores). Same seed, data order and steps for every arm.
# python finetune_long.py config/finetune_long_char_cpu.py
init_from = 'out/char-base'
out_dir = 'out/char-ft'
rope_type = 'linear,ntk,ntk_by_parts,yarn,yarn:beta_fast=8,llama3'
plain = True
factor = 4.0
max_iters = 100
batch_size = 8
learning_rate = 3e-4
warmup_iters = 20
eval_interval = 10
eval_iters = 8

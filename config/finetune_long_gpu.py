# Extend the GPU base model (L=256) to 1024 with every static method plus the plain control, 200 steps each.
# python finetune_long.py config/finetune_long_gpu.py
init_from = 'out/bpe-base'
out_dir = 'out/bpe-ft'
rope_type = 'linear,ntk,ntk_by_parts,yarn,yarn:beta_fast=8,llama3'
plain = True
factor = 4.0
max_iters = 200
batch_size = 16
learning_rate = 1e-4
warmup_iters = 20
eval_interval = 20
eval_iters = 8  # 8 x 16 windows of 1025 tokens: the BPE val split holds 134 that do not overlap
compile = True

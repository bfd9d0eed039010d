# DroPE (Gelberg, Cetin et al., Sakana, ICLR 2026) on the demo's base: every position encoding removed from the RoPE
# model (the same weights, layers='4*nope'), then recalibrated at the training length L = 128 on the base's own data
# mix (text with synthetic copies, as config/train_shakespeare_char_copy_cpu.py), with the demo's fine-tune recipe
# (batch 8, lr 3e-4, 20 warm-up steps), three seeds. `make drope` runs 30 / 100 / 300 steps (0.25% / 0.8% / 2.5% of
# the base's 12.3M training tokens; the paper recalibrates with 0.5-2%). Its inference temperature is an eval arm:
# --temperature=qtemp:shape=drope:c=... (lab/temperature.py), c chosen on dev windows.
#   python finetune_long.py config/studies/finetune_drope_cpu.py --max_iters=100 --out_dir=out/char-drope100
init_from = 'out/char-base-copy'
out_dir = 'out/char-drope'
rope_type = 'default'
block_size = 128
layers = '4*nope'
copy_share = 0.5
copy_span_lo, copy_span_hi = 8, 32
seeds = '1337,1338,1339'
max_iters = 100
batch_size = 8
learning_rate = 3e-4
warmup_iters = 20
eval_interval = 50
eval_iters = 8

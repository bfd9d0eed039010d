# make quick's evaluation: plain RoPE vs PI, NTK-aware and YaRN zero-shot on the base, and the three fine-tunes, at
# T = 512 = 4 x L on 32 held-out windows; loss only (the retrieval rooms are make demo's).
# python eval.py config/eval_quick.py
ckpt = 'out/quick-base,out/quick-ft'
rope_types = 'default,linear,ntk,yarn:beta_fast=8'
eval_len = 512
num_windows = 32
retrieval_examples = 0
depth_len = 0
needles = 0
recall_len = 0
entropy_windows = 2
out_dir = 'out/quick-eval'

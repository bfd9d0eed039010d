# PoSE (positional skip-wise training) beside the full-length fine-tunes of config/finetune_long_char_cpu.py: the
# plain control and YaRN at s=4 with the same steps, batch and learning rate, but every window is L=128 tokens whose
# position ids skip across [0, 512) (2 chunks); evaluations still run 512 tokens with ordinary positions.
# python finetune_long.py config/finetune_pose_char_cpu.py
init_from = 'out/char-base-copy'
out_dir = 'out/char-pose'
rope_type = 'yarn:beta_fast=8'
plain = True
pose = True
pose_len = 0          # 0: the base's L (128)
pose_chunks = 2
factor = 4.0
seeds = '1337,1338,1339'
max_iters = 100
batch_size = 8
learning_rate = 3e-4
warmup_iters = 20
eval_interval = 20
eval_iters = 8

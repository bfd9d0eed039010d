# A 0.8M-parameter character-level RoPE GPT at L=128, trained on 2 CPU cores in about 10 minutes.
# python train.py config/train_shakespeare_char_cpu.py
out_dir = 'out/char-base'
dataset = 'shakespeare_char'
block_size = 128
batch_size = 32
n_layer, n_head, n_embd = 4, 4, 128
dropout = 0.0
learning_rate = 2e-3
max_iters = 1500
lr_decay_iters = 1500
warmup_iters = 50
min_lr = 2e-4
eval_interval = 250
eval_iters = 8

# make quick's base: a smaller character-level RoPE GPT at L = 128, trained for a few minutes on 2 CPU cores.
# python train.py config/train_quick.py
out_dir = 'out/quick-base'
dataset = 'shakespeare_char'
block_size = 128
batch_size = 32
n_layer, n_head, n_embd = 3, 4, 96
learning_rate = 3e-3
max_iters = 500
lr_decay_iters = 500
warmup_iters = 30
min_lr = 3e-4
eval_interval = 250
eval_iters = 4

# make gpu-check, step 1: the GPU recipe's 30M-parameter BPE base (train_shakespeare_gpu.py), 300 steps in bf16 with
# torch.compile; `--bench=True` times 60 of them first (tokens/s, MFU per device, peak memory).
out_dir = 'out/gpu-check-base'
dataset = 'shakespeare'
block_size = 256
batch_size = 32
gradient_accumulation_steps = 4   # 32k tokens per step
n_layer, n_head, n_embd = 6, 6, 384
dropout = 0.1
learning_rate = 1e-3
max_iters = 300
lr_decay_iters = 300
warmup_iters = 30
min_lr = 1e-4
eval_interval = 100
eval_iters = 16
compile = True

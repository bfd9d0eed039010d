# GPT-2 BPE Shakespeare at L=256 on one GPU: a 30M-parameter model (10.6M without the tied embedding).
# python data/shakespeare/prepare.py && python train.py config/train_shakespeare_gpu.py
# several GPUs: torchrun --standalone --nproc_per_node=4 train.py config/train_shakespeare_gpu.py
out_dir = 'out/bpe-base'
dataset = 'shakespeare'
block_size = 256
batch_size = 32
gradient_accumulation_steps = 4   # 32 x 4 x 256 = 32k tokens per step (divisible by 1, 2 or 4 GPUs)
n_layer, n_head, n_embd = 6, 6, 384
dropout = 0.1
learning_rate = 1e-3
max_iters = 2000
lr_decay_iters = 2000
warmup_iters = 100
min_lr = 1e-4
eval_interval = 200
eval_iters = 16  # 16 x 32 windows of 257 tokens: the BPE val split holds 541 that do not overlap
compile = True

# make gpu-check, step 2: the base extended 256 -> 1024 with PI and YaRN plus the plain control, 60 steps each.
init_from = 'out/gpu-check-base'
out_dir = 'out/gpu-check-ft'
rope_type = 'linear,yarn'
plain = True
factor = 4.0
max_iters = 60
batch_size = 16
learning_rate = 1e-4
warmup_iters = 10
eval_interval = 20
eval_iters = 8
compile = True

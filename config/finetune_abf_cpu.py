# ABF (issue 33): the demo's base fine-tuned at 512 with its base raised by hand, 1e4 -> 1e5 and 1e6, the mainstream
# recipe (Llama 3, Qwen, SmolLM3 raise theta and fine-tune), at the same steps, seeds and settings as the demo's PI and
# YaRN fine-tunes (config/finetune_long_char_cpu.py), so the three compare run for run.
# python finetune_long.py config/finetune_abf_cpu.py
init_from = 'out/char-base-copy'
out_dir = 'out/char-ft-abf'
rope_type = 'abf:new_base=1e5,abf:new_base=1e6'
factor = 4.0
seeds = '1337,1338,1339'
max_iters = 100
batch_size = 8
learning_rate = 3e-4
warmup_iters = 20
eval_interval = 20
eval_iters = 8

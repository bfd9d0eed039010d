# make gpu-check, step 3: the base, three zero-shot scalings (one of them moving: Dynamic YaRN) and the three fine-tunes
# at T = 1024 = 4L on 16 held-out windows, with the passkey test and the retrieval rooms.
ckpt = 'out/gpu-check-base,out/gpu-check-ft'
rope_types = 'default,ntk,yarn,dynamic_yarn'
eval_len = 1024
num_windows = 16
retrieval_examples = 16
out_dir = 'out/gpu-check-eval'

# The attention maps' knob grids (make knobs; docs/results.md 'Where each knob was chosen'): the demo's base on 16
# TRAINING windows (never the held-out plays, which the knobs must not see), loss and passkey, the other rooms off.
# python eval.py config/studies/eval_knobs_cpu.py
base = 'out/char-base-copy'
split = 'train'
rope_types = ','.join(['crop:form=sliding'] +
                      [f'self_extend:window={w}:group={g}' for w, g in [(16, 16), (24, 12), (32, 16), (32, 32), (48, 16),
                                                                         (48, 24), (64, 16), (64, 32), (64, 64), (96, 32)]] +
                      [f'rerope:window={w}' for w in (32, 64, 96, 112)] + ['rerope:window=64:log_scale=0'] +
                      [f'leaky_rerope:window={w}:k={k}' for w, k in [(64, 8), (64, 16), (64, 32), (96, 32)]])
eval_len = 1024
num_windows = 16
depth_len = needles = recall_len = word_needles = mv_values = 0
tracking = False
out_dir = 'out/char-knobs'

# Issue 21, "train short, test long" and the plain control's puzzle (make long-s8): the fine-tunes at 512 with s = 4
# (the demo's) and s = 8 (the YaRN paper's recipe: fine-tune at s·L/2, use to s·L), the zero-shot s = 8 references,
# and three fine-tunes run with another scaling (--retune): Dynamic YaRN on the s = 4 YaRN fine-tune (the paper's way
# past s·L), the s = 4 fine-tunes at s = 8 (does their cliff at ~650-720 move?), and the plain control with YaRN s = 2
# over its own 512 (only the pairs that never turned within 512 squeezed).
# python eval.py config/studies/eval_long_s8.py
ckpt = 'out/char-base-copy,out/char-ft,out/char-ft-s8'
rope_types = 'linear,yarn:beta_fast=8'                  # zero-shot at s = T/L = 8
eval_len = 1024
num_windows = 32
out_dir = 'out/char-eval-s8'
_Y4, _Y8 = 'yarn_s4_beta_fast8_ft100', 'yarn_s8_beta_fast8_ft100'  # arm ids (lab/measure/arms.py arm_id), as in summary.md
retune = '; '.join([
    f"{_Y4} | dynamic_yarn:factor=4:beta_fast=8",
    f"{_Y4} | yarn:factor=8:beta_fast=8",
    "linear_s4_ft100 | linear:factor=8",
    "default_ft100 | yarn:factor=2",                      # original length: the fine-tune's 512
])
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    (_Y8, _Y4),                                           # train short, test long: s = 8 vs s = 4 at 512
    ('linear_s8_ft100', 'linear_s4_ft100'),
    (_Y8, 'yarn_s8_beta_fast8_zero-shot'),                # what the fine-tune adds at s = 8
    ('linear_s8_ft100', 'linear_s8_zero-shot'),
    (_Y8, 'linear_s8_ft100'),
    (f"{_Y4}_at_dynamic_yarn_s4_beta_fast8", _Y4),        # Dynamic YaRN past s·L on the s = 4 fine-tune
    (f"{_Y4}_at_yarn_s8_beta_fast8", _Y4),                # the s = 4 fine-tune run at s = 8
    ('linear_s4_ft100_at_linear_s8', 'linear_s4_ft100'),
    ('default_ft100_at_yarn_s2', 'default_ft100'),        # YaRN over the plain control's own 512
    ('default_ft100', _Y4),                               # the puzzle: plain vs YaRN s = 4 past 512
])

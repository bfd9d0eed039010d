# Issue 21, the copy-skill confound (make copy-capped): the demo's text-only fine-tunes beside the same fine-tunes
# with synthetic copies mixed in at distances capped below L (copy_max_distance=120, so no tested distance past L is
# ever trained), and zero-shot references at the fine-tunes' own scale s = 4.
# python eval.py config/studies/eval_copy_capped.py
ckpt = 'out/char-base-copy,out/char-ft,out/char-ft-capped'
rope_types = 'linear,yarn:beta_fast=8'
factor = 4.0
eval_len = 1024
num_windows = 32
out_dir = 'out/char-eval-capped'
# arm ids (lab/measure/arms.py arm_id): 'yarn s=4 β_fast=8 copy≤120 ft100' -> 'yarn_s4_beta_fast8' + _C
_C = '_copy_le120_ft100'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    (f"yarn_s4_beta_fast8{_C}", 'yarn_s4_beta_fast8_ft100'),   # what keeping the copy skill changes
    (f"linear_s4{_C}", 'linear_s4_ft100'),
    (f"default{_C}", 'default_ft100'),
    (f"yarn_s4_beta_fast8{_C}", f"linear_s4{_C}"),             # the fine-tuned ranking once the skill is kept
    (f"yarn_s4_beta_fast8{_C}", f"default{_C}"),
    (f"yarn_s4_beta_fast8{_C}", 'yarn_s4_beta_fast8_zero-shot'),  # what the fine-tune adds at s = 4
    (f"linear_s4{_C}", 'linear_s4_zero-shot'),
    ('yarn_s4_beta_fast8_ft100', 'yarn_s4_beta_fast8_zero-shot'),
])

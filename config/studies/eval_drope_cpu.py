# DroPE against scaling (issue 32): the demo's base with RoPE removed and recalibrated at L (make drope: 30 / 100 /
# 300 / 1000 steps at lr 3e-4, 1000 at lr 1e-3 decaying; 3 seeds), with and without its inference temperature 1 + c ln((p + 1)/L) (c chosen by make
# temperature-knobs on training windows), beside zero-shot YaRN and the base's crop; every recalibration also held
# to L (its own crop, --self_crop). make eval's 32 dev windows, T = 1024.
# python eval.py config/studies/eval_drope_cpu.py   (make drope-eval; needs make demo's base and make drope)
_C = 0.1  # DroPE's c: make temperature-knobs' lowest whole-window loss (the grid's smallest c; assets/studies/temperature_knobs/summary.md)
ckpt = 'out/char-base-copy,out/char-drope300,out/char-drope1000,out/char-drope1000-lr1e-3'  # (30 and 100 steps: their
# training logs only, val 2.56 and 2.45; each budget evaluated costs 12 model evaluations here)
base = 'out/char-base-copy'
rope_types = 'default,crop:form=sliding,yarn:beta_fast=8'
temperature = f'qtemp:shape=drope:c={_C}'
self_crop = 'sliding'
eval_len = 1024
num_windows = 32
retrieval_examples = 16
out_dir = 'out/char-eval-drope'
_T = f'_plus_qtemp_drope_c{_C}'
_D = {300: 'drope_copy_ft300', 1000: 'drope_copy_ft1000_char-drope1000',
      'lr1e-3': 'drope_copy_ft1000_char-drope1000-lr1e-3'}  # arm ids (the two 1000-step runs carry their folders)
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    *[(_D[k] + _T, 'yarn_s8_beta_fast8_zero-shot') for k in (300, 1000, 'lr1e-3')],  # dropping RoPE vs scaling it
    *[(_D[k] + _T, _D[k]) for k in _D],                                             # what its temperature is worth
    (_D[1000], _D[300]), (_D['lr1e-3'], _D[1000]),                                  # more recalibration
    (_D['lr1e-3'], 'base_L128'),                                                    # inside L: the price of dropping
])

# The 2025-26 designs at T = 2048 = 16 x L (issue 32), on 16 dev windows (make eval's first 16) and 8 examples per
# retrieval cell: the demo's base with YaRN (s = 16) and the temperature shapes, DroPE's longest recalibration with its
# temperature, the NoPE and hybrid bases; every arm against the base's crop.
# python eval.py config/studies/eval_designs_2048_cpu.py   (make designs-2048; after make drope, the bases and temperature-knobs)
_C = 0.1  # DroPE's c, from make temperature-knobs (assets/studies/temperature_knobs/summary.md)
ckpt = 'out/char-base-copy,out/char-drope1000-lr1e-3,out/char-nope-copy,out/char-hybrid-copy'
base = 'out/char-base-copy'
rope_types = ','.join(['default', 'crop:form=sliding', 'yarn:beta_fast=8',
                       'yarn:beta_fast=8:attention_factor=1+qtemp:shape=ministral', 'qtemp:shape=llama4', 'qtemp:shape=logn'])
temperature = f'qtemp:shape=drope:c={_C}'
eval_len = 2048
num_windows = 16
retrieval_examples = 8
out_dir = 'out/char-eval-designs-2048'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    (f'drope_copy_ft1000_plus_qtemp_drope_c{_C}', 'yarn_s16_beta_fast8_zero-shot'),
    (f'drope_copy_ft1000_plus_qtemp_drope_c{_C}', 'drope_copy_ft1000'),
    ('yarn_s16_beta_fast8_attention_factor1_plus_qtemp_ministral_zero-shot', 'yarn_s16_beta_fast8_zero-shot'),
    ('qtemp_logn_zero-shot', 'qtemp_llama4_zero-shot'),
    ('base_3_rope_w32_nope_L128', 'none_L128'),
])

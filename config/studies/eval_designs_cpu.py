# The 2025-26 designs beside the demo's base (issue 32; docs/results.md "The 2025-26 designs"): on make eval's 32 dev
# windows at T = 1024 = 8 x L, every arm against the base's crop (automatic) and the contrasts below.
#   the temperature family on the demo's base, inference only: Llama 4's step-log (on every layer: this base has no
#   NoPE layer), ReRoPE's log-n alone, SSMax swapped in (s chosen by make temperature-knobs on training windows),
#   Ministral 3 (YaRN with attention factor 1 and the position temperature) beside YaRN with and without mscale;
#   the new bases, each the demo's recipe with one change: NoPE, 3 windowed RoPE : 1 global NoPE, Gemma 3's
#   local/global bases, SSMax trained in; and the demo's YaRN fine-tune with the log-n and Llama 4 temperatures on top.
# python eval.py config/studies/eval_designs_cpu.py   (make designs; needs make demo's base and the four new bases)
_S = 0.16  # SSMax's s: make temperature-knobs' lowest whole-window loss (the grid's edge; assets/studies/temperature_knobs/summary.md)
ckpt = ','.join(['out/char-base-copy', 'out/char-nope-copy', 'out/char-hybrid-copy', 'out/char-local-global-copy',
                 'out/char-ssmax-copy'] +  # and the demo's YaRN fine-tune (3 seeds), with temperatures on top
                [f'out/char-ft/yarn_s4_beta_fast8/seed{s}' for s in (1337, 1338, 1339)])
base = 'out/char-base-copy'
rope_types = ','.join([
    'default', 'crop:form=sliding', 'yarn:beta_fast=8', 'yarn:beta_fast=8:attention_factor=1',
    'yarn:beta_fast=8:attention_factor=1+qtemp:shape=ministral',   # Ministral 3
    'qtemp:shape=llama4', 'qtemp:shape=logn', f'qtemp:shape=ssmax:s={_S}', 'rerope:window=64'])
eval_len = 1024
num_windows = 32
retrieval_examples = 16
temperature = 'qtemp:shape=logn; qtemp:shape=llama4'  # on the fine-tune (lab/temperature.py)
out_dir = 'out/char-eval-designs'
_Y8, _CROP = 'yarn_s8_beta_fast8_zero-shot', 'crop_w128_sliding'
_MIN = 'yarn_s8_beta_fast8_attention_factor1_plus_qtemp_ministral_zero-shot'
_HYB, _LG = 'base_3_rope_w32_nope_L128', 'base_3_rope_w32_base1e4_rope_base1e6_L128'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    (_MIN, _Y8),                                               # which temperature with YaRN: per position or mscale
    (_MIN, 'yarn_s8_beta_fast8_attention_factor1_zero-shot'),  # what the position temperature adds to bare YaRN
    ('qtemp_llama4_zero-shot', 'base_L128'),                   # a temperature alone, on plain RoPE
    ('qtemp_logn_zero-shot', 'base_L128'),
    (f'qtemp_ssmax_s{_S}_zero-shot', 'base_L128'),
    ('qtemp_logn_zero-shot', 'qtemp_llama4_zero-shot'),       # two shapes against each other
    ('rerope_w64_zero-shot', 'qtemp_logn_zero-shot'),         # ReRoPE's map, over its temperature alone
    ('none_L128', 'base_L128'),                                # NoPE from scratch against RoPE
    (_HYB, 'none_L128'), (_HYB, 'base_L128'), (_LG, 'base_L128'),
    ('base_ssmax_L128', 'base_L128'),
    ('yarn_s4_beta_fast8_ft100_plus_qtemp_logn', 'yarn_s4_beta_fast8_ft100'),  # a temperature on a fine-tune
    ('yarn_s4_beta_fast8_ft100_plus_qtemp_llama4', 'yarn_s4_beta_fast8_ft100'),                            # SSMax trained in, against the base
])

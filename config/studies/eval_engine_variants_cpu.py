# The engine-only rope types beside the ones they vary (issue 59 item 3; dev only: make eval's 32 dev windows at
# T = 1024 = 8 x L on the demo's base, zero-shot, every arm against the base's crop and the contrasts below):
#   Grok's yarn_log (YaRN's ramp blended in log space) against YaRN; TeleChat3's YaRN (temperature 0.07 ln s + 1
#   where YaRN's is 0.1 ln s + 1) against YaRN; NTK-mixed (vLLM's ntk with mixed_b; b = 1 is vLLM's plain 'ntk',
#   which squeezes pair 0 too) against the lab's NTK-aware; all at s = 8, beta_fast 8 where the lab's YaRN uses it.
#   Hunyuan's alpha-NTK at alpha = s is NTK-aware exactly (b' = b alpha^(d/(d-2))): not run twice.
# python eval.py config/studies/eval_engine_variants_cpu.py   (make engine-variants; needs make demo's base)
base = 'out/char-base-copy'
rope_types = ','.join(['default', 'crop:form=sliding', 'ntk', 'yarn:beta_fast=8', 'yarn_log:beta_fast=8',
                       'yarn_telechat:beta_fast=8', 'ntk_mixed', 'ntk_mixed:mixed_b=0.625'])
eval_len = 1024
num_windows = 32
retrieval_examples = 16
out_dir = 'out/char-eval-engine-variants'
_Y8 = 'yarn_s8_beta_fast8_zero-shot'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    ('yarn_log_s8_beta_fast8_zero-shot', _Y8),          # the ramp blended in log space, against YaRN
    ('yarn_telechat_s8_beta_fast8_zero-shot', _Y8),     # a cooler temperature, the same frequencies
    ('ntk_mixed_s8_zero-shot', 'ntk_s8_zero-shot'),     # vLLM's plain 'ntk' against the lab's NTK-aware
    ('ntk_mixed_s8_mixed_b0.625_zero-shot', 'ntk_mixed_s8_zero-shot'),  # Su's mixed b against b = 1
])

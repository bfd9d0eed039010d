# Issue 21, three bases (make bases): the demo's zero-shot arms on another copying base (--base=...), with the named
# contrasts of the demo that need no fine-tune; eval.py --combine then puts the bases side by side.
# python eval.py config/studies/eval_bases.py --base=out/char-base-copy-1338 --out_dir=out/char-eval-base1338
rope_types = ','.join([
    'default', 'crop:form=sliding', 'linear', 'ntk', 'ntk_by_parts', 'yarn', 'yarn:beta_fast=8',
    'yarn:beta_fast=8:attention_factor=1', 'dynamic_yarn', 'llama3', 'rerope:window=64', 'rerope:window=64:log_scale=0',
    'leaky_rerope:window=64:k=16', 'self_extend:window=64:group=32',
])
eval_len = 1024
num_windows = 32
_Y8 = 'yarn_s8_beta_fast8_zero-shot'  # arm ids (lab/measure/arms.py arm_id): 'yarn s=8 β_fast=8 zero-shot'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    (_Y8, 'linear_s8_zero-shot'),
    (_Y8, 'yarn_s8_beta_fast8_attention_factor1_zero-shot'),
    ('yarn_s8_zero-shot', 'ntk_by_parts_s8_zero-shot'),
    (_Y8, 'yarn_s8_zero-shot'),
    ('dynamic_yarn_zero-shot', _Y8),
    ('llama3_s8_zero-shot', _Y8),
    ('rerope_w64_zero-shot', 'rerope_w64_no-log_zero-shot'),
    ('rerope_w64_zero-shot', 'dynamic_yarn_zero-shot'),
    ('rerope_w64_zero-shot', _Y8),
    ('leaky_rerope_w64_k16_zero-shot', 'rerope_w64_zero-shot'),
    ('self_extend_w64_G32_zero-shot', 'rerope_w64_zero-shot'),
])

# Issue 21, three bases (make bases): the demo's zero-shot arms on another copying base (--base=...), with the named
# contrasts of the demo that need no fine-tune; eval.py --combine then puts the bases side by side.
# python eval.py config/eval_bases.py --base=out/char-base-copy-1338 --out_dir=out/char-eval-base1338
rope_types = ','.join([
    'default', 'crop:form=sliding', 'linear', 'ntk', 'ntk_by_parts', 'yarn', 'yarn:beta_fast=8',
    'yarn:beta_fast=8:attention_factor=1', 'dynamic_yarn', 'llama3', 'rerope:window=64', 'rerope:window=64:log_scale=0',
    'leaky_rerope:window=64:k=16', 'self_extend:window=64:group=32',
])
eval_len = 1024
num_windows = 32
_Y8 = 'yarn s=8 β_fast=8 zero-shot'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    (_Y8, 'linear s=8 zero-shot'),
    (_Y8, 'yarn s=8 β_fast=8 attention_factor=1 zero-shot'),
    ('yarn s=8 zero-shot', 'ntk_by_parts s=8 zero-shot'),
    (_Y8, 'yarn s=8 zero-shot'),
    ('dynamic_yarn zero-shot', _Y8),
    ('llama3 s=8 zero-shot', _Y8),
    ('rerope w=64 zero-shot', 'rerope w=64 no-log zero-shot'),
    ('rerope w=64 zero-shot', 'dynamic_yarn zero-shot'),
    ('rerope w=64 zero-shot', _Y8),
    ('leaky_rerope w=64 k=16 zero-shot', 'rerope w=64 zero-shot'),
    ('self_extend w=64 G=32 zero-shot', 'rerope w=64 zero-shot'),
])

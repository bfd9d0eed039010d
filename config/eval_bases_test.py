# Issue 31, three bases on the test split (make bases-test): laid over config/eval_test_cpu.py (the same windows,
# examples and self-crops, sharing no token with make eval's), its zero-shot arms on another copying base
# (--base=...), with its contrasts that need no fine-tune; eval.py --combine then puts the demo's base and the two
# others side by side.
# python eval.py config/eval_test_cpu.py config/eval_bases_test.py --base=out/char-base-copy-1338 --out_dir=out/char-eval-test-base1338
ckpt = ''  # no fine-tunes: the zero-shot arms of --base
rope_types = 'default,crop:form=sliding,yarn:beta_fast=8,dynamic_yarn,rerope:window=64,self_extend:window=64:group=32'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    ('dynamic_yarn_zero-shot', 'yarn_s8_beta_fast8_zero-shot'),      # dynamic vs static YaRN
    ('rerope_w64_zero-shot', 'yarn_s8_beta_fast8_zero-shot'),
    ('self_extend_w64_G32_zero-shot', 'rerope_w64_zero-shot'),
    ('rerope_w64_zero-shot', 'dynamic_yarn_zero-shot'),
])

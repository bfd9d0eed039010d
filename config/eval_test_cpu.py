# The test split (issue 31; make eval-test): windows and examples drawn once with their own seed, sharing no token with
# the dev run's (make eval: --exclude cuts every dev window out of the held-out plays), sized for the claims made:
# 140 windows of T = 1024 (the audit's estimate to resolve +-0.02 nats between the maps and the crop) and 100 examples
# per retrieval cell (Newcombe's interval for 100 concordant pairs is +-3.7 points). The headline arms, each also held
# to its own window (self_crop: a fine-tune to 512 and to 128, a zero-shot scaling to 128).
# python eval.py config/eval_test_cpu.py
ckpt = ','.join(['out/char-base-copy'] + [f'out/char-ft/{arm}/seed{s}' for arm in ('default', 'yarn_s4_beta_fast8')
                                          for s in (1337, 1338, 1339)])  # the plain control and YaRN (not PI: time)
rope_types = 'default,crop,yarn:beta_fast=8,dynamic_yarn,rerope:window=64,self_extend:window=64:group=32'
eval_len = 1024
num_windows = 140
seed = 2027
exclude = 'out/char-eval'
retrieval_examples = 100
moving_examples = 25
self_crop = 'sliding'
out_dir = 'out/char-eval-test'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    ('yarn_s4_beta_fast8_ft100', 'default_ft100'),                   # a scaled fine-tune vs the plain control
    ('dynamic_yarn_zero-shot', 'yarn_s8_beta_fast8_zero-shot'),      # dynamic vs static YaRN
    ('rerope_w64_zero-shot', 'yarn_s8_beta_fast8_zero-shot'),
    ('self_extend_w64_G32_zero-shot', 'rerope_w64_zero-shot'),
    ('rerope_w64_zero-shot', 'dynamic_yarn_zero-shot'),
])

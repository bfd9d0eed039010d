# The demo's evaluation (make eval): every arm at T = 1024 = 8 x L on 32 held-out windows, and the named contrasts the
# README and docs/results.md discuss, each a paired test with a verdict (better / worse / equivalent / unresolved).
# python eval.py config/eval_char_cpu.py
ckpt = 'out/char-base-copy,out/char-ft,out/char-ft20,out/char-pose,out/char-longrope-s8'
rope_types = ','.join([
    'default', 'crop',                                    # the base, and the base held to its last L tokens
    'linear', 'ntk', 'dynamic', 'ntk_by_parts',          # s = T/L = 8 unless dynamic
    'yarn', 'yarn:beta_fast=8', 'yarn:beta_fast=8:attention_factor=1', 'dynamic_yarn', 'llama3',
    'rerope:window=64', 'rerope:window=64:log_scale=0',  # the reference's query log-scaling on, and off
    'leaky_rerope:window=64:k=16', 'self_extend:window=64:group=32',
])
eval_len = 1024
num_windows = 32
retrieval_examples = 16  # the dev run's budget (issue 30): 16 examples per room and distance bucket (was 32)
moving_examples = 8      # Dynamic NTK / YaRN score rows past L (a forward per token) for the first 8 of those windows
out_dir = 'out/char-eval'
_Y8 = 'yarn_s8_beta_fast8_zero-shot'  # arm ids (lab/measure/arms.py arm_id): 'yarn s=8 β_fast=8 zero-shot'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    (_Y8, 'linear_s8_zero-shot'),                                    # YaRN vs PI, zero-shot
    ('yarn_s4_beta_fast8_ft100', 'linear_s4_ft100'),                 # YaRN vs PI, fine-tuned
    ('linear_s4_ft100', 'linear_s4_ft20'),                           # does PI gain from 80 more steps?
    (_Y8, 'yarn_s8_beta_fast8_attention_factor1_zero-shot'),         # what YaRN's temperature is worth
    ('yarn_s8_zero-shot', 'ntk_by_parts_s8_zero-shot'),              # the same, at beta_fast = 32
    (_Y8, 'yarn_s8_zero-shot'),                                      # beta_fast 8 vs 32
    ('longrope_s8_zero-shot', _Y8),                                  # a searched curve vs the formula
    ('dynamic_yarn_zero-shot', _Y8),                                 # dynamic vs static YaRN
    ('dynamic_zero-shot', 'ntk_s8_zero-shot'),                       # dynamic vs static NTK
    ('llama3_s8_zero-shot', _Y8),
    ('rerope_w64_zero-shot', 'rerope_w64_no-log_zero-shot'),         # what ReRoPE's log scaling is worth
    ('rerope_w64_zero-shot', 'dynamic_yarn_zero-shot'),
    ('rerope_w64_zero-shot', _Y8),
    ('leaky_rerope_w64_k16_zero-shot', 'rerope_w64_zero-shot'),
    ('self_extend_w64_G32_zero-shot', 'rerope_w64_zero-shot'),
    ('yarn_s4_beta_fast8_pose_ft100', 'yarn_s4_beta_fast8_ft100'),   # PoSE vs full-length fine-tuning
    ('default_pose_ft100', 'default_ft100'),
    ('yarn_s4_beta_fast8_ft100', 'default_ft100'),                   # a scaled fine-tune vs the plain control
])

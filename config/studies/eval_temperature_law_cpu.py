# The temperature-law diagnostic (issue 63 item 3; Hayase & Karakida 2026, lab/measure/temperature_law.py) on the demo's
# base: each attention row's critical inverse temperature beta_c (the least beta at which its top key holds half the
# mass) at 16 query positions per bucket, every layer and head, and the law ln beta_c = p ln ln n + c per window,
# beside the temperature shapes of make designs (the same zero-shot arms on the same base). Loss and the diagnostics
# only: the retrieval rooms are off (make designs has them). 16 dev windows at T = 1024 = 8 x L; ~45 s on one thread.
# python eval.py config/studies/eval_temperature_law_cpu.py      (make temperature-law; needs make demo's base)
ckpt = 'out/char-base-copy'
rope_types = ','.join([
    'default', 'crop:form=sliding', 'yarn:beta_fast=8', 'yarn:beta_fast=8:attention_factor=1',
    'yarn:beta_fast=8:attention_factor=1+qtemp:shape=ministral',   # Ministral 3
    'qtemp:shape=llama4', 'qtemp:shape=logn', 'qtemp:shape=ssmax:s=0.16',
    'rerope:window=64', 'rerope:window=64:log_scale=0'])
eval_len = 1024
num_windows = 16
temperature_law = True
law_rows = 16
retrieval_examples = 0   # the rooms off: this study reads the rows' scores, not retrieval
depth_len = 0
needles = 0
recall_len = 0
word_needles = 0
mv_values = 0
tracking = False
out_dir = 'out/char-eval-temperature-law'

# The miniature at the real model's factor (issue 58 item 4, like with like): the demo's base (L = 128) at T = 192 =
# 1.5 x L on make eval's 32 dev windows, the arms of the real model's study at s = 1.5 (as trained, the sink-kept
# crop and the plain one, PI, YaRN, NTK-aware, ReRoPE, Self-Extend with knobs that keep every distance below L), loss
# only, and the real model's declared contrasts (config/real_model_cpu.py, config/real_model_maps_cpu.py) as named
# contrasts in its one past-L bucket, 128-192, against the same control (the sink-kept crop at cache positions). python eval.py config/studies/eval_char_s15_cpu.py (make mini-s15)
base = 'out/char-base-copy'
rope_types = ','.join(['default', 'crop:form=sliding', 'crop:form=sliding:sink=4', 'crop:form=sliding:sink=4:at=cache', 'linear', 'yarn', 'ntk',
                       'rerope:window=64', 'self_extend:window=32:group=4'])
eval_len = 192
num_windows = 32
retrieval_examples = 0
out_dir = 'out/char-eval-s15'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    ('base_L128', 'crop_w128_sink4_cache_sliding'),
    ('yarn_s1.5_zero-shot', 'base_L128'),
    ('yarn_s1.5_zero-shot', 'linear_s1.5_zero-shot'),
    ('yarn_s1.5_zero-shot', 'crop_w128_sink4_cache_sliding'),
    ('rerope_w64_zero-shot', 'base_L128'),
    ('rerope_w64_zero-shot', 'crop_w128_sink4_cache_sliding'),
    ('self_extend_w32_G4_zero-shot', 'rerope_w64_zero-shot'),
    ('rerope_w64_zero-shot', 'yarn_s1.5_zero-shot'),
    ('crop_w128_sink4_sliding', 'crop_w128_sliding'),   # the kept sink on a model with no sink head, at its distance
    ('crop_w128_sink4_cache_sliding', 'crop_w128_sliding'),  # and at StreamingLLM's cache positions
])

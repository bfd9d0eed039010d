# Scale which layers? (issue 32) Gemma 3's shape in miniature (make local-global-base: 3 local RoPE layers, w = 32,
# base 1e4 : 1 global RoPE layer at base 1e6), extended zero-shot to T = 1024 = 8 x L with PI and YaRN applied to all
# layers, the global layer only (Gemma 3's choice for its linear factor 8) or the local layers only; the base itself
# and its crop beside them. make eval's 32 dev windows.
# python eval.py config/studies/eval_local_global_cpu.py   (make scale-layers)
base = 'out/char-local-global-copy'
rope_types = ','.join(['default', 'crop:form=sliding'] + [f'{t}{k}' for t in ('linear', 'yarn:beta_fast=8')
                                                          for k in ('', ':layers=full', ':layers=window')])
eval_len = 1024
num_windows = 32
retrieval_examples = 16
out_dir = 'out/char-eval-local-global'
contrasts = '; '.join(f"{a} | {b}" for t in ('linear_s8', 'yarn_s8_beta_fast8') for a, b in [
    (f'{t}_on_full_zero-shot', f'{t}_zero-shot'), (f'{t}_on_window_zero-shot', f'{t}_zero-shot'),
    (f'{t}_on_full_zero-shot', f'{t}_on_window_zero-shot'), (f'{t}_on_full_zero-shot', 'base_3_rope_w32_base1e4_rope_base1e6_L128')])

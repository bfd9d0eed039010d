# Which frequencies matter (issue 33; docs/results.md "Which frequencies matter"): the demo's base with only its k
# fastest RoPE pairs rotating, k = 0 (NoPE) .. 16 (plain RoPE), the rest stopped (theta = 0: p-RoPE at inference,
# rope_type proportional with p = k/16, factor 1). The critical dimension says pairs 0-5 complete a turn within
# L = 128 and 6-15 do not: clipping exactly those (k = 6) is clipped RoPE (FoPE / HoPE). On make eval's 32 dev windows
# at T = 1024 = 8 x L, each k against the crop (automatic) and against plain RoPE.
# python eval.py config/studies/eval_clip_sweep_cpu.py   (make clip-sweep; needs make demo's base)
ckpt = 'out/char-base-copy'
base = 'out/char-base-copy'
_KEEP = (0, 2, 4, 5, 6, 7, 8, 10, 12, 14, 15)
rope_types = ','.join(['default', 'crop:form=sliding'] +
                      [f'proportional:partial_rotary_factor={k / 16:g}:factor=1' for k in _KEEP])
eval_len = 1024
num_windows = 32
retrieval_examples = 16
out_dir = 'out/char-eval-clip-sweep'
_ID = lambda k: f"proportional_s1_p{k / 16:g}_zero-shot"  # the arm ids (lab.measure.arms.arm_id)
contrasts = '; '.join([f"{_ID(k)} | base_L128" for k in _KEEP] +  # each k against plain RoPE (all 16 pairs)
                      [f"{_ID(k)} | {_ID(k + 2)}" for k in (4, 6, 8)])  # two pairs more, around the critical dimension

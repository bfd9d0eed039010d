# The bases trained with fewer rotating pairs or a learned sink (issue 33), against the demo's base: p-RoPE (4 of
# 16 pairs rotate, HF proportional 0.25), clipped RoPE (pairs 6-15 never rotate), learned attention sinks, beside the
# demo's base; on make eval's 32 dev windows at T = 1024. Each base is the demo's recipe with that one change; each
# against its own crop: the evals after this one in make frequency-bases (a base's own crop is its crop control).
# python eval.py config/studies/eval_frequency_bases_cpu.py   (make frequency-bases; needs make demo, prope-base, clip-base, sinks-base)
ckpt = 'out/char-base-copy,out/char-prope-copy,out/char-clip-copy,out/char-sinks-copy'
eval_len = 1024
num_windows = 32
retrieval_examples = 16
out_dir = 'out/char-eval-frequency-bases'
contrasts = '; '.join(f"{a} | base_L128" for a in ('base_proportional_p0.25_L128', 'base_clip_L128', 'base_sinks_L128'))

# LongRoPE2's mixed windows within a step (issue 46 item 5): the needle-searched curve at s = 4 fine-tuned 100 steps at
# 512 (3 seeds) three ways: plain; mixed by whole steps (--mixed_short=0.5: half the steps at L, so half the long
# tokens, as the frequencies study ran it); mixed within each step (--mixed_in_step: every step keeps the plain
# fine-tune's long windows and adds as many short ones, as LongRoPE2's batches do). On make eval's 32 dev windows at
# T = 1024, with the base's crop. Does mixing cost long-context loss once the long tokens are equal?
# python eval.py config/studies/eval_longrope2_in_step_cpu.py   (make longrope2-in-step; needs make train-copy)
ckpt = ','.join(['out/char-base-copy', 'out/char-ft-longrope2-nomix', 'out/char-ft-longrope2',
                 'out/char-ft-longrope2-instep'])
base = 'out/char-base-copy'
rope_types = 'default,crop:form=sliding'
eval_len = 1024
num_windows = 32
retrieval_examples = 16
out_dir = 'out/char-eval-longrope2-in-step'
_LR2 = 'longrope_s4_needles'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    (f'{_LR2}_mixed_in-step_ft100', f'{_LR2}_ft100'),           # mixing at equal long tokens
    (f'{_LR2}_mixed_ft100', f'{_LR2}_ft100'),                   # mixing by whole steps (half the long tokens)
    (f'{_LR2}_mixed_in-step_ft100', f'{_LR2}_mixed_ft100'),     # the two mixes against each other
])

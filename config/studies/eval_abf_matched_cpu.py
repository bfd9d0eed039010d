# ABF at a matched target (issue 46 item 1; make abf-matched): the question "raise the base, or scale with PI / YaRN?"
# asked at one target. Every arm is the demo's base fine-tuned at 512 for 100 steps on 3 seeds (the same data order)
# and read to T = 1024: PI and YaRN at s = 8 (the paper's recipe: fine-tune at s·L/2, use to s·L) and ABF at b' = 1e5
# (NTK-aware's base for s = 8 at head_dim 32: 1e4 · 8^(32/30) ≈ 9.2e4, python -m lab.knobs) and b' = 1e6 (worth s ≈ 75,
# aimed far past 1024). The frequencies study's ABF row compared 1e6 with the s = 4 fine-tunes, which aim at 512 and
# break past it by construction; this one answers it at 1024. Against the base's crop (automatic) and each other.
# python eval.py config/studies/eval_abf_matched_cpu.py   (after finetune_long.py ... --out_dir=out/char-ft-abf8, make abf-matched)
ckpt = 'out/char-base-copy,out/char-ft-abf8'
rope_types = 'crop:form=sliding'
eval_len = 1024
num_windows = 32
retrieval_examples = 16
out_dir = 'out/char-eval-abf-matched'
_A5, _A6, _Y8, _P8 = 'abf_s8_b_1e5_ft100', 'abf_s8_b_1e6_ft100', 'yarn_s8_beta_fast8_ft100', 'linear_s8_ft100'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    (_A5, _Y8), (_A6, _Y8),      # raise the base, or YaRN, at the same target
    (_A5, _P8), (_A6, _P8),      # ... or PI
    (_A6, _A5),                  # how far to raise it
    (_Y8, _P8),                  # the two scalings against each other (the long_s8 study's, on this base)
])

# The designs of issue 47 on the test split (make designs-test): laid over config/eval_test_cpu.py (its 140 windows of
# T = 1024 and 100 examples a cell, sharing no token with the dev windows), one base per run (--base=...): as it is,
# its crop, and ReRoPE where it can copy; or, as make ape measured them, several bases (--ckpt=...) beside one base's crop. The dev folder to stay clear of is the committed demo's (assets/demo holds
# make eval's windows), so a clean clone needs no make eval first. Bases that never learned to copy skip retrieval
# (--retrieval_examples=0: no positive control, nothing to judge; the loss windows do not move).
# python eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-gated-copy --out_dir=out/char-eval-test-gated
ckpt = ''                     # the base's own arms only: no fine-tunes
rope_types = 'default,crop:form=sliding'
self_crop = ''                # the base's crop is the control (the arms are the base itself)
exclude = 'assets/demo'       # make eval's windows, as committed
contrasts = ''

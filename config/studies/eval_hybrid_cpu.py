# Does a hybrid extend with no scaling at all? (issue 32) The 3 windowed RoPE : 1 global NoPE base (make hybrid-base;
# Command A, Llama 4's iRoPE without its chunking) to T = 1024 = 8 x L as it is, with Llama 4's step-log temperature on
# its NoPE layer (Llama 4's placement), and with the log-n scale there; against its own crop. 32 dev windows.
# python eval.py config/studies/eval_hybrid_cpu.py   (make hybrid-eval)
base = 'out/char-hybrid-copy'
rope_types = 'default,crop:form=sliding,qtemp:shape=llama4:layers=nope,qtemp:shape=logn:layers=nope,qtemp:shape=logn'
eval_len = 1024
num_windows = 32
retrieval_examples = 16
out_dir = 'out/char-eval-hybrid'
_B = 'base_3_rope_w32_nope_L128'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    ('qtemp_llama4_on_nope_zero-shot', _B), ('qtemp_logn_on_nope_zero-shot', _B),
    ('qtemp_logn_on_nope_zero-shot', 'qtemp_llama4_on_nope_zero-shot'), ('qtemp_logn_zero-shot', 'qtemp_logn_on_nope_zero-shot')])

# Chunked against sliding local layers (issue 47): the 3 chunked RoPE : 1 global NoPE base (make chunked-base; Llama 4's
# shape, its chunk c = 32 < L) to T = 1024 = 8 x L as it is, with Llama 4's step-log temperature on its NoPE layer
# (Llama 4's own placement) and the log-n scale there; against its own crop. The same windows, examples and arms as
# config/studies/eval_hybrid_cpu.py, so that `eval.py --combine` pairs the two bases arm by arm (make chunked-eval).
# python eval.py config/studies/eval_chunked_cpu.py
base = 'out/char-chunked-copy'
rope_types = 'default,crop:form=sliding,qtemp:shape=llama4:layers=nope,qtemp:shape=logn:layers=nope,qtemp:shape=logn'
eval_len = 1024
num_windows = 32
retrieval_examples = 16
out_dir = 'out/char-eval-chunked'
_B = 'base_3_rope_c32_nope_L128'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    ('qtemp_llama4_on_nope_zero-shot', _B), ('qtemp_logn_on_nope_zero-shot', _B),
    ('qtemp_logn_on_nope_zero-shot', 'qtemp_llama4_on_nope_zero-shot'), ('qtemp_logn_zero-shot', 'qtemp_logn_on_nope_zero-shot')])

# Dual Chunk Attention's local window (issue 46 item 5): ChunkLlama's current default is L/8 where the frequencies study
# ran L/16; both beside each other on the demo's base (chunk S = 96 = 3L/4 for both), with its crop, on the 32 dev
# windows at T = 1024 = 8 x L. The base arm also gives the plain base's sinks counted per head (summary.md "Sink heads").
# python eval.py config/studies/eval_dca_window_cpu.py      (make dca-window; needs make train-copy)
base = 'out/char-base-copy'
rope_types = 'default,crop:form=sliding,dca:chunk=96:window=8,dca:chunk=96:window=16'
eval_len = 1024
num_windows = 32
retrieval_examples = 16
out_dir = 'out/char-eval-dca-window'
contrasts = 'dca_S96_w16_zero-shot | dca_S96_w8_zero-shot'

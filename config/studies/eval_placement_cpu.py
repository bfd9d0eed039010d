# Where the temperature goes (issue 47 item 3): on every dim of the logit (the softmax scale of DeepSeek-V3 and
# torchtitan; the lab's default) or only on the dims whose pairs turn (Hugging Face's cos/sin under a partial rotation:
# 'attention_factor_on': 'rotary', qtemp ...:on=rotary). On the GPT-NeoX-style partial base (make neox-base: the first
# 8 of 32 dims rotate, the base spread over them; Pythia's rotary_pct 0.25), YaRN s = 8 (beta_fast 8) and ReRoPE's
# log-n temperature each in both placements, against its own crop; 32 dev windows at T = 1024 = 8 x L.
# python eval.py config/studies/eval_placement_cpu.py      (make placement-eval; the p-RoPE base: --base=out/char-prope-copy)
base = 'out/char-neox-copy'
rope_types = ','.join(['default', 'crop:form=sliding', 'yarn:beta_fast=8', 'yarn:beta_fast=8:attention_factor_on=rotary',
                       'qtemp:shape=logn', 'qtemp:shape=logn:on=rotary'])
eval_len = 1024
num_windows = 32
retrieval_examples = 16
out_dir = 'out/char-eval-placement-neox'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    ('yarn_s8_beta_fast8_rotary-only_zero-shot', 'yarn_s8_beta_fast8_zero-shot'),
    ('qtemp_logn_rotary-only_zero-shot', 'qtemp_logn_zero-shot')])

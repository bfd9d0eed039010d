# One GPU (make real-model-gpu; not yet run here: no GPU was lent): SmolLM2-135M at T = 32,768 = 4 x L, 24 windows,
# one per play (31 plays of Shakespeare hold a window of 32,769 tokens in SmolLM2's BPE; none holds 65,536, so there
# is no 64k target: a window made of several plays would ask the model to read another play as its far context, a
# different question), a passkey planted 24,000-30,000 tokens before the question in each, and a short YaRN
# fine-tune at 16,384 (finetune_long.py on gguf:smollm2) read at 32,768 (s = 2 trained, 4 read). ReRoPE and
# Self-Extend with knobs that show no unseen distance at 32,768: Self-Extend 2,047 + (32,768 - 2,048)/8 = 5,887 < L.
# Read after config/real_model_cpu.py (its columns and margins are replaced here).
ckpt = 'out/real-model-ft'
rope_types = ','.join(['default', 'crop:form=sliding:sink=4:at=cache', 'linear', 'yarn', 'ntk',
                       'rerope:window=4096', 'self_extend:window=2048:group=8'])
eval_len = 32768
windows = 24
key_lo, key_hi = 24000, 30000
columns = '0-8192,8192-16384,16384-32768'
family = '; '.join([
    'base_L8192 | crop_w8192_sink4_cache_sliding | loss | 16384-32768',
    'yarn_s4_zero-shot | linear_s4_zero-shot | loss | 16384-32768',
    'yarn_s4_zero-shot | crop_w8192_sink4_cache_sliding | loss | 16384-32768',
    'rerope_w4096_zero-shot | yarn_s4_zero-shot | loss | 16384-32768',
    'yarn_s2_ft50 | yarn_s4_zero-shot | loss | 16384-32768',             # does a short fine-tune at 16k help at 32k?
    'yarn_s4_zero-shot | base_L8192 | digits | passkey',
])
out_dir = 'out/real-model-gpu'
parts_dir = ''

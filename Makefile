# The CPU pipeline, one visible step per target; `make demo` runs them all (about 25 minutes on 2 cores).
# Every step is a plain command you can copy and change. PY=python3 make demo to pick another interpreter.
PY ?= python
ZERO_SHOT = default,linear,ntk,dynamic,ntk_by_parts,yarn,yarn:beta_fast=8,yarn:beta_fast=8:attention_factor=1,dynamic_yarn,llama3

.PHONY: demo install data train finetune eval ape pose test

demo: install data train finetune eval

install:              # what requirements.txt lists, unless it is already importable
	$(PY) -c "import torch, numpy, tiktoken, tqdm, matplotlib, pytest" 2>/dev/null || $(PY) -m pip install -r requirements.txt

data:                 # character-level Shakespeare, 4 plays held out (~5 s)
	$(PY) data/shakespeare_char/prepare.py

train:                # 0.8M-param RoPE GPT at L=128 (~10 min)
	$(PY) train.py config/train_shakespeare_char_cpu.py --overwrite=True

finetune:             # every method + the plain control, 128 -> 512, 100 steps each (~1 min per arm)
	$(PY) finetune_long.py config/finetune_long_char_cpu.py --overwrite=True

eval:                 # loss vs position to 1024 = 8 x L, zero-shot and fine-tuned arms, all plots (~3 min)
	$(PY) eval.py --ckpt=out/char-base,out/char-ft --rope_types=$(ZERO_SHOT) --eval_len=1024 --num_windows=32 --out_dir=out/char-eval

ape:                  # optional: the same model with sinusoidal absolute positions and with ALiBi, evaluated past L (~22 min)
	$(PY) train.py config/train_shakespeare_char_cpu.py --pos_emb=sinusoidal --out_dir=out/char-sinusoidal --overwrite=True
	$(PY) train.py config/train_shakespeare_char_cpu.py --pos_emb=alibi --out_dir=out/char-alibi --overwrite=True
	$(PY) eval.py --ckpt=out/char-base,out/char-sinusoidal,out/char-alibi --eval_len=1024 --num_windows=32 --out_dir=out/char-ape

pose:                 # optional, after finetune: PoSE at L=128 (plain, YaRN s=4) vs the full-length fine-tunes at 512 (~2 min + eval)
	$(PY) finetune_long.py config/finetune_pose_char_cpu.py --overwrite=True
	$(PY) eval.py --ckpt=out/char-base,out/char-ft/default,out/char-ft/yarn_s4,out/char-pose --eval_len=1024 --num_windows=32 --out_dir=out/char-pose-eval

test:                 # the test suite (what .ci/run runs)
	$(PY) -m pytest -q tests

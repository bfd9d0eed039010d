"""
Sample from a trained model (nanoGPT's sample.py), with any RoPE scaling switched on zero-shot.

    python sample.py --ckpt=out/char-base --start="ROMEO:" --num_samples=3 --max_new_tokens=1000
    python sample.py --ckpt=out/char-base --start=FILE:prompt.txt --rope_type=yarn:beta_fast=8 --max_new_tokens=2000
    python sample.py --ckpt=out/char-base --rope_type=dynamic --kv_cache=False      # recompute the prefix per token

--start is the prompt, taken verbatim, or FILE:<path> to read it from a file. The tokenizer is the one the
checkpoint was trained with (its 'dataset' entry: characters, GPT-2 BPE, a GGUF's own BPE for --ckpt=gguf:<file>, the
folder's tokenizer.json for --ckpt=hf:<folder>).
--rope_type is one arm spec of eval.py (default, linear, ntk, dynamic, yarn, yarn:beta_fast=8, dynamic_yarn, ...) or
a position map (rerope:window=64, leaky_rerope:window=64:k=16, self_extend:window=64:group=32) switched on the model
without training; empty keeps the model as it was trained. Its factor is --factor, or when
that is 0: (prompt + new tokens) / L, at least 1, for the static types, and 1 for the dynamic ones (their scale
then follows l / L as the text grows). L is the checkpoint's training length.
The KV cache (lab/kv_cache.py) is exact for every rope type, for smeared keys, for FIRE and for CoPE;
--kv_cache=False recomputes the whole prefix for every token (the slow reference), and so does a model the cache does
not cover (ALiBi, a position map): the line printed first says which.
"""
import math
import os
import sys

import torch

from lab.measure.arms import lineage_of
from configurator import ConfigError, get_config
from lab.engine.cli import cli
from lab.engine.device import autocast_context, pick_device
from data.sources import get_tokenizer
from lab import kv_cache
from lab.position_maps import is_position_map_spec, mapped_attention, parse_position_map, position_map_name
from data.checkpoints import load_checkpoint, model_from_checkpoint
from rope_config import is_dynamic
from lab.measure.arm_specs import check_over_trained_in, parse_arm, scaling_name, trained_in

DEFAULTS = dict(
    ckpt='',                 # a run folder (or its ckpt.pt) written by train.py or finetune_long.py
    start='\n',              # the prompt (verbatim), or FILE:<path>
    num_samples=3,
    max_new_tokens=500,
    temperature=0.8,         # >= 0; lower is more conservative; 0 = greedy (the likeliest token, as top_k=1)
    top_k=200,               # sample among the k likeliest tokens; 0 = all of them; 1 = greedy
    seed=1337,
    rope_type='',            # arm spec switched on zero-shot (yarn, yarn:beta_fast=8, dynamic, ...); '' = as trained
    factor=0.0,              # scale s for --rope_type; 0 = (prompt + new tokens) / L, at least 1 (dynamic types: 1)
    kv_cache=True,           # False: recompute the whole prefix for every new token
    device='auto',           # auto | cpu | cuda | cuda:N | mps
    dtype='auto',            # auto (bfloat16 on CUDA when supported, else float32) | float32 | bfloat16 | float16
    progress=True,           # tqdm bar while generating
)
MAX_POSITIONS = 2 ** 24  # float32 holds every whole number up to here: positions past it share their RoPE angles


def parse_args(argv):
    """get_config, except that --start=... is kept verbatim: a prompt is text, not a python literal (--start=1984)."""
    starts = [a[len('--start='):] for a in argv if a.startswith('--start=')]
    cfg = get_config([a for a in argv if not a.startswith('--start=')], DEFAULTS)
    if starts:
        cfg['start'] = starts[-1]
    for key, low in (('num_samples', 1), ('max_new_tokens', 1), ('top_k', 0)):
        if cfg[key] < low:
            raise ConfigError(f"{key}={cfg[key]} is out of range; it must be >= {low}")
    if cfg['max_new_tokens'] >= MAX_POSITIONS:
        raise ConfigError(f"max_new_tokens={cfg['max_new_tokens']} is out of range; prompt + new tokens can be at most "
                          f"2**24 = {MAX_POSITIONS} positions: past them float32 (the RoPE and sinusoidal tables) "
                          f"cannot tell two positions apart")
    if not 0 <= cfg['temperature'] < math.inf:
        raise ConfigError(f"temperature={cfg['temperature']} must be a number >= 0 (lower is more conservative; "
                          f"0 is greedy)")
    if cfg['factor'] and not cfg['factor'] >= 1:
        raise ConfigError(f"factor={cfg['factor']} must be >= 1 (the scale s of --rope_type), or 0 for "
                          f"(prompt + new tokens) / L")
    if not cfg['ckpt']:
        raise ConfigError("no checkpoint given; pass --ckpt=<run folder written by train.py or finetune_long.py>")
    if cfg['factor'] and (not cfg['rope_type'] or is_position_map_spec(cfg['rope_type'])):
        raise ConfigError(f"--factor={cfg['factor']} scales a --rope_type and there is " +
                          ("none" if not cfg['rope_type'] else f"a position map ({cfg['rope_type']})") +
                          "; drop --factor, or pass a rope type such as --rope_type=yarn")
    return cfg


def read_prompt(start):
    """The --start text, or the contents of FILE:<path>; an empty prompt is an error."""
    if start.startswith('FILE:'):
        path = start[len('FILE:'):]
        if not os.path.isfile(path):
            raise ConfigError(f"prompt file {path} does not exist; pass --start=FILE:<an existing file> or --start=<text>")
        try:
            with open(path, encoding='utf-8') as f:
                start = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"prompt file {path} is unreadable ({e}); pass a UTF-8 text file") from None
        where = f"prompt file {path}"
    else:
        where = "--start"
    if not start:
        raise ConfigError(f"{where} is empty; give the model at least one token, e.g. --start='\\n' or --start=ROMEO:")
    return start


def prompt_ids(cfg, encode):
    """The prompt's token ids, checked against the vocabulary and, with the new tokens, against MAX_POSITIONS."""
    prompt = read_prompt(cfg['start'])
    try:
        ids = encode(prompt)
    except ValueError as e:
        raise ConfigError(f"the prompt does not fit the model's vocabulary: {e}; "
                          f"use only characters it was trained on") from None
    if len(ids) + cfg['max_new_tokens'] > MAX_POSITIONS:
        raise ConfigError(f"the prompt ({len(ids)} tokens) + max_new_tokens={cfg['max_new_tokens']} pass 2**24 = "
                          f"{MAX_POSITIONS} positions (float32 cannot tell positions apart past it); ask for fewer")
    return ids


def tokenizer(ckpt, path):
    """(encode, decode) of the vocabulary the checkpoint was trained on (its 'dataset' entry): characters, GPT-2 BPE,
    a GGUF's own BPE ('tokenizer_file', e.g. a checkpoint loaded from gguf:<file>), or a Hugging Face folder's
    tokenizer.json ('tokenizer_file', a checkpoint loaded from hf:<folder>)."""
    from lab.hf.tokenizer import run_tokenizer  # (a GGUF's file found again by its path and sha256)
    ds = run_tokenizer(ckpt)  # a GGUF's file from the run's data or its gguf: base where the entry lacks it
    if ds.get('tokenizer') == 'hf' and not ds.get('tokenizer_file'):
        where = path[len('hf:'):] if str(path).startswith('hf:') else path
        raise ConfigError(f"checkpoint {path}: the folder {where} has no tokenizer.json, so there is no tokenizer to "
                          f"write the prompt in; copy the model's tokenizer.json (from where its weights came) beside "
                          f"its config.json, or sample from the same model as a GGUF (--ckpt=gguf:<file>), whose file "
                          f"carries its tokenizer")
    need = {'char': 'itos', 'gguf': 'tokenizer_file', 'hf': 'tokenizer_file'}.get(ds.get('tokenizer'))
    if ds.get('tokenizer') not in ('char', 'gpt2', 'gguf', 'hf') or need and not ds.get(need):
        raise ConfigError(f"checkpoint {path} does not record its tokenizer (no 'dataset' entry with 'tokenizer' and, "
                          f"for characters, 'itos', for a GGUF's BPE, 'tokenizer_file'); sample from a run written "
                          f"by train.py")
    return get_tokenizer(ds)


def rope_scaling_for(cfg, ckpt, path, n_tokens):
    """--rope_type as a rope_scaling dict (None = plain RoPE) for a text of n_tokens tokens (see the docstring)."""
    if ckpt['model_args'].get('pos_emb', 'rope') != 'rope':
        raise ConfigError(f"--rope_type={cfg['rope_type']}: {path} uses pos_emb={ckpt['model_args']['pos_emb']!r}, "
                          f"no RoPE to scale; drop --rope_type")
    L = lineage_of(ckpt)['train_len']
    if is_position_map_spec(cfg['rope_type']):
        return None
    dynamic = is_dynamic({'rope_type': cfg['rope_type'].split(':')[0]})
    sc = parse_arm(cfg['rope_type'], cfg['factor'] or (1.0 if dynamic else max(1.0, n_tokens / L)), L)
    try:  # a rope type trained into the model (p-RoPE, clipped) is kept, not replaced: one line otherwise
        check_over_trained_in(trained_in(ckpt), sc, f"--ckpt={path}", f"--rope_type={cfg['rope_type']}",
                              "drop --rope_type to sample the model as trained")
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return sc


def main(argv):
    cfg = parse_args(argv)
    ckpt = load_checkpoint(cfg['ckpt'])
    encode, decode = tokenizer(ckpt, cfg['ckpt'])
    ids = prompt_ids(cfg, encode)
    model = model_from_checkpoint(ckpt)
    pm = parse_position_map(cfg['rope_type']) if is_position_map_spec(cfg['rope_type']) else None
    if cfg['rope_type'] and pm is None:
        model.set_rope_scaling(rope_scaling_for(cfg, ckpt, cfg['ckpt'], len(ids) + cfg['max_new_tokens']))
    attend = mapped_attention(model, pm) if pm else None
    device = pick_device(cfg['device'])
    dtype, ctx = autocast_context(device.split(':')[0], cfg['dtype'])
    model.to(device).eval()
    c, greedy = model.config, cfg['temperature'] == 0  # temperature 0: the likeliest token, i.e. top_k=1
    blocker = 'a position map' if pm else kv_cache.blocker(model)
    cache = 'off (--kv_cache=False)' if not cfg['kv_cache'] else f'off ({blocker} recomputes the prefix)' if blocker \
        else 'on'
    print(f"{cfg['ckpt']}: {model.get_num_params() / 1e6:.2f}M params, pos_emb={c.pos_emb}, "
          f"L={lineage_of(ckpt)['train_len']}" + (f", rope {scaling_name(c.rope_scaling)}" if c.pos_emb == 'rope' else '')
          + (f" + {position_map_name(pm)}" if pm else '') + f"; prompt {len(ids)} tokens + {cfg['max_new_tokens']} new, "
          f"temperature={cfg['temperature']}{' (greedy)' if greedy else ''}, top_k={cfg['top_k']}, kv_cache {cache}, device={device}, dtype={dtype}",
          file=sys.stderr)
    torch.manual_seed(cfg['seed'])
    temperature, top_k = (1.0, 1) if greedy else (cfg['temperature'], cfg['top_k'] or None)
    generator = torch.Generator(device=device).manual_seed(cfg['seed'])
    x = torch.tensor(ids, dtype=torch.long, device=device)[None]
    for _ in range(cfg['num_samples']):
        with ctx:
            if cache == 'on':
                y = kv_cache.generate(model, x, cfg['max_new_tokens'], temperature=temperature, top_k=top_k,
                                      generator=generator, progress=cfg['progress'])
            else:
                y = model.generate(x, cfg['max_new_tokens'], temperature=temperature, top_k=top_k, generator=generator,
                                   attend=attend)
        print(decode(y[0].tolist()))
        print('---------------')

if __name__ == '__main__':
    cli(main)

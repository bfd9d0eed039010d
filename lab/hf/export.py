"""
Take a run to Hugging Face: write a run folder as a GPT-NeoX folder that transformers loads with no custom code
(AutoModelForCausalLM.from_pretrained(folder)), RoPE scaling included.

    python -m lab.hf.export --ckpt=out/char-base --out_dir=out/hf/char-base
    python -m lab.hf.export --ckpt=out/bpe-ft/yarn_s4_beta_fast8 --out_dir=out/hf/bpe-yarn
    python -m lab.hf.export --ckpt=out/char-base --rope_type=yarn:beta_fast=8 --factor=4 --out_dir=out/hf/char-yarn

The folder: config.json (GPTNeoXForCausalLM), model.safetensors (written here with torch and the standard library),
generation_config.json, README.md (how to load, encode and decode), and the tokenizer: GPT-2's vocab.json and
merges.txt for a GPT-2 BPE run (from the files the data step keeps; named in README.md when this machine has none),
or vocab.json ({character: id}) and a tokenizer.json that AutoTokenizer reads for a character run.

The architecture maps one to one: pre-LayerNorm blocks (use_parallel_residual=False), erf GELU, eps 1e-5, tied
embeddings, rotate-half RoPE on every dimension, or GPT-NeoX's partial rotation (model_args partial_rotary_factor p:
rotary_pct p, each head's q/k rows put in NeoX's order, lab.hf.weights.neox_order; an attention factor must then sit on the rotary
dims, where HF's cos/sin put it: attention_factor_on='rotary'). The fused qkv rows
are [3, head, head_dim] here and [head, 3, head_dim] in GPT-NeoX; a model without biases gets zero biases (GPT-NeoX
always has them). config.json carries both rope forms: 5.x rope_parameters (rope_theta and partial_rotary_factor
inside) and 4.x rope_scaling + rotary_emb_base + rotary_pct, which say the same thing (transformers 5 reads
rope_scaling first when both are present). Each rope type becomes the HF type that computes the same frequencies:
default, linear, dynamic, yarn, llama3 and longrope as themselves; ntk as 'default' with the raised base
b*s^(d/(d-2)); ntk_by_parts (and any other static per-pair curve) as 'longrope' with equal short and long factors
f_i = theta_i / theta'_i and an explicit attention_factor. L goes to max_position_embeddings for 'dynamic' (HF reads
it there) and to original_max_position_embeddings for yarn, llama3 and longrope, with max_position_embeddings = s*L.
Refused, with what to do instead: smeared keys, gated attention, SSMax, sinks, ALiBi / FIRE / CoPE / sinusoidal /
learned / no positions, Dynamic YaRN, LongRoPE with n-hat > 0 (start_token_idx: HF has no such key), position maps,
Mistral Large 4's learned frequencies and log-position query scale (learned_freqs, attention='logpos': its own class).
--rope_type switches an arm spec on before export (eval.py's spec: yarn:beta_fast=8, ...); position maps, the crop
and a query temperature are not rope types and are refused by name (lab/hf/serve.py NOT_ROPE).

A model of model.py's Llama family (norm='rmsnorm': gguf:, hf: and the runs fine-tuned from them) has no GPT-NeoX form:
lab/hf/export_llama.py writes it as its own architecture (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM),
with its tokenizer, and the command prints the vLLM and llama-server lines for its rope (lab/hf/serve.py):

    python -m lab.hf.export --ckpt=gguf:smollm2 --rope_type=yarn --factor=4 --out_dir=out/hf/smollm2-yarn4
"""
import json
import os

import torch

from configurator import ConfigError, get_config
from lab.engine.cli import cli
from data.common import DataError
from data.checkpoints import checkpoint_args, load_checkpoint, model_from_checkpoint, train_len
from lab.hf.weights import neox_order
from model import GPTConfig
from rope_config import DYNAMIC_TYPES, ROPE_SCALING, rope_inv_freq
from lab.measure.arm_specs import ALIASES, parse_arm, scaling_name
from lab.hf.folder import (check_positions, check_rope_type, hf_rope, layer_kinds, rope_4x, tokenizer_files,
                           write_folder)

DEFAULTS = dict(
    ckpt='',             # a run folder (or its ckpt.pt) written by train.py, finetune_long.py or search_longrope.py
    out_dir='',          # the folder to write (refused when it exists and is not empty, unless --overwrite=True)
    overwrite=False,
    rope_type='',        # an arm spec switched on before export (yarn:beta_fast=8, ntk, ...); '' = as the run has it
    factor=0.0,          # s for --rope_type; 0 = 1 for the dynamic types (and default), else required
)
def check_exportable(args):
    """Refuse, in one line naming it and what to do instead, a model GPT-NeoX cannot express."""
    neox = dict(norm='layernorm', mlp='gelu', n_ffn=4 * args['n_embd'], n_kv_head=args['n_head'], qkv_bias=False,
                tie_embeddings=True)  # the Llama options of model.py at the values GPT-NeoX has (None: an older run)
    llama = {k: args[k] for k, v in neox.items() if args.get(k) not in (None, v)}
    if set(llama) == {'n_kv_head'}:  # (train.py --n_kv_head: a lab run with grouped-query heads)
        raise ValueError(f"n_kv_head={llama['n_kv_head']!r}: GPT-NeoX has no grouped-query heads (every head its own "
                         f"keys and values); export a run trained with n_kv_head = n_head")
    if llama:
        raise ValueError(f"{', '.join(f'{k}={v!r}' for k, v in llama.items())}: a Llama-family model (loaded from "
                         f"gguf: or hf:) has no GPT-NeoX form; its own Hugging Face folder or GGUF file is the export")
    check_positions(args, 'GPT-NeoX')
    kinds = layer_kinds(args)[1]
    what = [k for k in ('conv layers', 'NoPE layers', 'sliding windows', 'chunked attention', 'per-layer bases')
            if kinds[k]]
    if what:
        raise ValueError(f"layers={args['layers']!r} ({', '.join(what)}) has no GPT-NeoX counterpart, which rotates "
                         f"every layer alike over every earlier key; lab.hf.config.to_hf_layers gives its transformers "
                         f"5 per-layer form (layer_types, rope_parameters by type) for a port by hand")
    check_rope_type(args)
    p, sc = args.get('partial_rotary_factor', 1.0), args.get('rope_scaling') or {}
    if p < 1 and sc.get('attention_factor_on', 'all') != 'rotary' \
            and rope_inv_freq(rotary_dim(args), args['rope_base'], sc or None)[1] != 1.0:
        raise ValueError(f"partial_rotary_factor={p:g} with an attention factor on every dim: transformers' cos/sin "
                         f"carry it on the rotary dims only, another model; export with the factor placed as HF "
                         f"places it (--rope_type=...:attention_factor_on=rotary) or set attention_factor=1")


def rotary_dim(args):
    """The dims that turn in each head (model.GPTConfig.rotary_dim of model_args; GPT-NeoX's rotary_ndims)."""
    return GPTConfig(**args).rotary_dim


def hf_config(args, L, eot=None, dtype=torch.float32):
    """config.json of GPTNeoXForCausalLM for a checkpoint's model_args (checked exportable)."""
    check_exportable(args)
    C, H = args['n_embd'], args['n_head']
    rp, M = hf_rope(rotary_dim(args), args['rope_base'], args.get('rope_scaling'), L, args['block_size'])
    # the dims that turn as a fraction transformers turns back into them (int(head_dim * p)): 0.1875 of 16 dims turns
    # 2 here (a whole pair), 3 there, so p is written as rotary_dim / head_dim, never as the setting given
    rp['partial_rotary_factor'] = p = rotary_dim(args) / (C // H)
    legacy = rope_4x(rp)
    return {
        'architectures': ['GPTNeoXForCausalLM'], 'model_type': 'gpt_neox',
        'vocab_size': args['vocab_size'], 'hidden_size': C, 'num_hidden_layers': args['n_layer'],
        'num_attention_heads': H, 'intermediate_size': 4 * C, 'hidden_act': 'gelu', 'layer_norm_eps': 1e-5,
        'use_parallel_residual': False, 'attention_bias': True, 'tie_word_embeddings': True,
        'attention_dropout': 0.0, 'hidden_dropout': 0.0, 'initializer_range': 0.02, 'use_cache': True,
        'max_position_embeddings': M, 'bos_token_id': eot, 'eos_token_id': eot, 'pad_token_id': None,
        'rope_parameters': rp,                                                           # transformers 5.x
        'rope_scaling': legacy, 'rotary_emb_base': rp['rope_theta'], 'rotary_pct': p,  # transformers 4.x
        'dtype': str(dtype).removeprefix('torch.'), 'torch_dtype': str(dtype).removeprefix('torch.'),
    }


def hf_state_dict(state, args):
    """The lab's weights -> GPT-NeoX names ({name: tensor}); qkv rows [3, head, head_dim] -> [head, 3, head_dim];
    zero biases where the model has none. Any weight left unmapped is an error (not a plain GPT of this lab)."""
    sd = {k.removeprefix('_orig_mod.').removeprefix('module.'): v for k, v in state.items()}
    C, H = args['n_embd'], args['n_head']
    dtype = sd['transformer.wte.weight'].dtype
    used = set()

    def get(name, n=None):  # a weight, or (bias, n given) zeros when the model has none
        used.add(name)
        return sd[name] if name in sd or n is None else torch.zeros(n, dtype=dtype)

    order = torch.tensor(neox_order(C // H, rotary_dim(args)))

    def heads_first(t):  # rows (3, H, hd, ...) -> (H, 3, hd, ...); q and k rows in GPT-NeoX's rotary order
        t = t.reshape(3, H, C // H, *t.shape[1:])
        t = torch.cat((t[:2, :, order], t[2:]))
        return t.transpose(0, 1).reshape(3 * C, *t.shape[3:])

    out = {'gpt_neox.embed_in.weight': get('transformer.wte.weight')}
    pairs = [('ln_1', 'input_layernorm', C), ('ln_2', 'post_attention_layernorm', C),
             ('attn.c_attn', 'attention.query_key_value', 3 * C), ('attn.c_proj', 'attention.dense', C),
             ('mlp.c_fc', 'mlp.dense_h_to_4h', 4 * C), ('mlp.c_proj', 'mlp.dense_4h_to_h', C)]
    for i in range(args['n_layer']):
        for ours, theirs, n in pairs:
            p, q = f'transformer.h.{i}.{ours}.', f'gpt_neox.layers.{i}.{theirs}.'
            w, b = get(p + 'weight'), get(p + 'bias', n)
            out[q + 'weight'], out[q + 'bias'] = (heads_first(w), heads_first(b)) if ours == 'attn.c_attn' else (w, b)
    out['gpt_neox.final_layer_norm.weight'] = get('transformer.ln_f.weight')
    out['gpt_neox.final_layer_norm.bias'] = get('transformer.ln_f.bias', C)
    out['embed_out.weight'] = get('lm_head.weight')  # the tied head (4.x name; transformers 5 maps it to lm_head)
    left = sorted(set(sd) - used)
    if left:
        raise ValueError(f"weights {', '.join(left[:3])}{' ...' if len(left) > 3 else ''} have no GPT-NeoX place; "
                         f"export a plain GPT of this lab (attention='causal', pos_emb='rope')")
    return {k: v.detach().cpu().contiguous() for k, v in out.items()}


def readme(src, folder, config, name, tok_lines, tok_from, char):
    """The folder's README.md: where it came from, the rope mapping, how to load, encode and decode. tok_from: where
    AutoTokenizer finds the tokenizer (an expression), or None when there is none to name."""
    rp, M = config['rope_parameters'], config['max_position_embeddings']
    code = ["from transformers import AutoModelForCausalLM, AutoTokenizer",
            f"folder = {folder!r}",
            "model = AutoModelForCausalLM.from_pretrained(folder)"]
    if tok_from:
        code += [f"tok = AutoTokenizer.from_pretrained({tok_from})",
                 "ids = tok('ROMEO:', return_tensors='pt').input_ids",
                 "print(tok.decode(model.generate(ids, max_new_tokens=200, do_sample=False)[0]))"]
    if char:
        code += ["", "# without a tokenizer library: vocab.json maps each character to its id",
                 "import json, torch",
                 "stoi = json.load(open(f'{folder}/vocab.json', encoding='utf-8'))",
                 "itos = {i: c for c, i in stoi.items()}",
                 "encode = lambda s: torch.tensor([[stoi[c] for c in s]])",
                 "decode = lambda t: ''.join(itos[i] for i in t.tolist())",
                 "print(decode(model.generate(encode('ROMEO:'), max_new_tokens=200, do_sample=False)[0]))"]
    lines = [f"# {os.path.basename(os.path.normpath(folder))}: a run of the long-context lab as GPT-NeoX", "",
             f"Exported by `python -m lab.hf.export` from `{src}`. RoPE as run: {name}; here rope_type "
             f"'{rp['rope_type']}', rope_theta {rp['rope_theta']:g}, max_position_embeddings {M}.", "",
             "```python", *code, "```", "", *tok_lines]
    if rp['rope_type'] == 'dynamic' or rp['rope_type'] == 'longrope' and rp['short_factor'] != rp['long_factor']:
        lines += ["", "This type depends on the input length. transformers keeps state: dynamic NTK only grows its "
                  "frequencies on a model instance and resets them only for an input shorter than L; and with the "
                  "KV cache (generate's default) keys cached before the scale moved keep their old rotation. Pass "
                  "`use_cache=False` to generate to get the lab's numbers (its own cache recomputes the prefix)."]
    return '\n'.join(lines) + '\n'


def gguf_tokenizer_found(ckpt, ckpt_path):
    """The checkpoint with its GGUF tokenizer's file found (its recorded path and sha256, else the cache dir:
    lab.hf.tokenizer.gguf_path; a run saved without it: its data's or its gguf: base's file), so the export writes that
    file's BPE; DataError naming the file and its sha256 when it is nowhere, or naming the run when it records none
    (rather than another model's tokenizer). Other checkpoints are returned as they are."""
    from lab.hf.tokenizer import gguf_path, run_tokenizer
    ds = run_tokenizer(ckpt)
    if ds.get('tokenizer') != 'gguf' or str(ckpt_path).startswith('gguf:'):
        return ckpt
    if not ds.get('tokenizer_file'):
        raise DataError(f"checkpoint {ckpt_path} uses a GGUF's tokenizer but records no file for it (nor does its "
                        f"data's meta.json or its lineage); fine-tune it again with this version of finetune_long.py")
    return dict(ckpt, dataset=dict(ds, tokenizer_file=gguf_path(ds)))


def export(ckpt_path, out_dir, overwrite=False, rope_type='', factor=0.0, notes=None):
    """Write the run at ckpt_path as a GPT-NeoX folder (a Llama-family model: as its own architecture, through
    lab/hf/export_llama.py); returns (out_dir, config dict, parameter count). notes: a list that gets the lines the
    command prints beside the Llama family's folder (tokenizer, vLLM, llama.cpp)."""
    from lab.hf import export_llama, serve  # (they import this module's helpers)
    if not out_dir:
        raise ConfigError("pass --out_dir=<folder to write the Hugging Face model into>")
    run_dir = ckpt_path if os.path.isdir(ckpt_path) else os.path.dirname(os.path.abspath(ckpt_path))
    if os.path.realpath(out_dir) == os.path.realpath(run_dir):
        raise ConfigError(f"out_dir={out_dir} is the run folder itself; pass another folder")
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not overwrite:
        raise ConfigError(f"{out_dir} exists and is not empty; pass --overwrite=True to replace it, "
                          f"or another --out_dir")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ConfigError(f"out_dir={out_dir} is a file; pass a folder")
    t = ALIASES.get(rope_type.split(':')[0], rope_type.split(':')[0])
    what = rope_type and serve.not_rope_what(rope_type)
    if rope_type and (what or t not in ROPE_SCALING):
        raise ConfigError(f"--rope_type={rope_type}: {what or 'not a rope type'}; position maps, the crop and "
                          f"query temperatures change attention itself, which no Hugging Face architecture "
                          f"(GPT-NeoX, Llama), vLLM or llama-server expresses; pass a rope type")
    ckpt = load_checkpoint(ckpt_path)
    args, L = checkpoint_args(ckpt), train_len(ckpt)
    llama = export_llama.is_llama(args)
    check = export_llama.check_exportable if llama else check_exportable
    check(args)
    if rope_type:  # switched on before export, like sample.py's --rope_type
        L = (args.get('rope_scaling') or {}).get('original_max_position_embeddings') or L  # (a model's own scaling)
        if not factor and t not in DYNAMIC_TYPES and t != 'default':
            raise ConfigError(f"--rope_type={rope_type} needs --factor=<s> (the scale L'/L, L = {L})")
        args['rope_scaling'] = parse_arm(rope_type, factor or 1.0, L)
        check(args)
    elif factor:
        raise ConfigError("--factor is used with --rope_type only; drop it or name a rope type")
    model = model_from_checkpoint(dict(ckpt, model_args=args))  # validates everything; the weights as stored
    if llama:
        return export_llama.write(gguf_tokenizer_found(ckpt, ckpt_path), args, L, model, ckpt_path, out_dir, notes)
    weights = hf_state_dict(model.state_dict(), args)
    ds = ckpt.get('dataset') or {}
    _, M = hf_rope(rotary_dim(args), args['rope_base'], args['rope_scaling'], L, args['block_size'])
    tok_files, eot, tok_lines = tokenizer_files(ds, M)
    config = hf_config(args, L, eot, weights['gpt_neox.embed_in.weight'].dtype)
    gen = {'bos_token_id': eot, 'eos_token_id': eot, 'pad_token_id': eot} if eot is not None else {}
    files = {'config.json': json.dumps(config, indent=1) + '\n',
             'generation_config.json': json.dumps({'_from_model_config': True, **gen}, indent=1) + '\n',
             **tok_files,
             'README.md': readme(ckpt_path, out_dir, config, scaling_name(args['rope_scaling']), tok_lines,
                                 'folder' if 'vocab.json' in tok_files else
                                 "'openai-community/gpt2'" if ds.get('tokenizer') == 'gpt2' else None,
                                 ds.get('tokenizer') == 'char')}
    write_folder(out_dir, weights, files)
    return out_dir, config, model.get_num_params()


def main(argv):
    cfg = get_config(argv, DEFAULTS)
    if not cfg['ckpt']:
        raise ConfigError("pass --ckpt=<run folder> (written by train.py, finetune_long.py or search_longrope.py)")
    notes = []
    out, config, n = export(cfg['ckpt'], cfg['out_dir'], cfg['overwrite'], cfg['rope_type'], cfg['factor'], notes)
    if notes:  # the Llama family: its own architecture, tokenizer and engines' lines
        print('\n'.join(notes))
        return
    rp = config['rope_parameters']
    print(f"wrote {out}: GPTNeoXForCausalLM, {n / 1e6:.2f}M params (tied head), rope_type '{rp['rope_type']}' "
          f"theta {rp['rope_theta']:g}, max_position_embeddings {config['max_position_embeddings']}; "
          f"files: {', '.join(sorted(os.listdir(out)))}")


if __name__ == '__main__':
    cli(main)

"""
A real model, extended here, in its own Hugging Face format: lab/hf/export.py hands every model with norm='rmsnorm'
(the Llama family of model.py: what gguf: and hf: load, and the runs fine-tuned from them) to this module, which writes
the folder transformers loads with no custom code:

    python -m lab.hf.export --ckpt=gguf:smollm2 --rope_type=yarn --factor=4 --out_dir=out/hf/smollm2-yarn4
    python -m lab.hf.export --ckpt=hf:path/to/Qwen2.5-0.5B --rope_type=yarn --factor=4 --out_dir=out/hf/qwen-yarn4
    python -m lab.knobs --ckpt=gguf:smollm2 --T=32768 --export=out/hf/smollm2-32k   # YaRN at s = T/L, its knobs

  architecture  Qwen2ForCausalLM when the model has q/k/v biases (qkv_bias); MistralForCausalLM when every layer has
                one sliding window (a Mistral loaded with its sliding_window); LlamaForCausalLM otherwise (SmolLM2,
                Llama, Mistral without a window). Any other per-layer pattern, another attention class, positions other
                than RoPE, biases everywhere, a partial rotation: refused in one line naming it.
  weights       model.safetensors, float32 (export.write_safetensors), named by lab/hf/weights.py's HF_NAMES and
                LAYER_PARTS (the table the hf: loader reads with, inverted: c_attn's rows split into q, k, v and c_fc's
                into gate, up). model.py turns rotate-half pairs (i, i + d/2) as HF's Llama does: no q/k permutation
                (lab/hf/gguf.py undid llama.cpp's on loading). A tied head is not written (tie_word_embeddings).
  config.json   the model's fields as the checkpoint holds them (hidden_size, intermediate_size, heads, kv heads,
                head_dim, rms_norm_eps, tie_word_embeddings, vocab_size), bos/eos ids from the source (the GGUF's
                tokenizer.ggml.*, the folder's config.json), torch_dtype float32, and the rope in both forms as
                folder.hf_rope maps it: transformers 5 rope_parameters (rope_theta inside) and 4.x rope_scaling +
                rope_theta; max_position_embeddings = s*L with original_max_position_embeddings = L inside the rope
                (yarn, llama3, longrope). YaRN's attention factor is written only when the lab's differs from
                0.1 ln s + 1, so HF applies it once, on cos and sin, as the lab does.
  tokenizer     a GGUF's byte-level BPE as tokenizer.json + tokenizer_config.json (lab/hf/tokenizer.py
                gguf_tokenizer_files); an hf: folder's own tokenizer files copied; a char or GPT-2 run's as the GPT-NeoX
                export writes them. When none can be written, README.md and the command's output say why.
  engines       README.md and the command print the vLLM and llama-server lines for this rope (lab/hf/serve.py), or
                '<engine>: cannot express <what>'.
"""
import json
import os

import torch

from data.common import DataError, read_json
from lab.hf import serve
from lab.hf.folder import (FILES, check_positions, check_rope_type, hf_rope, layer_kinds, rope_4x, tokenizer_files,
                           write_folder)
from lab.hf.weights import HF_NAMES, LAYER_PARTS
from lab.measure.arm_specs import scaling_name
from rope_config import rope_inv_freq

TOKENIZER_FILES = ('tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'vocab.json', 'merges.txt',
                   'tokenizer.model', 'added_tokens.json', 'chat_template.jinja', 'chat_template.json')
ARCHS = {'llama': 'LlamaForCausalLM', 'mistral': 'MistralForCausalLM', 'qwen2': 'Qwen2ForCausalLM'}


def is_llama(args):
    """Whether a checkpoint's model_args go to this module (RMSNorm: model.py's Llama family)."""
    return args.get('norm') == 'rmsnorm'


def uniform_window(args):
    """The one sliding window every layer has (Mistral's form), None when no layer has one; ValueError naming the
    pattern when the layers differ in any way HF's Llama, Mistral or Qwen2 cannot say."""
    specs, kinds = layer_kinds(args)
    what = [k for k in ('conv layers', 'NoPE layers', 'chunked attention', 'per-layer bases',
                        'windows on some layers only') if kinds[k]]
    window = specs[0].window if specs else None
    if window and args.get('qkv_bias'):
        what.append("a sliding window in a Qwen2 model (its use_sliding_window / max_window_layers form is not "
                    "written here)")
    if (args.get('rope_scaling') or {}).get('layers', 'all') != 'all':
        what.append('a scaling on some layers only')
    if what:
        raise ValueError(f"layers={args.get('layers')!r} (a per-layer pattern: {', '.join(what)}) has no counterpart "
                         f"in HF's Llama, Mistral or Qwen2; lab.hf.config.to_hf_layers gives its transformers 5 "
                         f"per-layer form for a port by hand")
    return window


def check_exportable(args):
    """Refuse, in one line naming it and what to do instead, a Llama-family model HF's Llama / Mistral / Qwen2
    cannot express (export.check_exportable's counterpart)."""
    check_positions(args, "HF's Llama")
    for bad, why in ((args.get('mlp') != 'swiglu', f"mlp={args.get('mlp')!r} with RMSNorm: HF's Llama has SwiGLU"),
                     (args.get('bias'), "bias=True (a bias on every linear layer): HF's Llama has none, Qwen2 has them "
                                        "on q, k and v only (qkv_bias)"),
                     (args.get('partial_rotary_factor', 1.0) != 1.0,
                      f"partial_rotary_factor={args.get('partial_rotary_factor')} (GPT-NeoX's partial rotation): "
                      f"HF's Llama turns every dim")):
        if bad:
            raise ValueError(f"{why}; it cannot be exported as a Llama-family folder")
    uniform_window(args)
    check_rope_type(args)


def architecture(args):
    """'llama', 'mistral' or 'qwen2' (see the module docstring)."""
    return 'qwen2' if args.get('qkv_bias') else 'mistral' if uniform_window(args) else 'llama'


def part_rows(args):
    """Rows of each part of LAYER_PARTS in model.py's fused tensors: q, k, v (and their biases), gate, up."""
    hd = args['n_embd'] // args['n_head']
    rows = {'q': args['n_head'] * hd, 'k': args['n_kv_head'] * hd, 'v': args['n_kv_head'] * hd,
            'gate': args['n_ffn'], 'up': args['n_ffn']}
    return {**rows, **{f'{p}.bias': n for p, n in rows.items()}}


def llama_tensors(state, args):
    """model.py's state dict -> {HF name: tensor}: lab/hf/weights.py's table read backwards (fused tensors split into
    their parts by rows). No permutation: both sides turn rotate-half pairs. Any weight left over is an error."""
    sd = {k.removeprefix('_orig_mod.').removeprefix('module.'): v for k, v in state.items()}
    rows, used, out = part_rows(args), set(), {}

    def put(part, t, i=None):
        out[HF_NAMES[part].format(i=i)] = t
    for ours, part in (('transformer.wte.weight', 'wte'), ('transformer.ln_f.weight', 'ln_f')) + \
            ((('lm_head.weight', 'head'),) if not args.get('tie_embeddings', True) else ()):
        put(part, sd[ours])
        used.add(ours)
    if args.get('tie_embeddings', True):
        used.add('lm_head.weight')  # (the embedding itself; transformers ties it back)
    for i in range(args['n_layer']):
        for ours, parts in LAYER_PARTS.items():
            name = f'transformer.h.{i}.{ours}'
            if name not in sd:
                continue
            used.add(name)
            pieces = torch.split(sd[name], [rows[p] for p in parts]) if len(parts) > 1 else (sd[name],)
            for part, t in zip(parts, pieces):
                put(part, t, i)
    left = sorted(set(sd) - used)
    if left:
        raise ValueError(f"weights {', '.join(left[:3])}{' ...' if len(left) > 3 else ''} have no place in HF's "
                         f"Llama; export a model of model.py's Llama family (attention='causal', pos_emb='rope')")
    return {k: v.detach().to(torch.float32).cpu().contiguous() for k, v in out.items()}


def source_folder(ckpt_path, ds):
    """The Hugging Face folder an hf: checkpoint (or a run fine-tuned from one) came from, or None."""
    prefix, sep, rest = str(ckpt_path).partition(':')
    if sep and prefix == 'hf':
        return rest
    tok = ds.get('tokenizer_file')
    return os.path.dirname(tok) if ds.get('tokenizer') == 'hf' and tok else None


def tokenizer_of(ckpt_path, ds, M):
    """({file: text or bytes}, {bos/eos/pad ids}, README lines, printed line) for the model's tokenizer: a GGUF's BPE
    built as tokenizer.json, an hf: folder's files copied, a char / GPT-2 run's as export.tokenizer_files writes them.
    Nothing written is said, with why, in the lines."""
    kind = ds.get('tokenizer')
    if kind == 'gguf':
        from lab.hf.tokenizer import gguf_path, gguf_tokenizer_files
        try:  # the model's own file, by its recorded path and sha256; never another model's
            path = serve.gguf_source(ckpt_path) or gguf_path(ds)
            if path is None:
                raise DataError("the run records a GGUF tokenizer but no file")
            files, ids = gguf_tokenizer_files(path, M)
        except (DataError, ValueError) as e:
            why = f"no tokenizer written: {str(e).splitlines()[0]}"
            return {}, {'eos_token_id': ds.get('eot_token')}, [why + '.'], why
        return files, ids, [f"Tokenizer: `tokenizer.json` is the byte-level BPE of `{os.path.basename(path)}` "
                            f"({len(json.loads(files['tokenizer.json'])['model']['vocab'])} tokens), built by "
                            f"lab/hf/tokenizer.py; `AutoTokenizer` reads it."], \
            f"tokenizer: tokenizer.json from {os.path.basename(path)}"
    if kind == 'hf':
        folder = source_folder(ckpt_path, ds)
        found = {n: os.path.join(folder, n) for n in TOKENIZER_FILES
                 if folder and os.path.isfile(os.path.join(folder, n))}
        d = read_json(os.path.join(folder, 'config.json'), "restore the source folder's config.json") \
            if folder and os.path.isfile(os.path.join(folder, 'config.json')) else {}
        ids = {k: d.get(k) for k in ('bos_token_id', 'eos_token_id', 'pad_token_id')}
        if not found:
            why = f"no tokenizer written: the source folder {folder} holds none of {', '.join(TOKENIZER_FILES[:2])}"
            return {}, ids, [why + '; copy its tokenizer files here.'], why
        copied = {}
        for n, p in found.items():
            with open(p, 'rb') as f:
                copied[n] = f.read()
        try:
            cfg = json.loads(copied.get('tokenizer_config.json', b'{}'))
        except ValueError:
            cfg = {}  # (copied as it is)
        patched = isinstance(cfg, dict) and 'model_max_length' in cfg  # (the extended length, where it says one)
        if patched:
            copied['tokenizer_config.json'] = json.dumps(dict(cfg, model_max_length=M), indent=1) + '\n'
        return copied, ids, [f"Tokenizer: {', '.join(f'`{n}`' for n in found)} copied from `{folder}`"
                             f"{f' (model_max_length set to {M})' if patched else ''}."], \
            f"tokenizer: {', '.join(found)} copied from {folder}"
    files, eot, lines = tokenizer_files(ds, M)
    said = f"tokenizer: {', '.join(sorted(files))}" if files else f"no tokenizer written: {lines[0]}"
    return files, {'bos_token_id': eot, 'eos_token_id': eot}, lines, said


def hf_llama_config(args, L, ids):
    """config.json of the model's own architecture (architecture()) for checked model_args; ids: bos/eos/pad."""
    arch, hd = architecture(args), args['n_embd'] // args['n_head']
    rp, M = hf_rope(hd, args['rope_base'], args.get('rope_scaling'), L, args['block_size'])
    rp.pop('partial_rotary_factor', None)  # (Llama turns every dim; the key is GPT-NeoX's)
    window = uniform_window(args)
    config = {
        'architectures': [ARCHS[arch]], 'model_type': arch, 'vocab_size': args['vocab_size'],
        'hidden_size': args['n_embd'], 'intermediate_size': args['n_ffn'], 'num_hidden_layers': args['n_layer'],
        'num_attention_heads': args['n_head'], 'num_key_value_heads': args['n_kv_head'], 'head_dim': hd,
        'hidden_act': 'silu', 'rms_norm_eps': args['norm_eps'], 'tie_word_embeddings': args['tie_embeddings'],
        'max_position_embeddings': M, 'initializer_range': 0.02, 'use_cache': True, 'attention_dropout': 0.0,
        **{k: ids.get(k) for k in ('bos_token_id', 'eos_token_id', 'pad_token_id')},
        'rope_parameters': rp,                                   # transformers 5.x
        'rope_scaling': rope_4x(rp), 'rope_theta': rp['rope_theta'],  # transformers 4.x
        'dtype': 'float32', 'torch_dtype': 'float32'}
    if arch == 'llama':
        config.update(attention_bias=False, mlp_bias=False, pretraining_tp=1)
    if arch == 'mistral':
        config['sliding_window'] = window
    if arch == 'qwen2':
        config.update(use_sliding_window=False, sliding_window=None, max_window_layers=args['n_layer'])
    return config


def readme(src, folder, config, name, tok_lines, lines, n, has_tok):
    """The folder's README.md: source, rope, how to load, the tokenizer, the engines' lines."""
    rp, M = config['rope_parameters'], config['max_position_embeddings']
    L = rp.get('original_max_position_embeddings')
    code = ["from transformers import AutoModelForCausalLM, AutoTokenizer",
            f"model = AutoModelForCausalLM.from_pretrained({folder!r})  # {config['architectures'][0]}, float32"]
    if has_tok:
        code += [f"tok = AutoTokenizer.from_pretrained({folder!r})",
                 "ids = tok('The capital of France is', return_tensors='pt').input_ids",
                 "print(tok.decode(model.generate(ids, max_new_tokens=40, do_sample=False)[0]))"]
    return '\n'.join([
        f"# {os.path.basename(os.path.normpath(folder))}: {config['architectures'][0]} from the long-context lab", "",
        f"Exported by `python -m lab.hf.export` from `{src}` ({n / 1e6:.1f}M parameters). RoPE: {name}; here rope_type "
        f"'{rp['rope_type']}', rope_theta {rp['rope_theta']:g}, max_position_embeddings {M}"
        + (f", original_max_position_embeddings {L}" if L else '') + " (config.json carries transformers 5's "
        "`rope_parameters` and 4.x's `rope_scaling` + `rope_theta`, the same rope).", "",
        "```python", *code, "```", "", *tok_lines, "", "## Serving", "",
        "What each engine is told (or cannot express), from lab/hf/serve.py:", "", "```",
        *lines, "```", ""])


def write(ckpt, args, L, model, ckpt_path, out_dir, notes=None):
    """Write the checked, loaded model as its own architecture's folder (see the module docstring); returns (out_dir,
    config dict, parameter count) as export.export does; notes (a list) gets the lines the command prints."""
    weights = llama_tensors(model.state_dict(), args)
    ds = ckpt.get('dataset') or {}  # (export.gguf_tokenizer_found has found a GGUF tokenizer's file)
    _, M = hf_rope(args['n_embd'] // args['n_head'], args['rope_base'], args.get('rope_scaling'), L,
                   args['block_size'])
    tok_files, ids, tok_lines, tok_said = tokenizer_of(ckpt_path, ds, M)
    config = hf_llama_config(args, L, ids)
    af = rope_inv_freq(config['head_dim'], args['rope_base'], args.get('rope_scaling'))[1]
    lines = serve.engine_lines(config, out_dir, af, serve.gguf_source(ckpt_path), args['rope_base'])
    n = model.get_num_params()
    gen = {k: v for k, v in ids.items() if v is not None}
    files = {'config.json': json.dumps(config, indent=1) + '\n',
             'generation_config.json': json.dumps({'_from_model_config': True, **gen}, indent=1) + '\n',
             **tok_files,
             'README.md': readme(ckpt_path, out_dir, config, scaling_name(args.get('rope_scaling')), tok_lines,
                                 lines, n, bool(tok_files))}
    write_folder(out_dir, weights, files, FILES + TOKENIZER_FILES)
    if notes is not None:
        rp = config['rope_parameters']
        notes += [f"wrote {out_dir}: {config['architectures'][0]}, {n / 1e6:.2f}M params"
                  f"{' (tied head)' if args['tie_embeddings'] else ''}, rope_type '{rp['rope_type']}' theta "
                  f"{rp['rope_theta']:g}, max_position_embeddings {M}"
                  + (f" (L = {rp['original_max_position_embeddings']})" if 'original_max_position_embeddings' in rp
                     else '') + f"; files: {', '.join(sorted(os.listdir(out_dir)))}", tok_said, *lines]
    return out_dir, config, n

"""
Real models' weights in model.py's GPT. `load_checkpoint('hf:<folder>')` reads a Hugging Face folder (config.json and
*.safetensors, one file or shards listed in model.safetensors.index.json) into this project's checkpoint dict:

  llama, mistral, qwen2 (SmolLM / SmolLM2 are llama)   GPTConfig(norm='rmsnorm', mlp='swiglu', n_kv_head, qkv_bias
                                                      for Qwen2, tie_embeddings as config.json says); rope_theta and
                                                      rope_scaling / rope_parameters through lab.hf.config.from_hf;
                                                      Mistral's sliding_window as a windowed layer pattern
  gpt_neox                                            full rotation and a sequential residual only (what
                                                      lab/hf/export.py writes): the default GPT with biases. Pythia's
                                                      partial rotation (rotary_pct) and parallel residual are refused

Whatever the GPT cannot express is refused in one line that names it: M-RoPE, MLA (kv_lora_rank), experts, QK-norm
(q_norm weights), biases where it has none, a head_dim other than n_embd / n_head, an untied head without its weights.
The safetensors files are read here with numpy (an 8-byte header length, a JSON header, raw little-endian tensors):
no new dependency. lab/hf/gguf.py assembles llama.cpp's tensors through the same llama_state and checkpoint.
"""
import json
import math
import os
import reprlib
from dataclasses import asdict, replace

import numpy as np
import torch

from data.common import read_json
from data.checkpoints import LOADERS
from lab.hf.config import from_hf, from_hf_layers, hf_rotary_fraction, without
from lab.hf.tokenizer import char_vocabulary
from model import GPT, GPTConfig

# model.py's tensors of a Llama-shaped GPT, each from one or more parts (concatenated by rows) of the source file;
# a format names each part (HF_NAMES; lab/hf/gguf.py's GGUF_NAMES), {i} the layer
LAYER_PARTS = {'ln_1.weight': ('ln_1',), 'attn.c_attn.weight': ('q', 'k', 'v'),
               'attn.c_attn.bias': ('q.bias', 'k.bias', 'v.bias'), 'attn.c_proj.weight': ('o',),
               'ln_2.weight': ('ln_2',), 'mlp.c_fc.weight': ('gate', 'up'), 'mlp.c_proj.weight': ('down',)}
HF_NAMES = dict(
    wte='model.embed_tokens.weight', ln_f='model.norm.weight', head='lm_head.weight',
    ln_1='model.layers.{i}.input_layernorm.weight', ln_2='model.layers.{i}.post_attention_layernorm.weight',
    **{p: f'model.layers.{{i}}.self_attn.{p}_proj.weight' for p in 'qkvo'},
    **{f'{p}.bias': f'model.layers.{{i}}.self_attn.{p}_proj.bias' for p in 'qkv'},
    **{p: f'model.layers.{{i}}.mlp.{p}_proj.weight' for p in ('gate', 'up', 'down')})
LEFT_OVER = (('q_norm', "QK-norm (a norm on q and k per head)"), ('k_norm', "QK-norm (a norm on q and k per head)"),
             ('.bias', "a bias where model.py's GPT has none"), ('expert', "experts (MoE)"))
IGNORED = ('rotary_emb.inv_freq',)  # buffers older checkpoints saved: recomputed, not weights
LLAMA_TYPES = ('llama', 'mistral', 'qwen2')
HF_TYPES = LLAMA_TYPES + ('gpt_neox',)


def gpt_shapes(config):
    """{name: shape} of the state dict of GPT(config): a 1-layer GPT built on the meta device (no memory; its layer
    stands for every layer, which windows and scaling leave alike in shape)."""
    with torch.device('meta'):
        one = GPT(replace(config, n_layer=1, layers=None, rope_scaling=None)).state_dict()
    return {k.replace('.h.0.', f'.h.{i}.'): tuple(v.shape) for k, v in one.items()
            for i in (range(config.n_layer) if '.h.0.' in k else [0])}


def llama_state(config, tensors, names, source):
    """model.py's state dict (float32) for a Llama-shaped GPTConfig from a file's {name: tensor}, its parts named by
    `names` (part -> name, {i} the layer). Every GPT weight must be there in its shape and every tensor of the file
    must find a place (IGNORED aside): ValueError naming the file and the tensor otherwise."""
    used = set()

    def take(part, i=None):
        name = names[part].format(i=i)
        if name not in tensors:
            raise ValueError(f"{source}: tensor {name} is missing; the file is not a complete {config.n_layer}-layer "
                             f"model of the kind its config describes")
        used.add(name)
        return tensors[name]
    state = {'transformer.wte.weight': take('wte'), 'transformer.ln_f.weight': take('ln_f')}
    state['lm_head.weight'] = state['transformer.wte.weight'] if config.tie_embeddings else take('head')
    shapes = gpt_shapes(config)
    for i in range(config.n_layer):
        for ours, parts in LAYER_PARTS.items():
            if f'transformer.h.{i}.{ours}' in shapes:
                want, got = shapes[f'transformer.h.{i}.{ours}'][1:], [take(p, i) for p in parts]
                bad = next((names[p].format(i=i) for p, t in zip(parts, got) if tuple(t.shape[1:]) != want), None)
                if bad:
                    raise ValueError(f"{source}: tensor {bad} has shape {tuple(tensors[bad].shape)} but the config "
                                     f"gives {'rows of ' + str(want[0]) if want else 'a vector'}; the file's tensors "
                                     f"and its config disagree")
                state[f'transformer.h.{i}.{ours}'] = torch.cat(got)
    check_state(state, shapes, set(tensors) - used, source)
    return state


def check_state(state, shapes, left, source):
    """Refuse a tensor the GPT has no place for (named, with what it is) or one of the wrong shape."""
    left = sorted(n for n in left if not n.endswith(IGNORED))
    if left:
        what = next((why for key, why in LEFT_OVER if key in left[0]), "a weight model.py's GPT has no place for")
        raise ValueError(f"{source}: tensor {left[0]} is {what}; model.py's GPT cannot express this model")
    for name, shape in shapes.items():
        if name not in state:
            raise ValueError(f"{source}: no tensor for {name}; the file is not a complete model of its config's kind")
        if tuple(state[name].shape) != shape:
            raise ValueError(f"{source}: {name} has shape {tuple(state[name].shape)} from the file but the config "
                             f"gives {shape}; the file's tensors and its config disagree")


def checkpoint(config, state, train_len, source, dataset):
    """This project's checkpoint dict (what data.checkpoints.load_checkpoint returns) for a loaded model."""
    return {'model': {k: v.to(torch.float32).contiguous() for k, v in state.items()}, 'model_args': asdict(config),
            'config': {}, 'lineage': {'train_len': int(train_len), 'source': source}, 'dataset': dataset}


# ----------------------------------------------------------------------------- safetensors, read with numpy

ST_NUMPY = {'F32': np.float32, 'F16': np.float16, 'F64': np.float64, 'BF16': np.uint16}  # BF16: the top 16 bits


def read_safetensors(path):
    """{name: float32 tensor} of a .safetensors file; ValueError naming it when it is truncated, not safetensors,
    or holds a dtype other than F32 / F16 / BF16 / F64 (quantized)."""
    size = os.path.getsize(path)
    with open(path, 'rb') as f:
        n = int.from_bytes(f.read(8), 'little') if size >= 8 else -1
        try:
            header = json.loads(f.read(n)) if 0 < n <= size - 8 else None
        except ValueError:
            header = None
    if not isinstance(header, dict):
        raise ValueError(f"{path} is not a safetensors file (no JSON header); pass a folder of *.safetensors")
    header.pop('__metadata__', None)
    data, out = np.memmap(path, dtype=np.uint8, mode='r'), {}
    for name, h in header.items():
        if not isinstance(h, dict) or not all(k in h for k in ('dtype', 'shape', 'data_offsets')):
            raise ValueError(f"{path}: tensor {name}'s header entry {reprlib.repr(h)} lacks dtype, shape or "
                             f"data_offsets; the file is damaged: download it again")
        dtype = ST_NUMPY.get(h['dtype']) if isinstance(h['dtype'], str) else None
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} is {h['dtype']}; only F32, F16, BF16 and F64 weights are read "
                             f"(dequantize it first)")
        shape, offsets = h['shape'], h['data_offsets']
        whole = lambda xs: isinstance(xs, list) and all(type(x) is int and x >= 0 for x in xs)  # noqa: E731
        if not whole(shape) or not whole(offsets) or len(offsets) != 2 or offsets[0] > offsets[1] or \
                offsets[1] - offsets[0] != np.dtype(dtype).itemsize * math.prod(shape):
            raise ValueError(f"{path}: tensor {name}'s header gives shape {shape} of {h['dtype']} but data_offsets "
                             f"{offsets}; the header disagrees with its data (the file is damaged): download it again")
        a, b = offsets
        if 8 + n + b > size:
            raise ValueError(f"{path} is truncated: tensor {name} ends past the end of the file; download it again")
        x = np.frombuffer(data[8 + n + a:8 + n + b], dtype=dtype)
        x = (x.astype(np.uint32) << 16).view(np.float32) if h['dtype'] == 'BF16' else x.astype(np.float32)
        out[name] = torch.from_numpy(x.reshape(h['shape']))
    return out


def read_folder_tensors(folder):
    """Every tensor of a folder's model.safetensors, or of the shards model.safetensors.index.json lists."""
    index = os.path.join(folder, 'model.safetensors.index.json')
    if os.path.isfile(index):
        weight_map = read_json(index, "restore the model folder's index (a download cut short?)").get('weight_map')
        if not isinstance(weight_map, dict):
            raise ValueError(f"{index} has no weight_map (tensor name -> shard file); restore the model folder's index")
        files = sorted(set(weight_map.values()))
    else:
        files, weight_map = sorted(n for n in os.listdir(folder) if n.endswith('.safetensors')), {}
    if not files:
        raise ValueError(f"hf:{folder} holds no *.safetensors (a pytorch_model.bin is not read: it is a pickle); "
                         f"save the model with safe_serialization=True")
    tensors = {}
    for name in files:
        if not os.path.isfile(os.path.join(folder, name)):
            raise ValueError(f"hf:{folder}: {name} is missing (model.safetensors.index.json lists it); download the "
                             f"model folder again")
        got = read_safetensors(os.path.join(folder, name))
        lost = sorted(k for k, f in weight_map.items() if f == name and k not in got)
        if lost:
            raise ValueError(f"hf:{folder}: model.safetensors.index.json puts {lost[0]} in {name}, which does not hold "
                             f"it; the index and the shards disagree: download the model folder again")
        tensors.update(got)
    return tensors


# ----------------------------------------------------------------------------- config.json -> GPTConfig

def neox_head(d):
    """A GPT-NeoX config's head_dim (hidden_size / num_attention_heads), 0 where they are not whole numbers."""
    h, n = d.get('hidden_size'), d.get('num_attention_heads')
    return h // n if isinstance(h, int) and isinstance(n, int) and n > 0 else 0


def refuse_config(d, source):
    """One line naming what a config.json asks for that model.py's GPT has not (None: nothing)."""
    mt, rp = d.get('model_type'), {**(d.get('rope_scaling') or {}), **(d.get('rope_parameters') or {})}
    p = hf_rotary_fraction(d) if mt == 'gpt_neox' else 1.0  # GPT-NeoX's rotary_pct; int(head_dim * p) dims turn
    head_dim = d.get('head_dim')
    for bad, why in (
            ('kv_lora_rank' in d, "MLA (kv_lora_rank: keys and values through a low-rank latent)"),
            (any(d.get(k) for k in ('num_experts', 'num_local_experts', 'n_routed_experts')), "experts (MoE)"),
            ('mrope_section' in rp or rp.get('rope_type', rp.get('type')) == 'mrope',
             "M-RoPE (mrope_section: rotations per time / height / width section)"),
            (mt == 'gpt_neox' and int(neox_head(d) * p) % 2,
             f"GPT-NeoX's partial rotation of an odd number of dims (int(head_dim {neox_head(d)} x rotary_pct {p:g}) "
             f"= {int(neox_head(d) * p)}: a pair split)"),
            (mt == 'gpt_neox' and d.get('use_parallel_residual', True), "GPT-NeoX's parallel residual"),
            (mt not in HF_TYPES, f"model_type {mt!r} (read here: {', '.join(HF_TYPES)})"),
            (mt in LLAMA_TYPES and d.get('hidden_act', 'silu') != 'silu', f"hidden_act {d.get('hidden_act')!r}"),
            (mt in ('llama', 'mistral') and d.get('attention_bias'), "attention_bias (o_proj's bias as well)"),
            (d.get('mlp_bias'), "mlp_bias"),
            (d.get('rope_interleaved'), "rope_interleaved (pairs (2i, 2i + 1); model.py turns pairs (i, i + d/2))"),
            (mt == 'qwen2' and d.get('use_sliding_window') and not d.get('layer_types'),
             "Qwen2's sliding window from max_window_layers on"),
            (head_dim is not None and head_dim * d.get('num_attention_heads', 0) != d.get('hidden_size'),
             f"head_dim={head_dim} apart from hidden_size / num_attention_heads")):
        if bad:
            return f"{source}: {why} has no counterpart in model.py's GPT; it cannot be loaded"
    return None


HF_WHOLE = ('num_hidden_layers', 'num_attention_heads', 'hidden_size', 'max_position_embeddings', 'vocab_size',
            'intermediate_size')  # config.json's fields the GPT is built from: whole numbers >= 1, required
HF_OPTIONAL = {'num_key_value_heads': int, 'rms_norm_eps': float, 'layer_norm_eps': float, 'tie_word_embeddings': bool}


def check_fields(d, source):
    """The fields a supported config.json builds the GPT from: present and of their type, else ValueError naming the
    field (a rope dict that is not a dict; the model_type itself is refuse_config's)."""
    for k in ('rope_scaling', 'rope_parameters'):
        if d.get(k) is not None and not isinstance(d[k], dict):
            raise ValueError(f"{source}: config.json's {k} = {reprlib.repr(d[k])} must be a dict (or null); restore "
                             f"the model folder's config.json")
    if d.get('model_type') not in HF_TYPES:
        return
    bad = lambda k, kind: not isinstance(d[k], (int, float) if kind is float else kind) or \
        isinstance(d[k], bool) != (kind is bool) or \
        (kind is not bool and not d[k] > 0)  # noqa: E731
    for k, kind in [*((k, int) for k in HF_WHOLE), *((k, t) for k, t in HF_OPTIONAL.items() if d.get(k) is not None)]:
        if k not in d:
            raise ValueError(f"{source}: config.json has no {k}; restore the model folder's config.json")
        if bad(k, kind):
            want = {int: 'a whole number >= 1', float: 'a number > 0', bool: 'true or false'}[kind]
            raise ValueError(f"{source}: config.json's {k} = {d[k]!r} must be {want}; restore the model folder's "
                             f"config.json")
    types = d.get('layer_types')
    if types is not None and (not isinstance(types, list) or len(types) != d['num_hidden_layers']):
        raise ValueError(f"{source}: config.json's layer_types = {reprlib.repr(types)} must be a list of one type per "
                         f"layer (num_hidden_layers = {d['num_hidden_layers']}); restore the model folder's "
                         f"config.json")


def hf_args(d, source):
    """config.json -> (GPTConfig, train_len): the fields of a Llama-family or GPT-NeoX config (refuse_config first)."""
    check_fields(d, source)
    why = refuse_config(d, source)
    if why:
        raise ValueError(why)
    n, H, C, M = d['num_hidden_layers'], d['num_attention_heads'], d['hidden_size'], d['max_position_embeddings']
    neox = d['model_type'] == 'gpt_neox'  # its rotation read apart (hf_rotary_fraction), the rope dict without it
    scaling, theta = from_hf(dict(without(d, ('partial_rotary_factor', 'rotary_pct')), rotary_pct=1.0) if neox else d)
    args = dict(block_size=M, vocab_size=d['vocab_size'], n_layer=n, n_head=H, n_embd=C, n_ffn=d['intermediate_size'],
                rope_base=float(theta or d.get('rotary_emb_base') or 10000.0), rope_scaling=scaling,
                tie_embeddings=bool(d.get('tie_word_embeddings', False)))
    if neox:  # partial rotation: the rotary dims' own frequencies, an attention factor on them alone (as HF's cos/sin)
        p = hf_rotary_fraction(d)
        if p < 1 and args['rope_scaling']:
            args['rope_scaling'] = {**args['rope_scaling'], 'attention_factor_on': 'rotary'}
        return GPTConfig(**args, bias=True, norm_eps=d.get('layer_norm_eps', 1e-5), partial_rotary_factor=p), M
    types = d.get('layer_types') or (['sliding_attention'] * n if d['model_type'] == 'mistral' and
                                     (d.get('sliding_window') or M) < M else None)
    if types and set(types) != {'full_attention'}:
        args['layers'], args['rope_scaling'] = from_hf_layers(dict(d, layer_types=types), n)
    return GPTConfig(**args, norm='rmsnorm', mlp='swiglu', norm_eps=d.get('rms_norm_eps', 1e-6),
                     n_kv_head=d.get('num_key_value_heads') or H, qkv_bias=d['model_type'] == 'qwen2'), M


def neox_order(head_dim, r):
    """GPT-NeoX's dim j <- the lab's dim order[j]: its rotate-half runs over the first r dims (pair j is (j, j + r/2)),
    the lab's over all d with the pairs past r/2 at theta = 0 (pair j is (j, j + d/2)); the rest pass through."""
    h = head_dim // 2
    return list(range(r // 2)) + list(range(h, h + r // 2)) + list(range(r // 2, h)) + list(range(h + r // 2, head_dim))


NEOX_NAMES = {  # lab/hf/export.py's GPT-NeoX names -> model.py's, replaced in this order
    'gpt_neox.embed_in.': 'transformer.wte.', 'embed_out.': 'lm_head.', 'gpt_neox.final_layer_norm.': 'transformer.ln_f.',
    'gpt_neox.layers.': 'transformer.h.', '.input_layernorm.': '.ln_1.', '.post_attention_layernorm.': '.ln_2.',
    '.attention.query_key_value.': '.attn.c_attn.', '.attention.dense.': '.attn.c_proj.',
    '.mlp.dense_h_to_4h.': '.mlp.c_fc.', '.mlp.dense_4h_to_h.': '.mlp.c_proj.'}


def neox_tensors(tensors, config):
    """A GPT-NeoX folder's tensors (lab/hf/export.py's names) under model.py's names: qkv rows back from
    [head, 3, head_dim] to [3, head, head_dim]; unknown ones kept (check_state names them)."""
    C, H = config.n_embd, config.n_head
    back = torch.argsort(torch.tensor(neox_order(C // H, config.rotary_dim)))
    out = {}
    for name, t in tensors.items():
        for theirs, ours in NEOX_NAMES.items():
            name = name.replace(theirs, ours)
        if '.attn.c_attn.' in name:  # q and k rows back from GPT-NeoX's rotary order (export.neox_order)
            t = t.reshape(H, 3, C // H, *t.shape[1:]).transpose(0, 1)
            t = torch.cat((t[:2, :, back], t[2:])).reshape(-1, *t.shape[3:])
        out[name] = t
    return out


def load_hf(folder):
    """LOADERS['hf']: the checkpoint dict of a Hugging Face folder (see the module docstring)."""
    source = f'hf:{folder}'
    path = os.path.join(folder, 'config.json')
    if not os.path.isfile(path):
        raise ValueError(f"{source}: no config.json there; pass a Hugging Face model folder (config.json + "
                         f"*.safetensors)")
    d = read_json(path, "restore the model folder's config.json (a download cut short?)")
    if not isinstance(d, dict):
        raise ValueError(f"{path} holds a {type(d).__name__}, not a model config; restore the model folder's config.json")
    config, L = hf_args(d, source)
    tensors = read_folder_tensors(folder)
    if d['model_type'] == 'gpt_neox':
        state, shapes = neox_tensors(tensors, config), gpt_shapes(config)
        if config.tie_embeddings:
            state['lm_head.weight'] = state['transformer.wte.weight']
        check_state(state, shapes, set(state) - set(shapes), source)
    else:
        if config.tie_embeddings and 'lm_head.weight' in tensors and \
                not torch.equal(tensors['lm_head.weight'], tensors['model.embed_tokens.weight']):
            raise ValueError(f"{source}: tie_word_embeddings is true but lm_head.weight differs from the embedding; "
                             f"set tie_word_embeddings to false in config.json if the head is its own")
        state = llama_state(config, {k: v for k, v in tensors.items() if not (config.tie_embeddings and k ==
                                                                               'lm_head.weight')}, HF_NAMES, source)
    eos, tok = d.get('eos_token_id'), os.path.abspath(os.path.join(folder, 'tokenizer.json'))
    dataset = {'dataset': None, 'tokenizer': 'hf', 'vocab_size': config.vocab_size,  # lab/hf/tokenizer.py reads tok
               'tokenizer_file': tok if os.path.isfile(tok) else None,
               'eot_token': eos[0] if isinstance(eos, list) else eos}
    itos = char_vocabulary(tok) if dataset['tokenizer_file'] else None
    if itos is not None:  # a character run's export (lab/hf/folder.py): read as the run's own characters
        dataset.update(tokenizer='char', itos=itos)
    return checkpoint(config, state, L, source, dataset)


LOADERS['hf'] = load_hf

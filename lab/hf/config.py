"""
Hugging Face's rope settings read into this lab's: one rope dict or a whole config.json (from_hf), and the per-layer
form of transformers 5 (from_hf_layers: layer_types with rope_parameters keyed by layer type, a sliding window, Llama
4's chunks, NoPE layers) as this lab's layer pattern. lab/hf/export.py writes the other way.
"""
import reprlib

from model import layer_specs
from rope_config import SCALE_LAYERS, _hf_rope_dict, _number, check_scaling, parse_layers

LAYER_TYPES = {'sliding_attention': True, 'chunked_attention': True, 'full_attention': False}  # local or not
LLAMA4_CHUNK = 8192  # Llama4TextConfig's attention_chunk_size when a config leaves it out

HF_CONFIG_KEYS = ('rope_parameters', 'rope_scaling', 'max_position_embeddings', 'model_type', 'rotary_emb_base',
                  'rotary_pct', 'hidden_size')  # any of these (and no rope_type / type): a whole config.json


def from_hf(d):
    """Hugging Face rope settings -> (rope_scaling for this lab or None for plain RoPE, rope_theta or None).
    d is a 4.x rope_scaling dict ('type' or 'rope_type'), a 5.x rope_parameters dict (rope_theta and
    partial_rotary_factor inside), or a whole config.json, read as transformers 5 reads it: rope_scaling wins
    over rope_parameters; rope_theta / rotary_emb_base and partial_rotary_factor / rotary_pct may sit at the top
    (a gpt_neox config without one rotates 25%: refused); max_position_embeddings is L for 'dynamic' and fills
    a missing original_max_position_embeddings (yarn, llama3, longrope) and factor (yarn, longrope, as M / L); a
    top-level original_max_position_embeddings (Phi-3 and 3.5 keep it there) is L for yarn, llama3 and longrope,
    ahead of the rope dict's, as transformers 5 standardizes it (PreTrainedConfig.standardize_rope_params)."""
    if not isinstance(d, dict):
        raise ValueError(f"a Hugging Face rope config must be a dict, got {type(d).__name__}")
    if 'rope_type' not in d and 'type' not in d and any(k in d for k in HF_CONFIG_KEYS):
        rp = d.get('rope_scaling') or d.get('rope_parameters') or {}
        if not isinstance(rp, dict) or any(isinstance(v, dict) for v in rp.values()):
            raise ValueError("the config's rope parameters are not one flat dict (one per layer type?); "
                             "read per-layer configs with lab.hf.config.from_hf_layers")
        rp = {k: v for k, v in rp.items() if v is not None}
        for key, tops in (('rope_theta', ('rope_theta', 'rotary_emb_base')),
                          ('partial_rotary_factor', ('partial_rotary_factor', 'rotary_pct'))):
            top = next((d[k] for k in tops if d.get(k) is not None), None)
            if top is not None:
                rp.setdefault(key, top)
        if d.get('model_type') == 'gpt_neox':
            rp.setdefault('partial_rotary_factor', 0.25)  # GPTNeoXConfig's default
        t, M = rp.get('rope_type', rp.get('type', 'default')), d.get('max_position_embeddings')
        top_L = d.get('original_max_position_embeddings')
        if M is not None and t == 'dynamic':
            rp['original_max_position_embeddings'] = M  # transformers' dynamic NTK reads L from here only
        elif t in ('yarn', 'llama3', 'longrope') and top_L is not None:
            rp['original_max_position_embeddings'] = top_L  # Phi-3/3.5 keep L at the top; transformers 5 reads it first
        elif M is not None and t in ('yarn', 'llama3', 'longrope'):
            rp.setdefault('original_max_position_embeddings', M)
        if M is not None and t in ('yarn', 'longrope') and 'factor' not in rp:
            rp['factor'] = M / rp['original_max_position_embeddings']
        d = rp
    sc, theta = _hf_rope_dict(engine_type(d))
    sc = check_scaling(sc)
    return (None if sc['rope_type'] == 'default' else sc), theta


def without(d, keys):
    """d (and its rope dicts) without the given keys: what from_hf reads once partial rotation and the query
    temperatures are taken out."""
    out = {k: v for k, v in d.items() if k not in keys}
    for k in ('rope_scaling', 'rope_parameters'):
        rp = out.get(k)
        if isinstance(rp, dict):
            out[k] = {t: (drop(v, keys) if isinstance(v, dict) else v) for t, v in rp.items() if t not in keys}
            if (rp.get('rope_type') or rp.get('type')) == 'proportional' and 'partial_rotary_factor' in rp:
                out[k]['partial_rotary_factor'] = rp['partial_rotary_factor']  # (p-RoPE's own key)
    return out


def drop(rp, keys):
    """A per-layer-type rope dict without the keys (p-RoPE keeps its own partial_rotary_factor)."""
    keep = {'partial_rotary_factor'} if (rp.get('rope_type') or rp.get('type')) == 'proportional' else set()
    return {k: v for k, v in rp.items() if k not in keys or k in keep}


def hf_rotary_fraction(d):
    """p, the fraction of each head's dims that turn, as transformers reads a whole config.json: the rope dict's
    partial_rotary_factor (not p-RoPE's, which picks pairs over the whole head), else the top level's
    partial_rotary_factor or rotary_pct, else GPTNeoXConfig's 0.25 for gpt_neox and 1 for the rest. ValueError
    naming the field when it is not a number in (0, 1]. The rotary dims are int(head_dim * p)."""
    rp = d.get('rope_scaling') or d.get('rope_parameters') or {}
    rp = rp if isinstance(rp, dict) and (rp.get('rope_type') or rp.get('type')) != 'proportional' else {}
    key = next((k for k in ('partial_rotary_factor', 'rotary_pct') if d.get(k) is not None), None)
    p = rp.get('partial_rotary_factor', d[key] if key else 0.25 if d.get('model_type') == 'gpt_neox' else 1.0)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        raise ValueError(f"{'partial_rotary_factor' if key is None else key} = {p!r} must be a number in (0, 1]")
    return float(p)


def engine_type(rp):
    """The engines' names for two of the lab's engine-only types (rope.py's last section), as vLLM and SGLang read
    them: Hunyuan's {'type': 'dynamic', 'alpha': a} is ntk_alpha (static: both build its table once), and vLLM's
    'ntk' (with or without mixed_b) is ntk_mixed (its b = 1 squeezes pair 0 too, unlike the lab's NTK-aware 'ntk')."""
    t = rp.get('rope_type', rp.get('type'))
    new = 'ntk_alpha' if t == 'dynamic' and rp.get('alpha') is not None else 'ntk_mixed' if t == 'ntk' else None
    if new is None:
        return rp
    return dict({k: v for k, v in rp.items() if k not in ('type', 'rope_type')}, rope_type=new)


def _whole(d, key, low=1):
    """d[key] as an int >= low, or None where the config leaves it unset; anything else refused in one line."""
    v = d.get(key)
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < low):
        raise ValueError(f"the config's {key} = {v!r}: must be a whole number >= {low}")
    return v


def hf_layer_types(d):
    """layer_types as transformers 5 fills them in for a config published without them: Gemma 3 from
    sliding_window_pattern (every 6th layer full), Llama 4 from no_rope_layers (1 = RoPE, 0 = NoPE; by default every
    no_rope_layer_interval-th layer, 4, is NoPE): its RoPE layers are chunked, its NoPE layers global."""
    types, n, mt = d.get('layer_types'), _whole(d, 'num_hidden_layers'), str(d.get('model_type', ''))
    if types is None and n and mt.startswith('gemma3'):
        every = _whole(d, 'sliding_window_pattern') or 6
        types = ['full_attention' if (i + 1) % every == 0 else 'sliding_attention' for i in range(n)]
    if types is None and n and mt.startswith('llama4'):
        rope = hf_rope_layers(d, n)
        types = ['chunked_attention' if r else 'full_attention'  # (transformers: whatever attention_chunk_size says)
                 for r in (rope if isinstance(rope, list) else [])] or None
    return types


def hf_rope_layers(d, n):
    """no_rope_layers (per layer 1 = RoPE, 0 = NoPE) as transformers fills them in for a config that leaves them out
    or empty: Llama 4's every no_rope_layer_interval-th layer (4) NoPE; RoPE in every layer otherwise."""
    rope = d.get('no_rope_layers')
    if not rope and str(d.get('model_type', '')).startswith('llama4'):
        every = _whole(d, 'no_rope_layer_interval') or 4
        rope = [int((i + 1) % every != 0) for i in range(n)]
    return rope or [1] * n


def hf_chunk(d):
    """The chunk of a config's chunked_attention layers: attention_chunk_size; Llama 4's default when left out."""
    if 'attention_chunk_size' not in d and str(d.get('model_type', '')).startswith('llama4'):
        return LLAMA4_CHUNK
    return _whole(d, 'attention_chunk_size')


def from_hf_layers(d, n_layer=None):
    """A transformers config with per-layer positions -> (layers, rope_scaling or None) for GPTConfig.
    d holds layer_types (one of LAYER_TYPES per layer; filled in as transformers does for Gemma 3 and Llama 4
    configs published without them), sliding_window, rope_parameters keyed by layer type ({'full_attention':
    {'rope_type': 'linear', 'factor': 8.0, 'rope_theta': 1e6}, 'sliding_attention': {'rope_type': 'default',
    'rope_theta': 1e4}}: Gemma 3) or one flat dict for all, or the older top-level rope_scaling (Gemma 3's applies to
    its full layers, its local ones at rope_local_base_freq), and optionally no_rope_layers (Llama 4, SmolLM3: per
    layer 1 = RoPE, 0 = NoPE). One scaling, on one layer type or on both, has a counterpart here (rope_scaling['layers']);
    two different scalings have none. Llama 4's chunked_attention layers (a query sees only the keys of its own chunk
    of attention_chunk_size tokens) become chunked layers ('rope:c=8192'), its NoPE ones global ('nope'), and its
    scaling (llama3) applies to every RoPE layer: Scout's layers read as '3*rope:c=8192:base=500000.0,nope' x 12 (its
    llama3 dict, low_freq_factor = high_freq_factor = 1.0, is a step at wavelength L: rope.llama3_inv_freq)."""
    if not isinstance(d, dict):
        raise ValueError(f"a Hugging Face config must be a dict, got {type(d).__name__}")
    d = d['text_config'] if isinstance(d.get('text_config'), dict) else d  # Llama 4 / Gemma 3 nest the text model
    types, window, chunk = hf_layer_types(d), _whole(d, 'sliding_window'), hf_chunk(d)
    if not isinstance(types, list) or not types or any(not isinstance(t, str) or t not in LAYER_TYPES for t in types):
        raise ValueError(f"layer_types must be a list of {', '.join(LAYER_TYPES)} (one per layer), got "
                         f"{reprlib.repr(types)}")
    rp, top = d.get('rope_parameters') or {}, d.get('rope_scaling')
    rp = top if isinstance(top, dict) and top else rp  # transformers: an older rope_scaling wins over rope_parameters
    if not isinstance(rp, dict):
        raise ValueError(f"the config's rope_parameters = {reprlib.repr(rp)}: must be a dict (one flat dict, or one "
                         f"per layer type)")
    keyed = any(isinstance(v, dict) for v in rp.values())
    if str(d.get('model_type', '')).startswith('gemma3') and not keyed:  # Gemma 3 as published: the flat scaling on
        rp = {'full_attention': dict(rp or {'rope_type': 'default'},       # its full layers, the local ones plain
                                     rope_theta=rp.get('rope_theta') or d.get('rope_theta') or 1e6),
              'sliding_attention': {'rope_type': 'default', 'rope_theta': d.get('rope_local_base_freq') or 1e4}}
        keyed = True
    per_type = {t: from_hf(rp.get(t) or {'rope_type': 'default'} if keyed else rp or {'rope_type': 'default'})
                for t in set(types)}
    scalings = {repr(sc): sc for sc, _ in per_type.values() if sc is not None}
    if len(scalings) > 1:
        raise ValueError("the layer types carry different rope scalings; this lab scales with one (its 'layers' key "
                         f"picks the layers: {', '.join(SCALE_LAYERS)})")
    scaled = {LAYER_TYPES[t] for t, (sc, _) in per_type.items() if sc is not None}
    scale = 'all' if len(scaled) != 1 or len({LAYER_TYPES[t] for t in types}) == 1 else 'window' if True in scaled else 'full'
    nope = hf_rope_layers(d, len(types))
    if not isinstance(nope, list) or len(nope) != len(types) or any(r not in (0, 1) for r in nope):
        raise ValueError(f"the config's no_rope_layers = {reprlib.repr(nope)}: must be a list of 0 (NoPE) and 1 (RoPE), "
                         f"one per layer ({len(types)})")
    if 'sliding_attention' in types and not window:
        raise ValueError("layer_types has sliding_attention layers but the config has no sliding_window; set it")
    if 'chunked_attention' in types and not chunk:  # (transformers' create_chunked_causal_mask refuses it too)
        raise ValueError(f"layer_types has {types.count('chunked_attention')} chunked_attention layers but the config "
                         f"has no attention_chunk_size; set it (Llama 4: 8192)")
    top_theta = d.get('rope_theta')
    layers = []
    for t, rope in zip(types, nope):
        local = {'sliding_attention': f":w={window}", 'chunked_attention': f":c={chunk}"}.get(t, '')
        base = per_type[t][1] or (top_theta and _number(top_theta, 'rope_theta', 1)) or 10000.0
        layers.append(f"rope{local}:base={float(base)!r}" if rope else f"nope{local}")
    pattern = ','.join(layers)
    parse_layers(pattern, n_layer or len(types), 10000.0, max(window or 0, chunk or 0) + 2)  # it reads back (n_layer)
    sc = next(iter(scalings.values()), None)
    return pattern, None if sc is None else check_scaling(dict(sc, **({} if scale == 'all' else {'layers': scale})))


def to_hf_layers(config):
    """A GPTConfig's per-layer positions in transformers 5's form: layer_types, sliding_window, attention_chunk_size,
    no_rope_layers and rope_parameters keyed by layer type (this lab's keys; rope_theta inside); conv layers as LFM2 /
    LFM3 type them ('conv', no RoPE entry, their kernel in conv_L_cache). Refused where HF has no form: windows, chunks
    or kernels of different sizes, or layers of one type at different bases."""
    specs, scaled = layer_specs(config)
    windows, chunks = {s.window for s in specs if s.window}, {s.chunk for s in specs if s.chunk}
    kernels = {s.conv for s in specs if s.conv}
    for sizes, what, key in ((windows, 'windows', 'sliding_window'), (chunks, 'chunks', 'attention_chunk_size'),
                             (kernels, 'conv kernels', 'conv_L_cache')):
        if len(sizes) > 1:
            raise ValueError(f"layers={config.layers!r} has {what} of {sorted(sizes)}; Hugging Face has one {key}")
    types = ['conv' if s.conv else 'sliding_attention' if s.window else 'chunked_attention' if s.chunk else
             'full_attention' for s in specs]
    rp = {}
    for t, s, on in zip(types, specs, scaled):
        if not s.rope:
            continue
        sc = {k: v for k, v in (config.rope_scaling or {}).items() if k != 'layers'}
        entry = dict(sc if on and sc else {'rope_type': 'default'}, rope_theta=s.base)
        if rp.setdefault(t, entry) != entry:
            raise ValueError(f"layers={config.layers!r} gives {t} layers different bases or scalings; Hugging Face "
                             f"has one rope_parameters entry per layer type")
    for t in set(types) - set(rp) - {'conv'}:  # a type of NoPE layers only (LFM3 gives 'conv' none)
        rp[t] = {'rope_type': 'default', 'rope_theta': config.rope_base}
    return dict(layer_types=types, sliding_window=windows.pop() if windows else None,
                attention_chunk_size=chunks.pop() if chunks else None, rope_parameters=rp,
                no_rope_layers=[int(s.rope) for s in specs], **({'conv_L_cache': kernels.pop()} if kernels else {}))

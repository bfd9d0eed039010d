"""
Hugging Face's rope settings read into this lab's: one rope dict or a whole config.json (from_hf), and the per-layer
form of transformers 5 (from_hf_layers: layer_types with rope_parameters keyed by layer type, a sliding window, NoPE
layers) as this lab's layer pattern. lab/hf/export.py writes the other way.
"""
from model import layer_specs
from rope_config import SCALE_LAYERS, _hf_rope_dict, check_scaling, parse_layers

WINDOWED = {'sliding_attention': True, 'chunked_attention': True, 'full_attention': False}

HF_CONFIG_KEYS = ('rope_parameters', 'rope_scaling', 'max_position_embeddings', 'model_type', 'rotary_emb_base',
                  'rotary_pct', 'hidden_size')  # any of these (and no rope_type / type): a whole config.json


def from_hf(d):
    """Hugging Face rope settings -> (rope_scaling for this lab or None for plain RoPE, rope_theta or None).
    d is a 4.x rope_scaling dict ('type' or 'rope_type'), a 5.x rope_parameters dict (rope_theta and
    partial_rotary_factor inside), or a whole config.json, read as transformers 5 reads it: rope_scaling wins
    over rope_parameters; rope_theta / rotary_emb_base and partial_rotary_factor / rotary_pct may sit at the top
    (a gpt_neox config without one rotates 25%: refused); max_position_embeddings is L for 'dynamic' and fills
    a missing original_max_position_embeddings (yarn, llama3, longrope) and factor (yarn, longrope)."""
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
        if M is not None and t == 'dynamic':
            rp['original_max_position_embeddings'] = M  # transformers' dynamic NTK reads L from here only
        elif M is not None and t in ('yarn', 'llama3', 'longrope'):
            rp.setdefault('original_max_position_embeddings', M)
            if t != 'llama3' and 'factor' not in rp:
                rp['factor'] = M / rp['original_max_position_embeddings']
        d = rp
    sc, theta = _hf_rope_dict(d)
    sc = check_scaling(sc)
    return (None if sc['rope_type'] == 'default' else sc), theta


def from_hf_layers(d, n_layer=None):
    """A transformers 5 config with per-layer positions -> (layers, rope_scaling or None) for GPTConfig.
    d holds layer_types (one of WINDOWED per layer), sliding_window, rope_parameters keyed by layer type
    ({'full_attention': {'rope_type': 'linear', 'factor': 8.0, 'rope_theta': 1e6}, 'sliding_attention':
    {'rope_type': 'default', 'rope_theta': 1e4}}: Gemma 3) or one flat dict for all, and optionally no_rope_layers
    (Llama 4, SmolLM3: per layer 1 = RoPE, 0 = NoPE). One scaling, on one layer type or on both, has a counterpart
    here (rope_scaling['layers']); two different scalings have none. Llama 4's chunked attention is read as a window."""
    types, window = d.get('layer_types'), d.get('sliding_window')
    if not isinstance(types, list) or not types or any(t not in WINDOWED for t in types):
        raise ValueError(f"layer_types must be a list of {', '.join(WINDOWED)} (one per layer), got {types!r}")
    rp = d.get('rope_parameters') or {}
    per_type = {t: from_hf(rp[t] if isinstance(rp.get(t), dict) else rp or {'rope_type': 'default'}) for t in set(types)}
    scalings = {repr(sc): sc for sc, _ in per_type.values() if sc is not None}
    if len(scalings) > 1:
        raise ValueError("the layer types carry different rope scalings; this lab scales with one (its 'layers' key "
                         f"picks the layers: {', '.join(SCALE_LAYERS)})")
    scaled = {WINDOWED[t] for t, (sc, _) in per_type.items() if sc is not None}
    scale = 'all' if len(scaled) != 1 or len({WINDOWED[t] for t in types}) == 1 else 'window' if True in scaled else 'full'
    nope = d.get('no_rope_layers') or [1] * len(types)
    layers = []
    for t, rope in zip(types, nope):
        w = f":w={window}" if WINDOWED[t] and window else ''
        base = per_type[t][1] or d.get('rope_theta') or 10000.0
        layers.append(f"rope{w}:base={base:g}" if rope else f"nope{w}")
    pattern = ','.join(layers)
    parse_layers(pattern, n_layer or len(types), 10000.0, (window or 0) + 2)  # the pattern reads back (n_layer, kinds)
    sc = next(iter(scalings.values()), None)
    return pattern, None if sc is None else check_scaling(dict(sc, **({} if scale == 'all' else {'layers': scale})))


def to_hf_layers(config):
    """A GPTConfig's per-layer positions in transformers 5's form: layer_types, sliding_window, no_rope_layers and
    rope_parameters keyed by layer type (this lab's keys; rope_theta inside). Refused where HF has no form: windows
    of different sizes, or layers of one type at different bases."""
    specs, scaled = layer_specs(config)
    windows = {s.window for s in specs if s.window}
    if len(windows) > 1:
        raise ValueError(f"layers={config.layers!r} has windows of {sorted(windows)}; Hugging Face has one sliding_window")
    types = ['sliding_attention' if s.window else 'full_attention' for s in specs]
    rp = {}
    for t, s, on in zip(types, specs, scaled):
        if not s.rope:
            continue
        sc = {k: v for k, v in (config.rope_scaling or {}).items() if k != 'layers'}
        entry = dict(sc if on and sc else {'rope_type': 'default'}, rope_theta=s.base)
        if rp.setdefault(t, entry) != entry:
            raise ValueError(f"layers={config.layers!r} gives {t} layers different bases or scalings; Hugging Face "
                             f"has one rope_parameters entry per layer type")
    for t in set(types) - set(rp):  # a type of NoPE layers only
        rp[t] = {'rope_type': 'default', 'rope_theta': config.rope_base}
    return dict(layer_types=types, sliding_window=windows.pop() if windows else None, rope_parameters=rp,
                no_rope_layers=[int(s.rope) for s in specs])

"""
rope.py's formulas put to work: the one table of rope types (ROPE_SCALING: each type's keys, compute function and
check), the check of a rope config against it (Hugging Face key names, HF's 4.x / 5.x dicts too; whole config.json
files: lab/hf/config.py), the per-layer pattern, and rope_inv_freq (check, then dispatch through the table). As in
Hugging Face, the formulas stay pure in one module and the registry that validates and dispatches sits beside it
(rope.py imports neither). Arm specs ('yarn:beta_fast=8') and their names live in lab/measure/arm_specs.py; the per-pair table in lab/rope_table.py.
"""
import math
import re
import reprlib
from typing import Callable, NamedTuple, Optional

import torch

from rope import (abf_inv_freq, clipped_inv_freq, dynamic_inv_freq, dynamic_yarn_scale, linear_inv_freq, llama3_inv_freq,
                  longrope_attention_factor, longrope_inv_freq, neox_partial_inv_freq, ntk_alpha_inv_freq,
                  ntk_by_parts_inv_freq, ntk_inv_freq, ntk_mixed_inv_freq, plain_inv_freq, proportional_inv_freq,
                  telechat3_mscale, yarn_attention_factor, yarn_inv_freq, yarn_log_inv_freq)

# --------------------------------------------------------------------------- the one table of rope types

def check_bands(c):
    """NTK-by-parts / YaRN: the band edges are rotations within L, beta_slow > 0 and beta_fast above it."""
    if not c['beta_slow'] > 0:
        return 'beta_slow', "must be > 0"
    if not c['beta_fast'] > c['beta_slow']:
        return 'beta_fast', f"must be > beta_slow = {c['beta_slow']} (rotations in L: fast band edge above slow)"

def check_yarn(c):
    """YaRN's temperature: attention_factor > 0; mscale and mscale_all_dim >= 0 and given together; then the bands."""
    if c.get('attention_factor', 1) <= 0:
        return 'attention_factor', "must be > 0"
    for k in ('mscale', 'mscale_all_dim'):
        if c.get(k, 0) < 0:
            return k, "must be >= 0 (0 means: use the plain YaRN temperature, as Hugging Face does)"
    if ('mscale' in c) != ('mscale_all_dim' in c):
        return 'mscale_all_dim' if 'mscale' in c else 'mscale', "mscale and mscale_all_dim must be given together"
    return check_bands(c)

def check_llama3(c):
    """Llama 3.1: 0 < low_freq_factor <= high_freq_factor (wavelength cut-offs L/low and L/high; equal: a step,
    Llama 4 Scout's 1 and 1)."""
    if not c['low_freq_factor'] > 0:
        return 'low_freq_factor', "must be > 0"
    if not c['low_freq_factor'] <= c['high_freq_factor']:
        return 'low_freq_factor', f"must be <= high_freq_factor = {c['high_freq_factor']}"

def check_longrope(c):
    """LongRoPE: attention_factor > 0; n-hat = 0 is every position scaled, the same config as no n-hat (dropped)."""
    if c.get('attention_factor', 1) <= 0:
        return 'attention_factor', "must be > 0"
    if c.get('start_token_idx') == 0:
        del c['start_token_idx']

def check_masks(c):
    """abf: the new base b' > 1; proportional: 0 <= partial_rotary_factor <= 1; clip: max_wavelength > 0."""
    for k, ok, want in (('new_base', c.get('new_base', 2) > 1, "must be > 1 (the raised base b'; 1e6 as in Qwen 2)"),
                        ('partial_rotary_factor', 0 <= c.get('partial_rotary_factor', 0) <= 1, "must be in [0, 1]"),
                        ('max_wavelength', c.get('max_wavelength', 1) > 0, "must be > 0 (tokens; default L)")):
        if not ok:
            return k, want

def check_engine_ntk(c):
    """ntk_mixed: mixed_b >= 0 (lambda_m = exp(a*m^b) then grows with the pair); ntk_alpha: alpha >= 1 (it raises the base)."""
    for k, ok, want in (('mixed_b', c.get('mixed_b', 1) >= 0, "must be >= 0 (lambda_m = exp(a*m^b) grows with the pair m; "
                                                              "0 is PI, 1 is vLLM's 'ntk' without mixed_b)"),
                        ('alpha', c.get('alpha', 1) >= 1, "must be >= 1 (b' = b*alpha^(d/(d-2)) raises the base; 1 is "
                                                          "plain RoPE, Hunyuan ships 1000)")):
        if not ok:
            return k, want

def longrope_theta(d, b, s, L, l, c):
    af = c['attention_factor'] if 'attention_factor' in c else longrope_attention_factor(s, L)
    return longrope_inv_freq(d, b, c['short_factor'], c['long_factor'], L, l), af

def yarn_theta(d, b, s, L, c):
    return yarn_inv_freq(d, b, s, L, c['beta_fast'], c['beta_slow'], c['truncate']), yarn_attention_factor(s, c)

class RopeType(NamedTuple):
    """One row of the table. compute(d=, b=, s=, L=, l=, c=) -> (theta' float64 [d/2], attention factor): head dim,
    base, scale s (factor), training length L, current length l, the whole validated config c. keys: the type's own
    settings, name -> (type, default; None = optional, no default); a `list` key is one number per pair and required.
    check(c) -> None, or (key, what it must be) for a config whose keys are typed and filled (it may normalize c).
    dynamic: depends on l. needs_L: L must be given. factor: the default s (dynamic types: 1, s then follows l/L)."""
    compute: Callable
    keys: dict = {}
    check: Optional[Callable] = None
    dynamic: bool = False
    needs_L: bool = True
    factor: Optional[float] = None

BANDS = {'beta_fast': (float, 32.0), 'beta_slow': (float, 1.0)}
PLACEMENTS = ('all', 'rotary')  # where a temperature goes: every dim of the logit, or the turning pairs' (rope_cos_sin)
PLACEMENT = {'attention_factor_on': (str, None)}  # one of PLACEMENTS; unset = 'all'
YARN = {**BANDS, 'truncate': (bool, True), 'mscale': (float, None), 'mscale_all_dim': (float, None),
        'attention_factor': (float, None), **PLACEMENT}

# Every type also takes rope_type, factor (s) and original_max_position_embeddings (L). Adding a method is one
# function above plus one row here; rope_config.py checks configs against this table and dispatches through it.
ROPE_SCALING = {
    'default': RopeType(lambda d, b, **_: (plain_inv_freq(d, b), 1.0), needs_L=False),
    'linear': RopeType(lambda d, b, s, **_: (linear_inv_freq(d, b, s), 1.0), needs_L=False),
    'ntk': RopeType(lambda d, b, s, **_: (ntk_inv_freq(d, b, s), 1.0), needs_L=False),
    'abf': RopeType(lambda d, c, **_: (abf_inv_freq(d, c['new_base']), 1.0), {'new_base': (float, 1e6)}, check_masks,
                    needs_L=False, factor=1.0),  # factor: the length it is meant for; theta' does not use it
    'dynamic': RopeType(lambda d, b, s, L, l, **_: (dynamic_inv_freq(d, b, s, L, l), 1.0), dynamic=True,
                        factor=1.0),
    'ntk_by_parts': RopeType(lambda d, b, s, L, c, **_: (ntk_by_parts_inv_freq(d, b, s, L, c['beta_fast'],
                                                                              c['beta_slow']), 1.0), BANDS, check_bands),
    'yarn': RopeType(lambda d, b, s, L, c, **_: yarn_theta(d, b, s, L, c), YARN, check_yarn),
    'dynamic_yarn': RopeType(lambda d, b, s, L, l, c: yarn_theta(d, b, dynamic_yarn_scale(s, L, l), L, c),
                             YARN, check_yarn, dynamic=True, factor=1.0),
    'llama3': RopeType(lambda d, b, s, L, c, **_: (llama3_inv_freq(d, b, s, L, c['low_freq_factor'],
                                                                   c['high_freq_factor']), 1.0),
                       {'low_freq_factor': (float, 1.0), 'high_freq_factor': (float, 4.0)}, check_llama3),
    'longrope': RopeType(longrope_theta, {'short_factor': (list, None), 'long_factor': (list, None),
                                          'attention_factor': (float, None),
                                          'start_token_idx': (int, None), **PLACEMENT},  # n-hat (model.rope_tables)
                         check_longrope, dynamic=True),
    'proportional': RopeType(lambda d, b, s, c, **_: (proportional_inv_freq(d, b, c['partial_rotary_factor'], s), 1.0),
                             {'partial_rotary_factor': (float, 1.0)}, check_masks, needs_L=False, factor=1.0),
    'clip': RopeType(lambda d, b, L, c, **_: (clipped_inv_freq(d, b, c.get('max_wavelength', L)), 1.0),
                     {'max_wavelength': (float, None)}, check_masks, factor=1.0),  # theta' does not use the factor
    # engine-only variants (rope.py's last section): static, as vLLM and SGLang build them
    'yarn_log': RopeType(lambda d, b, s, L, c, **_: (yarn_log_inv_freq(d, b, s, L, c['beta_fast'], c['beta_slow']), 1.0),
                         BANDS, check_bands),  # Grok: no truncate key, no temperature on cos/sin
    'yarn_telechat': RopeType(lambda d, b, s, L, c, **_: (yarn_inv_freq(d, b, s, L, c['beta_fast'], c['beta_slow'],
                                                                        c['truncate']), telechat3_mscale(s)),
                              {**BANDS, 'truncate': (bool, True), **PLACEMENT}, check_bands),  # 0.07 is the class's
    'ntk_mixed': RopeType(lambda d, b, s, c, **_: (ntk_mixed_inv_freq(d, b, s, c['mixed_b']), 1.0),
                          {'mixed_b': (float, 1.0)}, check_engine_ntk, needs_L=False),  # 1: vLLM's plain 'ntk'
    'ntk_alpha': RopeType(lambda d, b, c, **_: (ntk_alpha_inv_freq(d, b, c['alpha']), 1.0), {'alpha': (float, 1000.0)},
                          check_engine_ntk, needs_L=False, factor=1.0),  # Hunyuan's alpha; theta' does not use the factor
}


ROPE_TYPES = tuple(ROPE_SCALING)
DYNAMIC_TYPES = tuple(t for t, row in ROPE_SCALING.items() if row.dynamic)
COMMON_KEYS = {'factor': (float, None), 'original_max_position_embeddings': (int, None),
               'layers': (str, None)}  # which layers it scales (SCALE_LAYERS; per-layer models, model.py)


def type_keys(rope_type):
    """The keys a type accepts besides rope_type, factor and original_max_position_embeddings: {name: (type, default)}."""
    return dict(ROPE_SCALING[rope_type].keys) if rope_type in ROPE_SCALING else {}


def all_type_keys():
    """Every per-type key of any type -> its type (what scripts offer as --flags)."""
    return {k: typ for row in ROPE_SCALING.values() for k, (typ, _) in row.keys.items()}


def _check_factors(v, bad):
    """A per-pair factor list (longrope's short_factor / long_factor) -> a new list of floats. Hugging Face asks for
    a list of numbers; each is also finite and > 0 here (theta_i / f_i). Not >= 1: that is the search's bound, not
    the format's. Its length is checked against head_dim in rope_inv_freq, where head_dim is known."""
    if not isinstance(v, (list, tuple)) or not v:
        bad("must be a non-empty list of numbers, one per pair")
    if any(isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0 for x in v):
        bad("every value must be a finite number > 0 (theta'_i = theta_i / f_i)")
    return [float(x) for x in v]


def _check_types(sc, allowed, bad):
    """The generic part of check_scaling: each key of the filled config sc of its declared type (floats made float,
    a per-pair list checked by _check_factors, a required list present) and inside its set or above its floor;
    bad(key, what it must be) raises."""
    for k, (typ, _) in allowed.items():
        if k not in sc:
            if typ is list:
                bad(k, "missing; give a list of numbers, one per pair (head_dim / 2 of them), e.g. from search_longrope.py")
            continue
        v = sc[k]
        if typ is bool and not isinstance(v, bool):
            bad(k, "must be True or False")
        if typ is float:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                bad(k, "must be a finite number")
            sc[k] = float(v)
        if typ is list:
            sc[k] = _check_factors(v, lambda want: bad(k, want))
        if k == 'layers' and v not in SCALE_LAYERS:
            bad(k, f"must be one of {', '.join(SCALE_LAYERS)} (the layers the scaling applies to)")
        if k == 'attention_factor_on' and v not in PLACEMENTS:
            bad(k, "must be 'all' (attention_factor^2 on the whole logit) or 'rotary' (on the pairs that turn only)")
        low = 1 if k == 'original_max_position_embeddings' else 0
        if typ is int and (isinstance(v, bool) or not isinstance(v, int) or v < low):
            bad(k, "must be a positive int (the training length L)" if low else "must be a whole number >= 0 "
                "(longrope's n-hat: the first positions, which keep plain RoPE; 0 = none)")


def check_scaling(scaling, base=None):
    """Validate a rope_scaling dict (Hugging Face key names); return a normalized copy with defaults filled in, or None
    for plain RoPE. Raises ValueError naming the bad field and what it accepts. Hugging Face's own forms are accepted
    too (lab/hf/config.py reads whole configs): 4.x 'type' for rope_type, and 5.x rope_parameters with
    partial_rotary_factor (1 only) and rope_theta inside, which must equal `base` (the model's rope_base)."""
    if scaling is None:
        return None
    if not isinstance(scaling, dict):
        raise ValueError(f"rope_scaling must be a dict or None, got {type(scaling).__name__}")
    if HF_ONLY_KEYS & set(scaling):
        scaling, theta = _hf_rope_dict(scaling)
        if theta is not None and theta != base:
            fix = (f"but rope_base = {base:g}; set rope_base={theta:g} or drop rope_theta" if base is not None else
                   "and the base lives in rope_base here; read the dict with lab.hf.config.from_hf, which returns "
                   "(rope_scaling, rope_theta)")
            raise ValueError(f"rope_scaling carries rope_theta = {theta:g} (Hugging Face's rope_parameters form) {fix}")
    t = scaling.get('rope_type')
    if t not in ROPE_SCALING:
        raise ValueError(f"rope_scaling['rope_type'] = {t!r} is missing or unknown; use one of {', '.join(ROPE_TYPES)}")
    allowed = {**COMMON_KEYS, **type_keys(t)}
    for k in scaling:
        if k != 'rope_type' and k not in allowed:
            raise ValueError(f"rope_scaling key {k!r} is not used by rope_type {t!r}; "
                             f"accepted keys: rope_type, {', '.join(allowed)}")
    row = ROPE_SCALING[t]
    sc = {'rope_type': t, **{k: default for k, (_, default) in allowed.items() if default is not None}}
    if row.factor is not None:
        sc['factor'] = row.factor
    sc.update(scaling)
    def bad(k, want):
        raise ValueError(f"rope_scaling['{k}'] = {reprlib.repr(sc.get(k))} for rope_type {t!r}: {want}")
    _check_types(sc, allowed, bad)
    if t != 'default' and 'factor' not in sc:
        bad('factor', "missing; set the scale s = L'/L (a number >= 1)")
    if sc.get('factor', 1.0) < 1:
        bad('factor', "must be >= 1 (s = L'/L; 1 means plain RoPE)")
    if row.needs_L and 'original_max_position_embeddings' not in sc:
        bad('original_max_position_embeddings', "missing; set it to the training length L")
    wrong = row.check(sc) if row.check else None  # the type's own rules, in its row of the table
    if wrong:
        bad(*wrong)
    if t == 'abf' and base is not None and not sc['new_base'] > base:  # (the one rule that needs the model's base)
        bad('new_base', f"must be above the model's rope_base = {base:g}: ABF raises the base (a lower one squeezes "
                        f"nothing and turns the slow pairs faster than training saw)")
    return sc


# --------------------------------------------------------------------------- per-layer positions (the 2025-26 designs)

class LayerSpec(NamedTuple):
    """One layer's positions: RoPE or none (NoPE), a sliding window of w keys (None: every earlier key), its base,
    and a chunk of c tokens (Llama 4's chunked local attention: query i sees keys j <= i with j // c == i // c); or,
    in place of attention, a short causal convolution over the last `conv` tokens (LFM2 / LFM3: lab/conv.py)."""
    rope: bool = True
    window: Optional[int] = None
    base: Optional[float] = None
    chunk: Optional[int] = None
    conv: Optional[int] = None

LAYER_KINDS = {'rope': ('w', 'c', 'base'), 'nope': ('w', 'c'), 'conv': ('k',)}  # each kind, the settings it takes
CONV_KERNEL = 3  # a conv layer's kernel unless k= says (LFM2's conv_L_cache; LFM3 ships 7)
SCALE_LAYERS = ('all', 'full', 'window')  # rope_scaling['layers']: the RoPE layers it applies to (Gemma 3: 'full';
# 'window': the local layers, a sliding window or a chunk)


def parse_layers(pattern, n_layer, base, block_size):
    """A layer pattern -> n_layer LayerSpecs. None: every layer RoPE at `base`, full attention (the default model).
    'rope:w=32,rope:w=32,rope:w=32,nope' = '3*rope:w=32,nope' (Command A's 3 windowed RoPE : 1 global NoPE);
    'rope:w=32:base=1e4,rope:base=1e6' (Gemma 3's local and global layers); '3*rope:c=32,nope' (Llama 4's 3 chunked
    RoPE : 1 global NoPE); 'conv,rope:w=32,conv,rope' (LFM3: short convolutions beside sliding and full attention; a
    conv layer has no position, 'conv:k=7' sets its kernel). A window, chunk or kernel must be shorter than L.
    Numbers are read as Python reads them and kept exactly (base=1234567 stays 1234567.0; 1E6 is 1e6)."""
    if pattern is None:
        return [LayerSpec(True, None, base)] * n_layer

    def refuse(why):
        raise ValueError(f"layers={pattern!r}: {why}; write each layer as rope[:w=W|:c=C][:base=B], "
                         f"nope[:w=W|:c=C] or conv[:k=K], comma-separated, n*... repeats (e.g. '3*rope:w=32,nope')")
    runs = []  # (count, LayerSpec): the repeats are counted before any list is built (a count of 10**9 is refused)
    for item in str(pattern).replace(' ', '').split(','):
        count, star, entry = item.rpartition('*')
        kind, *opts = entry.split(':')
        if kind not in LAYER_KINDS:
            refuse(f"{kind!r} is not a layer kind ({' | '.join(LAYER_KINDS)})")
        if star and not (re.fullmatch('[0-9]+', count) and int(count) >= 1):
            refuse(f"{item!r}: the repeat count {count!r} must be a whole number >= 1")
        got = {}
        for opt in opts:
            key, eq, value = opt.partition('=')
            if key not in LAYER_KINDS[kind]:
                takes = 'k (its kernel)' if kind == 'conv' else 'w or c' + (', and base' if kind == 'rope' else '')
                refuse(f"{item!r} has a setting {key!r}; a {kind} layer takes {takes}")
            if not value:
                refuse(f"{item!r} gives {key} no value")
            if key in got:
                refuse(f"{item!r} gives {key} twice ({got[key]} and {value}); give it once")
            got[key] = value
        w, c, k = got.get('w'), got.get('c'), got.get('k', str(CONV_KERNEL) if kind == 'conv' else None)
        if w is not None and c is not None:  # (a chunk inside a window, or the reverse, is neither design)
            refuse(f"{item!r} gives both a window w={w} and a chunk c={c}; a layer is windowed (w) or chunked (c): "
                   f"drop one")
        for key, what, v in (('w', 'window', w), ('c', 'chunk', c)):
            if v is not None and not (re.fullmatch('[0-9]+', v) and 1 <= int(v) < block_size):
                refuse(f"{what} {key}={v} must be a whole number in 1..{block_size - 1} (shorter than the training "
                       f"length L={block_size}; leave {key} out for full attention)")
        if k is not None and not (re.fullmatch('[0-9]+', k) and 2 <= int(k) < block_size):
            refuse(f"kernel k={k} must be a whole number in 2..{block_size - 1} (the conv sees k - 1 tokens back)")
        b = float(base)
        if 'base' in got:
            try:
                b = float(got['base'])
            except ValueError:
                b = math.nan
            if not (math.isfinite(b) and b > 1):
                refuse(f"base={got['base']} must be a finite number > 1")
        runs.append((int(count) if star else 1, LayerSpec(kind == 'rope', int(w) if w else None, b if kind == 'rope'
                                                          else None, int(c) if c else None, k and int(k))))
    total = sum(n for n, _ in runs)
    if total != n_layer:
        raise ValueError(f"layers={pattern!r} describes {total} layers but n_layer={n_layer}; give one per layer")
    if all(spec.conv for _, spec in runs):  # (n_layer x (k - 1) tokens back in all: no long context to study)
        refuse("every layer is a conv layer; keep an attention layer (rope or nope) beside them, as LFM2 and LFM3 do")
    return [spec for n, spec in runs for _ in range(n)]


def scaled_layers(specs, scaling):
    """Which layers a (checked) rope scaling applies to, a bool per layer: its 'layers' key, all by default (Gemma 3
    scales its full-attention layers only: 'full'). A scaling aimed at no RoPE layer is refused."""
    aim = (scaling or {}).get('layers', 'all')  # (a chunked layer is a local one, as a windowed one)
    hit = [s.rope and (aim == 'all' or (s.window is None and s.chunk is None) == (aim == 'full')) for s in specs]
    if scaling is not None and not any(hit):
        raise ValueError(f"rope_scaling is aimed at layers={aim!r}, but no such layer has RoPE; "
                         f"aim it at {' or '.join(repr(k) for k in SCALE_LAYERS if k != aim)}")
    return hit

# --------------------------------------------------------------------------- Hugging Face's forms

HF_ONLY_KEYS = {'type', 'rope_theta', 'partial_rotary_factor'}  # in HF rope dicts, never in this lab's

def _number(v, what, low):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not v > low:
        raise ValueError(f"{what} = {reprlib.repr(v)}: must be a finite number > {low:g}")
    return float(v)


def _hf_rope_dict(d):
    """A 4.x rope_scaling or 5.x rope_parameters dict -> (this lab's keys, rope_theta or None). 'type' becomes
    rope_type, null values are dropped (HF writes unset keys as null), partial rotation is refused."""
    sc = {k: v for k, v in d.items() if v is not None}
    legacy = sc.pop('type', None)
    if legacy is not None and sc.setdefault('rope_type', legacy) != legacy:
        raise ValueError(f"rope_scaling has type = {legacy!r} and rope_type = {sc['rope_type']!r}; give one")
    if 'rope_type' not in sc and set(sc) - {'rope_theta', 'partial_rotary_factor'}:  # (transformers reads it as plain)
        raise ValueError(f"the rope dict {reprlib.repr(d)} has {', '.join(sorted(set(sc) - {'rope_theta'}))} but no "
                         f"rope_type; name the type the keys belong to (e.g. 'rope_type': 'linear')")
    sc.setdefault('rope_type', 'default')
    theta = sc.pop('rope_theta', None)
    theta = None if theta is None else _number(theta, 'rope_theta', 1)
    p = sc.pop('partial_rotary_factor', 1.0) if sc['rope_type'] != 'proportional' else 1.0  # (proportional's own key)
    if _number(p, 'partial_rotary_factor', 0) != 1.0:
        raise ValueError(f"partial_rotary_factor = {p:g} with rope_type {sc['rope_type']!r}: GPT-NeoX's partial rotation "
                         f"has no counterpart here; rope_type 'proportional' rotates the first pairs (p-RoPE)")
    if sc['rope_type'] not in ROPE_SCALING:
        raise ValueError(f"Hugging Face rope_type {sc['rope_type']!r} has no counterpart here; "
                         f"use one of {', '.join(ROPE_TYPES)}")
    return sc, theta


def is_dynamic(scaling):
    """True for the types whose frequencies depend on the forward length (dynamic, dynamic_yarn, longrope)."""
    return scaling is not None and scaling.get('rope_type') in DYNAMIC_TYPES


def rope_inv_freq(head_dim, base=10000.0, scaling=None, seq_len=None, rotary_dim=None):
    """theta'_i for a config -> (inv_freq float32 [head_dim//2], attention_factor float).
    seq_len is the current length l, used by the dynamic types (None means l = L). Pure: nothing is cached,
    so a short input after a long one gets exactly the short input's frequencies. rotary_dim < head_dim: GPT-NeoX's
    partial rotation (model.py's partial_rotary_factor): the method runs on the first rotary_dim dims as if they were
    the head, the other pairs never turn (rope.neox_partial_inv_freq)."""
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim <= 0 or head_dim % 2:
        raise ValueError(f"head_dim = {head_dim!r}: must be a positive even int (n_embd / n_head)")
    if rotary_dim is not None and rotary_dim != head_dim:
        if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int) or not 0 < rotary_dim < head_dim \
                or rotary_dim % 2:
            raise ValueError(f"rotary_dim = {rotary_dim!r}: must be an even int in 2..head_dim = {head_dim}")
        inv, af = rope_inv_freq(rotary_dim, base, scaling, seq_len)
        return neox_partial_inv_freq(inv, head_dim), af
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not base > 1 or not math.isfinite(base):
        raise ValueError(f"base = {base!r}: must be a finite number > 1 (rope_base; 10000 is usual)")
    if seq_len is not None and seq_len < 0:
        raise ValueError(f"seq_len = {seq_len!r}: must be >= 0 (the current sequence length)")
    sc = check_scaling(scaling, base) or {'rope_type': 'default'}
    t = sc['rope_type']
    if t in ('ntk', 'dynamic', 'ntk_alpha') and head_dim < 4:
        raise ValueError(f"head_dim = {head_dim}: rope_type {t!r} needs head_dim >= 4 (b' uses d/(d-2))")
    inv, af = scaled_theta(head_dim, base, sc, seq_len)
    return inv.to(torch.float32), float(af)


def scaled_theta(head_dim, base, sc, seq_len=None):
    """theta'_i in float64 and the attention factor of a CHECKED config sc (check_scaling's output; None = plain),
    through the table's row for its type; seq_len None means l = L."""
    sc = sc or {'rope_type': 'default'}
    L = sc.get('original_max_position_embeddings')
    return ROPE_SCALING[sc['rope_type']].compute(d=head_dim, b=base, s=sc.get('factor', 1.0), L=L,
                                                 l=L if seq_len is None else seq_len, c=sc)

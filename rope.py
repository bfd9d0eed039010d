"""
RoPE and the ways to stretch it past the training length L, as small pure functions.

Notation: head dim d (even), pair i = 0 .. d/2-1, base b, training length L, scale s = L'/L >= 1,
current sequence length l. Plain RoPE turns pair i by m*theta_i at position m, theta_i = b^(-2i/d).
Wavelength lambda_i = 2*pi/theta_i; rotations within L: r_i = L/lambda_i. The pairs fall in three bands:
  high   r_i > beta_fast (32): many full turns inside L; every angle was seen, extrapolating is safe.
  middle in between.
  low    r_i < beta_slow (1): not even one turn inside L; angles past L were never seen -> squeeze.
Example d=128, b=1e4, L=4096: pair 0 turns 57.2958 deg/token (~652 turns in L); the last pair turns
0.0066164 deg/token (27.10 deg in all of L); pairs 0..45 complete a turn (boundary d*ln(L/2pi)/(2 ln b)
= 45.03). Each method below returns theta'_i (float64); rope_inv_freq dispatches and returns float32.
Run `python rope.py --head_dim 64 --L 256 --factor 4` to see every method side by side.
"""
import math
import reprlib

import torch

# --------------------------------------------------------------------------- the methods, in story order

def plain_inv_freq(head_dim, base):
    """Plain RoPE: theta_i = b^(-2i/d). Pair 0 is the fastest (1 rad/token), the last the slowest."""
    return base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)

def linear_inv_freq(head_dim, base, s):
    """PI (linear): theta'_i = theta_i / s, i.e. position m becomes m/s. Squeezes EVERY band: the low band
    is saved, but neighbouring tokens in the high band now differ by 1/s of the angle, hence fine-tuning."""
    return plain_inv_freq(head_dim, base) / s

def ntk_inv_freq(head_dim, base, s):
    """NTK-aware: raise the base, b' = b * s^(d/(d-2)), theta'_i = b'^(-2i/d). Pair 0 is unchanged and the
    last pair is exactly PI's (theta' = theta/s); in between the squeeze grows smoothly. It also squeezes
    the middle pairs that already turned fully within L (no need to)."""
    return plain_inv_freq(head_dim, base * s ** (head_dim / (head_dim - 2)))

def dynamic_inv_freq(head_dim, base, factor, L, seq_len):
    """Dynamic NTK: NTK-aware recomputed for every forward length l: s_l = max(1, l/L),
    b' = b * (a*s_l - a + 1)^(d/(d-2)) with a = factor (a = 1 is the plain rule s = l/L). For l <= L this
    is plain RoPE again. With a KV cache, keys rotated with an old base are wrong once the base changes:
    cache keys before rotation, or recompute them."""
    s_l = max(1.0, seq_len / L)
    return ntk_inv_freq(head_dim, base, factor * s_l - factor + 1)

def _ramp(x, lo, hi):
    """0 below lo, 1 above hi, linear in between."""
    return ((x - lo) / (hi - lo)).clamp(0.0, 1.0)

def _blend(theta, s, keep):
    """keep = 1: theta untouched (extrapolate); keep = 0: theta / s (PI); in between a mix."""
    return keep * theta + (1 - keep) * theta / s

def ntk_by_parts_inv_freq(head_dim, base, s, L, beta_fast=32.0, beta_slow=1.0):
    """NTK-by-parts (paper form): gamma(r) = ramp of the rotations r_i between alpha = beta_slow and
    beta = beta_fast; theta'_i = (1-gamma)*theta_i/s + gamma*theta_i. High band kept, low band pure PI,
    the middle ramps linearly in rotations. No temperature."""
    return _blend(plain_inv_freq(head_dim, base), s, _ramp(rotations_within(head_dim, base, L), beta_slow, beta_fast))

def yarn_correction_range(head_dim, base, L, beta_fast=32.0, beta_slow=1.0, truncate=True):
    """Pair indices where YaRN's ramp starts/ends: dim(n) = d*ln(L/(2*pi*n)) / (2 ln b) is the (fractional)
    pair that turns n times in L. low = floor(dim(beta_fast)), high = ceil(dim(beta_slow)) (no floor/ceil
    when truncate=False), clamped to [0, d-1]. L is always the ORIGINAL length. (20, 46) for d=128, L=4096."""
    dim = lambda n: head_dim * math.log(L / (2 * math.pi * n)) / (2 * math.log(base))
    low, high = dim(beta_fast), dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return float(max(low, 0)), float(min(high, head_dim - 1))

def yarn_inv_freq(head_dim, base, s, L, beta_fast=32.0, beta_slow=1.0, truncate=True):
    """YaRN frequencies (the form the authors and HF ship): ramp_i = clamp((i-low)/(high-low), 0, 1) over the
    pair index with (low, high) = yarn_correction_range; theta'_i = theta_i/s * ramp_i + theta_i * (1-ramp_i).
    Pairs i <= low (> beta_fast turns in L) untouched, i >= high (< beta_slow turns) pure PI.
    Small L: at L=128, d=32 pair 0 turns only L/2pi ~ 20 times, so with beta_fast=32 the high band is empty
    (only pair 0 survives, via the floor at 0); beta_fast ~ 4-8 works much better zero-shot there."""
    low, high = yarn_correction_range(head_dim, base, L, beta_fast, beta_slow, truncate)
    if high <= low:
        high = low + 0.001
    ramp = _ramp(torch.arange(head_dim // 2, dtype=torch.float64), low, high)
    return _blend(plain_inv_freq(head_dim, base), s, 1 - ramp)

def yarn_mscale(s, mscale=1.0):
    """YaRN temperature: 0.1 * mscale * ln(s) + 1 (1 for s <= 1); 1.2079442 at s=8. It multiplies cos AND
    sin, so every q.k logit grows by mscale^2 (= 1/t in softmax(q.k / (t*sqrt(d)))): longer inputs spread
    attention over more tokens, a sharper softmax counters that. Free at run time."""
    return 1.0 if s <= 1 else 0.1 * mscale * math.log(s) + 1.0

def yarn_attention_factor(s, scaling):
    """An explicit attention_factor wins; else DeepSeek-style yarn_mscale(s, mscale)/yarn_mscale(s, mscale_all_dim)
    when that pair is given and both are non-zero; else yarn_mscale(s). (Hugging Face falls back the same way
    when either is 0.)"""
    if 'attention_factor' in scaling:
        return float(scaling['attention_factor'])
    if scaling.get('mscale') and scaling.get('mscale_all_dim'):
        return yarn_mscale(s, scaling['mscale']) / yarn_mscale(s, scaling['mscale_all_dim'])
    return yarn_mscale(s)

def dynamic_yarn_scale(factor, L, seq_len):
    """Dynamic YaRN: YaRN (frequencies and mscale) with s_l = max(factor, l/L) recomputed per forward length.
    factor = 1 for a model never fine-tuned (plain up to L), the fine-tuned scale otherwise. This is how a
    model goes past the length it was scaled for; static YaRN degrades beyond s*L."""
    return max(factor, seq_len / L)

def llama3_inv_freq(head_dim, base, s, L, low_freq_factor=1.0, high_freq_factor=4.0):
    """Llama 3.1, in wavelengths: lambda < L/high_freq_factor keeps theta; lambda > L/low_freq_factor uses theta/s;
    in between smooth = (L/lambda - low)/(high - low), theta' = (1-smooth)*theta/s + smooth*theta.
    The same as NTK-by-parts with alpha = 1, beta = 4. No temperature."""
    theta = plain_inv_freq(head_dim, base)
    wavelen = 2 * math.pi / theta
    smooth = (L / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    out = torch.where(wavelen > L / low_freq_factor, theta / s, (1 - smooth) * theta / s + smooth * theta)
    return torch.where(wavelen < L / high_freq_factor, theta, out)

def longrope_inv_freq(head_dim, base, short_factor, long_factor, L, seq_len):
    """LongRoPE (Ding et al. 2024; Phi-3; Hugging Face 'longrope'): one rescale factor per pair, searched rather
    than drawn by a formula: theta'_i = theta_i / f_i with f = long_factor when the current length l > L, else
    short_factor (l <= L). The switch moves EVERY pair at once, so it is a dynamic type: keys cached with the
    short factors are stale once an input grows past L (recompute them, as for dynamic NTK). search_longrope.py
    finds long_factor for a model of this project."""
    f = long_factor if seq_len > L else short_factor
    for name, fs in (('short_factor', short_factor), ('long_factor', long_factor)):
        if len(fs) != head_dim // 2:
            raise ValueError(f"rope_scaling['{name}'] has {len(fs)} values but head_dim = {head_dim} has "
                             f"{head_dim // 2} pairs; give one factor per pair")
    return plain_inv_freq(head_dim, base) / torch.tensor(f, dtype=torch.float64)

def longrope_attention_factor(s, L):
    """LongRoPE's temperature: sqrt(1 + ln s / ln L) (1 for s <= 1); sqrt(9/7) = 1.1338934 at s=4, L=128.
    Like YaRN's mscale it multiplies cos and sin; as in Hugging Face and Phi-3 it depends on s alone, so it
    applies with the short factors too (l <= L). An explicit attention_factor overrides it."""
    return 1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(L))

# --------------------------------------------------------------------------- the one table of rope types

def _yarn(d, b, c, s):
    return yarn_inv_freq(d, b, s, c['original_max_position_embeddings'], c['beta_fast'], c['beta_slow'],
                         c['truncate']), yarn_attention_factor(s, c)

def _longrope(d, b, c, l):
    L = c['original_max_position_embeddings']
    af = c['attention_factor'] if 'attention_factor' in c else longrope_attention_factor(c['factor'], L)
    return longrope_inv_freq(d, b, c['short_factor'], c['long_factor'], L, l), af

_YARN_KEYS = {'beta_fast': (float, 32.0), 'beta_slow': (float, 1.0), 'truncate': (bool, True),
              'mscale': (float, None), 'mscale_all_dim': (float, None), 'attention_factor': (float, None)}

# rope_type -> (its own keys: name -> (type, default; None = optional, no default; a `list` key is a list of
#               numbers, one per pair, and is required: no default has the right length),
#               compute(head_dim, base, cfg, seq_len) -> (theta' float64, attention factor),
#               dynamic: depends on the forward length l).
# Every type also takes rope_type, factor (s) and original_max_position_embeddings (L). Adding a method is one
# function above plus one line here; scripts derive their per-type flags and the arm-spec parser from this table.
ROPE_SCALING = {
    'default': ({}, lambda d, b, c, l: (plain_inv_freq(d, b), 1.0), False),
    'linear': ({}, lambda d, b, c, l: (linear_inv_freq(d, b, c['factor']), 1.0), False),
    'ntk': ({}, lambda d, b, c, l: (ntk_inv_freq(d, b, c['factor']), 1.0), False),
    'dynamic': ({}, lambda d, b, c, l: (dynamic_inv_freq(d, b, c['factor'], c['original_max_position_embeddings'], l),
                                        1.0), True),
    'ntk_by_parts': ({'beta_fast': (float, 32.0), 'beta_slow': (float, 1.0)},
                     lambda d, b, c, l: (ntk_by_parts_inv_freq(d, b, c['factor'], c['original_max_position_embeddings'],
                                                               c['beta_fast'], c['beta_slow']), 1.0), False),
    'yarn': (_YARN_KEYS, lambda d, b, c, l: _yarn(d, b, c, c['factor']), False),
    'dynamic_yarn': (_YARN_KEYS, lambda d, b, c, l: _yarn(d, b, c, dynamic_yarn_scale(
        c['factor'], c['original_max_position_embeddings'], l)), True),
    'llama3': ({'low_freq_factor': (float, 1.0), 'high_freq_factor': (float, 4.0)},
               lambda d, b, c, l: (llama3_inv_freq(d, b, c['factor'], c['original_max_position_embeddings'],
                                                   c['low_freq_factor'], c['high_freq_factor']), 1.0), False),
    'longrope': ({'short_factor': (list, None), 'long_factor': (list, None), 'attention_factor': (float, None)},
                 _longrope, True),
}
ROPE_TYPES = tuple(ROPE_SCALING)
DYNAMIC_TYPES = tuple(t for t, (_, _, dyn) in ROPE_SCALING.items() if dyn)
COMMON_KEYS = {'factor': (float, None), 'original_max_position_embeddings': (int, None)}
ALIASES = {'plain': 'default'}  # an accepted second name for unscaled RoPE in arm specs


def type_keys(rope_type):
    """The keys a type accepts besides rope_type, factor and original_max_position_embeddings: {name: (type, default)}."""
    return dict(ROPE_SCALING[rope_type][0]) if rope_type in ROPE_SCALING else {}


def all_type_keys():
    """Every per-type key of any type -> its type (what scripts offer as --flags)."""
    return {k: typ for keys, _, _ in ROPE_SCALING.values() for k, (typ, _) in keys.items()}


def _check_factors(v, bad):
    """A per-pair factor list (longrope's short_factor / long_factor) -> a new list of floats. Hugging Face asks for
    a list of numbers; each is also finite and > 0 here (theta_i / f_i). Not >= 1: that is the search's bound, not
    the format's. Its length is checked against head_dim in rope_inv_freq, where head_dim is known."""
    if not isinstance(v, (list, tuple)) or not v:
        bad("must be a non-empty list of numbers, one per pair")
    if any(isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0 for x in v):
        bad("every value must be a finite number > 0 (theta'_i = theta_i / f_i)")
    return [float(x) for x in v]


def check_scaling(scaling):
    """Validate a rope_scaling dict (Hugging Face key names); return a normalized copy with defaults filled
    in, or None for plain RoPE. Raises ValueError naming the bad field and what it accepts."""
    if scaling is None:
        return None
    if not isinstance(scaling, dict):
        raise ValueError(f"rope_scaling must be a dict or None, got {type(scaling).__name__}")
    t = scaling.get('rope_type')
    if t not in ROPE_SCALING:
        raise ValueError(f"rope_scaling['rope_type'] = {t!r} is missing or unknown; use one of {', '.join(ROPE_TYPES)}")
    allowed = {**COMMON_KEYS, **type_keys(t)}
    for k in scaling:
        if k != 'rope_type' and k not in allowed:
            raise ValueError(f"rope_scaling key {k!r} is not used by rope_type {t!r}; "
                             f"accepted keys: rope_type, {', '.join(allowed)}")
    sc = {'rope_type': t, **{k: default for k, (_, default) in allowed.items() if default is not None}}
    sc.update(scaling)
    if t in ('dynamic', 'dynamic_yarn'):
        sc.setdefault('factor', 1.0)  # never fine-tuned: s = max(1, l/L)
    def bad(k, want):
        raise ValueError(f"rope_scaling['{k}'] = {reprlib.repr(sc.get(k))} for rope_type {t!r}: {want}")
    for k, (typ, _) in allowed.items():
        if k not in sc:
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
    for k, (typ, _) in allowed.items():
        if typ is list and k not in sc:
            bad(k, "missing; give a list of numbers, one per pair (head_dim / 2 of them), e.g. from search_longrope.py")
    if t != 'default' and 'factor' not in sc:
        bad('factor', "missing; set the scale s = L'/L (a number >= 1)")
    if sc.get('factor', 1.0) < 1:
        bad('factor', "must be >= 1 (s = L'/L; 1 means plain RoPE)")
    L = sc.get('original_max_position_embeddings')
    if L is None and t not in ('default', 'linear', 'ntk'):
        bad('original_max_position_embeddings', "missing; set it to the training length L")
    if L is not None and (isinstance(L, bool) or not isinstance(L, int) or L < 1):
        bad('original_max_position_embeddings', "must be a positive int (the training length L)")
    for k in ('beta_slow', 'attention_factor', 'low_freq_factor'):
        if k in sc and sc[k] <= 0:
            bad(k, "must be > 0")
    for k in ('mscale', 'mscale_all_dim'):
        if k in sc and sc[k] < 0:
            bad(k, "must be >= 0 (0 means: use the plain YaRN temperature, as Hugging Face does)")
    if sc.get('beta_fast', 1) <= sc.get('beta_slow', 0):
        bad('beta_fast', f"must be > beta_slow = {sc['beta_slow']} (rotations in L: fast band edge above slow)")
    if sc.get('low_freq_factor', 0) >= sc.get('high_freq_factor', 1):
        bad('low_freq_factor', f"must be < high_freq_factor = {sc['high_freq_factor']}")
    if ('mscale' in sc) != ('mscale_all_dim' in sc):
        bad('mscale_all_dim' if 'mscale' in sc else 'mscale', "mscale and mscale_all_dim must be given together")
    return sc


def is_dynamic(scaling):
    """True for the types whose frequencies depend on the forward length (dynamic, dynamic_yarn, longrope)."""
    return scaling is not None and scaling.get('rope_type') in DYNAMIC_TYPES


def rope_inv_freq(head_dim, base=10000.0, scaling=None, seq_len=None):
    """theta'_i for a config -> (inv_freq float32 [head_dim//2], attention_factor float).
    seq_len is the current length l, used by the dynamic types (None means l = L). Pure: nothing is cached,
    so a short input after a long one gets exactly the short input's frequencies."""
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim <= 0 or head_dim % 2:
        raise ValueError(f"head_dim = {head_dim!r}: must be a positive even int (n_embd / n_head)")
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not base > 1 or not math.isfinite(base):
        raise ValueError(f"base = {base!r}: must be a finite number > 1 (rope_base; 10000 is usual)")
    if seq_len is not None and seq_len < 0:
        raise ValueError(f"seq_len = {seq_len!r}: must be >= 0 (the current sequence length)")
    sc = check_scaling(scaling) or {'rope_type': 'default'}
    t = sc['rope_type']
    if t in ('ntk', 'dynamic') and head_dim < 4:
        raise ValueError(f"head_dim = {head_dim}: rope_type {t!r} needs head_dim >= 4 (b' uses d/(d-2))")
    l = sc.get('original_max_position_embeddings') if seq_len is None else seq_len
    inv, af = ROPE_SCALING[t][1](head_dim, base, sc, l)
    return inv.to(torch.float32), float(af)

# --------------------------------------------------------------------------- arm specs and names

def parse_value(key, text, typ):
    """'8' -> 8.0 for a float key, 'false' -> False for a bool key; ValueError naming the key otherwise."""
    try:
        if typ is bool:
            return {'true': True, 'false': False}[text.lower()]
        return typ(text)
    except (KeyError, ValueError):
        raise ValueError(f"{key}={text!r} is not a {typ.__name__}") from None


LIST_ARMS = ("a longrope arm comes from a run folder: search one with search_longrope.py, then evaluate it with "
             "eval.py --ckpt <folder> or fine-tune it with finetune_long.py --init_from=<folder> --rope_type=keep "
             "(finetune_long.py also takes --short_factor=[...] --long_factor=[...])")


def spec_settings(entry, pairs, keys):
    """['beta_fast=8', ...] of arm spec `entry` -> {key: value} typed by keys ({key: (type, ...)}); one-line errors."""
    given = {}
    for pair in pairs:
        key, _, val = pair.partition('=')
        if key not in keys or not val:
            raise ValueError(f"arm {entry!r}: {pair!r} should be key=value with key one of {', '.join(keys)}")
        if keys[key][0] is list:
            raise ValueError(f"arm {entry!r}: {key} is a list (one number per pair) and cannot be written in an "
                             f"arm spec; {LIST_ARMS}")
        if key in given:
            raise ValueError(f"arm {entry!r}: {key} is given twice; give it once")
        given[key] = parse_value(key, val, keys[key][0])
    return given


def parse_arm(entry, factor, L, flags=None):
    """One arm spec -> rope_scaling dict (None for unscaled RoPE).
    'yarn:beta_fast=8:attention_factor=1' with factor and L filling what the spec does not set. flags
    ({key: value}, e.g. a script's --beta_fast=8) go to the types that accept them. A key given twice (twice in
    the spec, or in the spec and as a flag) is an error. 'default' is unscaled RoPE ('plain' is an alias)."""
    rope_type, *pairs = entry.strip().split(':')
    rope_type = ALIASES.get(rope_type, rope_type)
    if rope_type not in ROPE_SCALING:
        raise ValueError(f"arm {entry!r}: rope type {rope_type!r} is unknown; use one of {', '.join(ROPE_TYPES)}")
    keys = {**COMMON_KEYS, **type_keys(rope_type)}
    given = spec_settings(entry, pairs, keys)
    for key, val in (flags or {}).items():
        if val is None or key not in keys:
            continue
        if key in given:
            raise ValueError(f"arm {entry!r} sets {key} and --{key}={val} sets it too; give it in one place")
        given[key] = val
    if rope_type == 'default':
        if given:
            raise ValueError(f"arm {entry!r}: unscaled RoPE takes no settings")
        return None
    missing = [k for k, (typ, _) in keys.items() if typ is list and k not in given]
    if missing:
        raise ValueError(f"arm {entry!r} needs {' and '.join(missing)} (one number per pair); {LIST_ARMS}")
    sc = {'rope_type': rope_type, 'factor': float(factor), 'original_max_position_embeddings': int(L)}
    sc.update(given)
    return check_scaling(sc)


def scaling_extras(sc):
    """The scalar settings of a config that differ from its type's defaults (not rope_type, factor or L, nor
    per-pair lists): {key: value}."""
    if sc is None or sc['rope_type'] == 'default':
        return {}
    keys = type_keys(sc['rope_type'])
    return {k: v for k, v in sc.items() if k in keys and keys[k][0] is not list and v != keys[k][1]}


def scaling_name(sc):
    """'yarn s=4 β_fast=8': the type, the scale, and the settings that differ from the table's defaults."""
    if sc is None or sc['rope_type'] == 'default':
        return 'default'
    greek = {'beta_fast': 'β_fast', 'beta_slow': 'β_slow'}
    extras = ''.join(f" {greek.get(k, k)}={v}" if isinstance(v, bool) else f" {greek.get(k, k)}={v:g}"
                     for k, v in scaling_extras(sc).items())
    f = sc.get('factor', 1.0)
    return sc['rope_type'] + ('' if is_dynamic(sc) and f == 1 else f" s={f:g}") + extras


def parse_arms(spec, factor, L, flags=None):
    """'default,linear,yarn:beta_fast=8' -> [(readable name, rope_scaling or None), ...], names unique."""
    arms = [parse_arm(e, factor, L, flags) for e in spec.split(',') if e.strip()]
    if not arms:
        raise ValueError(f"no arm in {spec!r}; list rope types like linear,ntk,yarn")
    names = [scaling_name(sc) for sc in arms]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise ValueError(f"arm {dup!r} is given twice; give each arm different settings")
    return list(zip(names, arms))


def slug(name):
    """A folder name for an arm name: 'yarn s=4 β_fast=8' -> 'yarn_s4_beta_fast8'."""
    return ''.join(c if c.isalnum() or c in '._-' else '_' for c in name.replace('β', 'beta').replace('=', '')).strip('_')

# --------------------------------------------------------------------------- tables and rotation

def rope_cos_sin(inv_freq, positions, attention_factor=1.0, dtype=None):
    """cos, sin tables [..., T, head_dim] in rotate-half layout (cat(freqs, freqs)), each multiplied by
    attention_factor. positions: a tensor of positions (ints or floats; may have batch dims) or an int T for
    0..T-1. Built in float32 with autocast off (in bf16, positions 256 and 257 are the same number), then cast
    to dtype if given. Build them for the length actually run; nothing here assumes a maximum."""
    device = inv_freq.device
    if isinstance(positions, int):
        positions = torch.arange(positions, device=device)
    with torch.autocast(device_type=device.type, enabled=False):
        freqs = positions.to(device=device, dtype=torch.float32)[..., None] * inv_freq.to(torch.float32)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos() * attention_factor, emb.sin() * attention_factor
    return (cos, sin) if dtype is None else (cos.to(dtype), sin.to(dtype))

def apply_rope(x, cos, sin):
    """Rotate x [..., T, head_dim] (rotate-half: pair i is (x[i], x[i + d/2]), as in HF Llama and litgpt):
    out = x*cos + cat(-x2, x1)*sin. The interleaved (complex) layout, pairs (x[2i], x[2i+1]), is the same
    function after permuting each head's q/k rows to cat(w[0::2], w[1::2]). Returns x's dtype."""
    if x.shape[-1] != cos.shape[-1]:
        raise ValueError(f"apply_rope: x has head_dim {x.shape[-1]} but cos/sin have {cos.shape[-1]}")
    x1, x2 = x.chunk(2, dim=-1)
    return (x * cos + torch.cat((-x2, x1), dim=-1) * sin).to(x.dtype)

# --------------------------------------------------------------------------- helpers for readers and plots

def wavelengths(head_dim, base):
    """lambda_i = 2*pi / theta_i: tokens per full turn of pair i."""
    return 2 * math.pi / plain_inv_freq(head_dim, base)

def rotations_within(head_dim, base, L):
    """r_i = L / lambda_i: full turns pair i makes within L tokens."""
    return L / wavelengths(head_dim, base)

def freq_ratio(head_dim, base, scaling, seq_len=None):
    """theta'_i / theta_i per pair for any config (1 = untouched, 1/s = PI)."""
    return rope_inv_freq(head_dim, base, scaling, seq_len)[0] / rope_inv_freq(head_dim, base)[0]

def bands(head_dim, base, L, beta_fast=32.0, beta_slow=1.0):
    """'high' (r_i > beta_fast), 'low' (r_i < beta_slow) or 'middle', per pair."""
    return ['high' if r > beta_fast else 'low' if r < beta_slow else 'middle'
            for r in rotations_within(head_dim, base, L).tolist()]

def critical_dimension(head_dim, base, L):
    """Where plain RoPE breaks (Liu et al. 2023): pairs that turn at least once within L have seen every angle; the
    dimensions that have are d_extra = 2*ceil((d/2) * log_b(L / 2pi)), and extrapolation is bounded near
    T_extra = 2pi * b^(d_extra / d), the wavelength of the first pair that never completed a turn.
    Returns (d_extra, T_extra); d = 32, b = 1e4, L = 128 gives (12, 198.7)."""
    d_extra = 2 * math.ceil(head_dim / 2 * math.log(L / (2 * math.pi)) / math.log(base))
    return d_extra, 2 * math.pi * base ** (d_extra / head_dim)

def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(description="Per pair: wavelength, turns within L, band, theta'/theta per type.")
    p.add_argument('--head_dim', type=int, default=64)
    p.add_argument('--L', type=int, default=256, help='training length')
    p.add_argument('--factor', type=float, default=4.0, help="scale s = L'/L")
    p.add_argument('--base', type=float, default=10000.0)
    p.add_argument('--beta_fast', type=float, default=32.0)
    p.add_argument('--beta_slow', type=float, default=1.0)
    p.add_argument('--seq_len', type=int, default=None, help='length l for the dynamic types (default s*L)')
    a = p.parse_args(argv)
    d, b, L, s = a.head_dim, a.base, a.L, a.factor
    l = a.seq_len if a.seq_len is not None else round(s * L)
    cols = []
    try:
        for t in ROPE_TYPES:
            if any(typ is list for typ, _ in type_keys(t).values()):
                continue  # longrope: searched factors, no formula to show (search_longrope.py)
            sc = {'rope_type': t, 'factor': 1.0 if t in DYNAMIC_TYPES else s, 'original_max_position_embeddings': L}
            if t in ('ntk_by_parts', 'yarn', 'dynamic_yarn'):
                sc.update(beta_fast=a.beta_fast, beta_slow=a.beta_slow)
            sc = None if t == 'default' else sc
            inv, af = rope_inv_freq(d, b, sc, l)
            cols.append((t, (inv / rope_inv_freq(d, b)[0]).tolist(), af))
        band = bands(d, b, L, a.beta_fast, a.beta_slow)
    except ValueError as e:
        raise SystemExit(f"error: {e}")
    lam, rot = wavelengths(d, b).tolist(), rotations_within(d, b, L).tolist()
    print(f"head_dim={d} base={b:g} L={L} s={s:g}; dynamic types at l={l} with factor 1; "
          f"bands: high r>{a.beta_fast:g}, low r<{a.beta_slow:g}; theta'/theta (1 = kept, {1 / s:.3f} = PI)")
    short = {'ntk_by_parts': 'by_parts', 'dynamic_yarn': 'dyn_yarn'}
    print(f"{'pair':>4} {'wavelen':>9} {'turns/L':>8} {'band':<6}" + ''.join(f"{short.get(t, t):>9}" for t, *_ in cols))
    for i in range(d // 2):
        print(f"{i:>4} {lam[i]:>9.1f} {rot[i]:>8.2f} {band[i]:<6}" + ''.join(f"{r[i]:>9.3f}" for _, r, _ in cols))
    print(f"{'attention factor (x cos, sin)':<30}" + ''.join(f"{af:>9.3f}" for _, _, af in cols))
    d_extra, t_extra = critical_dimension(d, b, L)
    print(f"critical dimension (Liu et al. 2023): d_extra = {d_extra} (pairs 0..{d_extra // 2 - 1} turn within L), "
          f"T_extra = {t_extra:.1f} tokens: plain RoPE is expected to break near there")

if __name__ == '__main__':
    main()

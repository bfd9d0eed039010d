"""
Support for rope.py that the core calls but a learner need not open: validating a rope config (Hugging Face key
names; HF's own 4.x / 5.x dicts and whole config.json files are read by from_hf), rope_inv_freq (validate, then
dispatch through rope.ROPE_SCALING), arm specs ('yarn:beta_fast=8') and their readable names and folder slugs,
per-pair helpers for plots, the critical dimension, and the side-by-side table:

    python rope_config.py --head_dim 64 --L 256 --factor 4

rope.py holds the formulas and the table; this module reads the table, so rope.py never imports it (no circle).
"""
import math
import reprlib

import torch

from rope import ROPE_SCALING, rotations_within, wavelengths

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


def check_scaling(scaling, base=None):
    """Validate a rope_scaling dict (Hugging Face key names); return a normalized copy with defaults filled
    in, or None for plain RoPE. Raises ValueError naming the bad field and what it accepts.
    Hugging Face's own forms are accepted too (see from_hf): 4.x 'type' for rope_type, and 5.x rope_parameters
    with partial_rotary_factor (1 only) and rope_theta inside, which must equal `base` (the model's rope_base)."""
    if scaling is None:
        return None
    if not isinstance(scaling, dict):
        raise ValueError(f"rope_scaling must be a dict or None, got {type(scaling).__name__}")
    if HF_ONLY_KEYS & set(scaling):
        scaling, theta = _hf_rope_dict(scaling)
        if theta is not None and theta != base:
            fix = (f"but rope_base = {base:g}; set rope_base={theta:g} or drop rope_theta" if base is not None else
                   "and the base lives in rope_base here; read the dict with rope_config.from_hf, which returns "
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
        if typ is int and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            bad(k, "must be a whole number >= 0 (longrope's n-hat: the first positions, which keep plain RoPE; "
                   "0 = none)")
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
    if sc.get('start_token_idx') == 0:
        del sc['start_token_idx']  # n-hat = 0 is every position scaled: the same config as without the key
    return sc


# --------------------------------------------------------------------------- Hugging Face's forms

HF_ONLY_KEYS = {'type', 'rope_theta', 'partial_rotary_factor'}  # in HF rope dicts, never in this lab's
HF_CONFIG_KEYS = ('rope_parameters', 'rope_scaling', 'max_position_embeddings', 'model_type', 'rotary_emb_base',
                  'rotary_pct', 'hidden_size')  # any of these (and no rope_type / type): a whole config.json


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
    sc.setdefault('rope_type', 'default')
    theta = sc.pop('rope_theta', None)
    theta = None if theta is None else _number(theta, 'rope_theta', 1)
    p = sc.pop('partial_rotary_factor', 1.0)
    if _number(p, 'partial_rotary_factor', 0) != 1.0:
        raise ValueError(f"partial_rotary_factor = {p:g}: this lab rotates every dimension of a head; only 1.0 "
                         f"(full rotation) has a counterpart here")
    if sc['rope_type'] not in ROPE_SCALING:
        raise ValueError(f"Hugging Face rope_type {sc['rope_type']!r} has no counterpart here; "
                         f"use one of {', '.join(ROPE_TYPES)}")
    return sc, theta


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
                             "this lab has one RoPE for every layer")
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
    sc = check_scaling(scaling, base) or {'rope_type': 'default'}
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
    entries = [e for e in spec.split(',') if e.strip()]
    arms = [parse_arm(e, factor, L, flags) for e in entries]
    if not arms:
        raise ValueError(f"no arm in {spec!r}; list rope types like linear,ntk,yarn")
    used = {k for e in entries for k in type_keys(ALIASES.get(e.split(':')[0].strip(), e.split(':')[0].strip()))}
    unused = [k for k, v in (flags or {}).items() if v is not None and k not in used]
    if unused:
        raise ValueError(f"--{unused[0]}={flags[unused[0]]} is used by none of the arms ({spec}); drop it or add an arm "
                         f"whose rope type takes it")
    names = [scaling_name(sc) for sc in arms]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise ValueError(f"arm {dup!r} is given twice; give each arm different settings")
    return list(zip(names, arms))


def slug(name):
    """A folder name for an arm name: 'yarn s=4 β_fast=8' -> 'yarn_s4_beta_fast8'."""
    return ''.join(c if c.isalnum() or c in '._-' else '_' for c in name.replace('β', 'beta').replace('=', '')).strip('_')

# --------------------------------------------------------------------------- helpers for readers and plots

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

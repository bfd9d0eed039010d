"""
Arm specs, the short strings scripts take for a rope config ('yarn:beta_fast=8', 'dynamic_yarn:factor=4'), and the
readable names ('yarn s=4 β_fast=8') and folder slugs ('yarn_s4_beta_fast8') made from a config. A spec's keys and
their types come from rope_config.py's table, so a new rope type needs nothing here.
"""
from lab.spec import LIST_ARMS, spec_settings  # (the rooms' specs are read the same way: lab/spec.py)
from rope_config import COMMON_KEYS, ROPE_SCALING, ROPE_TYPES, check_scaling, is_dynamic, parse_layers, type_keys

ALIASES = {'plain': 'default'}  # an accepted second name for unscaled RoPE in arm specs


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


def trained_in(ckpt):
    """The rope config trained into a checkpoint's weights, check_over_trained_in's `own`: a base's own (no
    base_checkpoint in its lineage: p-RoPE, clipped RoPE, ABF from scratch), or a fine-tune's clipped or p-RoPE type
    (kept from its base with --rope_type=keep, or tuned in: pairs it trained stopped); None otherwise."""
    sc = ckpt['model_args'].get('rope_scaling')
    derived = bool((ckpt.get('lineage') or {}).get('base_checkpoint'))
    return sc if not derived or (sc or {}).get('rope_type') in ('clip', 'proportional') else None


def check_over_trained_in(own, sc, source, new, fix):
    """A rope config switched on over a base whose rope type was trained in (own: the base's model_args rope_scaling,
    p-RoPE, clipped RoPE, ABF from scratch) replaces that type: model.set_rope_scaling puts `sc` in its place, so
    'linear' on a clipped base turns the pairs it trained stopped. rope.py composes no scaling over another, so only the
    base's own type with its own settings passes (its factor may move: p-RoPE's s is PI on the pairs that turn);
    anything else is refused in one line (ValueError) naming both types; new: how the user wrote it, fix: what to do."""
    if own is None or own.get('rope_type', 'default') == 'default':
        return
    t = own['rope_type']
    drop = {'factor'} | (set() if ROPE_SCALING[t].needs_L else {'original_max_position_embeddings'})
    same = lambda c: {k: v for k, v in c.items() if k not in drop}  # noqa: E731
    if sc is not None and sc['rope_type'] == t and same(check_scaling(sc)) == same(check_scaling(own)):
        return
    own_spec = ':'.join([t] + [f"{k}={v}" if isinstance(v, str) else f"{k}={v:g}"
                               for k, v in scaling_extras(own).items()])
    stops = ': its stopped pairs would turn again' if t in ('clip', 'proportional') else ''  # the types that stop pairs
    raise ValueError(f"{new} on {source}: that base was trained with rope_type {t!r} ({scaling_name(own)}), and "
                     f"{(sc or {}).get('rope_type', 'default')!r} would replace it, not compose with it (rope.py "
                     f"composes no scaling over a trained-in type{stops}); {fix}"
                     + (f", or scale its own type: {own_spec}:factor=S" if t == 'proportional' else ''))


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
    greek = {'beta_fast': 'β_fast', 'beta_slow': 'β_slow', 'new_base': "b'", 'partial_rotary_factor': 'p',
             'max_wavelength': 'λ_max'}
    always = {'abf': 'new_base', 'ntk_alpha': 'alpha'}.get(sc['rope_type'])  # the setting that is the method: shown
    shown = {**({always: sc[always]} if always else {}), **scaling_extras(sc)}
    on = shown.pop('attention_factor_on', 'all')  # where the attention factor goes: 'rotary' names the arm
    num = lambda k, v: f"{v:.3g}".replace('e+0', 'e').replace('e+', 'e') if k == 'new_base' else f"{v:g}"  # b'=1e6
    extras = ''.join(f" {greek.get(k, k)}={v}" if isinstance(v, (bool, str)) else f" {greek.get(k, k)}={num(k, v)}"
                     for k, v in shown.items())
    f, aim = sc.get('factor', 1.0), sc.get('layers', 'all')  # aim: the layers it scales, when not all of them
    return sc['rope_type'] + ('' if is_dynamic(sc) and f == 1 else f" s={f:g}") + extras + \
        ('' if aim == 'all' else f" on {aim}") + (' rotary-only' if on == 'rotary' else '')


def rope_tag(args, derived):
    """How an arm's RoPE shows in its name: its scaling, and a layer pattern in brackets ('yarn s=4 [3*rope:w=32,nope]');
    'drope' for a RoPE model with every position encoding removed (DroPE's recalibration: --layers=4*nope)."""
    lay, sc = args.get('layers'), args.get('rope_scaling')
    if lay and derived and sc is None and not any(s.rope for s in parse_layers(lay, args['n_layer'], args['rope_base'],
                                                                                args['block_size'])):
        return 'drope'
    return scaling_name(sc) + (f" [{lay}]" if lay else '')


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


def learned_tag(args, cfg=None):
    """Mistral Large 4's learned position parts in an arm's name, a base's or a fine-tune's (which may have switched
    them on over a plain base: finetune_long.py --learned_freqs=True --attention=logpos): ' learned-freqs' (RoPE's
    frequencies times exp(alpha), model.py) and ' logpos' (the log-position query scale, lab/temperature.py), then
    ' pos-lr30' when they trained at 30 x the learning rate (train.py's pos_lr_scale)."""
    logpos, scale = 'logpos' in (args.get('attention') or ''), (cfg or {}).get('pos_lr_scale', 1.0)
    tag = (' learned-freqs' if args.get('learned_freqs') else '') + (' logpos' if logpos else '')
    return tag + (f' pos-lr{scale:g}' if tag and scale != 1 else '')

"""
An arm spec's settings, read the one way every room reads them: 'rerope:window=64', 'crop:form=sliding',
'qtemp:shape=llama4:beta=0.1' (the rooms' own keys) as 'yarn:beta_fast=8' (rope_config.py's, lab/measure/arm_specs.py).
Below the methods: lab/position_maps.py, lab/crop.py and lab/temperature.py type their keys here, and arm_specs
reads a rope type's the same way.
"""

LIST_ARMS = ("a longrope arm comes from a run folder: search one with search_longrope.py, then evaluate it with "
             "eval.py --ckpt <folder> or fine-tune it with finetune_long.py --init_from=<folder> --rope_type=keep "
             "(finetune_long.py also takes --short_factor=[...] --long_factor=[...])")


def parse_value(key, text, typ):
    """'8' -> 8.0 for a float key, 'false' -> False for a bool key; ValueError naming the key otherwise."""
    try:
        if typ is bool:
            return {'true': True, 'false': False}[text.lower()]
        return typ(text)
    except (KeyError, ValueError):
        raise ValueError(f"{key}={text!r} is not a {typ.__name__}") from None


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

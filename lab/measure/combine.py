"""
Which features of an arm combine (issue 45): COMBINES states, for every pair of features an arm can carry, whether
the two run together (None: supported, and tests/test_combine_matrix.py runs it) or why not (one line, with the
fix). check_arm reads an arm's features and refuses the first pair the table refuses, and a name that misstates them.
"""
from itertools import combinations

from configurator import ConfigError
from lab.measure.arm_specs import check_over_trained_in
from lab.position_maps import position_map_name
from lab.temperature import temperature_name
from rope_config import is_dynamic

# The features, the more specific first (a dynamic scaling is a rope scaling too; its own refusal names it).
FEATURES = ('dynamic scaling', 'layer aim', 'rope scaling', 'trained-in rope type', 'layer pattern', 'position map',
            'sliding crop', 'truncated crop', 'query temperature', 'SSMax', 'sinks', 'gated', 'ALiBi', 'FIRE', 'CoPE')

NO_ROPE = "ALiBi has no RoPE"  # (the start of every ALiBi refusal of a RoPE feature)
FIRE_NO_ROPE = "FIRE has no RoPE (its learned bias interpolates past L by itself, lab/fire.py)"  # (FIRE's alike)
COPE_NO_ROPE = "CoPE has no RoPE (its positions count what its gates open on, lab/cope.py)"  # (CoPE's alike)
ONE_CLASS = "one attention class per model (GPTConfig.attention_class)"
CROP_DYNAMIC = ("a dynamic scale follows the input length, which a crop changes (sliding: the scale of p + 1 tokens "
                "seeing w keys; truncated: of w), so it is not the arm held to its window (self_crop_arms leaves it "
                "out); crop a static scaling")
MAP_CROP = ("a position map replaces the attention a crop masks (arm_form would run one of them and drop the other; "
            "self_crop_arms leaves maps out); evaluate them as two arms")

_TABLE = {
    ('dynamic scaling', 'layer aim'): None,
    ('dynamic scaling', 'rope scaling'): None,  # (a dynamic scaling is one)
    ('dynamic scaling', 'trained-in rope type'): None,  # the base's own dynamic type, run as trained
    ('dynamic scaling', 'layer pattern'): None,
    ('dynamic scaling', 'position map'): "a dynamic scale follows the forward length, for distances the map no longer "
                                         "produces (lab/position_maps.py); map a static scaling",
    ('dynamic scaling', 'sliding crop'): CROP_DYNAMIC,
    ('dynamic scaling', 'truncated crop'): CROP_DYNAMIC,
    ('dynamic scaling', 'query temperature'): None,
    ('dynamic scaling', 'SSMax'): None,
    ('dynamic scaling', 'sinks'): None,
    ('dynamic scaling', 'gated'): None,
    ('dynamic scaling', 'ALiBi'): f"{NO_ROPE}, so no dynamic scale; evaluate the ALiBi model as trained",
    ('dynamic scaling', 'FIRE'): f"{FIRE_NO_ROPE}, so no dynamic scale; evaluate the FIRE model as trained",
    ('dynamic scaling', 'CoPE'): f"{COPE_NO_ROPE}, so no dynamic scale; evaluate the CoPE model as trained",
    ('layer aim', 'rope scaling'): None,  # rope_scaling['layers'] = full | window
    ('layer aim', 'trained-in rope type'): None,
    ('layer aim', 'layer pattern'): None,
    ('layer aim', 'position map'): None,  # the map runs each layer's own group (mapped_logits)
    ('layer aim', 'sliding crop'): None,
    ('layer aim', 'truncated crop'): None,
    ('layer aim', 'query temperature'): None,  # the temperature's own aim: rope | nope
    ('layer aim', 'SSMax'): None,
    ('layer aim', 'sinks'): None,
    ('layer aim', 'gated'): None,
    ('layer aim', 'ALiBi'): None,  # a temperature on 'nope' scales every ALiBi layer (aimed_layers refuses 'rope')
    ('layer aim', 'FIRE'): None,  # (FIRE's alike)
    ('layer aim', 'CoPE'): None,  # (CoPE's alike)
    ('rope scaling', 'trained-in rope type'): "a scaling replaces a trained-in rope type, rope.py composes none "
                                              "over it (check_over_trained_in); evaluate the base as trained "
                                              "('default') or scale its own type",
    ('rope scaling', 'layer pattern'): None,
    ('rope scaling', 'position map'): None,  # a map over a fine-tuned scaled model (mapped_arms)
    ('rope scaling', 'sliding crop'): None,
    ('rope scaling', 'truncated crop'): None,
    ('rope scaling', 'query temperature'): None,
    ('rope scaling', 'SSMax'): None,
    ('rope scaling', 'sinks'): None,
    ('rope scaling', 'gated'): None,
    ('rope scaling', 'ALiBi'): f"{NO_ROPE} to scale (--rope_types needs a rope model); evaluate it as trained",
    ('rope scaling', 'FIRE'): f"{FIRE_NO_ROPE} to scale (--rope_types needs a rope model); evaluate it as trained",
    ('rope scaling', 'CoPE'): f"{COPE_NO_ROPE} to scale (--rope_types needs a rope model); evaluate it as trained",
    ('trained-in rope type', 'layer pattern'): None,
    ('trained-in rope type', 'position map'): None,  # the map turns by the model's own (trained-in) frequencies
    ('trained-in rope type', 'sliding crop'): None,
    ('trained-in rope type', 'truncated crop'): None,
    ('trained-in rope type', 'query temperature'): None,
    ('trained-in rope type', 'SSMax'): None,
    ('trained-in rope type', 'sinks'): None,
    ('trained-in rope type', 'gated'): None,
    ('trained-in rope type', 'ALiBi'): f"{NO_ROPE}, so no rope type is trained into it (GPTConfig refuses "
                                       f"rope_scaling without pos_emb='rope'); drop rope_scaling",
    ('trained-in rope type', 'FIRE'): f"{FIRE_NO_ROPE}, so no rope type is trained into it (GPTConfig refuses "
                                      f"rope_scaling without pos_emb='rope'); drop rope_scaling",
    ('trained-in rope type', 'CoPE'): f"{COPE_NO_ROPE}, so no rope type is trained into it (GPTConfig refuses "
                                      f"rope_scaling without pos_emb='rope'); drop rope_scaling",
    # (a pattern's windowed and chunked layers alike: tests/test_chunked.py builds each pair with chunks by hand)
    ('layer pattern', 'position map'): None,  # NoPE layers keep their own scores, windows and chunks their masks
    ('layer pattern', 'sliding crop'): None,  # a chunk and the crop's window both mask
    ('layer pattern', 'truncated crop'): None,  # a chunked layer's chunks count from the cut (lab/crop.py)
    ('layer pattern', 'query temperature'): None,  # n, the keys a query sees: its chunk's (lab.temperature.keys_seen)
    ('layer pattern', 'SSMax'): None,
    ('layer pattern', 'sinks'): None,
    ('layer pattern', 'gated'): None,
    ('layer pattern', 'ALiBi'): f"{NO_ROPE} and a layer pattern sets RoPE per layer (GPTConfig); use pos_emb='rope' "
                                f"for a pattern",
    ('layer pattern', 'FIRE'): f"{FIRE_NO_ROPE} and a layer pattern sets RoPE per layer (GPTConfig); use "
                               f"pos_emb='rope' for a pattern",
    ('layer pattern', 'CoPE'): f"{COPE_NO_ROPE} and a layer pattern sets RoPE per layer (GPTConfig); use "
                               f"pos_emb='rope' for a pattern",
    ('position map', 'sliding crop'): MAP_CROP,
    ('position map', 'truncated crop'): MAP_CROP,
    ('position map', 'query temperature'): None,
    ('position map', 'SSMax'): "a map scores with plain RoPE dot products and would drop SSMax's own scores "
                               "(mapped_logits); evaluate the SSMax model without a map",
    ('position map', 'sinks'): None,  # the sink joins the mapped scores (chunked_attention)
    ('position map', 'gated'): None,  # the gate multiplies what mapped_attention returns
    ('position map', 'ALiBi'): f"{NO_ROPE} for a map to re-rotate (mapped_logits); evaluate it without a map",
    ('position map', 'FIRE'): f"{FIRE_NO_ROPE} for a map to re-rotate (mapped_logits); evaluate it without a map",
    ('position map', 'CoPE'): f"{COPE_NO_ROPE} for a map to re-rotate (mapped_logits); evaluate it without a map",
    ('sliding crop', 'truncated crop'): None,  # one arm has one form; form=both makes two, equal on one layer
    ('sliding crop', 'query temperature'): None,
    ('sliding crop', 'SSMax'): None,  # ln n counts the keys the crop leaves
    ('sliding crop', 'sinks'): None,
    ('sliding crop', 'gated'): None,  # the gate multiplies what window_attention returns
    ('sliding crop', 'ALiBi'): None,
    ('sliding crop', 'FIRE'): None,  # at the full model's normaliser ψ(max(L_thr, p)): the forms differ (lab/crop.py)
    ('sliding crop', 'CoPE'): None,  # key j's position counts keys j..i, all in the window: the forms agree (one layer)
    ('truncated crop', 'query temperature'): None,  # at the true positions of the cut input's tokens
    ('truncated crop', 'SSMax'): None,
    ('truncated crop', 'sinks'): None,
    ('truncated crop', 'gated'): None,  # (GPT._last_layer_at: the gate takes the rows of the queries asked for)
    ('truncated crop', 'ALiBi'): None,
    ('truncated crop', 'FIRE'): None,  # (FIRE's attend(at=) builds the bias at the positions asked for)
    ('truncated crop', 'CoPE'): None,  # (CoPE's attend(at=) counts the gates of the queries asked for)
    ('query temperature', 'SSMax'): None,
    ('query temperature', 'sinks'): None,
    ('query temperature', 'gated'): None,  # the queries are scaled before attention, the gate acts after it
    ('query temperature', 'ALiBi'): None,
    ('query temperature', 'FIRE'): None,  # the queries are scaled, then FIRE's own attention adds its bias
    ('query temperature', 'CoPE'): None,  # the scaled queries sharpen CoPE's gates too: the positions move with it
    ('SSMax', 'sinks'): f"{ONE_CLASS} and none has both (model.ATTENTION); train one or the other",
    ('SSMax', 'gated'): f"{ONE_CLASS} and none has both (model.ATTENTION); train one or the other",
    ('sinks', 'gated'): f"{ONE_CLASS} and none has both (model.ATTENTION); train one or the other (the paper's "
                        f"gate is itself a way out of the first-token sink)",
}
_DROPPED = {'SSMax': ('SSMax', 'SSMax'), 'sinks': ('the sinks', 'sinks'), 'gated': ('the gate', 'gated attention')}
_BIASES = {'ALiBi': 'alibi', 'FIRE': 'fire', 'CoPE': 'cope'}  # the position encodings that bring an attention class
_TABLE.update({(cls, bias): f"{ONE_CLASS}: pos_emb='{pe}' takes it, so {what} would be dropped (GPTConfig refuses "
                            f"it); train {trained} on RoPE or NoPE"
               for cls, (what, trained) in _DROPPED.items() for bias, pe in _BIASES.items()})
_TABLE.update({(a, b): "one position encoding per model (GPTConfig.pos_emb) and none has both (model.POS_EMBS); "
                       "train one or the other" for i, a in enumerate(_BIASES) for b in list(_BIASES)[i + 1:]})
COMBINES = {frozenset(pair): why for pair, why in _TABLE.items()}  # {frozenset of two FEATURES: None | why}


def runs_own_type(own, sc):
    """True when the arm's scaling sc is the trained-in type `own` itself (its factor may move: p-RoPE's s), which
    check_over_trained_in lets through; a scaling that replaces it is the feature 'rope scaling'."""
    try:
        check_over_trained_in(own, sc, '', '', '')
    except ValueError:
        return False
    return True


def aimed(config):
    """True when a scaling or temperature config aims at some layers only (its 'layers' is not 'all')."""
    return (config or {}).get('layers', 'all') != 'all'


def arm_features(arm):
    """The FEATURES an arm carries, in the table's order: from its fields (scaling, position_map, crop,
    temperature) and its checkpoint's model_args (trained-in rope type, layer pattern, attention class). A rope type
    is trained in when the weights were trained from scratch with it (a base: no base_checkpoint)."""
    args = (arm.get('ckpt') or {}).get('model_args') or {}
    own, sc, temp = args.get('rope_scaling'), arm.get('scaling'), arm.get('temperature')
    scaled = sc is not None and sc.get('rope_type', 'default') != 'default'
    trained_in = own is not None and own.get('rope_type', 'default') != 'default' and not arm.get('base_checkpoint')
    attention, form = args.get('attention') or 'causal', (arm.get('crop') or {}).get('form')
    on = {'dynamic scaling': is_dynamic(sc), 'layer aim': aimed(sc) or aimed(temp),
          'rope scaling': scaled and not (trained_in and runs_own_type(own, sc)),
          'trained-in rope type': trained_in, 'layer pattern': bool(args.get('layers')),
          'position map': bool(arm.get('position_map')), 'sliding crop': form == 'sliding',
          'truncated crop': form == 'truncated', 'query temperature': bool(temp),
          'SSMax': 'ssmax' in attention, 'sinks': 'sinks' in attention, 'gated': 'gated' in attention,
          'ALiBi': 'alibi' in (args.get('pos_emb') or ''), 'FIRE': 'fire' in (args.get('pos_emb') or ''),
          'CoPE': 'cope' in (args.get('pos_emb') or '')}
    return [f for f in FEATURES if on[f]]


def refused_pair(features):
    """The first pair of `features` (in FEATURES order) that COMBINES refuses, as (a, b, why), or None."""
    return next(((a, b, COMBINES[frozenset((a, b))]) for a, b in combinations(features, 2)
                 if COMBINES[frozenset((a, b))]), None)


def misnamed(arm):
    """Why the arm's name misstates what it carries (one phrase), or None: 'held to' without a crop; a crop whose
    window or form, a position map or a temperature the name does not show (a self-crop: 'held to W (form)')."""
    name, crop, pm, temp = arm.get('name') or '', arm.get('crop'), arm.get('position_map'), arm.get('temperature')
    if 'held to' in name and not crop:
        return "the name says 'held to' and the arm has no crop"
    if crop:
        shown = f"held to {crop['window']} ({crop['form']})" if arm.get('self_crop_of') else f"w={crop['window']}"
        if shown not in name or f"({crop['form']})" not in name:
            return f"its crop {crop} is not in the name (it should show {shown!r})"
    if pm and position_map_name(pm) not in name:
        return f"its position map {position_map_name(pm)!r} is not in the name"
    if temp and temperature_name(temp) not in name:
        return f"its temperature {temperature_name(temp)!r} is not in the name"
    return None


def check_arm(arm):
    """Refuse an arm (ConfigError, one line) that carries a pair of features COMBINES refuses, naming both and the
    fix, or whose name misstates its crop, position map or temperature. Returns the arm's features."""
    features = arm_features(arm)
    pair = refused_pair(features)
    if pair:
        a, b, why = pair
        raise ConfigError(f"arm {arm.get('name')!r} combines {a} and {b}, which do not combine: {why}")
    wrong = misnamed(arm)
    if wrong:
        raise ConfigError(f"arm {arm.get('name')!r}: {wrong}; name the arm by what it runs (lab.crop.crop_name, "
                          f"self_crop_arms, position_map_name, with_temperature)")
    return features

"""
Which features of an arm combine (issue 45): COMBINES states, for every pair of features an arm can carry, whether
the two run together (None: supported, and tests/test_combine_matrix.py runs it) or why not (one line, with the
fix). check_arm reads an arm's features and refuses the first pair the table refuses, and a name that misstates them.

The table is not spelled out pair by pair: a few rules refuse groups of pairs, a short list of exceptions refuses
single pairs, and every other pair is supported (None). The rules (_refusal):
  1. no RoPE: a bias encoding (_BIASES: ALiBi, FIRE, CoPE) and Inkling-2's attention (_NO_ROPE) refuse every RoPE
     feature (_ROPE_FEATURES: dynamic scaling, rope scaling, trained-in rope type, layer pattern, position map), with
     their own NO_ROPE / FIRE_NO_ROPE / COPE_NO_ROPE / INKLING_NO_ROPE and the feature's own tail;
  2. one position encoding per model: two bias encodings refuse each other;
  3. ONE_CLASS: one attention class per model: two classes (_CLASSES: SSMax, sinks, gated, logpos, FoPE, Inkling)
     refuse each other, and a bias encoding (whose pos_emb brings its own class) refuses each class;
  4. MAP_CROP: a position map refuses each crop (_CROPS: sliding, truncated);
  5. CROP_DYNAMIC: a dynamic scaling refuses each crop;
  6. conv layers (lab/conv.py) sit beside attention='causal' only: they refuse each class (CONV_CLASS) and, as a
     layer pattern, each bias encoding (rule 1's layer-pattern refusal).
The exceptions (_EXCEPTIONS, which win over the rules): dynamic scaling + position map, rope scaling + trained-in
rope type, position map + SSMax / logpos / FoPE, sinks + gated (ONE_CLASS with a note on the paper's gate), dynamic
scaling + FoPE, and Inkling + trained-in rope type (its own fix) / layer pattern (supported: its NoPE layers and
windows come in one).
Issue 63's designs: logpos (lab/temperature.py's log-position query scale, a base's or a fine-tune's class), FoPE
(lab/fope.py, a class on its trained-in clip), Inkling (lab/inkling.py, a class without RoPE) and conv layers
(lab/conv.py, a layer kind in the pattern) are features. Not one, as it conflicts with nothing an arm carries:
  learned RoPE frequencies (learned_freqs): every reader of RoPE's frequencies (scalings, maps, the crop's at=cache,
  the KV cache) takes model.rope_freqs, theta * exp(alpha); GPTConfig refuses them without pos_emb='rope'.
A new feature goes into FEATURES (and arm_features) plus one line in the rule's group it belongs to (a RoPE feature
with its tail in _ROPE_FEATURES, a bias encoding in _BIASES, an attention class in _CLASSES, one without RoPE in
_NO_ROPE too, a crop in _CROPS), or, where it combines with everything, nowhere else; a pair that no rule states goes
into _EXCEPTIONS.
tests/test_combine_rules.py pins every verdict to tests/fixtures/combine_table.json.
"""
from itertools import combinations

from configurator import ConfigError
from lab.measure.arm_specs import check_over_trained_in
from lab.position_maps import position_map_name
from lab.temperature import temperature_name
from rope_config import is_dynamic

# The features, the more specific first (a dynamic scaling is a rope scaling too, a FoPE base has a trained-in clip,
# conv layers are a layer pattern: their own refusals name them).
FEATURES = ('dynamic scaling', 'layer aim', 'rope scaling', 'FoPE', 'trained-in rope type', 'conv layers',
            'layer pattern', 'position map', 'sliding crop', 'truncated crop', 'query temperature', 'SSMax', 'sinks',
            'gated', 'logpos', 'ALiBi', 'FIRE', 'CoPE', 'Inkling')

NO_ROPE = "ALiBi has no RoPE"  # (the start of every ALiBi refusal of a RoPE feature)
FIRE_NO_ROPE = "FIRE has no RoPE (its learned bias interpolates past L by itself, lab/fire.py)"  # (FIRE's alike)
COPE_NO_ROPE = "CoPE has no RoPE (its positions count what its gates open on, lab/cope.py)"  # (CoPE's alike)
INKLING_NO_ROPE = "Inkling has no RoPE (its bias mixes learned profiles over the distance, lab/inkling.py)"
CONV_CLASS = ("a short convolution is a layer kind beside attention='causal' only (GPTConfig, lab/conv.py); train the "
              "class on a pattern without conv layers, or the convs beside causal attention")
ONE_CLASS = "one attention class per model (GPTConfig.attention_class)"
CROP_DYNAMIC = ("a dynamic scale follows the input length, which a crop changes (sliding: the scale of p + 1 tokens "
                "seeing w keys; truncated: of w), so it is not the arm held to its window (self_crop_arms leaves it "
                "out); crop a static scaling")
MAP_CROP = ("a position map replaces the attention a crop masks (arm_form would run one of them and drop the other; "
            "self_crop_arms leaves maps out); evaluate them as two arms")
ONE_POS_EMB = ("one position encoding per model (GPTConfig.pos_emb) and none has both (model.POS_EMBS); train one or "
               "the other")
_BOTH_CLASSES = f"{ONE_CLASS} and none has both (model.ATTENTION); train one or the other"

# rule 1: the RoPE features, each with the tail of a bias encoding's refusal ({bias}: the encoding's name)
_ROPE_FEATURES = {
    'dynamic scaling': ", so no dynamic scale; evaluate the {bias} model as trained",
    'rope scaling': " to scale (--rope_types needs a rope model); evaluate it as trained",
    'trained-in rope type': ", so no rope type is trained into it (GPTConfig refuses rope_scaling without "
                            "pos_emb='rope'); drop rope_scaling",
    'layer pattern': " and a layer pattern sets RoPE per layer (GPTConfig); use pos_emb='rope' for a pattern",
    'position map': " for a map to re-rotate (mapped_logits); evaluate it without a map",
}
# rules 1-3: the bias encodings, each with (its pos_emb, the start of its no-RoPE refusal); each brings its own class
_BIASES = {'ALiBi': ('alibi', NO_ROPE), 'FIRE': ('fire', FIRE_NO_ROPE), 'CoPE': ('cope', COPE_NO_ROPE)}
_NO_ROPE = {**{b: why for b, (_, why) in _BIASES.items()}, 'Inkling': INKLING_NO_ROPE}  # rule 1: what has no RoPE
# rule 3: the attention classes, each with (what a bias encoding would drop, what to train instead)
_CLASSES = {'SSMax': ('SSMax', 'SSMax on RoPE or NoPE'), 'sinks': ('the sinks', 'sinks on RoPE or NoPE'),
            'gated': ('the gate', 'gated attention on RoPE or NoPE'),
            'logpos': ('the log-position scale', 'logpos on RoPE or NoPE'),
            'FoPE': ("FoPE's mixing", 'FoPE on clipped RoPE'), 'Inkling': ("Inkling's bias", 'Inkling on NoPE')}
# rules 4-5: the crops
_CROPS = ('sliding crop', 'truncated crop')


def _map_drops(scores, model):
    """A position map scores with plain RoPE dot products: what a class that scores its own way loses under one."""
    return (f"a map scores with plain RoPE dot products and would drop {scores} (mapped_logits); evaluate the {model} "
            f"model without a map")


# the pairs no rule states (they win over the rules)
_EXCEPTIONS = {
    frozenset(('dynamic scaling', 'position map')): "a dynamic scale follows the forward length, for distances the "
                                                    "map no longer produces (lab/position_maps.py); map a static "
                                                    "scaling",
    frozenset(('rope scaling', 'trained-in rope type')): "a scaling replaces a trained-in rope type, rope.py composes "
                                                         "none over it (check_over_trained_in); evaluate the base as "
                                                         "trained ('default') or scale its own type",
    frozenset(('position map', 'SSMax')): _map_drops("SSMax's own scores", 'SSMax'),
    frozenset(('sinks', 'gated')): f"{_BOTH_CLASSES} (the paper's gate is itself a way out of the first-token sink)",
    frozenset(('position map', 'logpos')): _map_drops("the log-position scale's own scores", 'logpos'),
    frozenset(('position map', 'FoPE')): "a map re-rotates q and k by plain RoPE, R(a)R(b) = R(a + b), which FoPE's "
                                         "mixed tables do not obey (rope_relative, mapped_logits); evaluate the FoPE "
                                         "model without a map",
    frozenset(('dynamic scaling', 'FoPE')): "FoPE mixes the tables of its trained-in clip, which a dynamic scale would "
                                            "replace and turn its stopped pairs again (check_over_trained_in); "
                                            "evaluate FoPE as trained",
    frozenset(('trained-in rope type', 'Inkling')): f"{INKLING_NO_ROPE}, so no rope type is trained into it "
                                                    "(GPTConfig refuses a rope_scaling on a model without a RoPE "
                                                    "layer); drop rope_scaling",
    frozenset(('layer pattern', 'Inkling')): None,  # supported: its NoPE layers and their windows are a pattern
}
# Supported pairs worth a word (each run by tests/test_combine_matrix.py):
#   dynamic scaling + rope scaling: a dynamic scaling is one; + trained-in rope type: the base's own dynamic type,
#     run as trained. layer aim + rope scaling: rope_scaling['layers'] = full | window; + query temperature: the
#     temperature's own aim, rope | nope; + position map: the map runs each layer's own group (mapped_logits);
#     + ALiBi/FIRE/CoPE: a temperature on 'nope' scales every layer (aimed_layers refuses 'rope').
#   rope scaling + position map: a map over a fine-tuned scaled model (mapped_arms). trained-in rope type + position
#     map: the map turns by the model's own (trained-in) frequencies.
#   layer pattern (its windowed and chunked layers alike: tests/test_chunked.py builds each pair with chunks by hand)
#     + position map: NoPE layers keep their own scores, windows and chunks their masks; + sliding crop: a chunk and
#     the crop's window both mask; + truncated crop: a chunked layer's chunks count from the cut (lab/crop.py);
#     + query temperature: n, the keys a query sees, is its chunk's (lab.temperature.keys_seen).
#   position map + sinks: the sink joins the mapped scores (chunked_attention); + gated: the gate multiplies what
#     mapped_attention returns.
#   sliding crop + truncated crop: one arm has one form; form=both makes two, equal on one layer. sliding crop
#     + SSMax: ln n counts the keys the crop leaves; + gated: the gate multiplies what window_attention returns;
#     + FIRE: at the full model's normaliser psi(max(L_thr, p)), the forms differ (lab/crop.py); + CoPE: key j's
#     position counts keys j..i, all in the window, the forms agree (one layer).
#   truncated crop + query temperature: at the true positions of the cut input's tokens; + gated: GPT._last_layer_at
#     gives the gate the rows of the queries asked for; + FIRE/CoPE: attend(at=) builds the bias / counts the gates
#     at the positions asked for.
#   issue 63's: rope scaling + FoPE: a fine-tune of the FoPE base's own clip (finetune_long --rope_type=keep; a
#     zero-shot scaling over the base is rope scaling + trained-in rope type, refused). FoPE + crops: its tables at
#     the true positions (sliding) or at 0..w-1 as trained (truncated: its own crop); the at=cache crop, which
#     re-rotates, FoPE refuses itself (lab.crop.cache_group), as it refuses it for logpos and Inkling. conv layers
#     + maps and crops: they act on the attention layers (a conv never calls attend); + query temperature: a conv
#     layer has no queries (aimed_layers). logpos + crops: the factor of the query's true position (sliding) or of
#     its place in the cut (truncated). Inkling + layer pattern: its NoPE layers and windows; + crops: its bias and
#     per-query sink are scored through its own logits (sliding) or attend(at=) (truncated).
#   query temperature + gated: the queries are scaled before attention, the gate acts after it; + FIRE: the queries
#     are scaled, then FIRE's own attention adds its bias; + CoPE: the scaled queries sharpen CoPE's gates too.


def _refusal(a, b):
    """Why features a and b do not combine (one line), or None: an exception, else the first rule that refuses."""
    if frozenset((a, b)) in _EXCEPTIONS:
        return _EXCEPTIONS[frozenset((a, b))]
    for x, y in ((a, b), (b, a)):
        if x in _NO_ROPE and y in _ROPE_FEATURES:  # 1. a bias encoding (or Inkling) has no RoPE
            return _NO_ROPE[x] + _ROPE_FEATURES[y].format(bias=x)
        if x in _BIASES and y in _BIASES:  # 2. one position encoding per model
            return ONE_POS_EMB
        if x in _CLASSES and y in _CLASSES:  # 3. one attention class per model
            return _BOTH_CLASSES
        if x in _CLASSES and y in _BIASES:  # 3. (a bias encoding's pos_emb takes the class)
            what, trained = _CLASSES[x]
            return (f"{ONE_CLASS}: pos_emb='{_BIASES[y][0]}' takes it, so {what} would be dropped (GPTConfig refuses "
                    f"it); train {trained}")
        if x == 'position map' and y in _CROPS:  # 4. maps and crops replace each other
            return MAP_CROP
        if x == 'dynamic scaling' and y in _CROPS:  # 5. a dynamic scale does not crop
            return CROP_DYNAMIC
        if x == 'conv layers' and y in _CLASSES:  # 6. conv layers beside causal attention only
            return CONV_CLASS
        if x == 'conv layers' and y in _BIASES:  # 6. (they come in a layer pattern)
            return _refusal(y, 'layer pattern')
    return None


COMBINES = {frozenset(pair): _refusal(*pair) for pair in combinations(FEATURES, 2)}  # {frozenset of two: None | why}


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
    temperature) and its checkpoint's model_args (trained-in rope type, layer pattern and conv layers, attention
    class, FoPE and Inkling among them). A rope type is trained in when the weights were trained from scratch with it
    (a base: no base_checkpoint)."""
    args = (arm.get('ckpt') or {}).get('model_args') or {}
    own, sc, temp = args.get('rope_scaling'), arm.get('scaling'), arm.get('temperature')
    scaled = sc is not None and sc.get('rope_type', 'default') != 'default'
    trained_in = own is not None and own.get('rope_type', 'default') != 'default' and not arm.get('base_checkpoint')
    attention, form = args.get('attention') or 'causal', (arm.get('crop') or {}).get('form')
    on = {'dynamic scaling': is_dynamic(sc), 'layer aim': aimed(sc) or aimed(temp),
          'rope scaling': scaled and not (trained_in and runs_own_type(own, sc)), 'FoPE': 'fope' in attention,
          'trained-in rope type': trained_in, 'conv layers': 'conv' in (args.get('layers') or ''),
          'layer pattern': bool(args.get('layers')),
          'position map': bool(arm.get('position_map')), 'sliding crop': form == 'sliding',
          'truncated crop': form == 'truncated', 'query temperature': bool(temp),
          'SSMax': 'ssmax' in attention, 'sinks': 'sinks' in attention, 'gated': 'gated' in attention,
          'logpos': 'logpos' in attention, 'ALiBi': 'alibi' in (args.get('pos_emb') or ''),
          'FIRE': 'fire' in (args.get('pos_emb') or ''), 'CoPE': 'cope' in (args.get('pos_emb') or ''),
          'Inkling': 'inkling' in attention}
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

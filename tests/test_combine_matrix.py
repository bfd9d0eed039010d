"""Issue 45, items 1-2: lab/measure/combine.py's table, pair by pair. The matrix is generated (itertools.combinations
over FEATURES, not a hand-picked list): a supported pair is built as one arm with both features on a tiny random
model and run through eval's arm_form and its scorer (finite losses; where a direct construction exists its numbers
match: an arm's own crop inside its window is the arm, a position map whose window covers T is the arm without it,
the two crop forms agree on one layer for every attention class but FIRE's, tests/test_fire.py, CoPE's included, and
issue 63's: FoPE's tables are absolute, logpos's factor and Inkling's key and value convolutions read the position
or the tokens before the window, a conv layer sees no crop); a refused pair's arm is refused by check_arm in one line naming both, and the refusal that already exists in the code
(where one does) refuses it too. A planted mismatch, a self-crop built without its arm's temperature, is caught by the
matrix's own self-crop check."""
import re
from itertools import combinations

import numpy as np
import pytest
import torch

import lab.crop
import lab.cope  # noqa: F401  registers pos_emb='cope'
import lab.fire  # noqa: F401  registers pos_emb='fire'
import lab.gated  # noqa: F401  registers attention='gated'
from configurator import ConfigError
from lab.measure.arm_specs import check_over_trained_in, scaling_name
from lab.measure.combine import COMBINES, FEATURES, aimed, arm_features, check_arm
from lab.position_maps import check_position_map, mapped_logits, position_map_name
from lab.temperature import parse_temperature, temperature_name
from model import ATTENTION, GPTConfig
from rope_config import check_scaling
from test_combine_features import T, V, losses, tiny

W = 8  # the arms' L, and so the window of their own crop (self_crop_arms holds an arm to L)
PATTERN = 'rope:w=4,rope,nope'  # a windowed RoPE, a full RoPE and a NoPE layer: every aim hits one of them
TEMP = 'qtemp:shape=ssmax:s=0.5'  # a temperature that moves every position (s ln n), inside the window too
DYNAMIC = {'rope_type': 'dynamic', 'factor': 1.0, 'original_max_position_embeddings': W}
STATIC = {'rope_type': 'linear', 'factor': 2.0}
TRAINED_IN = {'rope_type': 'proportional', 'partial_rotary_factor': 0.5}  # p-RoPE: half the pairs stopped
CLIP = {'rope_type': 'clip', 'original_max_position_embeddings': 64}  # FoPE's: pairs 0-2 of 8 turn, mixed per head
CONV_PATTERN = 'conv,rope:w=4,rope,nope'  # a conv layer (lab/conv.py) before PATTERN's three
NOPE_PATTERN = 'nope:w=4,nope'  # Inkling's (no RoPE layer; pos_emb='none' without a pattern)
CLASSES = ('SSMax', 'sinks', 'gated', 'logpos', 'FoPE', 'Inkling')  # attention=: two of them joined (refused)
BIASES = ('ALiBi', 'FIRE', 'CoPE')
ROWS = torch.randint(0, V, (3, T + 1), generator=torch.Generator().manual_seed(1))
PAIRS = list(combinations(FEATURES, 2))
# refused by the table alone (no other check in the code): a position map over a dynamic scaling, which
# lab/position_maps.py's docstring rules out (mapped_logits turns far keys at a batch's forward length, not each row's)
TABLE_ONLY = {('dynamic scaling', 'position map')}


def scalings(f):
    """(the checkpoint's own rope_scaling, the one the arm switches on) for features f; the run one aimed at the full
    layers under 'layer aim'. A dynamic trained-in type is the base's own, run as trained. FoPE's own is its clip, and
    its rope scaling a fine-tune of that clip (no other runs on it; its layer aim is a temperature's)."""
    own_dynamic = {'dynamic scaling', 'trained-in rope type'} <= f and 'rope scaling' not in f
    own = CLIP if 'FoPE' in f else (DYNAMIC if own_dynamic else TRAINED_IN) if 'trained-in rope type' in f else None
    new = None if own_dynamic or not f & {'rope scaling', 'dynamic scaling'} else \
        DYNAMIC if 'dynamic scaling' in f else CLIP if 'FoPE' in f else STATIC
    if 'layer aim' in f and (new or own) and 'FoPE' not in f:
        own, new = (own, dict(new, layers='full')) if new else (dict(own, layers='full'), None)
    return own, new


def spec_of(features, n_layer=2):
    """(GPTConfig kwargs, arm dict) with `features` switched on, the crops left out (held, crop_by_hand). A layer aim
    aims the arm's scaling at the full layers, else a query temperature at the NoPE ones. Inkling's pattern is
    NOPE_PATTERN (else pos_emb='none'), conv layers' CONV_PATTERN."""
    f = set(features)
    cfg = dict(block_size=16, vocab_size=V, n_layer=n_layer, n_head=2, n_embd=32,
               attention='_'.join(a.lower() for a in CLASSES if a in f) or 'causal',  # two: refused
               pos_emb='_'.join(a.lower() for a in BIASES if a in f) or 'rope')  # two: refused
    if 'conv layers' in f:
        cfg.update(layers=CONV_PATTERN, n_layer=4)
    elif 'layer pattern' in f or ('layer aim' in f and not f & set(BIASES)):
        cfg.update(layers=NOPE_PATTERN if 'Inkling' in f else PATTERN, n_layer=2 if 'Inkling' in f else 3)
    elif 'Inkling' in f and cfg['pos_emb'] == 'rope' and 'FoPE' not in f:  # (FoPE + Inkling: no 'fope_inkling')
        cfg['pos_emb'] = 'none'
    own, new = scalings(f)
    if own:
        cfg['rope_scaling'] = own
    sc = check_scaling(new or own)
    aim_temp = 'layer aim' in f and not aimed(sc)
    temp = parse_temperature(TEMP + (':layers=nope' if aim_temp else '')) if 'query temperature' in f or aim_temp \
        else None
    pm = check_position_map({'method': 'rerope', 'window': 4}) if 'position map' in f else None
    name = ' + '.join([scaling_name(sc)] + ([position_map_name(pm)] if pm else []) +
                      ([temperature_name(temp)] if temp else []))
    tuned = {'FoPE', 'rope scaling'} <= f  # (a fine-tune of a FoPE base)
    return cfg, dict(name=name, kind='fine-tuned' if tuned else 'zero-shot', L=W, seq_len=T, scaling=sc,
                     position_map=pm, temperature=temp, base_checkpoint='the FoPE base' if tuned else None,
                     ckpt={'model_args': cfg})


def held(arm, form):
    """The arm's own crop to W in `form` as eval.py builds it (lab.crop.self_crop_arms), or None when it builds none."""
    arms = [arm]
    lab.crop.self_crop_arms({'self_crop': form}, arms)
    return next((a for a in arms[1:] if a['crop'] == {'window': W, 'form': form}), None)


def crop_by_hand(arm, form):
    """The arm with a crop that self_crop_arms would not build (a refused pair), named as it would name it."""
    return dict(arm, name=f"{arm['name']} held to {W} ({form})", crop={'window': W, 'form': form},
                self_crop_of=arm['name'])


def forms_of(pair):
    return [f.split()[0] for f in pair if f.endswith(' crop')]


def model_of(cfg, arm):
    """The tiny random model of cfg with the arm's scaling switched on, as eval.py's measure_run does for a
    zero-shot arm. A gated model's gate weights x30: gates spread over (0, 1) token by token, not all ~0.5, so a gate
    taken from the wrong token's row shows in the losses. A CoPE model's position embeddings N(0, 0.5²) instead of its
    zeros (as trained from scratch: NoPE), so a position counted wrong shows too; logpos's scale a_h 0.5 and -0.3
    instead of 0 (the plain model), Inkling's profiles x50 (N(0, 1), a bias that moves the scores)."""
    model = tiny(**cfg)
    with torch.no_grad():
        for block in model.transformer.h:
            if hasattr(block.attn, 'c_gate'):
                block.attn.c_gate.weight.mul_(30.0)
            if hasattr(block.attn, 'cope_e'):
                block.attn.cope_e.copy_(0.5 * torch.randn(block.attn.cope_e.shape,
                                                          generator=torch.Generator().manual_seed(2)))
            if hasattr(block.attn, 'logpos_scale'):  # (0 at init: the plain model)
                block.attn.logpos_scale.copy_(torch.tensor([[0.5], [-0.3]]))
            if hasattr(block.attn, 'rel_profiles'):  # (N(0, 0.02) at init: no bias to speak of)
                block.attn.rel_profiles.mul_(50.0)
    if model.config.pos_emb == 'rope':
        model.set_rope_scaling(arm['scaling'])
    return model


def close(a, b, what):
    assert np.abs(a - b).max() < 1e-5, what


# ----------------------------------------------------------------------------- the checks the matrix runs


def check_self_crop(model, arm, form):
    """The arm's own crop (built by self_crop_arms) runs and, inside its window, is the arm itself to 1e-5; returns
    its losses. AssertionError when it is not built or differs."""
    own = held(arm, form)
    assert own is not None, f"self_crop_arms builds no {form} crop of {arm['name']!r}"
    check_arm(own)
    got = losses(model, own, ROWS)
    assert np.isfinite(got).all()
    close(got[:, :W], losses(model, arm, ROWS)[:, :W], f"{own['name']} inside its window")
    return got


def check_wide_map(model, arm, mapped):
    """A position map whose window covers T maps nothing: the arm without it, to 1e-5; the arm's own map (mapped: its
    losses) moves them past its window (it is switched on)."""
    wide = dict(arm, position_map=dict(arm['position_map'], window=T))
    plain = losses(model, dict(arm, position_map=None), ROWS)
    close(losses(model, wide, ROWS), plain, f"{arm['name']} at w={T}")
    assert np.abs(mapped - plain).max() > 1e-4, f"{arm['name']}: the map changes nothing"


def check_forms_agree():
    """On one layer the two crop forms see the same keys at the same distances: the same losses, for every attention
    class (plain, SSMax, sinks, gated, ALiBi, CoPE: key j's position counts keys j..i, all in the window). Not FIRE:
    its normaliser reads the query's own position, which the truncated crop restarts (lab/crop.py; tests/test_fire.py
    builds both by hand)."""
    for cls in ((), ('SSMax',), ('sinks',), ('gated',), ('ALiBi',), ('CoPE',)):
        cfg, arm = spec_of(cls, n_layer=1)
        model = model_of(cfg, arm)
        slide, cut = (check_self_crop(model, arm, f) for f in ('sliding', 'truncated'))
        close(slide, cut, f"the two crop forms on one layer, {cls or 'plain'}")


def check_live(model, arm, features):
    """The model runs what the arm carries: its scaling switched on, the parameters of its attention class (SSMax, the
    sinks, the gate, logpos, FoPE, Inkling) in every layer (pos_emb='alibi' would take the class and drop them
    silently)."""
    assert model.config.rope_scaling == arm['scaling'], f"{arm['name']} runs rope_scaling={model.config.rope_scaling}"
    for feature, attr in (('SSMax', 'ssmax'), ('sinks', 'sink'), ('gated', 'c_gate'), ('logpos', 'logpos_scale'),
                          ('FoPE', 'n_pairs'), ('Inkling', 'rel_profiles')):
        assert feature not in features or all(hasattr(b.attn, attr) for b in model.transformer.h), feature


def check_supported(pair):
    """A supported pair as one arm: check_arm passes and names both features, it runs (finite losses), and matches
    its direct construction where one exists."""
    if set(pair) == {'sliding crop', 'truncated crop'}:
        return check_forms_agree()
    cfg, arm = spec_of(pair)
    forms = forms_of(pair)
    run = held(arm, forms[0]) if forms else arm
    assert run is not None, f"self_crop_arms builds no {forms[0]} crop of {arm['name']!r}"
    assert set(pair) <= set(check_arm(run)), (pair, arm_features(run))
    model = model_of(cfg, arm)
    check_live(model, arm, pair)
    got = losses(model, run, ROWS)
    assert np.isfinite(got).all()
    if forms:
        check_self_crop(model, arm, forms[0])
    if arm['position_map']:
        check_wide_map(model, arm, got)


def refusal_elsewhere(cfg, arm):
    """What the code outside the table does with a refused pair's arm, asserted per pair (None: no other check)."""
    def raises(fn, match):
        with pytest.raises(ValueError, match=match):
            fn()
    own = cfg.get('rope_scaling')
    crop_left_out = lambda: [held(arm, f) for f in ('sliding', 'truncated')] == [None, None]  # noqa: E731
    class_taken = lambda: raises(lambda: GPTConfig(**cfg), 'would be dropped')  # noqa: E731  (one class per layer)
    return {
        ('rope scaling', 'trained-in rope type'): lambda: raises(
            lambda: check_over_trained_in(own, arm['scaling'], 'base', 'arm', 'fix'), 'would replace it'),
        ('rope scaling', 'ALiBi'): lambda: raises(lambda: tiny(**cfg).set_rope_scaling(arm['scaling']), 'alibi'),
        ('dynamic scaling', 'ALiBi'): lambda: raises(lambda: tiny(**cfg).set_rope_scaling(arm['scaling']), 'alibi'),
        ('rope scaling', 'FIRE'): lambda: raises(lambda: tiny(**cfg).set_rope_scaling(arm['scaling']), 'fire'),
        ('dynamic scaling', 'FIRE'): lambda: raises(lambda: tiny(**cfg).set_rope_scaling(arm['scaling']), 'fire'),
        ('trained-in rope type', 'FIRE'): lambda: raises(lambda: GPTConfig(**cfg), 'rope_scaling is set'),
        ('layer pattern', 'FIRE'): lambda: raises(lambda: GPTConfig(**cfg), 'sets RoPE per layer'),
        ('position map', 'FIRE'): lambda: raises(lambda: mapped_logits(tiny(**cfg), arm['position_map']), 'pos_emb'),
        ('ALiBi', 'FIRE'): lambda: raises(lambda: GPTConfig(**cfg), "pos_emb='alibi_fire' is unknown"),
        ('rope scaling', 'CoPE'): lambda: raises(lambda: tiny(**cfg).set_rope_scaling(arm['scaling']), 'cope'),
        ('dynamic scaling', 'CoPE'): lambda: raises(lambda: tiny(**cfg).set_rope_scaling(arm['scaling']), 'cope'),
        ('trained-in rope type', 'CoPE'): lambda: raises(lambda: GPTConfig(**cfg), 'rope_scaling is set'),
        ('layer pattern', 'CoPE'): lambda: raises(lambda: GPTConfig(**cfg), 'sets RoPE per layer'),
        ('position map', 'CoPE'): lambda: raises(lambda: mapped_logits(tiny(**cfg), arm['position_map']), 'pos_emb'),
        ('ALiBi', 'CoPE'): lambda: raises(lambda: GPTConfig(**cfg), "pos_emb='alibi_cope' is unknown"),
        ('FIRE', 'CoPE'): lambda: raises(lambda: GPTConfig(**cfg), "pos_emb='fire_cope' is unknown"),
        ('trained-in rope type', 'ALiBi'): lambda: raises(lambda: GPTConfig(**cfg), 'rope_scaling is set'),
        ('layer pattern', 'ALiBi'): lambda: raises(lambda: GPTConfig(**cfg), 'sets RoPE per layer'),
        ('position map', 'SSMax'): lambda: raises(lambda: mapped_logits(tiny(**cfg), arm['position_map']),
                                                  'scores of its own'),
        ('position map', 'ALiBi'): lambda: raises(lambda: mapped_logits(tiny(**cfg), arm['position_map']), 'pos_emb'),
        ('dynamic scaling', 'sliding crop'): crop_left_out, ('dynamic scaling', 'truncated crop'): crop_left_out,
        ('position map', 'sliding crop'): crop_left_out, ('position map', 'truncated crop'): crop_left_out,
        ('SSMax', 'ALiBi'): class_taken, ('sinks', 'ALiBi'): class_taken, ('gated', 'ALiBi'): class_taken,
        ('SSMax', 'FIRE'): class_taken, ('sinks', 'FIRE'): class_taken, ('gated', 'FIRE'): class_taken,
        ('SSMax', 'CoPE'): class_taken, ('sinks', 'CoPE'): class_taken, ('gated', 'CoPE'): class_taken,
        ('SSMax', 'sinks'): lambda: 'ssmax_sinks' not in ATTENTION,
        ('SSMax', 'gated'): lambda: 'ssmax_gated' not in ATTENTION,
        ('sinks', 'gated'): lambda: 'sinks_gated' not in ATTENTION,
        # issue 63's designs: FoPE, conv layers, logpos, Inkling
        ('dynamic scaling', 'FoPE'): lambda: raises(
            lambda: check_over_trained_in(own, arm['scaling'], 'base', 'arm', 'fix'), 'would replace it'),
        ('dynamic scaling', 'Inkling'): lambda: raises(lambda: tiny(**cfg).set_rope_scaling(arm['scaling']), 'pos_emb'),
        ('rope scaling', 'Inkling'): lambda: raises(lambda: tiny(**cfg).set_rope_scaling(arm['scaling']), 'pos_emb'),
        ('trained-in rope type', 'Inkling'): lambda: raises(lambda: GPTConfig(**cfg), 'rope_scaling is set'),
        ('FoPE', 'position map'): lambda: raises(lambda: mapped_logits(tiny(**cfg), arm['position_map']),
                                                 'tables of its own'),
        ('position map', 'logpos'): lambda: raises(lambda: mapped_logits(tiny(**cfg), arm['position_map']),
                                                   'scores of its own'),
        ('position map', 'Inkling'): lambda: raises(lambda: mapped_logits(tiny(**cfg), arm['position_map']), 'pos_emb'),
        **{pair: lambda: raises(lambda: GPTConfig(**cfg), "beside attention='causal' only")
           for pair in PAIRS if 'conv layers' in pair and set(pair) & set(CLASSES)},
        **{('conv layers', b): lambda: raises(lambda: GPTConfig(**cfg), 'sets RoPE per layer') for b in BIASES},
        **{pair: lambda: raises(lambda: GPTConfig(**cfg), 'is unknown') for pair in PAIRS
           if set(pair) <= set(CLASSES) and set(pair) & {'logpos', 'FoPE', 'Inkling'}},  # (no 'ssmax_logpos', ...)
        **{('logpos', b): class_taken for b in BIASES},
        **{(b, 'Inkling'): class_taken for b in BIASES},
        **{('FoPE', b): lambda: raises(lambda: GPTConfig(**cfg), 'rope_scaling is set') for b in BIASES},  # (its clip)
    }


def check_refused(pair):
    """A refused pair as one arm: check_arm raises ConfigError, one line naming both features (in the table's order),
    and the code's own refusal of it, where there is one, refuses it too."""
    cfg, arm = spec_of(pair)
    bare, forms = arm, forms_of(pair)
    arm = crop_by_hand(arm, forms[0]) if forms else arm
    with pytest.raises(ConfigError) as e:
        check_arm(arm)
    a, b = sorted(pair, key=FEATURES.index)
    assert f"combines {a} and {b}," in str(e.value) and '\n' not in str(e.value), str(e.value)
    other = refusal_elsewhere(cfg, bare).get(pair)
    assert other is not None or pair in TABLE_ONLY, f"{pair}: refused by the table alone; name the code that refuses it"
    assert other is None or other() is not False, pair


# ----------------------------------------------------------------------------- the matrix


@pytest.mark.parametrize('pair', PAIRS, ids=[f"{a} + {b}" for a, b in PAIRS])
def test_every_pair_runs_as_the_table_says(pair):
    """Every pair of features: supported -> built, run, matched with its direct construction; refused -> refused by
    check_arm in one line naming both."""
    (check_supported if COMBINES[frozenset(pair)] is None else check_refused)(pair)


def test_the_table_covers_every_pair_of_the_features_check_arm_reads():
    """COMBINES has one verdict per pair (n(n-1)/2 of them), each None or one line with its fix after ';'; every
    feature arm_features can report is in FEATURES, and each is seen on an arm built with it alone."""
    n = len(FEATURES)
    assert set(COMBINES) == {frozenset(p) for p in PAIRS} and len(COMBINES) == n * (n - 1) // 2
    assert all(v is None or ('\n' not in v and '; ' in v) for v in COMBINES.values())
    seen = set()
    for f in FEATURES:
        arm = spec_of([f])[1]
        arm = crop_by_hand(arm, forms_of([f])[0]) if forms_of([f]) else arm
        assert f in arm_features(arm), f
        seen |= set(arm_features(arm))
    assert seen == set(FEATURES)


def test_a_self_crop_built_without_its_temperature_is_caught(monkeypatch):
    """The planted mismatch: self_crop_arms dropping the arm's temperature from its own crops (the defect fixed in
    tests/test_combine_features.py) makes the matrix's self-crop check fail, in both forms; unpatched it passes."""
    real = lab.crop.self_crop_arms

    def untempered(cfg, arms):
        n = len(arms)
        real(cfg, arms)
        arms[n:] = [dict(a, temperature=None) for a in arms[n:]]
    cfg, arm = spec_of(['query temperature'])
    model = model_of(cfg, arm)
    for form in ('sliding', 'truncated'):
        check_self_crop(model, arm, form)
    monkeypatch.setattr(lab.crop, 'self_crop_arms', untempered)
    for form in ('sliding', 'truncated'):
        with pytest.raises(AssertionError, match='inside its window'):
            check_self_crop(model, arm, form)
        with pytest.raises(AssertionError):
            check_supported((f'{form} crop', 'query temperature'))


# ----------------------------------------------------------------------------- names that say what the arm runs


@pytest.mark.parametrize('change, says', [
    (lambda a: dict(a, name=a['name'] + ' held to 8 (sliding)'), "'held to' and the arm has no crop"),
    (lambda a: dict(held(a, 'sliding'), name=a['name'] + ' held to 16 (sliding)'), "should show 'held to 8 (sliding)'"),
    (lambda a: dict(held(a, 'truncated'), name=a['name'] + ' held to 8 (sliding)'), "should show 'held to 8 (trunc"),
    (lambda a: dict(a, crop={'window': 8, 'form': 'sliding'}, name='crop w=16 (sliding)'), "should show 'w=8'"),
    (lambda a: dict(a, name='base'), "temperature 'qtemp ssmax s=0.5' is not in the name"),
    (lambda a: dict(a, temperature=None, position_map=check_position_map({'method': 'rerope', 'window': 4})),
     "position map 'rerope w=4' is not in the name")])
def test_an_arm_whose_name_misstates_it_is_refused(change, says):
    """A name that says one thing and an arm that carries another (a 'held to' without a crop, a self-crop named for
    another window or form, a crop, map or temperature the name leaves out) is refused in one line."""
    arm = spec_of(['query temperature'])[1]
    check_arm(held(arm, 'sliding'))
    with pytest.raises(ConfigError, match=re.escape(says)) as e:
        check_arm(change(arm))
    assert '\n' not in str(e.value)


def test_plan_arms_refuses_a_pair_before_any_model_runs(char_data, tmp_path):
    """plan_arms checks every arm: a position map on an SSMax base ran until mapped_logits refused it in the middle
    of the eval; now refused while planning, in one line naming both features."""
    import eval as ev
    from conftest import tiny_cfg
    from lab.measure.arms import plan_arms
    from train import train
    base = str(tmp_path / 'ssmax')
    train(dict(tiny_cfg(char_data, base, max_iters=1, eval_interval=1, attention='ssmax'), block_size=16,
               eval_iters=1))
    cfg = dict(ev.DEFAULTS, base=base, eval_len=32)
    assert [a['name'] for a in plan_arms(dict(cfg, rope_types='default,crop'))[0]] == \
        ['base ssmax (L=16)', 'crop w=16 (sliding)', 'crop w=16 (truncated)']
    with pytest.raises(ConfigError, match="rerope w=4 zero-shot' combines position map and SSMax, which do not "
                                          "combine: a map scores with plain RoPE"):
        plan_arms(dict(cfg, rope_types='default,rerope:window=4'))

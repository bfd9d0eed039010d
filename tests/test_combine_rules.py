"""Issue 61, item 7: lab/measure/combine.py states its table as a few rules and a short list of exceptions instead of
pair by pair. tests/fixtures/combine_table.json is the table as it was spelled out before (generated from the
pair-by-pair _TABLE): every unordered pair of FEATURES with its verdict, None (supported) or the exact refusal. The
rules must reproduce every entry byte for byte, so an edit that changes a decision fails here. A new feature's pairs
are appended to it from COMBINES (issue 63: FoPE, conv layers, logpos, Inkling), after checking that every entry
already pinned is reproduced; the features list is rewritten in FEATURES order; no pinned entry is ever rewritten."""
import json
from itertools import combinations
from pathlib import Path

import pytest

from lab.measure import combine
from lab.measure.combine import COMBINES, FEATURES, refused_pair

FIXTURE = json.loads((Path(__file__).parent / 'fixtures' / 'combine_table.json').read_text())
EXPECTED = {frozenset((a, b)): why for a, b, why in FIXTURE['pairs']}


def test_the_fixture_covers_every_pair_of_the_features():
    """The same FEATURES, in the same order (refused_pair reports the first refused pair in it), and one entry per
    unordered pair."""
    assert tuple(FIXTURE['features']) == FEATURES
    assert len(FIXTURE['pairs']) == len(EXPECTED) == len(FEATURES) * (len(FEATURES) - 1) // 2
    assert set(EXPECTED) == {frozenset(p) for p in combinations(FEATURES, 2)} == set(COMBINES)


@pytest.mark.parametrize('a,b,why', FIXTURE['pairs'], ids=[f"{a} + {b}" for a, b, _ in FIXTURE['pairs']])
def test_the_rules_reproduce_the_pinned_verdict(a, b, why):
    """COMBINES, the rules in either order and refused_pair give the pinned verdict exactly."""
    assert COMBINES[frozenset((a, b))] == why
    assert combine._refusal(a, b) == why and combine._refusal(b, a) == why
    for pair in ((a, b), (b, a)):
        assert refused_pair(list(pair)) == (None if why is None else (*pair, why))


def test_the_named_messages_start_the_refusals_they_name():
    """The message constants other modules and tests import are the ones the refusals use."""
    counts = {m: sum(1 for why in EXPECTED.values() if why and why.startswith(m))
              for m in (combine.NO_ROPE, combine.FIRE_NO_ROPE, combine.COPE_NO_ROPE, combine.INKLING_NO_ROPE,
                        combine.ONE_CLASS)}
    # each bias: its 5 RoPE features and conv layers; Inkling: dynamic, rope scaling, trained-in type, position map;
    # ONE_CLASS: 15 pairs of the 6 classes, 18 of a class and a bias
    assert counts == {combine.NO_ROPE: 6, combine.FIRE_NO_ROPE: 6, combine.COPE_NO_ROPE: 6, combine.INKLING_NO_ROPE: 4,
                      combine.ONE_CLASS: 33}
    assert sum(why == combine.MAP_CROP for why in EXPECTED.values()) == 2
    assert sum(why == combine.CROP_DYNAMIC for why in EXPECTED.values()) == 2
    assert sum(why == combine.CONV_CLASS for why in EXPECTED.values()) == 6  # conv layers + each of the 6 classes

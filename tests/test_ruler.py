"""lab/measure/ruler.py's rooms (issue 31 item 3): needles in an untrained format, multi-value needles and variable tracking,
checked on the fixture corpus for their layout, and with a copying stand-in model for what their outcomes and
confusion tables show. The corpus fixture and the stand-in scorers come from test_retrieval.py."""
import numpy as np
import pytest

from lab.measure import ruler
from lab.measure.outcomes import room_scores, summarize_retrieval
from lab.measure.retrieval import DEFAULTS, make_rooms, separator_token
from test_retrieval import L, T, CopyOracle, corpus, scorer  # noqa: F401  (corpus: the fixture)


@pytest.fixture(scope='module')
def digits(corpus):
    """The fixture's vocabulary with the digits it lacks appended (the text has only '1' and '2')."""
    itos = corpus['meta']['itos'] + [d for d in '0123456789' if d not in corpus['meta']['itos']]
    return dict(corpus, meta=dict(corpus['meta'], itos=itos, vocab_size=len(itos)), V=len(itos))


def count(row, key):
    key = np.asarray(key)
    return int((np.lib.stride_tricks.sliding_window_view(row, len(key)) == key).all(1).sum())


def test_word_needles_are_play_words_with_digit_values(digits):
    meta, val = digits['meta'], digits['val']
    words = {w for w in ruler.decode(meta, val).split() if w.isalpha() and w.islower() and len(w) == 5}
    buckets, ex = ruler.word_needle_examples(val, digits['starts'], T, L, meta, 3, needles=3)
    assert len(ex) == len(buckets) * len(digits['starts'])
    for e in ex:
        q, seq = e['query'], e['seq']
        assert ruler.decode(meta, seq[q:q + 6])[0] == ' ' and ruler.decode(meta, seq[q + 6:q + 10]) == ' is '
        for n in e['needles']:
            text = ruler.decode(meta, seq[n['pos']:n['pos'] + 15])
            assert text[1:6] in words and text[6:10] == ' is ' and text[10:].isdigit(), text
            assert count(seq[:q], n['key']) == 1  # each key once before the query, so the answer is unique
        assert len({int(n['value'][0]) for n in e['needles']}) == 3  # first digits differ: the emitted one names a record
        asked = next(n for n in e['needles'] if n['queried'])
        assert ruler.decode(meta, [seq[p + 1] for p in e['where']]) == ruler.decode(meta, asked['value'])
        lo, hi = buckets[e['bucket']][1:]
        assert lo <= e['distance'] < hi and q - asked['pos'] == e['distance']


def test_word_needles_need_digits(corpus):
    with pytest.raises(ValueError, match='digit tokens'):
        ruler.word_needle_examples(corpus['val'], corpus['starts'], T, L, corpus['meta'], 3)


def test_multi_value_layout(corpus):
    meta, val = corpus['meta'], corpus['val']
    sep = separator_token(meta)
    buckets, ex = ruler.multi_value_examples(val, corpus['starts'], T, L, meta, 4, values=3, distractors=2)
    for e in ex:
        q, seq = e['query'], e['seq']
        key = seq[q:q + 4]
        assert seq[q + 4] == sep and len(seq) == q + 4 + 1 + 12
        at = [p for p in range(q - 8) if (seq[p:p + 4] == key).all() and seq[p + 4] == sep]
        assert len(at) == 3 and count(seq[:q], key) == 3 and q - at[0] == e['distance']
        assert [list(seq[p + 5:p + 9]) for p in at] == [list(seq[q + 5 + 4 * i:q + 9 + 4 * i]) for i in range(3)]
        assert e['where'] == list(range(q + 4, q + 16))  # every value token of the query scored
        assert [c for c, _ in e['choices']] == ['first', 'later', 'later', 'other', 'other']
        assert e['choices'][0][1] == seq[at[0] + 5]
        lo, hi = buckets[e['bucket']][1:]
        assert lo <= e['distance'] < hi


def test_tracking_answer_shares_no_token_with_the_query(corpus):
    meta, val = corpus['meta'], corpus['val']
    sep = separator_token(meta)
    buckets, ex = ruler.tracking_examples(val, corpus['starts'] * 2, T, L, meta, 4)
    orders = [e['order'] for e in ex]
    assert 0.3 < orders.count('A:K first') / len(orders) < 0.7  # both orders, about half each
    for e in ex:
        q, seq = e['query'], e['seq']
        A, V = seq[q:q + 4], seq[q + 5:q + 9]
        ak = [p for p in range(q) if (seq[p:p + 4] == A).all() and seq[p + 4] == sep]
        assert len(ak) == 1 and count(seq[:q], A) == 1
        K = seq[ak[0] + 5:ak[0] + 9]
        kv = [p for p in range(q) if (seq[p:p + 4] == K).all() and seq[p + 4] == sep]
        assert len(kv) == 1 and (seq[kv[0] + 5:kv[0] + 9] == V).all() and count(seq[:q], K) == 2
        pairs = lambda r: set(zip(r[:-1].tolist(), r[1:].tolist()))  # noqa: E731
        assert not pairs(seq[q:q + 5]) & pairs(seq[kv[0]:kv[0] + 9])  # no literal match: query vs the answer's record
        assert q - min(ak[0], kv[0]) == e['distance']
        assert (ak[0] < kv[0]) == (e['order'] == 'A:K first')
        assert dict(e['choices'][:2]) == {'answer': V[0], 'one hop': K[0]}


def test_a_copying_model_shows_its_shortcuts_in_the_confusion(digits):
    """A model that copies after the latest match of its longest context suffix (CopyOracle) finds a word needle
    by its key (emitted = the asked record, exact); in variable tracking it writes K, one hop, and never V; with
    several values it starts with the nearest one (a later value, not the first written), so it is never exact."""
    meta, val, starts = digits['meta'], digits['val'], digits['starts'][:10]
    score = scorer(CopyOracle(digits['V']))
    b, ex = ruler.word_needle_examples(val, starts, T, L, meta, 3, needles=3)
    words = summarize_retrieval([room_scores(score, b, ex)])
    assert all(x['exact_match'] == 1.0 for x in words)
    assert all(e == r for x in words for e, r in zip(x['per_example']['emitted'][0], x['per_example']['rank']))
    b, ex = ruler.tracking_examples(val, starts, T, L, meta, 3)
    got = room_scores(score, b, ex)
    assert all(e == 'one hop' for r in got for e in r['emitted']) and not any(x for r in got for x in r['exact'])
    assert summarize_retrieval([got])[0]['per_example']['emitted'] == [got[0]['emitted']]
    b, ex = ruler.multi_value_examples(val, starts, T, L, meta, 3)
    got = room_scores(score, b, ex)
    assert all(e == 'later' for r in got for e in r['emitted']) and not any(x for r in got for x in r['exact'])


def test_eval_builds_the_rooms_or_says_why_not(digits, corpus):
    cfg = dict(DEFAULTS, seed=5, retrieval_examples=4, word_needles=3)  # 4 records of 15 tokens do not fit in L=64
    starts = digits['starts'][:4]
    extra = ruler.rooms(cfg, digits['val'], starts, T, L, digits['meta'])
    rooms, skipped = make_rooms(digits['val'], starts, T, L, digits['meta'], 5, 4, 4, extra=extra)
    assert {'needles_words', 'needles_mv', 'tracking'} <= set(rooms) and not skipped
    assert rooms['needles_mv']['settings'] == dict(examples=4, buckets=[b[0] for b in rooms['needles_mv']['buckets']],
                                                   values=3, distractors=2, key_len=4, value_len=4)
    again = ruler.rooms(cfg, digits['val'], starts, T, L, digits['meta'])
    assert all((x['seq'] == y['seq']).all() for n, build, _ in again for x, y in zip(build()[1], rooms[n]['examples']))
    _, skipped = make_rooms(corpus['val'], starts, T, L, corpus['meta'], 5, 4, 4, strict=False,
                            extra=ruler.rooms(cfg, corpus['val'], starts, T, L, corpus['meta']))
    assert 'digit tokens' in skipped['needles_words']  # the fixture's own vocabulary has two digits
    off = dict(cfg, word_needles=0, mv_values=0, tracking=False)
    assert ruler.rooms(off, digits['val'], starts, T, L, digits['meta']) == []

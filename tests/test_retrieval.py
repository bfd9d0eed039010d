"""Tests of lab/measure/retrieval.py's rooms (issue 20) with known answers: a model that copies (it looks up the longest
suffix of its input earlier in the row) must score 100% exact on the passkey and the needles and gain on recall; a
model that ignores its context (unigram logits) scores no exact match and no gain. No training, no eval.py run:
the fixture corpus at character level, and a scorer with lab.measure.scoring.score's convention."""
import json
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import at_positions
from lab.measure.outcomes import room_scores, score_rows, summarize_retrieval
from lab.measure.placement import distance_buckets
from lab.measure.retrieval import (make_rooms, needle_examples, newline_tokens, passkey_depth_examples,
                           passkey_examples, recall_examples, retrieval_scores, separator_token, text_lines)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
L, T = 64, 256


@pytest.fixture(scope='module')
def corpus():
    """The fixture corpus as one char vocabulary: eot = 0 after every document (like data/shakespeare_char)."""
    folder = os.path.join(ROOT, 'tests', 'fixtures', 'corpus')
    texts = [open(os.path.join(folder, f), encoding='utf-8').read() for f in sorted(os.listdir(folder))]
    itos = ['\x00'] + sorted(set(''.join(texts)))
    stoi = {c: i for i, c in enumerate(itos)}
    val = np.array([t for x in texts for t in [stoi[c] for c in x] + [0]], dtype=np.uint16)
    meta = dict(tokenizer='char', itos=itos, vocab_size=len(itos), eot_token=0)
    starts = np.random.default_rng(0).integers(0, len(val) - T - 1, 32).tolist()
    return dict(val=val, meta=meta, V=len(itos), starts=starts)


class CopyOracle(torch.nn.Module):
    """Predicts the token that followed the latest earlier occurrence of the longest suffix (up to 8 tokens) of its
    input; with none, the token 1. It finds a passkey's earlier copy, and a needle by its key."""

    def __init__(self, V):
        super().__init__()
        self.V = V

    def forward(self, idx, targets, reduction='none', pos=None, attend=None, rope=None, at=None):
        B, n = idx.shape
        logits = torch.zeros(B, n, self.V)
        for b in range(B):
            s, seen = idx[b].tolist(), {}
            for t in range(n):
                nxt = 1
                for k in range(min(8, t + 1), 0, -1):
                    j = seen.get(tuple(s[t - k + 1:t + 1]))
                    if j is not None:
                        nxt = s[j + 1]
                        break
                logits[b, t, nxt] = 30.0
                for k in range(1, min(8, t + 1) + 1):
                    seen[tuple(s[t - k + 1:t + 1])] = t
        return at_positions(logits, F.cross_entropy(logits.view(-1, self.V), targets.reshape(-1),
                                                    reduction='none').view(B, n), at)


class Unigram(torch.nn.Module):
    """Ignores the context: the same logits (log unigram frequencies of the text) at every position."""

    def __init__(self, val, V):
        super().__init__()
        counts = torch.bincount(torch.from_numpy(val.astype(np.int64)), minlength=V)
        self.logits = torch.log(counts.double() + 1).float()

    def forward(self, idx, targets, reduction='none', pos=None, attend=None, rope=None, at=None):
        B, n = idx.shape
        logits = self.logits.expand(B, n, -1)
        return at_positions(logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                                    reduction='none').view(B, n), at)


def scorer(model, batch_size=8, seen=None):
    """lab.measure.scoring.score's convention for a static arm: rows in chunks of batch_size, one forward per chunk up to its
    last scored position; (loss, hit) as lists of arrays. `seen` collects each chunk's forward length."""
    @torch.no_grad()
    def score(rows, positions, preds=False):
        loss, hit, pred = [None] * len(rows), [None] * len(rows), [None] * len(rows)
        for c in range(0, len(rows), batch_size):
            rs = list(range(c, min(c + batch_size, len(rows))))
            n = max(max(positions[r]) for r in rs) + 1
            x = rows[rs, :n + 1]
            if seen is not None:
                seen.append(n)
            logits, lo = model(x[:, :-1], x[:, 1:], reduction='none')
            for k, r in enumerate(rs):
                ps = torch.tensor(positions[r])
                loss[r] = lo[k, ps].numpy()
                pred[r] = logits[k, ps].argmax(-1).numpy()
                hit[r] = pred[r] == x[k, ps + 1].numpy()
        return (loss, hit, pred) if preds else (loss, hit)
    return score


def same(a, b):
    """Two example lists equal, arrays compared by value."""
    def norm(x):
        if isinstance(x, dict):
            return {k: norm(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [norm(v) for v in x]
        return x.tolist() if isinstance(x, np.ndarray) else x
    return norm(a) == norm(b)


def test_distance_buckets():
    assert distance_buckets(128, 1024, 12, 12) == [('12-95', 12, 96, 128), ('96-116', 96, 117, 128),
                                                   ('128-256', 128, 256, 1024), ('256-512', 256, 512, 1024),
                                                   ('512-1024', 512, 1013, 1024)]
    assert distance_buckets(128, 1024, 24, 24)[1] == ('96-104', 96, 105, 128)  # d + K must fit in L
    assert distance_buckets(16, 64, 4, 4) == [('4-11', 4, 12, 16), ('12-12', 12, 13, 16), ('16-32', 16, 32, 64),
                                              ('32-64', 32, 61, 64)]
    assert [b[0] for b in distance_buckets(16, 64, 9, 9)] == ['16-32', '32-64']  # d + 9 > 16: nothing inside L


def test_passkey_depth_geometry_and_seed(corpus):
    val, V, starts = corpus['val'], corpus['V'], corpus['starts']
    K, cue = 8, 3
    buckets, ex = passkey_depth_examples(val, starts, T, L, K, cue, V, 0, 7)
    assert [b[0] for b in buckets] == ['8-47', '48-56', '64-128', '128-256']
    assert len(ex) == len(buckets) * len(starts)
    for i, e in enumerate(ex):
        label, lo, hi = buckets[e['bucket']]
        limit = L if hi <= L else T
        d, p, n = e['distance'], e['depth'], len(e['seq'])
        assert e['start'] == starts[i % len(starts)] and lo <= d < hi and e['repeat'] == p + d == e['first'] + d
        assert n == len(e['control']) == p + d + K <= limit  # the row ends at the last scored target
        orig = np.array(val[e['start']:e['start'] + n], dtype=np.int64)
        assert list(e['seq'][p:p + K]) == list(e['key']) == list(e['seq'][p + d:]) == list(e['control'][p + d:])
        assert 0 not in e['key']
        keep = np.ones(n, bool)
        keep[p:p + K] = keep[p + d:] = False
        assert (e['seq'][keep] == orig[keep]).all() and (e['control'][:p + d] == orig[:p + d]).all()
        assert e['where'] == list(range(p + d + cue - 1, n - 1))
    again = passkey_depth_examples(val, starts, T, L, K, cue, V, 0, 7)
    assert same(again, (buckets, ex)) and not same(passkey_depth_examples(val, starts, T, L, K, cue, V, 0, 8)[1], ex)


def test_depth_varies_apart_from_distance():
    """The depth is drawn uniformly over what fits once d is drawn: its place in that range does not depend on d,
    and inside a bucket the depth itself hardly does (the last bucket's room shrinks to 0 at d = T - K: a triangle)."""
    val = np.random.default_rng(1).integers(1, 60, 1 << 16).astype(np.uint16)
    starts = list(range(0, 400 * 16, 16))
    K = 8
    buckets, ex = passkey_depth_examples(val, starts, 1024, 128, K, 4, 60, 0, 3)
    for b, (label, lo, hi) in enumerate(buckets):
        limit = 128 if hi <= 128 else 1024
        d = np.array([e['distance'] for e in ex if e['bucket'] == b], dtype=float)
        p = np.array([e['depth'] for e in ex if e['bucket'] == b], dtype=float)
        frac = (p + 0.5) / (limit - K - d + 1)  # the depth's place among the limit - K - d + 1 that fit
        assert abs(np.corrcoef(frac, d)[0, 1]) < 0.15, label
        assert frac.min() < 0.05 and frac.max() > 0.95 and 0.4 < frac.mean() < 0.6, label
        if lo in (128, 256):
            assert abs(np.corrcoef(p, d)[0, 1]) < 0.3, label
    rep = np.array([e['repeat'] for e in ex if e['bucket'] == 2], dtype=float)
    dist = np.array([e['distance'] for e in ex if e['bucket'] == 2], dtype=float)
    assert np.corrcoef(rep, dist)[0, 1] < 0.3  # the fixed-depth passkey has 1: the repeat's place was d


def test_passkey_depth_known_answers(corpus):
    val, V, starts = corpus['val'], corpus['V'], corpus['starts'][:10]
    buckets, ex = passkey_depth_examples(val, starts, T, L, 8, 3, V, 0, 7)
    res = summarize_retrieval([room_scores(scorer(CopyOracle(V)), buckets, ex)])
    assert [r['exact_match'] for r in res] == [1.0] * len(buckets)
    assert all(r['gain'] > 5 and r['gain_ci'][0] > 0 and r['repeat_loss'] < 1e-6 for r in res)
    for r, b in zip(res, range(len(buckets))):
        mine = [e for e in ex if e['bucket'] == b]
        assert r['per_example']['depth'] == [e['depth'] for e in mine]
        assert r['per_example']['distance'] == [e['distance'] for e in mine]
        assert r['per_example']['exact'] == [[1] * len(mine)] and len(r['per_example']['gain'][0]) == len(mine)
    flat = summarize_retrieval([room_scores(scorer(Unigram(val, V)), buckets, ex)])
    assert all(r['exact_match'] == 0.0 and abs(r['gain']) < 1e-6 for r in flat)


@pytest.mark.parametrize('queries, sep', [(1, ':'), (1, None), (2, ':')], ids=['one key', 'no separator',
                                                                              'multi-query'])
def test_needles_geometry_and_known_answers(corpus, queries, sep):
    val, V, starts, meta = corpus['val'], corpus['V'], corpus['starts'], corpus['meta']
    sep = separator_token(meta) if sep else None
    kl, vl, k = 4, 3, 4
    buckets, ex = needle_examples(val, starts, T, L, V, 0, 5, needles=k, queries=queries, key_len=kl, value_len=vl,
                                  sep=sep)
    rec = kl + vl + (sep is not None)
    assert [b[1] for b in buckets][0] == queries * rec and len(ex) == len(buckets) * len(starts)
    for e in ex:
        label, lo, hi = buckets[e['bucket']]
        q, seq, nd = e['query'], e['seq'], e['needles']
        assert len(seq) == q + queries * rec <= (L if hi <= L else T)
        spans = sorted((x['pos'], x['pos'] + rec) for x in nd)
        assert len(nd) == k and spans[0][0] >= 0 and spans[-1][1] <= q  # every needle before the query
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # and none overlaps another
        assert len({tuple(x['key']) for x in nd}) == k
        asked = [x for x in nd if x['queried']]
        assert len(asked) == queries and e['depth'] == asked[0]['pos'] and e['distance'] == q - asked[0]['pos']
        where = []
        for j, x in enumerate(asked):
            record = list(x['key']) + ([sep] if sep is not None else []) + list(x['value'])
            assert list(seq[x['pos']:x['pos'] + rec]) == record == list(seq[q + j * rec:q + (j + 1) * rec])
            assert lo <= q + j * rec - x['pos'] < hi
            where += list(range(q + j * rec + rec - vl - 1, q + (j + 1) * rec - 1))
        assert e['where'] == where
        for x in nd:
            assert 0 not in x['key'] and 0 not in x['value'] and sep not in list(x['key']) + list(x['value'])
            hits = [i for i in range(q - kl + 1) if list(seq[i:i + kl]) == list(x['key'])]
            assert hits == [x['pos']]  # the key is found once, at its needle: the answer is unique
    again = needle_examples(val, starts, T, L, V, 0, 5, needles=k, queries=queries, key_len=kl, value_len=vl, sep=sep)
    assert same(again, (buckets, ex))
    sub = [e for e in ex if e['start'] in starts[:8]]
    res = summarize_retrieval([room_scores(scorer(CopyOracle(V)), buckets, sub)])
    assert [r['exact_match'] for r in res] == [1.0] * len(buckets) and all(r['n'] == 8 for r in res)
    assert all(r['loss'] < 1e-6 and 'gain' not in r and len(r['per_example']['loss'][0]) == 8 for r in res)
    flat = summarize_retrieval([room_scores(scorer(Unigram(val, V)), buckets, sub)])
    assert all(r['exact_match'] == 0.0 and r['loss'] > 2 for r in flat)


def test_needle_depths_spread(corpus):
    buckets, ex = needle_examples(corpus['val'], corpus['starts'] * 4, T, L, corpus['V'], 0, 5)
    for b, (label, lo, hi) in enumerate(buckets):
        p = np.array([e['depth'] for e in ex if e['bucket'] == b])
        most = (L if hi <= L else T) - 9 - lo  # the deepest a needle at distance lo can be (records of 9 tokens)
        assert len(set(p.tolist())) > min(20, most // 2) and p.max() > 0.7 * most, label  # not one fixed depth


def test_recall_lines_and_known_answers(corpus):
    val, V, starts, meta = corpus['val'], corpus['V'], corpus['starts'], corpus['meta']
    nl = newline_tokens(meta)
    K, cue = 20, 4
    buckets, ex = recall_examples(val, starts, T, L, K, cue, nl, 0, 9)
    assert [b[0] for b in buckets] == ['20-44', '64-128', '128-256']  # 48-63 cannot hold a line of 20 inside 64
    text = np.asarray(val)
    for e in ex:
        at, line = e['line'], list(e['key'])
        assert at == 0 or text[at - 1] in nl + [0]  # a line's beginning
        assert line == text[at:at + K].tolist() and not set(line) & set(nl + [0])  # real text, one line
        window = np.array(val[e['start']:e['start'] + len(e['seq'])], dtype=np.int64)
        assert not any(list(window[i:i + K]) == line for i in range(len(window) - K + 1))  # no copy in the text
        p, d = e['depth'], e['distance']
        assert list(e['seq'][p:p + K]) == line == list(e['seq'][p + d:]) == list(e['control'][p + d:])
        assert (e['control'][:p + d] == window[:p + d]).all()
        assert e['where'] == list(range(p + d + cue - 1, p + d + K - 1))
    assert same(recall_examples(val, starts, T, L, K, cue, nl, 0, 9), (buckets, ex))
    sub = [e for e in ex if e['start'] in starts[:10]]
    res = summarize_retrieval([room_scores(scorer(CopyOracle(V)), buckets, sub)])
    assert all(r['gain'] > 1 and r['gain_ci'][0] > 0 and r['exact_match'] == 1.0 for r in res)
    flat = summarize_retrieval([room_scores(scorer(Unigram(val, V)), buckets, sub)])
    assert all(abs(r['gain']) < 1e-6 and r['gain_ci'][0] <= 0 <= r['gain_ci'][1] for r in flat)


def test_text_lines_and_vocabulary_tokens(corpus):
    meta = corpus['meta']
    assert newline_tokens(meta) == [meta['itos'].index('\n')]
    assert separator_token(meta) == meta['itos'].index(':') and separator_token(meta, '§') is None
    assert text_lines(np.array([5, 5, 5, 1, 5, 5, 0, 5, 5, 5, 5]), [1], 0, 3).tolist() == [0, 7]
    pytest.importorskip('tiktoken')
    gpt2 = dict(tokenizer='gpt2', vocab_size=50257, eot_token=50256)
    try:
        nls = newline_tokens(gpt2)
    except Exception as e:  # pragma: no cover
        pytest.skip(f"tiktoken's gpt2 encoding is not available here ({e})")
    assert {198, 628} <= set(nls) and 50256 not in nls
    assert separator_token(gpt2) in (25, None)


def test_rows_are_sorted_by_length_and_scored_in_place(corpus):
    """score_rows hands the scorer the rows sorted by the length they need and gives the outcomes back in the
    order given; the old passkey (retrieval_scores) keeps its output and now carries depth and distance."""
    val, V, starts = corpus['val'], corpus['V'], corpus['starts'][:12]
    buckets, ex = passkey_depth_examples(val, starts, T, L, 8, 3, V, 0, 7)
    seen = []
    rows, where = [e['seq'] for e in ex], [e['where'] for e in ex]
    loss, hit = score_rows(scorer(CopyOracle(V), 4, seen), rows, where)
    assert seen == sorted(seen) and len(seen) == -(-len(ex) // 4)
    ref_l, ref_h = scorer(CopyOracle(V))(torch.from_numpy(np.stack([np.pad(r, (0, T - len(r))) for r in rows])), where)
    for a, b, c, d in zip(loss, ref_l, hit, ref_h):
        np.testing.assert_allclose(a, b, atol=1e-6)
        assert (c == d).all()
    pb, pe = passkey_examples(val, starts, [16, 32, 64], 64, 16, 6, 2, V, 0, 7)
    res = retrieval_scores(scorer(CopyOracle(V)), pb, pe, 6, 4)
    assert [set(r) for r in res] == [{'bucket', 'distance_lo', 'distance_hi', 'exact', 'gain', 'repeat_loss',
                                      'control_loss', 'depth', 'distance'}] * len(pb)
    two = summarize_retrieval([res, res])
    assert list(two[0]) == ['bucket', 'distance_lo', 'distance_hi', 'n', 'seeds', 'exact_match', 'exact_match_ci',
                            'repeat_loss', 'control_loss', 'gain', 'gain_ci', 'per_example', 'exact_match_seed_sd',
                            'gain_seed_sd']
    assert two[0]['per_example']['exact'] == [[1] * 12] * 2 and two[0]['per_example']['depth'] == [2] * 12


def test_eval_score_runs_the_rooms(corpus):
    """Through lab.measure.scoring.score itself (a static plan, then every token at its own length): the oracle's outcomes."""
    import lab.measure.scoring as scoring
    val, V, starts = corpus['val'], corpus['V'], corpus['starts'][:4]
    buckets, ex = needle_examples(val, starts, T, L, V, 0, 5, queries=2)
    pb, pe = passkey_examples(val, starts, [16, 32, 64], 64, 16, 6, 2, V, 0, 7)
    for plan in (([(1, T)], T), ([(1, T)], 0)):
        score = lambda rows, where, preds=False: scoring.score(CopyOracle(V), rows, where, plan,  # noqa: E731
                                                               torch.no_grad(), 4, preds=preds)
        got = room_scores(score, buckets, ex)
        assert all(all(r['exact']) for r in got)
        assert all(r['emitted'] == r['rank'] for r in got)  # the oracle writes the asked record's value
        assert all(all(r['exact']) and min(r['gain']) > 5 for r in retrieval_scores(score, pb, pe, 6, 4))


def test_make_rooms_as_eval_uses_them(corpus):
    """eval.py's flow: the rooms built once, each arm's seeds scored, summarized per room; sizes 0 skip a room."""
    val, V, meta, starts = corpus['val'], corpus['V'], corpus['meta'], corpus['starts'][:4]
    rooms, skipped = make_rooms(val, starts, T, L, meta, 1337, 4, len(starts), depth_len=10, needles=3, key_len=3,
                                value_len=3, recall_len=20)
    assert skipped == {}
    assert list(rooms) == ['passkey_depth', 'needles', 'needles_mq', 'recall']
    assert rooms['passkey_depth']['settings'] == dict(examples=4, buckets=['10-47', '48-54', '64-128', '128-256'],
                                                      len=10, cue=4, control=False)
    assert 'control' not in rooms['passkey_depth']['examples'][0]  # exact match and loss only: half the rows
    assert rooms['needles_mq']['settings']['queries'] == 2 and rooms['needles']['settings']['sep'] == \
        meta['itos'].index(':')
    again, _ = make_rooms(val, starts, T, L, meta, 1337, 4, len(starts), depth_len=10, needles=3, key_len=3,
                          value_len=3, recall_len=20)
    assert same([r['examples'] for r in again.values()], [r['examples'] for r in rooms.values()])
    once = {n: room_scores(scorer(CopyOracle(V)), r['buckets'], r['examples']) for n, r in rooms.items()}
    per_seed = [once, once]  # two seeds of one arm (the same model twice)
    summary = {n: summarize_retrieval([p[n] for p in per_seed]) for n in rooms}
    for n, buckets in summary.items():
        assert [b['bucket'] for b in buckets] == rooms[n]['settings']['buckets']
        for b in buckets:
            pe = b['per_example']
            assert b['seeds'] == 2 and np.shape(pe['exact']) == (2, 4) and len(pe['depth']) == len(pe['distance']) == 4
            assert ('gain' in pe) == (n == 'recall') and ('loss' in pe) == (n != 'recall') and b['exact_match'] == 1.0
    assert json.loads(json.dumps(summary)) == summary  # plain JSON
    assert list(make_rooms(val, starts, T, L, meta, 1, 4, 4, depth_len=0, needles=0, recall_len=20)[0]) == ['recall']
    with pytest.raises(ValueError, match='inside L'):
        make_rooms(val, starts, T, L, meta, 1, 4, 4, depth_len=60)
    small, skipped = make_rooms(val, starts, 64, 16, meta, 1, 4, 4, strict=False)  # the defaults at L = 16
    assert list(small) == [] and list(skipped) == ['passkey_depth', 'needles', 'needles_mq', 'recall']
    assert 'inside L=16' in skipped['needles']


def test_depth_plot(tmp_path):
    """retrieval_depth.png from a summary.json alone: the base, the best zero-shot and the best fine-tune beyond L."""
    import lab.pictures.retrieval_plots as retrieval_plots
    import plot
    rng = np.random.default_rng(0)

    def room(p):
        out = []
        for label, lo, hi in (('8-95', 8, 96), ('96-120', 96, 121), ('128-256', 128, 256), ('512-1024', 512, 1017)):
            d = rng.integers(lo, hi, 32).tolist()
            ex = (rng.random((2, 32)) < p).astype(int).tolist()
            depth = [int(rng.integers(0, (1024 if lo >= 128 else 128) - x - 8 + 1)) for x in d]
            out.append(dict(bucket=label, distance_lo=lo, distance_hi=hi - 1, exact_match=float(np.mean(ex)),
                            per_example=dict(exact=ex, depth=depth, distance=d)))
        return out
    arms = [dict(name='base (L=128)', kind='base', passkey_depth=room(0.5)),
            dict(name='linear s=8 zero-shot', kind='zero-shot', passkey_depth=room(0.1)),
            dict(name='yarn s=8 zero-shot', kind='zero-shot', passkey_depth=room(0.7)),
            dict(name='yarn s=4 ft100', kind='fine-tuned', passkey_depth=room(0.9))]
    summary = dict(settings=dict(T=1024, L=128, passkey_depth=dict(len=8, cue=3, examples=32)), arms=arms)
    path, png = retrieval_plots.plot_retrieval_depth(str(tmp_path), json.loads(json.dumps(summary)))  # picks 3 of the 4 arms
    assert path.endswith('retrieval_depth.png') and png[:8] == b'\x89PNG\r\n\x1a\n'
    assert 'retrieval_depth.png' in plot.SOURCES and plot.OPTIONAL['retrieval_depth.png'] == ('passkey_depth',)

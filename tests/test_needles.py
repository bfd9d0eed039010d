"""The needle room's design checks (issue 31): the asked record's rank is uniform past L, and the record whose value
a model starts to write is recorded, so that a positional shortcut shows. The corpus fixture and the stand-in
scorers come from test_retrieval.py."""
import numpy as np
import torch
import torch.nn.functional as F

from conftest import at_positions
from lab.measure.outcomes import room_scores, summarize_retrieval
from lab.measure.retrieval import needle_examples, separator_token
from test_retrieval import L, T, corpus, scorer  # noqa: F401  (corpus: the fixture)


def test_needle_rank_is_uniform_at_every_distance_past_L(corpus):
    """The asked record's rank (records before it) is uniform over 0..k-1 in each bucket past L: drawn so, checked
    by a chi-square over 4 x 32 windows (p > 0.001; the old placement put it first in most examples past 2L).
    Inside L, where the row is short, the ranks that fit are what they are (recorded, not claimed uniform)."""
    from scipy import stats
    buckets, ex = needle_examples(corpus['val'], corpus['starts'] * 4, T, L, corpus['V'], 0, 5)
    past = [b for b, (_, lo, _) in enumerate(buckets) if lo >= L]
    assert past
    for b in past:
        counts = np.bincount([e['rank'] for e in ex if e['bucket'] == b], minlength=4)
        assert len(counts) == 4 and stats.chisquare(counts).pvalue > 1e-3, (buckets[b], counts)
    for e in ex:
        assert e['rank'] == sum(n['pos'] < e['depth'] for n in e['needles'])


class Oldest(torch.nn.Module):
    """After a needle's separator, writes the first value token of the OLDEST record (the shortcut the rank fixes):
    at every position, the token that followed the first ':' of the row."""

    def __init__(self, V, sep):
        super().__init__()
        self.V, self.sep = V, sep

    def forward(self, idx, targets, reduction='none', pos=None, attend=None, rope=None, at=None):
        B, n = idx.shape
        logits = torch.zeros(B, n, self.V)
        for b in range(B):
            first = (idx[b] == self.sep).nonzero()
            logits[b, :, idx[b, first[0] + 1] if len(first) else 1] = 30.0
        return at_positions(logits, F.cross_entropy(logits.view(-1, self.V), targets.reshape(-1),
                                                    reduction='none').view(B, n), at)


def test_emitted_record_shows_a_copy_the_oldest_strategy(corpus):
    """room_scores records which record's value the model starts to write: a model that copies the oldest record
    emits rank 0 everywhere (never right where another record is asked), and the confusion says so."""
    V, meta = corpus['V'], corpus['meta']
    sep = separator_token(meta)
    val = np.where(corpus['val'] == sep, 1, corpus['val'])  # no ':' in the text: the row's first ':' is a record's
    buckets, ex = needle_examples(val, corpus['starts'][:12], T, L, V, 0, 5, sep=sep)
    got = room_scores(scorer(Oldest(V, sep)), buckets, ex)
    for r in got:
        assert r['emitted'] == [0] * len(r['rank'])
        assert not any(x for x, k in zip(r['exact'], r['rank']) if k != 0)  # right only where the oldest is asked
    per = summarize_retrieval([got])[0]['per_example']
    assert per['emitted'] == [got[0]['emitted']] and per['rank'] == got[0]['rank']

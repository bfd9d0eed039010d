"""Issue 30's faster scoring, each checked against the slow path it replaces: forward(at=) (the last layer runs only
the wanted queries) equals a full forward at those positions for causal, smeared-key and ALiBi attention, with and
without position ids and a dynamic scale; lab.measure.scoring.score uses it and scores as before."""
import numpy as np
import pytest
import torch

import lab.alibi  # noqa: F401  registers pos_emb='alibi'
import lab.smeared_keys  # noqa: F401  registers attention='smear_keys'
from lab.measure.scoring import score, scoring_plan
from model import GPT, GPTConfig

V = 37


def tiny(**kw):
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=16, vocab_size=V, n_layer=3, n_head=2, n_embd=32, **kw)).eval()


@pytest.mark.parametrize('kw', [{}, {'attention': 'smear_keys'}, {'pos_emb': 'alibi'}, {'pos_emb': 'learned'},
                                {'rope_scaling': {'rope_type': 'dynamic', 'factor': 1.0,
                                                  'original_max_position_embeddings': 8}}])
def test_forward_at_equals_the_full_forward_there(kw):
    model = tiny(**kw)
    x = torch.randint(0, V, (3, 15))
    at = torch.tensor([[0, 7, 14], [3, 3, 9], [14, 2, 5]])  # any order, repeats allowed
    with torch.no_grad():
        full, full_loss = model(x, x, reduction='none')
        got, got_loss = model(x, x, reduction='none', at=at)
    rows = torch.arange(3)[:, None]
    assert got.shape == (3, 3, V) and got_loss.shape == (3, 3)
    torch.testing.assert_close(got, full[rows, at], atol=2e-5, rtol=0)
    torch.testing.assert_close(got_loss, full_loss[rows, at], atol=2e-5, rtol=0)


def test_forward_at_with_position_ids_per_row():
    """A moving-scale job: each row stops at its own position (ids clamped after it), one query kept per row."""
    model = tiny(rope_scaling={'rope_type': 'dynamic', 'factor': 1.0, 'original_max_position_embeddings': 4})
    x, stop = torch.randint(0, V, (2, 12)), torch.tensor([6, 11])
    pos = torch.minimum(torch.arange(12)[None], stop[:, None])
    with torch.no_grad():
        want = [model(x[r:r + 1, :stop[r] + 1])[0][0, -1] for r in range(2)]  # a forward of exactly p + 1 tokens
        got = model(x, pos=pos, at=stop[:, None])[0][:, 0]
    for r in range(2):
        torch.testing.assert_close(got[r], want[r], atol=2e-5, rtol=0)


def test_at_is_refused_with_attend():
    model = tiny()
    with pytest.raises(ValueError, match='cannot be combined with attend'):
        model(torch.zeros(1, 4, dtype=torch.long), at=torch.zeros(1, 1, dtype=torch.long),
              attend=lambda i, q, k, v: q)


@pytest.mark.parametrize('dynamic', [False, True])
def test_score_with_trimmed_forwards_equals_one_position_at_a_time(dynamic):
    """score() (few positions per row: the last layer runs their queries only) against a forward of exactly p + 1
    tokens per scored position."""
    sc = {'rope_type': 'dynamic', 'factor': 1.0, 'original_max_position_embeddings': 8} if dynamic else None
    model = tiny(rope_scaling=sc)
    rows = torch.randint(0, V, (5, 40))
    positions = [[3, 20, 21], [38], [10, 11, 12, 30], [0, 39 - 1], [25]]
    loss, hit = score(model, rows, positions, scoring_plan(model, 39, 8), torch.autocast('cpu', enabled=False), 2)
    for r, ps in enumerate(positions):
        for j, p in enumerate(ps):
            with torch.no_grad():
                logits, nll = model(rows[r:r + 1, :p + 1], rows[r:r + 1, 1:p + 2], reduction='none')
            assert loss[r][j] == pytest.approx(float(nll[0, -1]), abs=2e-5)
            assert hit[r][j] == bool(logits[0, -1].argmax() == rows[r, p + 1])

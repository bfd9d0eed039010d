"""lab/crop.py, the crop control (#20): the sliding window against explicit masked attention and the causal forward,
the truncated scorer against a direct forward over each cut input, where the two forms agree and where (and why)
they differ, the entropy of the truncated crop, and the arm specs."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import lab.alibi, lab.smeared_keys  # noqa: E401,F401  register the lab's attention classes
from lab.crop import crop_name, is_crop_spec, parse_crop, truncated_scores, window_attention, window_logits
from lab.measure.diagnostics import attention_entropy, truncated_entropy
from model import GPT, GPTConfig

V, T = 40, 16


def make(**kw):
    torch.manual_seed(0)
    return GPT(GPTConfig(**dict(dict(block_size=16, vocab_size=V, n_layer=2, n_head=2, n_embd=32), **kw))).eval()


@pytest.fixture(scope='module')
def model():
    return make()


@pytest.fixture(scope='module')
def rows():
    return torch.randint(0, V, (3, T + 1), generator=torch.Generator().manual_seed(1))


def nll_at(logits, target):
    return F.cross_entropy(logits.float(), target, reduction='none')


# ----------------------------------------------------------------------------- sliding window


@pytest.mark.parametrize('kw', [{}, {'pos_emb': 'alibi'}, {'pos_emb': 'none'}, {'attention': 'smear_keys'}])
def test_window_at_least_T_is_the_causal_forward(kw, rows):
    m = make(**kw)
    x = rows[:, :T]
    with torch.no_grad():
        ref = m(x)[0]
        for w, chunk in ((T, 256), (T, 5), (10 * T, 3)):
            assert torch.allclose(m(x, attend=window_attention(m, w, chunk))[0], ref, atol=1e-5, rtol=0)


def test_window_attention_is_masked_softmax(model):
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 2, 11, 8, generator=g) for _ in range(3))
    i, j = torch.arange(11)[:, None], torch.arange(11)[None]
    for w in (1, 3, 7):
        att = (q @ k.transpose(-2, -1)) / math.sqrt(8)
        ref = torch.softmax(att.masked_fill((j > i) | (j <= i - w), float('-inf')), -1) @ v
        for chunk in (1, 4, 256):
            assert torch.allclose(window_attention(model, w, chunk)(0, q, k, v), ref, atol=1e-6)
        scores = window_logits(model, w)(1, q, k, 4, 9)  # queries 4..8 against keys 0..8
        seen = torch.isfinite(scores[0, 0])
        assert torch.equal(seen, ((j[:, :9] <= i[4:9]) & (j[:, :9] > i[4:9] - w)))


def test_window_one_attends_to_itself(model):
    """Hand-built q/k/v where every query would prefer key 0 by far: with window 1 each query still returns its own
    value row, exactly."""
    t = 6
    q = torch.ones(1, 1, t, 4) * 10
    k = torch.zeros(1, 1, t, 4)
    k[..., 0, :] = 10  # key 0 dominates every causal score
    v = torch.arange(t, dtype=torch.float32).view(1, 1, t, 1).expand(1, 1, t, 4) * torch.tensor([1., 2., 3., 4.])
    y = window_attention(model, 1, chunk=4)(0, q, k, v)
    assert torch.equal(y, v)
    assert not torch.allclose(window_attention(model, t)(0, q, k, v)[..., 1:, :], v[..., 1:, :])  # causal: key 0


# ----------------------------------------------------------------------------- truncated input


def direct(m, rows, r, p, w):
    """The reference: one forward over only rows[r, max(0, p - w + 1) : p + 1]."""
    x = rows[r, max(0, p - w + 1):p + 1][None]
    with torch.no_grad():
        logits = m(x)[0][0, -1]
    return float(nll_at(logits[None], rows[r, p + 1][None])), bool(logits.argmax() == rows[r, p + 1])


@pytest.mark.parametrize('kw', [{}, {'rope_scaling': {'rope_type': 'dynamic', 'factor': 2.0,
                                                     'original_max_position_embeddings': 4}}])
def test_truncated_scores_are_direct_forwards_on_the_cut_input(kw, rows):
    m = make(**kw)
    w = 5
    positions = [[15, 0, 3, 4, 9, 7], [], list(range(T))]
    loss, hit = truncated_scores(m, rows, positions, w, None, batch_size=1)  # tiny batches: several per length
    assert [len(x) for x in loss] == [len(x) for x in hit] == [6, 0, T]
    assert all(x.dtype == np.float64 for x in loss) and all(x.dtype == bool for x in hit)
    for r, ps in enumerate(positions):
        for j, p in enumerate(ps):
            ref_l, ref_h = direct(m, rows, r, p, w)
            assert loss[r][j] == pytest.approx(ref_l, abs=1e-5)
            assert hit[r][j] == ref_h
    big = truncated_scores(m, rows, positions, w, None, batch_size=64)  # one batch per length: same numbers
    assert all(np.allclose(a, b, atol=1e-5) for a, b in zip(loss, big[0]))


def test_before_the_window_both_forms_are_the_base(model, rows):
    w = 6
    x, y = rows[:, :T], rows[:, 1:]
    with torch.no_grad():
        base = model(x, y, reduction='none')[1]
        sliding = model(x, y, reduction='none', attend=window_attention(model, w))[1]
    loss, _ = truncated_scores(model, rows, [list(range(w))] * 3, w, None, 8)
    assert torch.allclose(sliding[:, :w], base[:, :w], atol=1e-5)
    assert np.allclose(np.stack(loss), base[:, :w].numpy(), atol=1e-5)
    # the whole row at window >= T: the truncated crop is the base everywhere
    everywhere, _ = truncated_scores(model, rows, [list(range(T))] * 3, T, None, 8)
    assert np.allclose(np.stack(everywhere), base.numpy(), atol=1e-5)


def test_receptive_fields_sliding_vs_truncated(rows):
    """Change token 0 and see which predictions move. Truncated to w: only p < w (the crops that hold token 0).
    Sliding window w through 2 layers: p <= 2 (w - 1), so at w <= p <= 2 (w - 1) the two forms differ; past that
    neither moves."""
    m, w = make(n_layer=2), 3
    other = rows.clone()
    other[:, 0] = (rows[:, 0] + 1) % V
    ps = [list(range(T))] * 3

    def sliding(r):
        with torch.no_grad():
            return m(r[:, :T], r[:, 1:], reduction='none', attend=window_attention(m, w, chunk=4))[1].numpy()
    moved_s = np.abs(sliding(rows) - sliding(other)).max(0)
    moved_t = np.abs(np.stack(truncated_scores(m, rows, ps, w, None, 8)[0]) -
                     np.stack(truncated_scores(m, other, ps, w, None, 8)[0])).max(0)
    assert (moved_t[:w] > 1e-5).all() and (moved_t[w:] < 1e-6).all()
    reach = 2 * (w - 1)
    assert (moved_s[:reach + 1] > 1e-5).all() and (moved_s[reach + 1:] < 1e-6).all()
    # the two forms: the same before w, different where the sliding window still reaches token 0
    s, t = sliding(rows), np.stack(truncated_scores(m, rows, ps, w, None, 8)[0])
    assert np.allclose(s[:, :w], t[:, :w], atol=1e-5)
    assert (np.abs(s[:, w:reach + 1] - t[:, w:reach + 1]).max(0) > 1e-5).all()


def test_one_layer_forms_agree(rows):
    m, w = make(n_layer=1), 4
    with torch.no_grad():
        s = m(rows[:, :T], rows[:, 1:], reduction='none', attend=window_attention(m, w))[1].numpy()
    t = np.stack(truncated_scores(m, rows, [list(range(T))] * 3, w, None, 8)[0])
    assert np.allclose(s, t, atol=1e-5)


def test_truncated_entropy_is_the_last_query_of_the_cut_forward(model, rows):
    x, w = rows[:2, :T], 5
    ps = [0, 3, 4, 11, 15]
    got = truncated_entropy(model, x, ps, w, None, batch_size=2, chunk=3)
    for p in range(T):
        if p not in ps:
            assert np.isnan(got[p])
            continue
        ref = attention_entropy(model, x[:, max(0, p - w + 1):p + 1])[..., -1].mean()
        assert got[p] == pytest.approx(float(ref), abs=1e-5)


def test_errors(model, rows):
    for bad in (0, -1, 2.5, True, None):
        with pytest.raises(ValueError, match='window'):
            window_attention(model, bad)
        with pytest.raises(ValueError, match='window'):
            truncated_scores(model, rows, [[0]] * 3, bad, None, 8)
    with pytest.raises(ValueError, match='outside'):
        truncated_scores(model, rows, [[T], [], []], 4, None, 8)  # no target for p = T
    with pytest.raises(ValueError, match='one list per row'):
        truncated_scores(model, rows, [[0]], 4, None, 8)


def test_arm_specs():
    assert is_crop_spec('crop') and is_crop_spec(' crop:window=64') and not is_crop_spec('rerope:window=64')
    both = parse_crop('crop', 128)
    assert both == [{'window': 128, 'form': 'sliding'}, {'window': 128, 'form': 'truncated'}]
    assert [crop_name(c) for c in both] == ['crop w=128 (sliding)', 'crop w=128 (truncated)']
    assert parse_crop('crop:window=64:form=truncated', 128) == [{'window': 64, 'form': 'truncated'}]
    for bad in ('crop:window=0', 'crop:form=tiled', 'crop:size=4', 'crop:window=x', 'crop:window=4:window=5'):
        with pytest.raises(ValueError, match='crop'):
            parse_crop(bad, 128)

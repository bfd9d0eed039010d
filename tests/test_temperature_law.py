"""Issue 63, item 3: the temperature-law diagnostic (Hayase & Karakida 2026, lab/measure/temperature_law.py): beta_c of
an attention row against hand-worked rows and a direct root search, the law fit against rows built to follow a law and
against i.i.d. score families, the interval over windows, and the measurement through the model's attend seam against
scores computed by hand."""
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import brentq

from lab.crop import window_logits
from lab.measure import temperature_law as tl
from lab.stats import t975
from lab.verdicts.summary_md import law_table
from model import GPT, GPTConfig

NEG = float('-inf')


def test_hand_worked_rows():
    """One competitor: it holds half at beta = 0; k competitors at gap g: k e^{-beta g} = 1 -> ln(k) / g; a tie with
    the top (beside others): no beta separates them; one key: nothing to separate."""
    got = tl.critical_beta(torch.tensor([[0.0, -2.0, NEG, NEG], [0.0, -2.0, -2.0, -2.0], [3.0, 3.0, 1.0, NEG],
                                         [1.0, NEG, NEG, NEG]]))
    assert got[0] == 0 and math.isclose(got[1], math.log(3) / 2, rel_tol=1e-12)
    assert got[2] == math.inf and got[3] == 0
    for k, g in ((2, 0.5), (7, 1.3), (100, 4.0)):
        row = torch.tensor([1.0] + [1.0 - g] * k, dtype=torch.float64)
        assert math.isclose(tl.critical_beta(row), math.log(k) / g, rel_tol=1e-12)


def test_against_a_direct_root_and_the_half_mass():
    """Random rows (masked keys mixed in), vectorised over (B, H): the root of sum_j exp(-beta g_j) = 1 found by
    brentq, and at that beta the softmax of beta * s puts half of the mass on the top key."""
    torch.manual_seed(0)
    s = torch.randn(3, 4, 50, dtype=torch.float64) * 2
    s[0, 1, 30:] = NEG
    got = tl.critical_beta(s)
    for b, h in ((0, 0), (0, 1), (2, 3)):
        row = s[b, h][torch.isfinite(s[b, h])].numpy()
        g = np.sort(row.max() - row)[1:]
        want = brentq(lambda x: np.log(np.exp(-x * g).sum()), 1e-9, np.log(len(g)) / g.min(), xtol=1e-15)
        assert math.isclose(got[b, h], want, rel_tol=1e-10)
    assert torch.allclose(F.softmax(got[..., None] * s, -1).amax(-1), torch.full((3, 4), 0.5, dtype=torch.float64),
                          atol=1e-10)
    assert torch.equal(tl.critical_beta(s[0, 1, :30]), got[0, 1])  # the masked keys count for nothing


@pytest.mark.parametrize('q', [0.5, 1.0, 2.0])
def test_the_fit_recovers_a_law_built_into_the_rows(q):
    """Rows of n keys whose n - 1 competitors sit at gap ln(n - 1) / (ln n)^q have beta_c = (ln n)^q exactly, so the
    fit of ln beta_c on ln ln n returns p = q and c = 0; rows under MIN_KEYS are left out."""
    ns = [8, 20, 50, 130, 400, 1000]
    rows = torch.full((len(ns), max(ns)), NEG, dtype=torch.float64)
    for i, n in enumerate(ns):
        rows[i, 0] = 0.0
        rows[i, 1:n] = -math.log(n - 1) / math.log(n) ** q
    beta = tl.critical_beta(rows).numpy()
    assert np.allclose(beta, [math.log(n) ** q for n in ns], rtol=1e-10)
    beta[0] = 1e6  # (n = 8 < MIN_KEYS: ignored)
    p, c = tl.law_fit(ns, beta)
    assert math.isclose(p, q, rel_tol=1e-9) and abs(c) < 1e-9


def test_iid_score_families_order_as_their_laws():
    """i.i.d. rows at n = 16..4096: an exponential tail's beta_c barely grows, Gaussian rows grow slower than the ln n
    family (log of exponentials) and the (ln n)^2 family (an endpoint approached as exp(-1/|x|)) fastest, each
    near its finite-n exponent (the asymptotic 0, 1/2, 1, 2 are reached slowly, reference_laws' docstring)."""
    ns = np.unique(np.geomspace(16, 4096, 8).astype(int))
    ref = tl.reference_laws(ns, reps=48)
    assert ref['constant'] < 0.4 and 0.6 < ref['(ln n)^1/2'] < 1.05 < ref['ln n'] < 1.6 and 2.0 < ref['(ln n)^2'] < 2.8


def test_the_interval_is_over_windows():
    """The window is the unit: the mean and t interval of the windows' p (a NaN window, no fit, dropped), and the laws
    whose exponent the interval holds."""
    p = tl.law_interval([[1.0, 2.0, 3.0, math.nan]])
    h = t975(2) * 1.0 / math.sqrt(3)
    assert p['windows'] == 3 and p['p'] == 2.0 and np.allclose(p['ci'], [2 - h, 2 + h])
    assert p['laws'] == ['constant', '(ln n)^1/2', 'ln n', '(ln n)^2']  # [-0.48, 4.48]: three windows decide nothing
    got = tl.law_interval([[0.4, 0.5, 0.6, 0.5]])
    assert got['laws'] == ['(ln n)^1/2'] and np.isclose(got['p'], 0.5)
    assert tl.law_interval([[math.nan, math.nan]])['p'] is None


def test_positions_are_geometric_in_each_bucket():
    """law_positions(L=16, T=64, 4): n geometric from max(lo + 1, MIN_KEYS) to hi in each bucket (0-16 has one)."""
    assert tl.law_positions(16, 64, 4) == [15, 16, 20, 25, 31, 32, 40, 50, 63]


def tiny(**kw):
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=64, vocab_size=20, n_layer=2, n_head=2, n_embd=16, **kw)).eval()
    with torch.no_grad():
        for blk in m.transformer.h:
            blk.attn.c_attn.weight.mul_(5.0)  # (sharper rows than at init)
    return m


def by_hand(m, x, positions, window=None, sink=None):
    """beta_c of every layer's and head's row from q and k as the model's own forward makes them, scored by hand
    (q k^T / sqrt(d), causal, a window; a sink logit appended as a column): [n_layer, B, H, P]."""
    out, keep = [], []

    def seam(layer, q, k, v):
        keep.append((q, k))
        return m.transformer.h[layer].attn.attend(q, k, v)
    with torch.no_grad():
        m(x, attend=seam)
    for q, k in keep:
        att = (q @ k.transpose(-2, -1)).double() / math.sqrt(q.size(-1))
        i, j = torch.arange(x.size(1))[:, None], torch.arange(x.size(1))[None]
        ok = (j <= i) & ((i - j < window) if window else True)
        att = att.masked_fill(~ok, NEG)
        if sink is not None:
            att = torch.cat((att, torch.full((*att.shape[:-1], 1), sink, dtype=att.dtype)), -1)
        out.append(torch.stack([tl.critical_beta(att[:, :, p]) for p in positions], -1))
    return torch.stack(out).numpy()


def test_the_seam_measures_the_models_rows():
    """Every layer's and head's row as the forward computes it (n = p + 1 keys), the forward run by the arm's attend
    (called once a layer); with a sliding crop's score function n stops at its window."""
    m, x, pos = tiny(), torch.randint(0, 20, (3, 64)), [15, 30, 63]
    calls = []
    attend = lambda layer, q, k, v: calls.append(layer) or m.transformer.h[layer].attn.attend(q, k, v)  # noqa: E731
    beta, n = tl.row_betas(m, x, pos, attend=attend)
    assert calls == [0, 1] and beta.shape == (2, 3, 2, 3) and (n == np.array([16, 31, 64])).all()
    assert np.allclose(beta, by_hand(m, x, pos), rtol=1e-4)
    wb, wn = tl.row_betas(m, x, pos, logits=window_logits(m, 20))
    assert (wn == np.array([16, 20, 20])).all() and np.allclose(wb, by_hand(m, x, pos, window=20), rtol=1e-4)


def test_a_learned_sink_is_one_more_competitor():
    """lab/sinks.py's learned sink logit sits in the softmax beside the keys: one more competitor (n counts keys)."""
    m, x = tiny(attention='sinks'), torch.randint(0, 20, (2, 40))
    with torch.no_grad():
        for blk in m.transformer.h:
            blk.attn.sink.fill_(3.0)
    beta, n = tl.row_betas(m, x, [20, 39])
    assert (n == np.array([21, 40])).all()
    assert np.allclose(beta, by_hand(m, x, [20, 39], sink=3.0), rtol=1e-4)
    assert not np.allclose(beta, by_hand(m, x, [20, 39]), rtol=1e-3)  # (the sink changes them)


def test_eval_measure_summary_csv_and_table():
    """law_measures through an arm's form (off by default: None; the truncated crop: skipped), law_summary's buckets
    and fits, temperature_law.csv and summary.md's table from them."""
    m, L, T = tiny(), 16, 64
    seqs = torch.randint(0, 20, (4, T + 1))
    form = SimpleNamespace(truncated=False, logits=None, attend=None)
    run, plan = dict(L=L, T=T, seqs=seqs), ([(1, T)], T)
    cfg = dict(tl.DEFAULTS, law_rows=4)
    assert tl.law_measures(m, form, plan, run, cfg, torch.no_grad()) is None  # off by default
    cfg['temperature_law'] = True
    assert 'skipped' in tl.law_measures(m, SimpleNamespace(truncated=True), plan, run, cfg, torch.no_grad())
    got = tl.law_measures(m, form, plan, run, cfg, torch.no_grad())
    assert got['beta'].shape == (2, 4, 2, len(got['positions']))
    assert np.allclose(got['beta'], by_hand(m, seqs[:, :T], got['positions']), rtol=1e-4)
    s = tl.law_summary([got], L, T)
    assert list(s['buckets']) == ['0-16', '16-32', '32-64'] and s['buckets']['0-16']['rows'] == 2 * 4 * 2 * 1
    pos = np.asarray(got['positions'])
    b = got['beta'][..., (pos >= 32)]
    assert math.isclose(s['buckets']['32-64']['median'], float(np.median(b)))
    w0 = tl.law_fit(got['n'][:, 0], got['beta'][:, 0])[0]
    assert math.isclose(s['all']['per_window'][0][0], round(w0, 4)) and s['all']['windows'] == 4
    assert s['inside_L']['p'] is None  # one n (16) inside L: no fit
    layer1 = np.mean([tl.law_fit(got['n'][1, w], got['beta'][1, w])[0] for w in range(4)])
    assert len(s['all']['per_layer']) == 2 and math.isclose(s['all']['per_layer'][1], layer1, abs_tol=6e-4)
    text = tl.law_csv([dict(name='a', temperature_law=s), dict(name='b')])
    assert text.splitlines()[0].startswith('arm,bucket,median_beta_c') and len(text.splitlines()) == 1 + 3 + 3
    assert tl.law_csv([dict(name='b')]) is None
    md = law_table([dict(name='a', temperature_law=s)])
    assert md[-1].startswith('| a | ') and md[-1].count('|') == 8

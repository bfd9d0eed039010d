"""lab/pairs.py (python -m lab.pairs, issue 47 item 6): each rotary pair's share of the attention logit, checked on a
tiny GPT against a direct computation from the layer's q and k (norm products, attention-weighted contributions, the
logit they sum to, the complex form with e^{i(m-n)theta}), a zero-shot PI and YaRN against the plain model, the
command end to end on the fixture corpus, and bad inputs refused in one line."""
import csv
import json
import math
import os

import numpy as np
import pytest
import torch

from badinput import assert_refused, call
from data.common import atomic_torch_save, load_meta
from data.checkpoints import model_args
from lab import pairs
from model import GPT, GPTConfig

L, T = 16, 40


def make(**kw):
    """A tiny GPT (head_dim 16: 8 pairs) whose q and k weights are scaled up, so attention is far from uniform."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(**dict(dict(block_size=L, vocab_size=65, n_layer=2, n_head=2, n_embd=32), **kw))).eval()
    with torch.no_grad():
        for block in m.transformer.h:
            block.attn.c_attn.weight[:64] *= 12
    return m


def tokens(B, n):
    return torch.randint(0, 65, (B, n), generator=torch.Generator().manual_seed(1))


def captured(model, x, rope=None):
    """Every layer's q and k as the attend seam gets them (rotated), the forward otherwise unchanged."""
    got = {}

    def attend(layer, q, k, v):
        got[layer] = (q.clone(), k.clone())
        return model.transformer.h[layer].attn.attend(q, k, v)
    with torch.no_grad():
        model(x, attend=attend, rope=rope)
    return got


def table_of(model, x):
    return pairs.pair_table(*pairs.pair_totals(model, x, L))


def direct(q, k, L, window=None, picked=None):
    """norm, used, signed [head, bucket, pair] by loops over the queries (or those picked), from complex pairs
    (rotate-half layout); each query sees the keys n <= m (and m - n < window)."""
    h = q.size(-1) // 2
    qc, kc = (torch.complex(t[..., :h].double(), t[..., h:].double()) for t in (q, k))
    B, H, n, P = qc.shape
    out = np.zeros((3, H, 2, P))
    for b in range(B):
        for hd in range(H):
            for m in picked or range(n):
                keys = kc[b, hd, max(0, m - window + 1) if window else 0:m + 1]
                c = (qc[b, hd, m] * keys.conj()).real  # [keys, pairs]: Re[q_i conj(k_i)]
                p = torch.softmax(c.sum(-1) / math.sqrt(2 * h), -1)
                row = (qc[b, hd, m].abs() * keys.abs()).mean(0), (p[:, None] * c.abs()).sum(0), (p[:, None] * c).sum(0)
                for j, r in enumerate(row):
                    out[j, hd, int(m >= L)] += r.numpy()
    counts = [sum(m < L for m in picked), sum(m >= L for m in picked)] if picked else [min(L, n), n - L]
    return out / (np.array(counts) * B)[None, None, :, None]


@pytest.mark.parametrize('kw', [{}, {'n_kv_head': 1}, {'layers': 'rope:w=8,rope'}])
def test_the_measures_equal_a_direct_computation(kw):
    """norm (keys alike), used and signed (attention-weighted) of every layer, head, pair and bucket, from the q and k
    the layer saw (grouped-query heads; a layer with a sliding window sees fewer keys); the head 'all' row is the heads'
    mean; past L differs from inside L."""
    m, x = make(**kw), tokens(2, T)
    table, qk = table_of(m, x), captured(m, x)
    for layer, (q, k) in qk.items():
        want = direct(q, k, L, m.transformer.h[layer].attn.window)
        for j, name in enumerate(pairs.RAW):
            got = table[name][layer]
            assert np.allclose(got[:2], want[j], rtol=1e-4, atol=1e-7), (layer, name)
            assert np.allclose(got[2], want[j].mean(0), rtol=1e-4, atol=1e-7)
    assert table['norm'][0, 0, 0, 0] > 0.1  # (the scaled-up q and k: numbers well above float noise)
    assert not np.allclose(table['used'][:, :, 0], table['used'][:, :, 1], rtol=1e-2)


def test_evenly_spaced_queries_are_those_queries_measured():
    """--queries=4: 4 evenly spaced queries per bucket, its ends in (linspace(16, 39, 4) rounds to 16, 24, 31, 39),
    each measured as the direct computation has it."""
    assert pairs.query_chunks(T, L, 4, 100) == [[0, 1], [5, 6], [10, 11], [15, 17], [24, 25], [31, 32], [39, 40]]
    assert pairs.query_chunks(T, L, 0, 16) == [[0, 16], [16, 32], [32, 40]]
    m, x = make(), tokens(2, T)
    totals, counts = pairs.pair_totals(m, x, L, queries=4)
    assert counts.tolist() == [8, 8]
    table, (q, k) = pairs.pair_table(totals, counts), captured(m, x)[1]
    want = direct(q, k, L, picked=[0, 5, 10, 15, 16, 24, 31, 39])
    for j, name in enumerate(pairs.RAW):
        assert np.allclose(table[name][1, :2], want[j], rtol=1e-4, atol=1e-7), name


def test_the_shares_sum_to_one():
    m, x = make(), tokens(2, T)
    table = table_of(m, x)
    for name in ('norm', 'used'):
        share = table[f'{name}_share']
        assert np.allclose(share.sum(-1), 1.0, atol=1e-9)
        assert np.allclose(share, table[name] / table[name].sum(-1, keepdims=True))
        assert share.min() >= 0 and share.max() < 1
    whole = pairs.model_pairs(table)
    for bucket in pairs.BUCKETS:
        assert sum(whole[bucket]['norm_share']) == pytest.approx(1.0)
        assert sum(whole[bucket]['used_share']) == pytest.approx(1.0)
        assert whole[bucket]['norm'] == pytest.approx(table['norm'][:, -1, pairs.BUCKETS.index(bucket)].mean(0))


def test_the_signed_contributions_sum_to_the_logit():
    """Over pairs, with sign, c_i(m, n) sums to the layer's own logit x sqrt(d); each c_i is Re[q_i conj(k_i)
    e^{i(m-n)theta_i}] of the unrotated q and k (layer 0's, read with identity tables)."""
    m, x = make(), tokens(1, T)
    qk, d = captured(m, x), m.head_dim
    for layer, (q, k) in qk.items():
        c = pairs.pair_contributions(q, k)
        logit = m.transformer.h[layer].attn.logits(q, k, 0, T)
        seen = torch.isfinite(logit)
        assert torch.allclose(c.sum(-1)[seen], logit[seen] * math.sqrt(d), rtol=1e-4, atol=1e-4)
        assert c.abs().max() > 1.0
    ident = [(torch.ones(T, d), torch.zeros(T, d))]
    q0, k0 = captured(m, x, rope=ident)[0]  # layer 0's input does not depend on the rotation
    h, theta = d // 2, m.rope_inv_freq.double()
    qc, kc = (torch.complex(t[0, 0, :, :h].double(), t[0, 0, :, h:].double()) for t in (q0, k0))
    mm, nn = 37, 5
    want = (qc[mm] * kc[nn].conj() * torch.exp(1j * (mm - nn) * theta)).real
    assert torch.allclose(pairs.pair_contributions(*qk[0])[0, 0, mm, nn].double(), want, rtol=1e-4, atol=1e-5)


def test_a_zero_shot_pi_keeps_layer_0s_norms_and_moves_its_contributions():
    """PI changes no weight and no norm: layer 0's norm products stay; the rotation moves used and signed past L.
    YaRN's attention factor multiplies cos and sin, so its layer 0 norms are the plain ones x mscale^2."""
    x = tokens(2, 4 * L)
    plain = table_of(make(), x)
    m = make()
    m.set_rope_scaling({'rope_type': 'linear', 'factor': 4.0})
    pi = table_of(m, x)
    assert np.allclose(pi['norm'][0], plain['norm'][0], rtol=1e-5)
    for name, by in (('used', 0.03), ('signed', 0.1)):  # (the norms agree to 1e-5)
        moved = np.abs(pi[name][0, :, 1] - plain[name][0, :, 1]) / np.abs(plain[name][0, :, 1]).mean()
        assert moved.max() > by, name
    assert not np.allclose(pi['norm'][1], plain['norm'][1], rtol=1e-3)  # layer 1 reads layer 0's new output
    m.set_rope_scaling({'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': L})
    yarn = table_of(m, x)
    assert np.allclose(yarn['norm'][0], plain['norm'][0] * (0.1 * math.log(4) + 1) ** 2, rtol=1e-5)


@pytest.fixture
def tiny_ckpt(tmp_path, char_data):
    """A random tiny GPT saved as a run folder of the fixture corpus (L = 16)."""
    meta = load_meta(char_data)
    m = make(vocab_size=meta['vocab_size'])
    folder = tmp_path / 'base'
    atomic_torch_save({'model': m.state_dict(), 'model_args': model_args(m), 'config': {'seed': 1337},
                       'dataset': {'dataset': char_data, 'tokenizer': meta['tokenizer'],
                                   'vocab_size': meta['vocab_size'], 'itos': meta.get('itos')}},
                      str(folder / 'ckpt.pt'))
    return str(folder)


def test_the_command_writes_the_numbers_and_the_picture(tiny_ckpt, tmp_path, capsys):
    """python -m lab.pairs on held-out windows of the fixture corpus: the JSON (PI's layer 0 norms = the base's, its
    used ones not), the CSV (one row per arm, layer, head and 'all', pair, bucket; the JSON's numbers), the PNG, and
    --plot_only drawing it again from the JSON."""
    out = tmp_path / 'pairs'
    argv = [f'--ckpt={tiny_ckpt}', '--rope_types=default,linear', '--num_windows=2', f'--out_dir={out}',
            '--device=cpu']
    assert pairs.main(argv) == 0
    printed = capsys.readouterr().out
    assert 'linear s=4 zero-shot: pairs 0-0 (a full turn within L=16) carry' in printed
    assert 'wrote pair_usage.csv, pair_usage.json, pair_usage.png' in printed
    got = json.load(open(out / 'pair_usage.json'))
    assert got['settings']['T'] == 4 * L and got['settings']['buckets'] == {'inside': [0, L], 'past': [L, 4 * L]}
    base, pi = got['arms']
    assert pi['rope_scaling']['factor'] == 4.0  # s = T/L
    assert pi['critical_pair'] == base['critical_pair'] == 1  # wavelengths 2pi 10^(i/2): 6.3, then 19.9 > L = 16
    assert np.allclose(pi['layers']['past']['norm'][0], base['layers']['past']['norm'][0], rtol=1e-5)
    assert not np.allclose(pi['layers']['past']['used'][0], base['layers']['past']['used'][0], rtol=1e-2)
    rows = list(csv.DictReader(open(out / 'pair_usage.csv')))
    assert len(rows) == 2 * 2 * 3 * 8 * 2  # arms x layers x (heads + all) x pairs x buckets
    row = next(r for r in rows if r['arm'] == base['name'] and r['layer'] == '0' and r['head'] == 'all'
               and r['pair'] == '3' and r['bucket'] == 'past')
    assert float(row['used_share']) == pytest.approx(base['layers']['past']['used_share'][0][3], rel=1e-5)
    png = out / 'pair_usage.png'
    assert png.stat().st_size > 10_000
    os.remove(png)
    assert pairs.main([f'--out_dir={out}', '--plot_only=True']) == 0 and png.exists()


@pytest.mark.parametrize('argv, names', [
    ([], ['no run to measure', '--ckpt']),
    (['--ckpt={tmp}/nowhere'], ['nowhere', 'does not exist']),
    (['--ckpt={ckpt}', '--eval_len=16'], ['eval_len=16', 'L=16', '--eval_len > 16']),
    (['--ckpt={ckpt}', '--rope_types=default,warp'], ["'warp'", 'rope type']),
    (['--ckpt={ckpt}', '--rope_types=rerope:window=8'], ['rerope w=8 zero-shot', 'position map', 'drop the arm']),
    (['--ckpt={ckpt}', '--rope_types=crop'], ['crop w=16', 'is the crop', 'drop the arm']),
    (['--ckpt={ckpt}', '--rope_types=yarn+qtemp:shape=logn'], ['qtemp logn', 'a temperature']),
    (['--ckpt={ckpt}', '--num_windows=0'], ['num_windows=0', 'positive']),
    (['--plot_only=True', '--out_dir={tmp}/empty'], ['pair_usage.json not found']),
])
def test_bad_inputs_are_refused_in_one_line(argv, names, tiny_ckpt, tmp_path, capsys):
    argv = [a.format(tmp=tmp_path, ckpt=tiny_ckpt) for a in argv]
    assert_refused(*call(pairs.main, [*argv, f'--out_dir={tmp_path}/out'] if not any('out_dir' in a for a in argv)
                         else argv, capsys), names)
    assert not os.path.exists(tmp_path / 'out' / 'pair_usage.json')

"""Tests of eval.py and plot.py on a tiny char model trained here (L=16, 400 steps on the fixture corpus, a few
seconds on one CPU thread), two short fine-tunes of it (plain and YaRN at 64 = 4L) and one eval at T = 64."""
import csv
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import eval as ev  # noqa: E402
import lab.measure.scoring as scoring  # noqa: E402
import lab.verdicts.summary_json as lab_summary  # noqa: E402
import train  # noqa: E402
from data.common import doc_windows, fetch_windows, load_meta, load_split  # noqa: E402
from lab.measure.outcomes import summarize_retrieval  # noqa: E402
from lab.measure.retrieval import passkey_examples, retrieval_scores  # noqa: E402
from lab.stats import mean_ci, t975, wilson  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402
from data.checkpoints import load_checkpoint, model_from_checkpoint

from conftest import EVAL_L as L, EVAL_N as N, EVAL_T as T, at_positions  # noqa: E402  the `lab` fixture's run
PNGS = ('loss_vs_position.png', 'rope_ramp.png', 'attention_entropy.png', 'retrieval.png', 'finetune_curves.png')


def columns(path):
    with open(path, newline='', encoding='utf-8') as f:
        rows = list(csv.reader(f))
    return {name: np.array([float(r[j]) if r[j] != '' else np.nan for r in rows[1:]]) for j, name in enumerate(rows[0])}


def arm(summary, name):
    return next(a for a in summary['arms'] if a['name'] == name)


def direct_nll(model, x, y):
    """-log softmax(logits)[target], token by token, from the logits alone."""
    with torch.no_grad():
        logits = model(x)[0]
    return -torch.log_softmax(logits.double(), -1).gather(-1, y[..., None])[..., 0]


def test_arms_and_summary_json(lab):
    s = lab['summary']
    assert [a['name'] for a in s['arms']] == ['base (L=16)', 'default ft10', 'yarn s=4 β_fast=8 ft10',
                                              'linear s=4 zero-shot', 'ntk s=4 zero-shot', 'dynamic zero-shot',
                                              'yarn s=4 β_fast=8 zero-shot', 'dynamic_yarn zero-shot']
    with open(os.path.join(lab['out'], 'summary.json'), encoding='utf-8') as f:
        assert json.load(f) == json.loads(json.dumps(lab_summary.rounded(s)))  # floats to 7 significant digits
    p = s['settings']['provenance']  # where the file came from (issue 31 item 6)
    assert p['command'].startswith('python eval.py --') and f"--out_dir={lab['out']}" in p['command']
    assert p['commit'] is None or len(p['commit']) == 40 and p['torch'] == torch.__version__
    with open(os.path.join(lab['out'], 'summary.md'), encoding='utf-8') as f:
        assert f"Made by `{p['command']}`" in f.read()
    for a in s['arms']:
        assert {'name', 'checkpoint', 'train_len', 'rope_scaling', 'finetune_steps', 'buckets', 'ppl_at', 'buckets_ci',
                'rope_type', 'kind', 'factor', 'settings'} <= set(a)
        for b, (lo, hi) in a['buckets_ci'].items():
            assert lo < a['buckets'][b] < hi
        assert a['train_len'] == L
        assert list(a['buckets']) == ['0-16', '16-32', '32-64'] and list(a['ppl_at']) == ['16', '32', '64']
    assert arm(s, 'default ft10')['finetune_steps'] == 10 and arm(s, 'ntk s=4 zero-shot')['finetune_steps'] == 0
    zs = arm(s, 'yarn s=4 β_fast=8 zero-shot')
    assert zs['checkpoint'] == lab['base'] and zs['kind'] == 'zero-shot'
    assert zs['rope_scaling']['factor'] == T / L and zs['rope_scaling']['beta_fast'] == 8
    assert zs['rope_scaling']['original_max_position_embeddings'] == L  # L read from the checkpoint
    assert arm(s, 'base (L=16)')['rope_scaling'] is None
    st = s['settings']
    assert st['T'] == T and st['L'] == L and st['num_windows'] == N and st['protocol'] == ev.PROTOCOL
    assert arm(s, 'yarn s=4 β_fast=8 ft10')['rope_type'] == 'yarn' and arm(s, 'yarn s=4 β_fast=8 ft10')['settings'] == {'beta_fast': 8.0}
    meta = load_meta(lab['data'])
    assert st['windows'] == doc_windows(meta['docs']['val'], T + 1, N, st['seed'])
    for w in st['windows']:  # each window (T+1 tokens with the last target) inside one held-out document
        assert any(a <= w and w + T + 1 <= b for _, a, b in meta['docs']['val'])
    with open(os.path.join(lab['out'], 'summary.md'), encoding='utf-8') as f:
        md = f.read()
    assert '| yarn s=4 β_fast=8 ft10 |' in md and ev.PROTOCOL in md


def test_retune_runs_a_fine_tune_with_another_scaling(lab):
    """--retune: the fine-tuned model itself (same weights) with another scaling switched on; the original length is
    the arm's own (a scaled arm: L; an unscaled fine-tune: the length it was trained at), the factor the spec's."""
    out = str(lab['root'] / 'retune')
    s = ev.main([f'--ckpt={lab["ft"]}', '--retune=default ft10 | linear:factor=2; yarn s=4 β_fast=8 ft10 | yarn:factor=8',
                 f'--eval_len={T}', '--num_windows=4', '--retrieval_examples=0', '--entropy_windows=1',
                 f'--out_dir={out}', '--device=cpu', '--progress=False', '--plot=False'])
    assert [a['name'] for a in s['arms']] == ['default ft10', 'yarn s=4 β_fast=8 ft10', 'default ft10 @ linear s=2',
                                              'yarn s=4 β_fast=8 ft10 @ yarn s=8']
    lin, y8 = arm(s, 'default ft10 @ linear s=2')['rope_scaling'], arm(s, 'yarn s=4 β_fast=8 ft10 @ yarn s=8')['rope_scaling']
    assert lin == {'rope_type': 'linear', 'factor': 2.0, 'original_max_position_embeddings': 4 * L}
    assert y8['factor'] == 8.0 and y8['original_max_position_embeddings'] == L and y8['beta_fast'] == 32  # the spec's own
    cols = columns(os.path.join(out, 'position_loss.csv'))
    x, y = fetch_windows(load_split(lab['data'], 'val'), s['settings']['windows'], T, 'cpu')
    for name, folder, scaling in (('default ft10 @ linear s=2', 'default', lin),
                                  ('yarn s=4 β_fast=8 ft10 @ yarn s=8', 'yarn_s4_beta_fast8', y8)):
        model = model_from_checkpoint(load_checkpoint(os.path.join(lab['ft'], folder))).eval()
        own = direct_nll(model, x, y).mean(0).numpy()
        model.set_rope_scaling(scaling)
        np.testing.assert_allclose(cols[name], direct_nll(model, x, y).mean(0).numpy(), atol=2e-5)
        assert np.abs(cols[name] - own).max() > 1e-2  # not the fine-tune as it was trained
    with pytest.raises(ValueError, match="the fine-tuned arms are: default ft10, yarn"):
        ev.main([f'--ckpt={lab["ft"]}', '--retune=no such arm | linear', f'--out_dir={out}x', '--device=cpu'])


def test_position_loss_equals_direct_computation_on_shared_windows(lab):
    """Every arm's CSV column is the per-token NLL on the SAME windows (those in summary.json)."""
    s, cols = lab['summary'], columns(os.path.join(lab['out'], 'position_loss.csv'))
    assert list(cols['position']) == list(range(T))
    val = load_split(lab['data'], 'val')
    x, y = fetch_windows(val, s['settings']['windows'], T, 'cpu')
    yarn = arm(s, 'yarn s=4 β_fast=8 zero-shot')['rope_scaling']
    for name, path, scaling in (('base (L=16)', lab['base'], None), ('default ft10', os.path.join(lab['ft'], 'default'), None),
                                ('yarn s=4 β_fast=8 zero-shot', lab['base'], yarn)):
        model = model_from_checkpoint(load_checkpoint(path)).eval()
        if scaling:
            model.set_rope_scaling(scaling)
        np.testing.assert_allclose(cols[name], direct_nll(model, x, y).mean(0).numpy(), atol=2e-5)
    # a dynamic arm is scored as it generates: position p by a forward of p + 1 tokens; below L (scale 1) that is
    # one forward of L, past it each window's own random stratified positions, each at its own length
    model = model_from_checkpoint(load_checkpoint(lab['base'])).eval()
    model.set_rope_scaling(arm(s, 'dynamic zero-shot')['rope_scaling'])
    got = cols['dynamic zero-shot']
    design = s['settings']['design']
    assert sorted({p for d in design for p in d if p >= L}) == list(np.flatnonzero(np.isfinite(got[L:])) + L)
    np.testing.assert_allclose(got[:16], direct_nll(model, x[:, :16], y[:, :16]).mean(0).numpy(), atol=2e-5)
    for p in (L, 40, T - 1):
        rows = [w for w, d in enumerate(design) if p in d]
        assert got[p] == pytest.approx(np.mean([direct_nll(model, x[w:w + 1, :p + 1], y[w:w + 1, :p + 1])[0, p].item()
                                                for w in rows]), abs=2e-5)
    whole = direct_nll(model, x, y).mean(0).numpy()  # one forward of 64 would differ inside L: not what is scored
    assert np.abs(whole[:16] - got[:16]).max() > 1e-3


def test_design_positions_are_stratified_random_and_seeded():
    d = scoring.design_positions(16, 64, 5, 8, 1337)
    assert d == scoring.design_positions(16, 64, 5, 8, 1337) and d != scoring.design_positions(16, 64, 5, 8, 1338)
    for w in d:  # buckets 0-16, 16-32, 32-64: 8 strata each (width 2, 2, 4), one position in each
        assert len(w) == 24 and all(lo + k * (hi - lo) // 8 <= w[b * 8 + k] < lo + (k + 1) * (hi - lo) // 8
                                    for b, (lo, hi) in enumerate([(0, 16), (16, 32), (32, 64)]) for k in range(8))
    assert len({tuple(w) for w in d}) == 5  # each window its own draw, not one fixed grid
    assert scoring.design_positions(16, 64, 2, 64, 1)[0] == list(range(64))  # more samples than positions: all of them


def test_constant_runs_and_the_exact_paths(lab):
    """Exact scoring: a static arm is one run, LongRoPE two (its bucket past L equals the mean of one forward of T),
    a dynamic one a run per length; a static arm scored through the moving-scale path equals its one-forward score."""
    val = load_split(lab['data'], 'val')
    x, y = fetch_windows(val, lab['summary']['settings']['windows'][:4], T, 'cpu')
    rows = torch.cat([x, y[:, -1:]], 1)
    model = model_from_checkpoint(load_checkpoint(lab['base'])).eval()
    assert scoring.constant_runs(model, T) == [(1, T)]
    where = [list(range(T))] * 4
    exact = scoring.score(model, rows, where, ([(1, T)], T), torch.no_grad(), 8)[0]
    moving = scoring.score(model, rows, [[3, 17, 40, 63]] * 4, ([(1, T)], 0), torch.no_grad(), 8)[0]
    np.testing.assert_allclose(np.stack(exact), direct_nll(model, x, y).numpy(), atol=2e-5)
    np.testing.assert_allclose(np.stack(moving), np.stack(exact)[:, [3, 17, 40, 63]], atol=2e-5)
    hd = model.head_dim // 2
    model.set_rope_scaling({'rope_type': 'longrope', 'factor': 4.0, 'original_max_position_embeddings': L,
                            'short_factor': [1.0] * hd, 'long_factor': [1.0 + i for i in range(hd)]})
    plan = scoring.scoring_plan(model, T, 32)
    assert plan == ([(1, L), (L + 1, T)], T)  # two runs, both exact
    got = np.stack(scoring.score(model, rows, where, plan, torch.no_grad(), 8)[0])
    np.testing.assert_allclose(got[:, L:], direct_nll(model, x, y)[:, L:].numpy(), atol=2e-5)  # one forward of T
    np.testing.assert_allclose(got[:, :L], direct_nll(model, x[:, :L], y[:, :L]).numpy(), atol=2e-5)  # short factors
    model.set_rope_scaling(arm(lab['summary'], 'dynamic zero-shot')['rope_scaling'])
    runs = scoring.constant_runs(model, T)
    assert runs[0] == (1, L) and runs[1:] == [(n, n) for n in range(L + 1, T + 1)]
    assert scoring.scoring_plan(model, T, 32)[1] == L and scoring.scoring_plan(model, T, 0)[1] == T


def test_dynamic_arm_at_T_equals_the_static_arm_at_s_T_over_L(lab):
    """Table 1 form: ppl_at[T] of dynamic_yarn (factor 1) is one forward of T at s = T/L, i.e. yarn s=4 exactly."""
    s, out = lab['summary'], str(lab['root'] / 'eval_yarn4')
    static = ev.main([f'--base={lab["base"]}', '--rope_types=yarn', f'--eval_len={T}', f'--num_windows={N}',
                      '--retrieval_examples=0', f'--out_dir={out}', '--device=cpu', '--progress=False', '--plot=False'])
    assert arm(static, 'yarn s=4 zero-shot')['ppl_at'][str(T)] == pytest.approx(
        arm(s, 'dynamic_yarn zero-shot')['ppl_at'][str(T)], rel=1e-6)
    assert arm(static, 'yarn s=4 zero-shot')['ppl_at'][str(L)] != pytest.approx(
        arm(s, 'dynamic_yarn zero-shot')['ppl_at'][str(L)], rel=1e-3)  # at n = L the dynamic arm is plain RoPE


def test_buckets_are_csv_means_and_ppl_is_exp(lab):
    cols = columns(os.path.join(lab['out'], 'position_loss.csv'))
    for a in lab['summary']['arms']:
        for label, loss in a['buckets'].items():
            lo, hi = map(int, label.split('-'))
            assert loss == pytest.approx(np.nanmean(cols[a['name']][lo:hi]), abs=1e-6)
        for cut, ppl in a['ppl_at'].items():
            if not a['dynamic']:  # one forward of the first n tokens = the first n positions of one forward of T
                assert ppl == pytest.approx(math.exp(cols[a['name']][:int(cut)].mean()), rel=1e-6)


def test_plain_rope_is_worse_past_L(lab):
    """The effect the tool exists to show: at 4L, plain RoPE's loss past L is above its loss inside L."""
    loss = columns(os.path.join(lab['out'], 'position_loss.csv'))['base (L=16)']
    assert loss[L:].mean() > loss[:L].mean() + 0.1
    assert loss[2 * L:].mean() > loss[L:2 * L].mean()


def test_pngs_written_and_plot_only_redraws_them(lab, tmp_path):
    out = lab['out']
    before = {}
    for p in PNGS:
        with open(os.path.join(out, p), 'rb') as f:
            before[p] = f.read()
        assert before[p][:8] == b'\x89PNG\r\n\x1a\n' and len(before[p]) > 10_000
    with open(os.path.join(out, 'finetune_curves.csv'), newline='') as f:
        rows = list(csv.reader(f))
    assert rows[0][:5] == ['arm', 'seed', 'iter', 'val_loss', 'val_loss_beyond_L']  # every seed's curve
    assert [(r[0], r[2]) for r in rows[1:]] == [(a, i) for a in ('default ft10', 'yarn s=4 β_fast=8 ft10')
                                                for i in ('0', '5', '10')]
    redo = str(tmp_path / 'redo')  # only the CSV/JSON files: no checkpoint, no data needed
    os.makedirs(redo)
    for name in ev.FILES:
        shutil.copy(os.path.join(out, name), redo)
    r = subprocess.run([sys.executable, os.path.join(ROOT, 'eval.py'), '--plot_only=True', f'--out_dir={redo}'],
                       cwd=str(tmp_path), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for p in PNGS:
        with open(os.path.join(redo, p), 'rb') as f:
            assert f.read() == before[p], p
    ev.main(['--plot_only=True', f'--out_dir={redo}', '--log_x=True'])  # a setting of the drawing only
    with open(os.path.join(redo, 'loss_vs_position.png'), 'rb') as f:
        assert f.read() != before['loss_vs_position.png']


class CopyOracle(torch.nn.Module):
    """A model that copies: predicts the token that followed the latest earlier occurrence of the longest
    suffix (up to 8 tokens) of its input; no idea where the passkey is."""

    def forward(self, idx, targets, reduction='none', pos=None, attend=None, rope=None, at=None):
        assert attend is None  # retrieval_scores hands on the arm's attention (none here: plain causal)
        B, n = idx.shape
        logits = torch.zeros(B, n, 128)
        for b in range(B):
            s, seen = idx[b].tolist(), {}
            for t in range(n):
                for k in range(min(8, t + 1), 0, -1):
                    j = seen.get(tuple(s[t - k + 1:t + 1]))
                    if j is not None:
                        logits[b, t, s[j + 1]] = 30.0
                        break
                for k in range(1, min(8, t + 1) + 1):
                    seen[tuple(s[t - k + 1:t + 1])] = t
        return at_positions(logits, F.cross_entropy(logits.view(-1, 128), targets.reshape(-1), reduction='none').view(B, n),
                            at)


def test_passkey_positions_control_and_copy_oracle(lab):
    meta, val = load_meta(lab['data']), load_split(lab['data'], 'val')
    starts = lab['summary']['settings']['windows'][:6]
    K, cue, pos = 6, 4, 2
    buckets, examples = passkey_examples(val, starts, scoring.bucket_ends(L, T), T, L, K, pos, meta['vocab_size'],
                                         meta['eot_token'], 7)
    # [K, L): both copies and the scored tokens inside the first L tokens; then [L, 2L), [2L, T - pos - K]
    assert buckets == [('6-8', 6, 9), ('16-32', 16, 32), ('32-64', 32, T - pos - K + 1)]
    assert len(examples) == 3 * len(starts)
    for i, e in enumerate(examples):  # bucket by bucket, one example per window
        label, lo, hi = buckets[e['bucket']]
        orig = np.array(val[starts[i % len(starts)]:][:T + 1], dtype=np.int64)
        d = e['repeat'] - e['first']
        assert e['first'] == pos and d == e['distance'] and lo <= d < hi and e['repeat'] + K <= T
        if e['bucket'] == 0:
            assert e['repeat'] + K <= L
        assert list(e['seq'][pos:pos + K]) == list(e['key']) == list(e['seq'][e['repeat']:e['repeat'] + K])
        assert meta['eot_token'] not in e['key']
        keep = np.ones(T + 1, bool)
        keep[pos:pos + K] = keep[e['repeat']:e['repeat'] + K] = False
        assert (e['seq'][keep] == orig[keep]).all()  # the filler is the held-out window itself
        ctl = e['control']  # the control: the same string at the same place, the earlier copy left as text
        assert (ctl[pos:pos + K] == orig[pos:pos + K]).all() and (ctl[e['repeat']:e['repeat'] + K] == e['key']).all()
        assert (ctl[keep] == orig[keep]).all()
    oracle = CopyOracle()
    score = lambda plan: lambda rows, where: scoring.score(oracle, rows, where, plan, torch.no_grad(), 4)  # noqa: E731
    res = summarize_retrieval([retrieval_scores(score(([(1, T)], T)), buckets, examples, K, cue)])
    assert [r['exact_match'] for r in res] == [1.0, 1.0, 1.0]
    assert all(r['repeat_loss'] < 1e-6 and r['gain'] > 5 and r['gain_ci'][0] > 0 for r in res)
    assert all(r['exact_match_ci'][0] > 0.5 and r['exact_match_ci'][1] == 1.0 for r in res)
    # token by token at its own length (a moving scale) scores the same for a model whose scale does not move
    assert summarize_retrieval([retrieval_scores(score(([(1, T)], 0)), buckets, examples, K, cue)]) == res
    real = lab['summary']['arms'][0]['retrieval']  # 12 examples per bucket
    assert [r['bucket'] for r in real] == ['6-8', '16-32', '32-64'] and all(r['n'] == 12 for r in real)


def test_statistics_against_known_values():
    assert t975(10) == pytest.approx(2.228139, abs=2e-3) and t975(31) == pytest.approx(2.039513, abs=1e-3)
    m, (lo, hi) = mean_ci([1.0, 2.0, 3.0, 4.0])  # sd 1.29099, t(3) = 3.182446
    assert m == 2.5 and hi - m == pytest.approx(3.182446 * 1.290994 / 2, rel=5e-3)
    assert wilson(0, 32) == pytest.approx([0.0, 0.107179], abs=1e-5)  # z² / (n + z²)
    assert wilson(16, 32) == pytest.approx([0.336309, 0.663691], abs=1e-5)


def test_base_without_arms_is_a_clear_error(lab, tmp_path):
    with pytest.raises(ValueError, match='no arm to evaluate'):
        ev.main([f'--base={lab["base"]}', f'--out_dir={tmp_path / "x"}'])


def test_default_length_and_arm_names(lab):
    base, ft = lab['base'], lab['ft']
    cfg = dict(ev.DEFAULTS, ckpt=base)
    assert ev.plan_arms(cfg)[2] == 8 * L
    arms, b, T_ = ev.plan_arms(dict(cfg, ckpt=f'{ft}', rope_types='yarn,dynamic_yarn,yarn:attention_factor=1'))
    assert T_ == 4 * 64 and b['checkpoint'] == base  # base found through the fine-tunes' lineage
    assert [a['name'] for a in arms] == ['default ft10', 'yarn s=4 β_fast=8 ft10', 'yarn s=16 zero-shot',
                                         'dynamic_yarn zero-shot', 'yarn s=16 attention_factor=1 zero-shot']
    assert arms[3]['dynamic'] and arms[3]['scaling']['factor'] == 1.0


def other_vocab_run(root, data):
    run = str(root / 'other')
    os.makedirs(run, exist_ok=True)
    m = GPT(GPTConfig(block_size=L, vocab_size=70, n_layer=1, n_head=2, n_embd=16))
    torch.save({'model': m.state_dict(), 'model_args': vars(m.config), 'lineage': train.new_lineage(L),
                'dataset': {'dataset': data, 'vocab_size': 70, 'tokenizer': 'char'}}, os.path.join(run, 'ckpt.pt'))
    return run


@pytest.mark.parametrize('case', ['vocab', 'short', 'no_docs', 'dup_type', 'dup_ckpt', 'windows'])
def test_bad_input_is_one_clear_error_and_writes_nothing(lab, tmp_path, case):
    out = str(tmp_path / 'out')
    args = [f"--ckpt={lab['base']}", f'--out_dir={out}', '--device=cpu', '--progress=False', f'--eval_len={T}']
    if case == 'vocab':
        args[0] = f"--ckpt={lab['base']},{other_vocab_run(tmp_path, lab['data'])}"
        match = 'different data'
    elif case == 'short':
        args[-1], match = '--eval_len=8', 'eval_len=8 is shorter than the training length L=16'
    elif case == 'no_docs':
        data = str(tmp_path / 'data')
        shutil.copytree(lab['data'], data)
        meta = load_meta(data)
        del meta['docs']
        with open(os.path.join(data, 'meta.json'), 'w') as f:
            json.dump(meta, f)
        args, match = args + [f'--dataset={data}'], 'docs'
    elif case == 'dup_type':
        args, match = args + ['--rope_types=yarn,ntk,yarn'], "'yarn s=4 zero-shot' is given twice"
    elif case == 'dup_ckpt':
        args[0], match = f"--ckpt={lab['base']},{lab['base']}/", 'given twice'
    else:
        args, match = args + ['--num_windows=500'], 'num_windows=500'
    with pytest.raises(ValueError, match=match):
        ev.main(args)
    assert not os.path.exists(out)


def test_cli_error_keeps_earlier_results(lab, tmp_path):
    out = str(tmp_path / 'keep')
    shutil.copytree(lab['out'], out)
    before = {n: open(os.path.join(out, n), 'rb').read() for n in os.listdir(out)}
    r = subprocess.run([sys.executable, os.path.join(ROOT, 'eval.py'), f"--ckpt={lab['base']}", '--eval_len=8',
                        f'--out_dir={out}'], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"error: eval_len=8 is shorter than the training length L=16 of {lab['base']}; pass --eval_len >= 16 "
        f"(or 0 for the default)"]
    assert {n: open(os.path.join(out, n), 'rb').read() for n in os.listdir(out)} == before

"""search_longrope.py: the operators keep curves monotone and in bounds (hand-checked), the search only improves,
is reproducible and resumes to the same result, and writes a run that loads, runs at s x L and is an eval.py arm."""
import json
import math
import os
from contextlib import nullcontext

import numpy as np
import pytest
import torch

import eval as ev
import search_longrope as sl
from lab import longrope_search as ls
from data.common import doc_windows, load_meta, load_split
from model import load_checkpoint, model_from_checkpoint
from train import estimate_loss

S, L, T = 4.0, 32, 128  # tiny_run (conftest.py): L = 32, head_dim 32 -> 16 pairs
SMALL = ['--factor=4', '--search_population=6', '--search_parents=2', '--search_windows=2', '--batch_size=2',
         '--eval_iters=1', '--progress=False', '--device=cpu']


class Script:
    """A stand-in generator returning the given draws, to check the operators by hand."""
    def __init__(self, random, normal=()):
        self.r, self.n = list(random), list(normal)

    def random(self, n):
        return np.array(self.r.pop(0))

    def standard_normal(self):
        return self.n.pop(0)


def monotone_in_bounds(f, s):
    f = np.asarray(f)
    return bool(np.all(np.diff(f) >= 0) and f[0] >= 1 and f[-1] <= 1.25 * s)


def test_mutation_pushes_neighbours_and_clips():
    f = np.array([1.0, 2.0, 3.0, 4.0])
    up = ls.mutate(f, Script([[0.9, 0.1, 0.9, 0.9]], [math.log(2) / 0.5]), 0.3, 0.5, 5.0)  # pair 1: 2 x 2 = 4
    assert up.tolist() == [1.0, 4.0, 4.0, 4.0]
    down = ls.mutate(f, Script([[0.9, 0.9, 0.1, 0.9]], [-10.0]), 0.3, 0.5, 5.0)  # pair 2: 3 x e^-5 -> clipped to 1
    assert down.tolist() == [1.0, 1.0, 1.0, 4.0]
    top = ls.mutate(f, Script([[0.9, 0.9, 0.9, 0.1]], [10.0]), 0.3, 0.5, 5.0)  # the last pair: clipped to the bound
    assert top.tolist() == [1.0, 2.0, 3.0, 5.0] and f.tolist() == [1.0, 2.0, 3.0, 4.0]  # the parent is untouched
    child = ls.crossover([1.0, 2.0, 3.0, 4.0], [1.0, 1.5, 5.0, 5.0], Script([[0.9, 0.1, 0.9, 0.1]]))  # b, a, b, a
    assert child.tolist() == [1.0, 2.0, 5.0, 5.0]  # 1, 2, 5, 4 made non-decreasing
    rng = np.random.default_rng(0)  # and at random: always non-decreasing, within [1, 1.25 s], never the parent
    for _ in range(300):
        a, b = np.sort(rng.uniform(1, 5, 16)), np.sort(rng.uniform(1, 5, 16))
        m = ls.mutate(a, rng, 0.3, 0.3, 5.0)
        assert monotone_in_bounds(m, 4.0) and not np.array_equal(m, a)
        assert monotone_in_bounds(ls.crossover(a, b, rng), 4.0)


def test_seed_curves_are_pi_ntk_yarn_as_factors():
    seeds = dict(ls.seed_curves('linear,ntk,yarn', 8.0, 128, 32, 10000.0))
    assert seeds['linear s=8'].tolist() == [8.0] * 16
    assert seeds['ntk s=8'][1] == pytest.approx(8 ** (2 / 30)) and seeds['ntk s=8'][15] == pytest.approx(8.0)
    # YaRN at d=32, L=128: ramp over pairs 0..6 (see test_rope), pair 3 half way: f = 1 / (0.5/8 + 0.5) = 1.7778
    y = seeds['yarn s=8']
    assert y[0] == 1.0 and y[3] == pytest.approx(16 / 9) and y[6:].tolist() == [8.0] * 10
    assert all(monotone_in_bounds(f, 8.0) for f in seeds.values())


@pytest.fixture(scope='module')
def searched(tiny_run, tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small runs much faster on one thread
    out = tmp_path_factory.mktemp('search')
    best, state = sl.main([f'--init_from={tiny_run}', f'--out_dir={out}', '--search_generations=3', *SMALL])
    yield dict(out=str(out), best=best, state=state, base=tiny_run)
    torch.set_num_threads(threads)


def test_search_only_improves_and_scores_training_windows(searched, char_data):
    state, cands = searched['state'], searched['state']['candidates']
    log = [json.loads(line) for line in open(os.path.join(searched['out'], 'search.jsonl'))]
    assert log == state['log'] and [r['generation'] for r in log] == [0, 1, 2, 3]
    bests = [r['best_loss'] for r in log]
    assert all(b2 <= b1 for b1, b2 in zip(bests, bests[1:]))
    assert bests[-1] < bests[0]  # this seed's search did find a better curve than generation 0's
    for r in log:  # each row's best is the best of everything scored up to then
        assert r['best_loss'] == min(c['loss'] for c in cands if c['generation'] <= r['generation'])
    assert all(monotone_in_bounds(c['long_factor'], S) and len(c['long_factor']) == 16 for c in cands)
    assert {c['origin'] for c in cands if c['generation'] == 0} >= {'seed linear s=4', 'seed ntk s=4', 'seed yarn s=4'}
    assert set(log[0]['references']) == {'linear s=4', 'ntk s=4', 'yarn s=4', 'yarn s=4 β_fast=8'}
    # the score is the base model's mean loss on the seeded TRAINING windows of s x L tokens, recomputed here
    model = model_from_checkpoint(load_checkpoint(searched['base']))
    model.set_rope_scaling(ls.longrope_scaling(searched['best']['long_factor'], S, L))
    starts = doc_windows(load_meta(char_data)['docs']['train'], T + 1, 2, 1337)
    loss = estimate_loss(model, load_split(char_data, 'train'), starts, T, L, 2, 'cpu', nullcontext())
    assert loss[0] == pytest.approx(searched['best']['loss'], abs=1e-6)


def test_search_is_reproducible_and_resumes_to_the_same_result(searched, tmp_path):
    base = searched['base']
    sl.main([f'--init_from={base}', f'--out_dir={tmp_path / "again"}', '--search_generations=3', *SMALL])
    sl.main([f'--init_from={base}', f'--out_dir={tmp_path / "r"}', '--search_generations=1', *SMALL])
    sl.main(['--init_from=resume', f'--out_dir={tmp_path / "r"}', '--search_generations=3'])  # continue and extend
    for d in ('again', 'r'):
        state = json.load(open(tmp_path / d / 'search_state.json'))
        assert state['candidates'] == searched['state']['candidates']
        assert [r['best_loss'] for r in state['log']] == [r['best_loss'] for r in searched['state']['log']]
        assert load_checkpoint(str(tmp_path / d))['model_args']['rope_scaling'] == \
            load_checkpoint(searched['out'])['model_args']['rope_scaling']


def test_the_run_loads_runs_at_sL_and_is_an_eval_arm(searched):
    ck = load_checkpoint(searched['out'])
    sc = ck['model_args']['rope_scaling']
    assert sc == ls.longrope_scaling(searched['best']['long_factor'], S, L) and sc['short_factor'] == [1.0] * 16
    assert ck['lineage'] == dict(train_len=L, seq_len=T, base_checkpoint=os.path.abspath(searched['base']),
                                 rope_type="longrope", factor=S, finetune_steps=0, pose=None)
    assert ck['iter_num'] == 0 and ck['model_args']['block_size'] == T and ck['log'][0]['val_loss_beyond_L'] is not None
    model, base = model_from_checkpoint(ck).eval(), model_from_checkpoint(load_checkpoint(searched['base'])).eval()
    base.set_rope_scaling(sc)  # the base weights, unchanged, with the searched scaling
    x = torch.randint(0, 68, (1, T))
    assert torch.equal(model(x)[0], base(x)[0]) and torch.isfinite(model(x)[0]).all()
    arms, _, _ = ev.plan_arms(dict(ev.DEFAULTS, ckpt=f"{searched['base']},{searched['out']}", eval_len=T))
    assert [(a['name'], a['dynamic']) for a in arms] == [('base (L=32)', False), ('longrope s=4 zero-shot', True)]


@pytest.mark.parametrize('args, msg', [
    (['--search_parents=6'], 'search_parents'),
    (['--search_parents=1'], 'search_parents'),
    (['--factor=1'], 'factor'),
    (['--search_seeds=linear,longrope'], 'needs short_factor and long_factor'),
    (['--search_population=3', '--search_seeds=linear,ntk,yarn,llama3'], 'search_seeds'),
    (['--search_mutation=0'], 'search_mutation'),
])
def test_bad_settings_fail_before_anything_is_written(tiny_run, tmp_path, args, msg):
    with pytest.raises(ValueError, match=msg):
        sl.main([f'--init_from={tiny_run}', f'--out_dir={tmp_path / "x"}', *SMALL, *args])
    assert not os.path.exists(tmp_path / 'x')


def test_resume_keeps_settings_and_a_run_is_not_replaced(searched):
    with pytest.raises(ValueError, match='was started with factor=4.0'):
        sl.main(['--init_from=resume', f"--out_dir={searched['out']}", '--factor=8'])
    with pytest.raises(ValueError, match='already holds a run'):
        sl.main([f"--init_from={searched['base']}", f"--out_dir={searched['out']}", *SMALL])
    with pytest.raises(ValueError, match='no search to resume'):
        sl.main(['--init_from=resume', f"--out_dir={searched['out']}_missing"])

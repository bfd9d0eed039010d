"""search_longrope.py: the operators keep curves monotone and in bounds (hand-checked), the search only improves,
is reproducible and resumes to the same result, and writes a run that loads, runs at s x L and is an eval.py arm."""
import json
import os
from contextlib import nullcontext

import numpy as np
import pytest
import torch

import eval as ev
import search_longrope as sl
from lab import longrope_search as ls
from data.common import doc_windows, load_meta, load_split
from data.checkpoints import load_checkpoint, model_from_checkpoint
from train import estimate_loss

S, L, T = 4.0, 32, 128  # tiny_run (conftest.py): L = 32, head_dim 32 -> 16 pairs
SMALL = ['--factor=4', '--search_population=6', '--search_parents=2', '--search_windows=2', '--batch_size=2',
         '--eval_iters=1', '--progress=False', '--device=cpu']


class Script:
    """A stand-in generator returning the given draws, to check the operators by hand: random() -> the next of
    `random`, integers(n) -> the next of `index`."""
    def __init__(self, random, index=()):
        self.r, self.i = list(random), list(index)

    def random(self):
        return self.r.pop(0)

    def integers(self, n):
        i = self.i.pop(0)
        assert 0 <= i < n
        return i


def monotone_in_bounds(f, s):
    f = np.asarray(f)
    return bool(np.all(np.diff(f) >= 0) and f[0] >= 1 and f[-1] <= 1.25 * s)


def seen_with(*cands):
    seen = ls.Seen(len(cands[0][1]))
    for c in cands:
        seen.add(c)
    return seen


def test_mutation_redraws_a_factor_between_its_neighbours():
    """The reference's dim_mono mutate: each factor with probability p is redrawn uniformly from lo, lo + step, ...
    up to hi (its neighbours; 1 and the bound at the ends); a candidate already seen is mutated again."""
    f, op = np.array([1.0, 2.0, 3.0, 4.0]), dict(p=0.3, step=0.5, upper=5.0, start_tokens=(0,))
    seen = seen_with((0, f))
    # pair 1 hit: grid 1.0, 1.5, 2.0, 2.5, 3.0 between pairs 0 and 2; index 4 -> 3.0
    assert ls.mutate((0, f), Script([0.9, 0.1, 0.9, 0.9], [4]), seen, **op)[1].tolist() == [1.0, 3.0, 3.0, 4.0]
    assert (0, np.array([1.0, 3.0, 3.0, 4.0])) in seen and f.tolist() == [1.0, 2.0, 3.0, 4.0]  # parent untouched
    # the last pair: from its lower neighbour 3.0 up to the bound 5.0 (3.0, 3.5, ..., 5.0); index 4 -> 5.0
    assert ls.mutate((0, f), Script([0.9, 0.9, 0.9, 0.1], [4]), seen, **op)[1].tolist() == [1.0, 2.0, 3.0, 5.0]
    # the first pair: from 1 up to pair 1 (1.0, 1.5, 2.0); index 0 gives back the parent, which is seen, so a second
    # pass runs on it and moves pair 0 to 1.5
    child = ls.mutate((0, f), Script([0.1, 0.9, 0.9, 0.9] + [0.1, 0.9, 0.9, 0.9], [0, 1]), seen, **op)
    assert child[1].tolist() == [1.5, 2.0, 3.0, 4.0]
    # n-hat: with probability p redrawn from its set (before the factors)
    child = ls.mutate((0, f), Script([0.1, 0.9, 0.9, 0.9, 0.9], [2]), seen, **dict(op, start_tokens=(0, 4, 8)))
    assert child[0] == 8 and child[1].tolist() == f.tolist()


def test_crossover_takes_genes_of_the_worse_parent_until_new_and_monotone():
    """The reference's dim_mono crossover: from the better parent a, genes in turn (n-hat first), each hit with
    probability p, take b's value with probability 1/2; the first monotone, unseen candidate is the child."""
    a, b = (0, np.array([1.0, 2.0, 3.0, 4.0])), (4, np.array([1.0, 1.5, 5.0, 5.0]))
    seen = seen_with(a, b)
    # n-hat not hit; pair 0 hit but kept (= a, seen); pair 1 hit and taken: 1, 1.5, 3, 4
    child = ls.crossover(a, b, Script([0.9, 0.1, 0.9, 0.1, 0.1]), seen, 0.3, 20)
    assert child[0] == 0 and child[1].tolist() == [1.0, 1.5, 3.0, 4.0] and child in seen
    # pair 2 taken: 1, 2, 5, 4 is not monotone, so on: pair 3 taken too -> 1, 2, 5, 5
    child = ls.crossover(a, b, Script([0.9, 0.9, 0.9, 0.1, 0.1, 0.1, 0.1]), seen, 0.3, 20)
    assert child[0] == 0 and child[1].tolist() == [1.0, 2.0, 5.0, 5.0]
    # n-hat taken alone
    assert ls.crossover(a, b, Script([0.1, 0.1]), seen, 0.3, 20)[0] == 4
    assert ls.crossover(a, a, Script([]), seen, 0.3, 20) is None  # the same parent twice: none
    assert ls.crossover(a, b, Script([0.9] * 5), seen, 0.3, 1) is None  # nothing hit in the passes allowed


def test_operators_at_random_stay_monotone_in_bounds_and_new():
    rng, st = np.random.default_rng(0), (0, 1, 2, 4, 8)
    parents = [(int(rng.choice(st)), np.sort(rng.uniform(1, 5, 16))) for _ in range(40)]
    seen = seen_with(*parents)
    made = []
    for i in range(300):
        a, b = parents[i % 40], parents[(7 * i + 3) % 40]
        m = ls.mutate(a, rng, seen, 0.3, 0.01, 5.0, st)
        c = ls.crossover(a, b, rng, seen, 0.3, 20)
        for child in (m, c):
            if child is not None:
                assert monotone_in_bounds(child[1], 4.0) and child[0] in st
                made.append(child)
    assert len(made) > 450
    rows = np.array([[n, *f] for n, f in parents + made])
    assert len(np.unique(rows.round(9), axis=0)) == len(rows)  # every candidate made is new
    assert len(seen.rows) == len(rows)


def test_start_token_candidates():
    assert ls.parse_start_tokens(ls.START_TOKENS, 1024) == (0, 1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 64, 128, 256)
    assert ls.parse_start_tokens(ls.START_TOKENS, 128) == (0, 1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 64)  # < T
    for bad in ('', '4,2', '1,1', '-1', 'a', '200'):
        with pytest.raises(ValueError, match='search_start_tokens'):
            ls.parse_start_tokens(bad, 128)


def test_reference_budget_settings():
    """config/studies/search_longrope_ref.py is the reference's dim_mono.json budget, on the demo's windows."""
    from configurator import get_config
    ref = get_config([os.path.join(os.path.dirname(os.path.dirname(__file__)), 'config', 'studies', 'search_longrope_ref.py')],
                     sl.DEFAULTS)
    P, k, G = ref['search_population'], ref['search_parents'], ref['search_generations']
    assert (P, k, G, ref['search_crossover_tries'], ref['search_grid'], ref['search_mutation']) == \
        (64, 32, 40, 20, 0.01, 0.3)
    assert round(ref['search_crossover'] * (P - k)) == 16 and P + G * (P - k) == 1344  # 16 + 16 a generation
    assert ref['search_windows'] == sl.DEFAULTS['search_windows'] == 16 and ref['seed'] == sl.DEFAULTS['seed']


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
    assert [r['new'] for r in log] == [6, 4, 4, 4]  # every child is new: population 6, 2 parents
    rows = np.array([[c['start_token_idx'], *c['long_factor']] for c in cands])
    assert len(np.unique(rows, axis=0)) == len(rows)  # nothing scored twice
    assert {c['start_token_idx'] for c in cands} <= set(ls.parse_start_tokens(ls.START_TOKENS, T))
    assert len({c['start_token_idx'] for c in cands}) > 1  # n-hat is searched
    assert {c['origin'] for c in cands if c['generation'] == 0} >= {'seed linear s=4', 'seed ntk s=4', 'seed yarn s=4'}
    assert set(log[0]['references']) == {'linear s=4', 'ntk s=4', 'yarn s=4', 'yarn s=4 β_fast=8'}
    # the score is the base model's mean loss on the seeded TRAINING windows of s x L tokens, recomputed here
    model = model_from_checkpoint(load_checkpoint(searched['base']))
    model.set_rope_scaling(ls.longrope_scaling(searched['best']['long_factor'], S, L,
                                               searched['best']['start_token_idx']))
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
    assert sc == ls.longrope_scaling(searched['best']['long_factor'], S, L, searched['best']['start_token_idx'])
    assert sc['short_factor'] == [1.0] * 16 and sc.get('start_token_idx', 0) == searched['best']['start_token_idx']
    assert ck['lineage'] == dict(train_len=L, seq_len=T, base_checkpoint=os.path.abspath(searched['base']),
                                 rope_type="longrope", factor=S, finetune_steps=0, pose=None)
    assert ck['iter_num'] == 0 and ck['model_args']['block_size'] == T and ck['log'][0]['val_loss_beyond_L'] is not None
    model, base = model_from_checkpoint(ck).eval(), model_from_checkpoint(load_checkpoint(searched['base'])).eval()
    base.set_rope_scaling(sc)  # the base weights, unchanged, with the searched scaling
    x = torch.randint(0, 68, (1, T))
    assert torch.equal(model(x)[0], base(x)[0]) and torch.isfinite(model(x)[0]).all()
    arms, _, _ = ev.plan_arms(dict(ev.DEFAULTS, ckpt=f"{searched['base']},{searched['out']}", eval_len=T))
    n_hat = searched['best']['start_token_idx']
    name = 'longrope s=4' + (f' start_token_idx={n_hat}' if n_hat else '') + ' zero-shot'
    assert [(a['name'], a['dynamic']) for a in arms] == [('base (L=32)', False), (name, True)]


@pytest.mark.parametrize('args, msg', [
    (['--search_parents=6'], 'search_parents'),
    (['--search_parents=1'], 'search_parents'),
    (['--factor=1'], 'factor'),
    (['--search_seeds=linear,longrope'], 'needs short_factor and long_factor'),
    (['--search_population=3', '--search_seeds=linear,ntk,yarn,llama3'], 'search_seeds'),
    (['--search_mutation=0'], 'search_mutation'),
    (['--search_start_tokens=128,256'], 'search_start_tokens'),  # T = 128: none below
    (['--search_crossover_tries=0'], 'search_crossover_tries'),
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

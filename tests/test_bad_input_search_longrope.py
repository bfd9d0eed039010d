"""search_longrope.py on bad inputs (issue 23): a new search's settings and data, and a resumed search's
search_state.json (not JSON, a field missing, a value of the wrong type, candidates of the wrong length) are refused
before anything is scored or written (exit 2, no traceback, one last line naming the setting or the file, no file
touched)."""
import shutil

import pytest

import search_longrope as sl
from badinput import bad_datasets, check_refused, edit_json  # noqa: F401

SMALL = ['--factor=4', '--search_population=4', '--search_parents=2', '--search_windows=1', '--batch_size=1',
         '--eval_iters=1', '--progress=False', '--device=cpu', '--search_seeds=linear,yarn']


@pytest.fixture(scope='module')
def searched(tiny_run, tmp_path_factory):
    """A finished search of generation 0 only (4 candidates at s=4, L=32: head_dim 32, so 16 factors each)."""
    out = tmp_path_factory.mktemp('bad_search') / 'search'
    sl.main([f'--init_from={tiny_run}', f'--out_dir={out}', '--search_generations=0', *SMALL])
    return out


def truncate(path):
    with open(path, 'rb') as f:
        data = f.read()
    with open(path, 'wb') as f:
        f.write(data[:len(data) // 2])


def state(change):
    return lambda d: edit_json(d / 'search_state.json', change)


STATES = [  # (damage to a copy of the search, what the last line must name); the file is always named too
    (lambda d: truncate(d / 'search_state.json'), 'is not valid JSON'),
    (state(lambda s: s.clear()), "has no 'config' object"),
    (state(lambda s: s['config'].update(factor='4')), "factor='4'"),
    (state(lambda s: s['config'].update(bogus=1)), "unknown setting 'bogus'"),
    (state(lambda s: s.pop('candidates')), 'candidates must be a list'),
    (state(lambda s: s['candidates'][0].update(long_factor=s['candidates'][0]['long_factor'][:3])),
     'candidates[0].long_factor must be 16 numbers'),
    (state(lambda s: s['candidates'][1]['long_factor'].__setitem__(0, 0.5)), 'candidates[1].long_factor'),
    (state(lambda s: s['candidates'][1].update(loss='low')), 'candidates[1] lacks'),
    (state(lambda s: s['candidates'][0].pop('generation')), 'candidates[0] lacks'),
    (state(lambda s: s['candidates'][1].update(start_token_idx=3)), 'candidates[1].start_token_idx is 3'),
    (state(lambda s: s['candidates'][0].pop('start_token_idx')), 'candidates[0].start_token_idx is None'),
    (state(lambda s: s.update(generation='0')), "generation is '0'"),
    (state(lambda s: s.update(log=[])), 'log must be a list of 1 rows'),
    (state(lambda s: s.pop('references')), 'references'),
    (state(lambda s: s.update(head_dim=8)), 'head_dim is 8'),
    (state(lambda s: s.update(T=64)), 'T is 64'),
    (state(lambda s: s.pop('cpu_s')), 'cpu_s'),
]


@pytest.mark.parametrize('damage, names', STATES, ids=[str(i) for i in range(len(STATES))])
def test_a_damaged_state_is_named_before_anything_runs(searched, tiny_run, tmp_path, capsys, damage, names):
    run = tmp_path / 'search'
    shutil.copytree(searched, run)
    damage(run)
    check_refused(sl.main, ['--init_from=resume', f'--out_dir={run}', '--search_generations=2'],
                  (names, 'search_state.json'), capsys, [tmp_path, tiny_run])


SETTINGS = [  # (extra argv, {file}: a plain file, {data}: damaged datasets; what the last line must name)
    (['--out_dir={file}'], 'is a file'),
    (['--out_dir={file}/sub'], 'which is a file'),
    (['--factor=1000'], ('factor=1000.0', 'do not fit')),
    (['--factor=300'], ('factor=300.0', 'train document')),
    (['--seed=-1'], 'seed=-1'),
    (['--seed=9223372036854775808'], 'seed=9223372036854775808'),
    (['--search_grid=0'], 'search_grid=0'),
    (['--search_start_tokens=4,2'], 'search_start_tokens'),
    (['--search_crossover=1.5'], 'search_crossover=1.5'),
    (['--search_seeds=yarn:bogus=1'], 'bogus=1'),
    (['--search_windows=0'], 'search_windows=0'),
    (['--dtype=float16'], 'dtype=float16'),
    (['--dataset={data[other_chars]}'], 'different characters'),
]


@pytest.mark.parametrize('argv, names', SETTINGS, ids=[' '.join(a) for a, _ in SETTINGS])
def test_a_bad_setting_is_refused_before_anything_is_written(tiny_run, bad_datasets, tmp_path, capsys, argv,  # noqa: F811
                                                           names):
    a_file = tmp_path / 'a_file'
    a_file.write_text('not a folder')
    args = [a.format(file=a_file, data=bad_datasets) for a in argv]
    check_refused(sl.main, [f'--init_from={tiny_run}', f'--out_dir={tmp_path / "out"}', *SMALL, *args], names, capsys,
                  [tmp_path, tiny_run, *bad_datasets.values()])

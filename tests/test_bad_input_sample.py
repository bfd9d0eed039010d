"""sample.py on bad inputs (issue 23): each is refused with exit 2, no traceback, one last line naming the setting or the
file, and no file touched; --max_new_tokens has a stated bound (2**24 positions: float32 cannot tell positions apart
past it). --temperature=0 is legitimate: it means greedy, the same tokens as --top_k=1."""
import os

import pytest

import sample
from badinput import check_refused


@pytest.fixture(scope='module')
def inputs(tiny_run, tmp_path_factory):
    d = tmp_path_factory.mktemp('sample_inputs')
    (d / 'binary.txt').write_bytes(b'\xff\xfe\x00 not utf-8')
    (d / 'twenty.txt').write_text('\n' * 20, encoding='utf-8')
    (d / 'a_folder').mkdir()
    (d / 'torn').mkdir()
    with open(os.path.join(tiny_run, 'ckpt.pt'), 'rb') as f:
        (d / 'torn' / 'ckpt.pt').write_bytes(f.read()[:4000])
    return d


CASES = [  # (extra argv, with {d} for the inputs folder; what the last line must name)
    (['--max_new_tokens=100000000'], 'max_new_tokens=100000000'),
    (['--max_new_tokens=16777216'], ('max_new_tokens=16777216', '2**24')),
    (['--max_new_tokens=16777200', '--start=FILE:{d}/twenty.txt'], ('prompt (20 tokens)', 'max_new_tokens=16777200')),
    (['--max_new_tokens=0'], 'max_new_tokens=0'),
    (['--temperature=-0.5'], 'temperature=-0.5'),
    (['--temperature=1e999'], 'temperature=inf'),
    (['--top_k=-1'], 'top_k=-1'),
    (['--num_samples=0'], 'num_samples=0'),
    (['--rope_type=yarn', '--factor=0.5'], 'factor=0.5'),
    (['--rope_type=linear', '--factor=-2'], 'factor=-2.0'),
    (['--start=FILE:{d}/binary.txt'], ('binary.txt', 'unreadable')),
    (['--start=FILE:{d}/a_folder'], 'a_folder does not exist'),
    (['--seed=-5'], 'seed=-5'),
    (['--seed=18446744073709551616'], 'seed=18446744073709551616'),
    (['--rope_type=rerope:window=0'], 'window'),
    (['--rope_type=longrope'], 'short_factor'),
    (['--ckpt={d}/torn'], os.path.join('torn', 'ckpt.pt')),
    (['--dtype=float16'], 'dtype=float16'),
    (['--kv_cache=maybe'], 'kv_cache'),
]


@pytest.mark.parametrize('argv, names', CASES, ids=[' '.join(a) for a, _ in CASES])
def test_bad_input_is_refused_naming_it(tiny_run, inputs, capsys, argv, names):
    base = [f'--ckpt={tiny_run}', '--device=cpu', '--progress=False', '--num_samples=1', '--max_new_tokens=2']
    check_refused(sample.main, base + [a.format(d=inputs) for a in argv], names, capsys, [tiny_run, inputs])


def test_temperature_zero_is_greedy(tiny_run, capsys):
    """Decision: --temperature=0 (refused before) is the usual spelling of greedy decoding; it gives the tokens of
    --top_k=1, whatever the seed."""
    base = [f'--ckpt={tiny_run}', '--device=cpu', '--progress=False', '--num_samples=1', '--max_new_tokens=24']
    sample.main(base + ['--temperature=0'])
    zero = capsys.readouterr()
    assert 'temperature=0.0 (greedy)' in zero.err
    sample.main(base + ['--top_k=1', '--seed=7'])
    assert capsys.readouterr().out == zero.out

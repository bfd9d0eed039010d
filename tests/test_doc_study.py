"""lab/doc_study.py, the real model's study (issue 58): one window per document, the passkey planted in the
window and scored in the same forward (its tokens out of the loss columns, its digits teacher-forced), the declared
family judged with Holm, a stopped run resumed, and bad settings refused in one line. End to end on a tiny char model
whose corpus has the digits (a few seconds)."""
import os
import shutil

import numpy as np
import pytest

from configurator import ConfigError
from data.common import DataError
from data.sources import get_tokenizer
from lab import doc_study as ds
from lab.measure import passkey_text as pt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
L, T = 128, 512


@pytest.fixture(scope='module')
def study(tmp_path_factory):
    """A char corpus (the fixture plays and a page with digits and '?', so the passkey can be written), a tiny base
    at L = 128 trained a few steps, and the study run once on it."""
    from data.shakespeare_char.prepare import main as prepare
    from train import DEFAULTS, train
    root = tmp_path_factory.mktemp('doc_study')
    src = root / 'src'
    shutil.copytree(os.path.join(ROOT, 'tests', 'fixtures', 'corpus'), src)
    (src / 'numbers.txt').write_text('What is 0123456789? ' * 200)
    prepare(['--src', str(src), '--out_dir', str(root / 'data')])
    train(dict(DEFAULTS, block_size=L, batch_size=4, n_layer=2, n_head=2, n_embd=32, max_iters=20, lr_decay_iters=20,
               eval_interval=20, eval_iters=2, progress=False, learning_rate=3e-3, warmup_iters=2, min_lr=3e-4,
               dataset=str(root / 'data'), out_dir=str(root / 'base')))
    args = [f'--base={root / "base"}', '--rope_types=default,crop:form=sliding:sink=4,linear,yarn', f'--eval_len={T}',
            '--windows=3', '--control_rows=1', '--control_len=128', '--control_lo=60', '--control_hi=64',
            '--key_lo=300', '--key_hi=350', '--columns=0-128,128-512', '--bin=16', '--progress=False',
            '--family=yarn_s4_zero-shot | base_L128 | loss | 128-512; base_L128 | crop_w128_sink4_sliding | loss | 0-128; '
            'yarn_s4_zero-shot | linear_s4_zero-shot | digits | passkey; yarn_s4_zero-shot | base_L128 | exact | x',
            f'--out_dir={root / "out"}']
    return dict(root=root, args=args, summary=ds.main(args))


def test_windows_one_per_document():
    docs = [(f'play{i}', 1000 * i, 1000 * i + n) for i, n in enumerate([900, 300, 700, 800, 200])]
    got = ds.study_windows(docs, 299, 3, 1)
    assert len({t for t, _ in got}) == 3 and 'play4' not in {t for t, _ in got}  # 200 tokens hold no window
    for t, s in got:
        _, a, b = next(d for d in docs if d[0] == t)
        assert a <= s and s + 300 <= b
    assert got == ds.study_windows(docs, 299, 3, 1) and got != ds.study_windows(docs, 299, 3, 2)
    with pytest.raises(DataError, match=r"need 5 documents of at least 300 tokens; the data has 4"):
        ds.study_windows(docs, 299, 5, 1)


def test_plant_layout(study):
    """The key sentence `distance` before the question, the question and the answer at the end, the planted tokens
    out of the text mask, the answer positions predicting the key's digits."""
    meta = next(iter([__import__('data.common', fromlist=['x']).load_meta(str(study['root'] / 'data'))]))
    encode, decode = get_tokenizer(meta)
    text = np.array(encode('The king is dead. Long live the king. ' * 20), dtype=np.int64)
    row, mask, ans = ds.plant(text, meta, '48213', 300, 400)
    assert len(row) == 401 and len(mask) == 400
    assert decode(row).endswith(' What is the pass key? The pass key is 48213')
    sentence = encode(pt.KEY.format(key='48213'))
    q = 401 - len(encode(pt.QUESTION + ' 48213'))
    at = q - 300
    assert decode(row[at:at + len(sentence)]) == pt.KEY.format(key='48213')
    assert decode(row[ans + 1]) == '48213'
    planted = np.zeros(401, dtype=bool)
    planted[at:at + len(sentence)] = planted[q:] = True
    assert np.array_equal(mask, ~planted[1:])
    assert np.array_equal(row[~planted], text[:(~planted).sum()])  # the text runs on around the key
    with pytest.raises(ValueError, match='does not fit'):
        ds.plant(text, meta, '48213', 399, 400)


def test_judge_holm_and_verdicts():
    rng = np.random.default_rng(0)
    base = rng.normal(3.0, 0.3, 12)
    values = {'a': {'loss x': list(base - 0.25 + rng.normal(0, 0.01, 12)), 'exact': [1.0] * 12,
                    'digits': list(rng.normal(1.0, 0.02, 12))},
              'b': {'loss x': list(base), 'exact': [0.0] * 12, 'digits': list(rng.normal(1.0, 0.02, 12))},
              'c': {'loss x': list(base + rng.normal(0, 0.002, 12)), 'exact': [1.0] * 11 + [0.0],
                    'digits': list(rng.normal(1.0, 0.02, 12))}}
    fam = [dict(a='a', b='b', kind='loss', column='x'), dict(a='c', b='b', kind='loss', column='x'),
           dict(a='a', b='b', kind='exact', column='passkey'), dict(a='a', b='c', kind='digits', column='passkey')]
    got = ds.judge(fam, values, {'loss': 0.02, 'digits': 0.5, 'exact': 0.1})
    assert [r['verdict'] for r in got] == ['better', 'equivalent', 'better', 'equivalent']
    assert got[0]['diff'] == pytest.approx(np.mean(values['a']['loss x']) - np.mean(base))
    assert got[2]['diff'] == 1.0 and got[2]['method'] == 'newcombe-mcnemar'
    ps = sorted(r['p'] for r in got)
    assert min(r['p_holm'] for r in got) == pytest.approx(min(1.0, 4 * ps[0]))  # Holm over the whole family


def test_study_end_to_end(study):
    s, out = study['summary'], study['root'] / 'out'
    assert [w['play'] for w in s['windows']] and len({w['play'] for w in s['windows']}) == 3
    assert list(s['arms']) == ['base (L=128)', 'crop w=128 sink=4 (sliding)', 'linear s=4 zero-shot', 'yarn s=4 zero-shot']
    assert s['fields'] == ['loss 0-128', 'loss 128-512', 'digits', 'exact']
    # inside its window the crop is the model as shipped: the same losses up to the fused kernel's rounding
    assert np.allclose(s['arms']['base (L=128)']['loss 0-128'], s['arms']['crop w=128 sink=4 (sliding)']['loss 0-128'],
                       atol=1e-4)
    fam = s['family']
    assert [r['kind'] for r in fam] == ['loss', 'loss', 'digits', 'exact'] and fam[3]['column'] == 'passkey'
    assert fam[1]['verdict'] == 'equivalent' and fam[1]['ci'][1] - fam[1]['ci'][0] < 1e-3
    assert s['control']['arm'] == 'base (L=128)' and len(s['control']['exact']) == 1
    for f in ('summary.json', 'summary.md', 'windows.csv', 'per_window.csv', 'position_loss.csv', 'headline.png',
              'verdicts.png'):
        assert (out / f).stat().st_size > 0
    assert (out / 'position_loss.csv').read_text().count('\n') == 1 + T // 16
    assert '/' not in s['settings']['provenance']['command'].split('--base=')[0]  # (no machine path besides args)
    made = s['settings']['parts_made_by']  # each part names the commit that measured it
    assert set(made) == set(s['arms']) and all(len(v) == 1 and v[0] != 'not recorded' for v in made.values())
    again = ds.main(study['args'])  # every part is there: nothing measured, the same summary
    assert again['settings']['arm_seconds'] == {} and again['family'] == fam
    assert all(v is not None and v >= 0 for v in s['settings']['forward_seconds'].values())  # kept in the parts
    assert again['settings']['forward_seconds'] == s['settings']['forward_seconds']


@pytest.mark.parametrize('change, match', [
    ({'--family': ''}, 'family is empty'),
    ({'--family': 'yarn_s4_zero-shot | nope | loss | 128-512'}, "no arm is named 'nope'"),
    ({'--family': 'yarn_s4_zero-shot | base_L128 | ppl | 128-512'}, "kind 'ppl' must be one of"),
    ({'--family': 'yarn_s4_zero-shot | base_L128 | loss | 0-100'}, "column '0-100' is not among"),
    ({'--columns': '0-999'}, "column '0-999' must lie in 0-512"),
    ({'--bin': '10'}, 'bin=10 must divide eval_len=512'),
    ({"--control_len": "129"}, "control rows must lie inside L = 128"),
    ({"--key_lo": "490", "--key_hi": "500"}, "key_hi < eval_len"),
    ({'--windows': '9'}, 'need 10 documents'),
    ({'--rope_types': 'default,crop:form=truncated'}, 'the truncated crop is a forward per position'),
])
def test_bad_settings(study, change, match, tmp_path):
    args = [a for a in study['args'] if a.split('=')[0] not in change and not a.startswith('--out_dir')]
    args += [f'{k}={v}' for k, v in change.items()] + [f'--out_dir={tmp_path / "o"}']
    if change.get('--rope_types'):
        args = [a if not a.startswith('--family') else '--family=base_L128 | crop_w128_truncated | loss | 128-512'
                for a in args]
    with pytest.raises((ConfigError, DataError, ValueError), match=match):
        ds.main(args)
    assert not (tmp_path / 'o' / 'summary.json').exists()


def test_the_study_and_the_bench_read_real_weights_on_their_own():
    """Run as python -m, each reaches the gguf: and hf: loaders itself (not through eval.py): load_checkpoint imports
    the loader's room on first use (data.checkpoints.LOADER_MODULES)."""
    from conftest import run
    for module in ('lab.doc_study', 'lab.engine.masked_bench'):
        code = (f"import {module}; from data.checkpoints import load_checkpoint\ntry:\n    load_checkpoint('hf:/no/such')\n"
                f"except ValueError as e:\n    print(e)")
        r = run(['-c', code], timeout=120)
        assert r.returncode == 0 and 'no config.json there' in r.stdout, (module, r.stdout, r.stderr[-300:])

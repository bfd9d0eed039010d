"""End to end through the command lines, as the Makefile runs them: prepare the fixture -> train a few steps ->
extend two arms (one zero-shot, the plain control and YaRN fine-tuned) -> eval -> every output exists, every
number is finite."""
import csv
import json
import math
import os

from conftest import FIXTURE_CORPUS, run

TINY = ['--block_size=16', '--batch_size=8', '--n_layer=1', '--n_head=2', '--n_embd=32', '--eval_iters=2',
        '--progress=False']


def ok(p):
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_pipeline_end_to_end(tmp_path):
    data, base, ft, ev = (str(tmp_path / d) for d in ('data', 'base', 'ft', 'eval'))
    ok(run(['data/shakespeare_char/prepare.py', '--src', FIXTURE_CORPUS, '--out_dir', data]))
    out = ok(run(['train.py', f'--dataset={data}', f'--out_dir={base}', '--max_iters=20', '--eval_interval=10', *TINY]))
    assert 'iter 20:' in out
    out = ok(run(['finetune_long.py', f'--init_from={base}', f'--out_dir={ft}', '--rope_type=yarn:beta_fast=8',
                  '--plain=True', '--max_iters=4', '--eval_interval=2', '--batch_size=4', '--eval_iters=2',
                  '--progress=False']))
    assert 'default' in out and 'yarn s=4 β_fast=8' in out
    out = ok(run(['eval.py', f'--ckpt={base},{ft}', '--rope_types=default,ntk,dynamic_yarn', '--eval_len=128',
                  '--num_windows=8', '--entropy_windows=2', '--retrieval_examples=2', '--retrieval_len=6',
                  '--retrieval_pos=2', '--grid=4', f'--out_dir={ev}', '--progress=False']))
    assert 'eval: 5 arms x 8 windows x 128 tokens' in out
    expected = {'position_loss.csv', 'attention_entropy.csv', 'retrieval.csv', 'finetune_curves.csv', 'summary.json',
                'summary.md', 'loss_vs_position.png', 'rope_ramp.png', 'attention_entropy.png', 'retrieval.png',
                'finetune_curves.png', 'families.png', 'retrieval_families.png'}  # (no crop, no contrasts: no verdicts)
    assert expected <= set(os.listdir(ev))
    for name in expected:
        assert os.path.getsize(os.path.join(ev, name)) > 0, name
    with open(os.path.join(ev, 'summary.json')) as f:
        summary = json.load(f)
    assert [a['name'] for a in summary['arms']] == ['base (L=16)', 'default ft4', 'yarn s=4 β_fast=8 ft4',
                                                     'ntk s=8 zero-shot', 'dynamic_yarn zero-shot']

    def numbers(obj):
        if isinstance(obj, dict):
            return [x for v in obj.values() for x in numbers(v)]
        if isinstance(obj, list):
            return [x for v in obj for x in numbers(v)]
        return [obj] if isinstance(obj, float) else []
    values = numbers(summary['arms'])
    assert len(values) > 50 and all(math.isfinite(v) for v in values)
    for name in ('position_loss.csv', 'attention_entropy.csv'):
        with open(os.path.join(ev, name)) as f:
            rows = list(csv.reader(f))
        assert len(rows) == 129 and all(math.isfinite(float(v)) for r in rows[1:] for v in r if v != '')
        scored = {p for d in summary['settings']['design'] for p in d if p >= 16}  # past L: the random positions
        assert sum(r[-1] != '' for r in rows[1:]) == 16 + (len(scored) if name == 'position_loss.csv' else 3 * 4)

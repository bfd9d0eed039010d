"""make gpu-check, run tiny on the CPU so that its lines never rot: the Makefile's own commands (read with make -n),
each with a tiny model on the fixture corpus appended, must run and print what the GPU run reports."""
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

TINY = ['--device=cpu', '--progress=False']
TINY_MODEL = ['--compile=False', '--n_layer=1', '--n_head=2', '--n_embd=32', '--block_size=32', '--batch_size=4',
              '--gradient_accumulation_steps=1', '--dropout=0.0']


def test_gpu_check_runs_tiny_on_the_cpu(char_data, tmp_path):
    if shutil.which('make') is None:
        pytest.skip('make is not installed')
    out = subprocess.run(['make', '-n', 'gpu-check', 'PY=python'], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = [shlex.split(ln)[1:] for ln in out.stdout.splitlines() if ln.startswith('python ')]
    assert [ln[0] for ln in lines] == ['data/shakespeare/prepare.py', 'train.py', 'train.py', 'finetune_long.py',
                                       'eval.py']  # the BPE prepare is tested in test_data.py: here the char fixture
    base, ft, ev = tmp_path / 'base', tmp_path / 'ft', tmp_path / 'eval'
    extra = {1: [f'--dataset={char_data}', f'--out_dir={tmp_path / "bench"}', *TINY_MODEL, '--max_iters=6'],
             2: [f'--dataset={char_data}', f'--out_dir={base}', *TINY_MODEL, '--max_iters=8', '--eval_interval=4',
                 '--eval_iters=2'],
             3: [f'--init_from={base}', f'--out_dir={ft}', '--compile=False', '--max_iters=4', '--eval_interval=2',
                 '--eval_iters=2', '--batch_size=2'],
             4: [f'--ckpt={base},{ft}', f'--out_dir={ev}', '--eval_len=128', '--num_windows=4', '--retrieval_examples=2',
                 '--retrieval_len=6', '--retrieval_pos=2', '--needles=0', '--depth_len=0', '--recall_len=0',
                 '--entropy_windows=1', '--grid=2', '--samples=4']}
    printed = []
    for i, args in enumerate(lines[1:], start=1):
        # the 60 timed steps of the bench line are cut to 6 here (--max_iters given twice: the last one wins)
        res = subprocess.run([sys.executable, *args, *TINY, *extra[i]], cwd=ROOT, capture_output=True, text=True,
                             env=dict(os.environ, OMP_NUM_THREADS='1'))
        assert res.returncode == 0, (args, res.stderr[-2000:])
        printed.append(res.stdout)
    assert 'bench: ' in printed[0] and 'tokens/s' in printed[0] and 'MFU n/a per device' in printed[0]
    assert os.path.isfile(base / 'ckpt.pt') and os.path.isfile(ft / 'arms.json')
    assert 'eval: 7 arms' in printed[3] and os.path.isfile(ev / 'loss_vs_position.png')

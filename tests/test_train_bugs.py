"""Bugs found in the story-spine restructure (issue 29); each test failed on the code before it (commit 1378a1a)."""
import json
import os

import pytest
import torch

import finetune_long
import train as train_mod
from configurator import ConfigError
from conftest import run
from data.checkpoints import load_checkpoint
from test_train import DDP, TINY_MODEL, assert_same_weights, torchrun

FT = ['--max_iters=2', '--eval_interval=2', '--eval_iters=1', '--batch_size=2', '--progress=False', '--device=cpu']


def test_b4_finetune_under_torchrun_trains_every_arm(tiny_run, tmp_path):
    """B4: train() returned None on every rank but 0, so rank 1 raised TypeError reading the first arm's val_loss.
    Two seeds under 2 gloo processes now train both arms, with the weights of one process."""
    args = [f'--init_from={tiny_run}', '--rope_type=linear', '--factor=2', '--seeds=1,2', *DDP]
    single = run(['finetune_long.py', *args, f'--out_dir={tmp_path / "single"}'])
    assert single.returncode == 0, single.stderr[-2000:]
    ddp = torchrun('finetune_long.py', *args, f'--out_dir={tmp_path / "ddp"}')
    assert ddp.returncode == 0, ddp.stderr[-2000:]
    arms = json.load(open(tmp_path / 'ddp' / 'arms.json'))['arms']
    assert [a['folder'] for a in arms] == ['seed1', 'seed2'] and all(a['val_loss'] is not None for a in arms)
    for folder in ('seed1', 'seed2'):
        a, b = load_checkpoint(str(tmp_path / 'single' / folder)), load_checkpoint(str(tmp_path / 'ddp' / folder))
        assert a['iter_num'] == b['iter_num'] == 4
        assert_same_weights(a, b)


def test_b7_resume_under_torchrun_is_exact(char_data, tmp_path):
    """B7: only rank 0's RNG was saved, so with dropout rank 1 resumed with other masks. 4 steps in one go == 2 steps,
    save, resume for 2 more, under 2 processes: the same weights and losses, bit for bit."""
    common = [f'--dataset={char_data}', *DDP, *TINY_MODEL, '--dropout=0.1', '--eval_interval=2']
    full = torchrun('train.py', *common, f'--out_dir={tmp_path / "full"}')
    assert full.returncode == 0, full.stderr[-2000:]
    half = torchrun('train.py', *common, '--max_iters=2', f'--out_dir={tmp_path / "half"}')
    assert half.returncode == 0, half.stderr[-2000:]
    more = torchrun('train.py', '--init_from=resume', '--max_iters=4', f'--out_dir={tmp_path / "half"}')
    assert more.returncode == 0, more.stderr[-2000:]
    a, b = load_checkpoint(str(tmp_path / 'full')), load_checkpoint(str(tmp_path / 'half'))
    assert a['iter_num'] == b['iter_num'] == 4
    assert all(torch.equal(a['model'][k], b['model'][k]) for k in a['model'])
    assert [r['val_loss'] for r in a['log']] == [r['val_loss'] for r in b['log']]
    assert len(b['rng']['ranks']) == 2  # every rank's RNG states, each restored by its own rank


def test_b10a_every_seed_is_scored_on_the_same_validation_windows(tiny_run, tmp_path, monkeypatch):
    """B10a: the validation windows were drawn with the training seed, so each seed of an arm was scored on other
    text. Now they come from eval_seed: the same windows, and (zero steps, the same weights) the same loss."""
    drawn, real = [], train_mod.doc_windows
    monkeypatch.setattr(train_mod, 'doc_windows', lambda *a, **kw: drawn.append(real(*a, **kw)) or drawn[-1])
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=linear', '--seeds=1,2', f'--out_dir={tmp_path}',
                        *FT, '--max_iters=0'])
    assert len(drawn) == 2 and drawn[0] == drawn[1]
    one, two = json.load(open(tmp_path / 'arms.json'))['arms']
    assert (one['seed'], two['seed']) == (1, 2) and one['val_loss'] == two['val_loss']


def test_b10b_keep_refuses_an_explicit_factor(tiny_run, tmp_path):
    """B10b: --rope_type=keep took the checkpoint's own factor and silently ignored an explicit --factor equal to the
    default (4). Any --factor other than the checkpoint's own is refused, in one line, before anything is written."""
    zs = tmp_path / 'zs'
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=linear', '--factor=2', f'--out_dir={zs}', *FT,
                        '--max_iters=0'])
    with pytest.raises(ConfigError, match=r"rope_type=keep uses the checkpoint's own rope_scaling \(factor 2.0\); "
                                          r"--factor=4.0 would be ignored") as e:
        finetune_long.main([f'--init_from={zs}', '--rope_type=keep', '--factor=4', f'--out_dir={tmp_path / "x"}', *FT])
    assert '\n' not in str(e.value) and not os.path.exists(tmp_path / 'x')
    finetune_long.main([f'--init_from={zs}', '--rope_type=keep', '--factor=2', f'--out_dir={tmp_path / "y"}', *FT])
    assert load_checkpoint(str(tmp_path / 'y'))['model_args']['block_size'] == 64  # its own factor, named: accepted

"""Shared fixtures: the committed fixture corpus prepared once per session, and a tiny trained RoPE model."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
FIXTURE_CORPUS = os.path.join(ROOT, 'tests', 'fixtures', 'corpus')

# A tiny model that trains in seconds on 2 CPU cores; L = 32 so 4 x L = 128 stays cheap.
TINY = dict(block_size=32, batch_size=16, n_layer=2, n_head=2, n_embd=64, learning_rate=3e-3,
            warmup_iters=10, min_lr=3e-4, eval_iters=4, progress=False, seed=1337)


def run(args, **kw):
    """Run a project script in a subprocess from the repo root; returns CompletedProcess (text)."""
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, **kw)


@pytest.fixture(scope='session')
def char_data(tmp_path_factory):
    """The fixture corpus prepared at character level (val = tempest)."""
    out = tmp_path_factory.mktemp('char_data')
    from data.shakespeare_char.prepare import main as prepare
    prepare(['--src', FIXTURE_CORPUS, '--out_dir', str(out)])
    return str(out)


def tiny_cfg(data_dir, out_dir, **kw):
    from train import DEFAULTS
    return dict(DEFAULTS, **TINY, dataset=data_dir, out_dir=str(out_dir),
                **dict(dict(max_iters=200, lr_decay_iters=200, eval_interval=100), **kw))


@pytest.fixture(scope='session')
def tiny_run(char_data, tmp_path_factory):
    """A tiny char RoPE model trained 200 steps at L=32 (a few seconds); returns its run folder."""
    from train import train
    out = tmp_path_factory.mktemp('tiny_run')
    train(tiny_cfg(char_data, out))
    return str(out)

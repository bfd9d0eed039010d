"""Reliability (issue 7): a run killed with SIGKILL or stopped with Ctrl-C resumes exactly; torn or unsafe
checkpoints are refused without running anything; a NaN stops the run and keeps the last good checkpoint;
every bad input ends in one line naming the problem, a non-zero exit, and no file changed."""
import hashlib
import importlib
import json
import os
import pickle
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import lab.engine.cli
import finetune_long
import train
from conftest import ROOT
from data.common import load_meta
from data.sources import run_prepare
from data.shakespeare_char import prepare as prepare_char
from data.checkpoints import load_checkpoint

# a model small enough that one step takes a few ms on one CPU thread
FAST = ['--block_size=16', '--batch_size=4', '--n_layer=1', '--n_head=2', '--n_embd=32', '--eval_iters=2',
        '--log_interval=10', '--warmup_iters=10', '--progress=False', '--device=cpu']
ENV = dict(os.environ, OMP_NUM_THREADS='1')  # same thread count in every process: bitwise-equal runs


def fast_args(data_dir, out_dir, *extra):
    return [f'--dataset={data_dir}', f'--out_dir={out_dir}', *FAST, *extra]


def hashes(*roots):
    """{path: sha256} of every file under the given folders."""
    out = {}
    for root in roots:
        for d, _, names in os.walk(root):
            for n in names:
                p = os.path.join(d, n)
                with open(p, 'rb') as f:
                    out[p] = hashlib.sha256(f.read()).hexdigest()
    return out


@pytest.fixture(scope='module')
def small_run(char_data, tmp_path_factory):
    """A fast rope model trained 20 steps at L=16 (under a second); its run folder."""
    out = tmp_path_factory.mktemp('small_run')
    train.train(train.get_config(fast_args(char_data, out, '--max_iters=20', '--eval_interval=10'), train.DEFAULTS))
    return str(out)


def call(main, argv, capsys, runner=lab.engine.cli.cli):
    """A script's main through its command-line wrapper, in this process: (exit code, stderr, stdout)."""
    saved = sys.argv
    sys.argv = ['script', *argv]
    capsys.readouterr()
    try:
        runner(main)
        code = 0
    except SystemExit as e:
        code = e.code
    finally:
        sys.argv = saved
    captured = capsys.readouterr()
    return code, captured.err, captured.out


# ----------------------------------------------------------------------------- kill -9 / Ctrl-C, then resume

def start(args):
    return subprocess.Popen([sys.executable, 'train.py', *args], cwd=ROOT, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for_checkpoint(out_dir, min_iter, alive, timeout=120):
    """Poll until out_dir/ckpt.pt holds iteration >= min_iter; returns it, or None once alive() is false."""
    path, seen, t0 = os.path.join(out_dir, 'ckpt.pt'), None, time.time()
    while time.time() - t0 < timeout:
        if not alive():
            return None
        stamp = os.stat(path).st_mtime_ns if os.path.exists(path) else None
        if stamp != seen:  # a new file was renamed into place: read it
            seen, it = stamp, load_checkpoint(path)['iter_num']
            if it >= min_iter:
                return it
        time.sleep(0.01)
    raise TimeoutError(f"no checkpoint at iter >= {min_iter} in {out_dir}")


def test_sigkill_then_ctrl_c_then_resume_reaches_the_same_weights(char_data, tmp_path, capsys):
    """150 steps with dropout on (so the torch RNG matters too), against the same run killed with SIGKILL
    after its iter-30 checkpoint, resumed with --init_from=resume alone, stopped with Ctrl-C (SIGINT) a few
    steps later, and resumed again: the same weights, optimizer moments, iteration, data-order
    generator and logged losses, bit for bit. The first run is a real process (SIGKILL cannot be caught);
    the rest run in this process on one thread like it, to save the start-up time of three more."""
    full, broken = str(tmp_path / 'full'), str(tmp_path / 'broken')
    args = ['--max_iters=150', '--eval_interval=30', '--lr_decay_iters=150', '--dropout=0.1']
    proc = start(fast_args(char_data, broken, *args))
    assert wait_for_checkpoint(broken, 30, alive=lambda: proc.poll() is None), proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    killed_at = load_checkpoint(broken)['iter_num']
    assert 30 <= killed_at < 150  # stopped mid-way; its last checkpoint is whole

    threads, sigint = torch.get_num_threads(), signal.signal(signal.SIGINT, lambda *_: None)  # a late SIGINT: no-op
    torch.set_num_threads(1)
    try:
        train.train(train.get_config(fast_args(char_data, full, *args), train.DEFAULTS))
        orig_lr, target = train.get_lr, killed_at + 5

        def lr_then_ctrl_c(it, cfg):  # Ctrl-C arrives during the resumed run's step `target`, deterministically
            if it == target:
                os.kill(os.getpid(), signal.SIGINT)
            return orig_lr(it, cfg)
        train.get_lr = lr_then_ctrl_c
        try:
            code, err, out = call(train.main, [f'--out_dir={broken}', '--init_from=resume'], capsys)
        finally:
            train.get_lr = orig_lr
        assert code == 130 and err.strip() == 'interrupted', err
        stopped_at = load_checkpoint(broken)['iter_num']
        assert stopped_at == target + 1  # the step under way finishes, then the checkpoint is written
        assert f"saved {os.path.join(broken, 'ckpt.pt')} at iter {stopped_at} (stopped by SIGINT" in out
        code, err, _ = call(train.main, [f'--out_dir={broken}', '--init_from=resume'], capsys)
        assert code == 0, err
    finally:
        torch.set_num_threads(threads)
        signal.signal(signal.SIGINT, sigint)

    ref, got = load_checkpoint(full), load_checkpoint(broken)
    assert got['iter_num'] == ref['iter_num'] == 150
    assert got['model'].keys() == ref['model'].keys()
    for k in ref['model']:
        assert torch.equal(got['model'][k], ref['model'][k]), k
    for i, state in ref['optimizer']['state'].items():
        for k in ('exp_avg', 'exp_avg_sq', 'step'):
            assert torch.equal(got['optimizer']['state'][i][k], state[k]), (i, k)
    assert torch.equal(got['rng']['batches'], ref['rng']['batches'])
    assert torch.equal(got['rng']['torch'], ref['rng']['torch'])
    assert [r['iter'] for r in got['log']] == [0, 30, 60, 90, 120, 150]
    assert [r['val_loss'] for r in got['log']] == [r['val_loss'] for r in ref['log']]


def test_finetune_arm_resumes_with_its_own_settings(small_run, tmp_path, capsys):
    """finetune_long.py --init_from=resume continues an arm with its stored settings (length, scaling, schedule):
    6 + 6 steps give the weights of 12 in one go."""
    arm = ['--rope_type=yarn', '--factor=2', '--eval_interval=6', '--eval_iters=2', '--batch_size=4',
           '--progress=False', '--device=cpu', f'--init_from={small_run}']
    for out, steps in (('whole', 12), ('split', 6)):
        code, err, _ = call(finetune_long.main, [*arm, f'--out_dir={tmp_path / out}', f'--max_iters={steps}'], capsys)
        assert code == 0, err
    code, err, _ = call(finetune_long.main, ['--init_from=resume', f'--out_dir={tmp_path / "split"}',
                                             '--max_iters=12'], capsys)
    assert code == 0, err
    a, b = load_checkpoint(str(tmp_path / 'whole')), load_checkpoint(str(tmp_path / 'split'))
    assert b['iter_num'] == 12 and b['lineage']['finetune_steps'] == 12 and b['config']['block_size'] == 32
    assert b['model_args']['rope_scaling'] == a['model_args']['rope_scaling']
    assert b['model_args']['rope_scaling']['rope_type'] == 'yarn'
    assert all(torch.equal(a['model'][k], b['model'][k]) for k in a['model'])
    assert [r['val_loss'] for r in b['log']] == [r['val_loss'] for r in a['log']]


# ----------------------------------------------------------------------------- unsafe or torn checkpoints

class Payload:
    """Pickles as a call of exec(): an unsafe load would create the marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').close()",)


def test_truncated_and_malicious_checkpoints_are_refused(small_run, tmp_path):
    with open(os.path.join(small_run, 'ckpt.pt'), 'rb') as f:
        good = f.read()
    rng = random.Random(7)
    for cut in [0, 1, len(good) - 1] + [rng.randrange(2, len(good) - 1) for _ in range(4)]:
        path = tmp_path / f'cut{cut}' / 'ckpt.pt'
        path.parent.mkdir()
        path.write_bytes(good[:cut])
        with pytest.raises(ValueError, match='truncated or not a checkpoint') as e:
            load_checkpoint(str(path.parent))
        assert str(path) in str(e.value) and '\n' not in str(e.value)

    marker = tmp_path / 'code_ran'
    payload = {'model': Payload(str(marker)), 'model_args': {}}
    pickle.loads(pickle.dumps(payload))  # the payload is live: a plain unpickle runs it
    assert marker.exists()
    marker.unlink()
    raw, zipped = tmp_path / 'raw.pt', tmp_path / 'zipped.pt'
    raw.write_bytes(pickle.dumps(payload, protocol=2))  # a bare pickle ...
    torch.save(payload, zipped)             # ... and the same object in torch.save's zip format
    for path in (raw, zipped):
        with pytest.raises(ValueError, match='could not be loaded safely') as e:
            load_checkpoint(str(path))
        assert str(path) in str(e.value)
        assert not marker.exists()
    torch.save({'model': 'weights', 'model_args': [1, 2]}, tmp_path / 'other.pt')
    with pytest.raises(ValueError, match='not a checkpoint of this project'):  # loads safely, but is not ours
        load_checkpoint(str(tmp_path / 'other.pt'))


# ----------------------------------------------------------------------------- NaN

def test_nan_stops_the_run_and_keeps_the_last_checkpoint(small_run, tmp_path, capsys):
    run_dir = str(tmp_path / 'run')
    shutil.copytree(small_run, run_dir)
    before = hashes(run_dir)
    code, err, _ = call(train.main, [f'--out_dir={run_dir}', '--init_from=resume', '--max_iters=60',
                                     '--log_interval=1', '--learning_rate=1e6', '--decay_lr=False'], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    m = re.match(r"error: training loss is (nan|inf) at iter (\d+); training stopped "
                 r"\(the last good checkpoint (\S+) is kept\)", err)
    assert m, err
    assert 20 < int(m.group(2)) < 60 and m.group(3) == os.path.join(run_dir, 'ckpt.pt')
    assert hashes(run_dir) == before  # byte-identical checkpoint and log, no stray temp file


# ----------------------------------------------------------------------------- bad inputs

@pytest.fixture(scope='module')
def bad_data(char_data, tmp_path_factory):
    """Broken copies of the fixture data: {name: folder}."""
    root = tmp_path_factory.mktemp('bad_data')
    meta = load_meta(char_data)
    V = meta['vocab_size']
    out = {}
    for name in ('no_val', 'odd_size', 'big_id', 'other_chars', 'bpe'):
        out[name] = str(root / name)
        shutil.copytree(char_data, out[name])
    os.remove(os.path.join(out['no_val'], 'val.bin'))
    with open(os.path.join(out['odd_size'], 'train.bin'), 'ab') as f:
        f.write(b'\x01')
    ids = np.fromfile(os.path.join(out['big_id'], 'train.bin'), dtype=np.uint16)
    ids[100] = V
    ids.tofile(os.path.join(out['big_id'], 'train.bin'))
    itos = list(meta['itos'])
    itos[5], itos[6] = itos[6], itos[5]  # same size, two characters swapped
    with open(os.path.join(out['other_chars'], 'meta.json'), 'w') as f:
        json.dump(dict(meta, itos=itos), f)
    n = {s: meta['docs'][s][-1][2] for s in ('train', 'val')}  # a GPT-2 BPE dataset of the same lengths
    for s in n:
        np.random.default_rng(0).integers(0, 50256, n[s]).astype(np.uint16).tofile(os.path.join(out['bpe'], f'{s}.bin'))
    with open(os.path.join(out['bpe'], 'meta.json'), 'w') as f:
        json.dump(dict(meta, tokenizer='gpt2', vocab_size=50257, eot_token=50256, itos=None,
                       docs={s: [['doc', 0, n[s]]] for s in n}), f)
    one_doc = root / 'one_doc_src'
    one_doc.mkdir()
    (one_doc / 'a.txt').write_text('just one document\n')
    out['one_doc_src'] = str(one_doc)
    return out


def test_bad_inputs_one_line_nonzero_exit_nothing_changed(char_data, small_run, bad_data, tmp_path, capsys):
    """40 bad inputs across train.py, finetune_long.py, eval.py and the prepare script (in this process through
    each script's command-line wrapper, then 4 more as real processes): each exits non-zero with one line on
    stderr that names the problem, and no file in any run or data folder changes."""
    conf = tmp_path / 'typo.py'
    conf.write_text('batch_size = 8\nlearning_rate = 1e-3 +\n')
    a_file = tmp_path / 'a_file'
    a_file.write_text('not a folder')
    torn = tmp_path / 'torn'
    torn.mkdir()
    with open(os.path.join(small_run, 'ckpt.pt'), 'rb') as f:
        (torn / 'ckpt.pt').write_bytes(f.read()[:5000])
    fresh = str(tmp_path / 'fresh')  # a run folder that must stay absent
    tr = lambda *a, data=char_data, out=fresh: fast_args(data, out, '--max_iters=5', *a)  # noqa: E731
    ft = lambda *a: [f'--init_from={small_run}', f'--out_dir={fresh}', '--max_iters=2', '--progress=False', *a]  # noqa: E731
    ev = lambda *a: [f'--ckpt={small_run}', f'--out_dir={fresh}', '--progress=False', *a]  # noqa: E731
    prep = lambda *a: ['--src', os.path.join(ROOT, 'tests', 'fixtures', 'corpus'), '--out_dir', fresh, *a]  # noqa: E731
    cases = [  # (script, argv, what the one line must name)
        ('train', tr('--bach_size=3'), "unknown setting 'bach_size'"),
        ('train', tr('--batch_size=big'), 'batch_size'),
        ('train', tr('--max_iters=1.5'), 'max_iters'),
        ('train', [str(conf), *tr()], 'typo.py'),
        ('train', tr(data=str(tmp_path / 'no_such_data')), 'no_such_data'),
        ('train', tr(data=bad_data['no_val']), 'val.bin not found'),
        ('train', tr(data=bad_data['odd_size']), 'not a whole'),
        ('train', tr(data=bad_data['big_id']), f"token id {load_meta(char_data)['vocab_size']} >= vocab_size"),
        ('train', tr('--block_size=100000'), 'block_size=100000'),
        ('train', tr('--block_size=0'), 'block_size=0'),
        ('train', tr('--device=tpu'), 'device'),
        ('train', tr('--dtype=fp8'), 'dtype'),
        ('train', tr('--gradient_accumulation_steps=0'), 'gradient_accumulation_steps'),
        ('train', tr('--beta2=1.5'), 'beta2'),
        ('train', tr('--pos_emb=xpos'), 'xpos'),
        ('train', tr('--n_head=3'), 'n_head'),
        ('train', tr('--learning_rate=-0.1'), 'learning_rate'),
        ('train', tr(out=str(a_file)), 'is a file'),
        ('train', tr(out=small_run), 'already holds a run'),
        ('train', [f'--out_dir={fresh}', '--init_from=resume'], 'does not exist'),
        ('train', [f'--out_dir={small_run}', '--init_from=resume', f'--dataset={bad_data["other_chars"]}'],
         'different characters'),
        ('finetune', ['--out_dir=' + fresh], '--init_from'),
        ('finetune', ft('--factor=0.5'), 'factor=0.5'),
        ('finetune', ft('--rope_type=pi'), "'pi'"),
        ('finetune', ft('--rope_type=yarn:foo=1'), 'foo=1'),
        ('finetune', ft('--beta_fast=fast'), 'beta_fast'),
        ('finetune', ft('--block_size=8'), 'block_size=8'),
        ('finetune', ft(f'--dataset={bad_data["bpe"]}'), 'gpt2 vocabulary of 50257'),
        ('finetune', [f'--init_from={torn}', f'--out_dir={fresh}'], os.path.join(str(torn), 'ckpt.pt')),
        ('finetune', [f'--init_from={small_run}', f'--out_dir={small_run}'], 'already holds a run'),
        ('eval', ev('--bogus=1'), "unknown setting 'bogus'"),
        ('eval', ev('--eval_len=8'), 'eval_len=8'),
        ('eval', ev('--num_windows=0'), 'num_windows=0'),
        ('eval', ev(f'--dataset={bad_data["bpe"]}'), '50257'),
        ('eval', [f'--ckpt={torn}', f'--out_dir={fresh}'], os.path.join(str(torn), 'ckpt.pt')),
        ('prepare', ['--src', str(tmp_path / 'nope'), '--out_dir', fresh], 'nope'),
        ('prepare', ['--src', bad_data['one_doc_src'], '--out_dir', fresh], 'at least 2'),
        ('prepare', prep('--val_titles', 'hamlet,nope'), 'nope'),
        ('prepare', prep('--bogus'), '--bogus'),
        ('prepare', prep()[:-1] + [str(a_file)], 'is a file'),
    ]
    mains = {'train': (train.main, lab.engine.cli.cli), 'finetune': (finetune_long.main, lab.engine.cli.cli),
             'eval': (importlib.import_module('eval').main, lab.engine.cli.cli),
             'prepare': (prepare_char.main, run_prepare)}
    watched = (char_data, small_run, *bad_data.values(), str(tmp_path))
    before = hashes(*watched)
    for script, argv, names in cases:
        main, runner = mains[script]
        code, err, _ = call(main, argv, capsys, runner)
        lines = err.strip().splitlines()
        assert code not in (0, None) and len(lines) == 1 and lines[0].startswith('error: '), (script, argv, err)
        assert names in lines[0], (script, argv, lines[0])
        assert hashes(*watched) == before, (script, argv)
    assert not os.path.exists(fresh)

    # the same through real processes: the scripts as a user runs them, and a DDP launch whose world size
    # (3 processes, as torchrun would set) does not divide gradient_accumulation_steps=2
    ddp_env = dict(ENV, RANK='0', WORLD_SIZE='3', LOCAL_RANK='0', MASTER_ADDR='127.0.0.1', MASTER_PORT='1')
    procs = [
        (['train.py', *tr('--bach_size=3')], None, 'bach_size'),
        (['train.py', *tr('--gradient_accumulation_steps=2')], ddp_env, 'not divisible by the 3 processes'),
        (['finetune_long.py', *ft(f'--dataset={bad_data["bpe"]}')], None, 'gpt2 vocabulary'),
        (['data/shakespeare_char/prepare.py', *prep('--val_titles', 'nope')], None, 'nope'),
    ]
    started = [(subprocess.Popen([sys.executable, *a], cwd=ROOT, env=env or ENV, text=True, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE), names) for a, env, names in procs]
    for p, names in started:
        _, err = p.communicate(timeout=120)
        lines = err.strip().splitlines()
        assert p.returncode != 0 and len(lines) == 1 and lines[0].startswith('error: ') and names in lines[0], err
    assert hashes(*watched) == before and not os.path.exists(fresh)


def worker_pids(parent):
    """{RANK: pid} of torchrun's worker processes (children of `parent`), read from /proc."""
    out = {}
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/stat') as f:
                ppid = int(f.read().rsplit(')', 1)[1].split()[1])
            with open(f'/proc/{pid}/environ', 'rb') as f:
                env = dict(kv.split(b'=', 1) for kv in f.read().split(b'\0') if b'=' in kv)
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b'RANK' in env:
            out[int(env[b'RANK'])] = int(pid)
    return out


@pytest.mark.skipif(not os.path.isdir('/proc'), reason='finds the worker processes through /proc')
def test_sigterm_to_one_torchrun_rank_stops_both_and_saves_once(char_data, tmp_path):
    """Only rank 1 gets SIGTERM; the ranks agree at the next log step, rank 0 saves once, every process exits
    (no rank left waiting in a collective), and the run resumes from that checkpoint."""
    out = str(tmp_path / 'ddp')
    args = [f'--dataset={char_data}', f'--out_dir={out}', '--max_iters=100000', '--eval_interval=5', '--eval_iters=1',
            '--block_size=32', '--batch_size=2', '--n_layer=1', '--n_head=2', '--n_embd=16', '--log_interval=2',
            '--gradient_accumulation_steps=2', '--device=cpu', '--progress=False']
    proc = subprocess.Popen([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2',
                             'train.py', *args], cwd=ROOT, env=dict(ENV, OMP_NUM_THREADS='1'), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert wait_for_checkpoint(out, 5, alive=lambda: proc.poll() is None, timeout=180), proc.communicate()
        workers = worker_pids(proc.pid)
        assert sorted(workers) == [0, 1]
        os.kill(workers[1], signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    saved = re.findall(r"saved \S+ at iter (\d+) \(stopped by SIGTERM", stdout + stderr)
    assert len(saved) == 1, (stdout[-2000:], stderr[-2000:])
    ckpt = load_checkpoint(out)
    assert ckpt['iter_num'] == int(saved[0]) and ckpt['iter_num'] % 2 == 0 and 5 <= ckpt['iter_num'] < 100000
    assert proc.returncode != 0  # the workers exit 130 (interrupted); torchrun reports the failure
    for pid in workers.values():
        assert not os.path.exists(f'/proc/{pid}') or open(f'/proc/{pid}/stat').read().split()[2] == 'Z'

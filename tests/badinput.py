"""What every case of the tests/test_bad_input_*.py tables checks: a script's main, run through lab.engine.cli.cli (in
this process; in a child process where a write must fail), exits non-zero without a traceback, its last line on stderr
names the setting or the file, and no file or folder under the watched paths is created, changed or removed. Also the
shared inputs: a finished two-seed fine-tune and damaged copies of the fixture dataset."""
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys

import pytest

import lab.engine.cli
from conftest import ROOT

FT = ['--max_iters=2', '--eval_interval=2', '--eval_iters=1', '--batch_size=2', '--progress=False', '--device=cpu']


def snapshot(*roots):
    """{path: 'dir' | (mtime_ns, size, sha256) | None (absent)} of every folder and file under the given paths."""
    def stamp(p):
        st = os.stat(p)
        with open(p, 'rb') as f:
            return st.st_mtime_ns, st.st_size, hashlib.sha256(f.read()).hexdigest()
    out = {}
    for root in map(str, roots):
        out[root] = stamp(root) if os.path.isfile(root) else 'dir' if os.path.isdir(root) else None
        for d, _, names in os.walk(root):
            out[d] = 'dir'
            out.update({os.path.join(d, n): stamp(os.path.join(d, n)) for n in names})
    return out


def call(main, argv, capsys):
    """main(argv) through lab.engine.cli.cli in this process: (exit code, stderr). An exception cli does not turn into
    one line (a traceback for the user) propagates and fails the test."""
    saved, sys.argv = sys.argv, ['script', *map(str, argv)]
    capsys.readouterr()
    try:
        lab.engine.cli.cli(main)
        code = 0
    except SystemExit as e:
        code = e.code
    finally:
        sys.argv = saved
    return code, capsys.readouterr().err


def assert_refused(code, err, names):
    """Exit != 0, no traceback, and the last stderr line is 'error: ...' holding every one of `names`."""
    lines = err.strip().splitlines()
    assert code not in (0, None), err[-2000:]
    assert 'Traceback' not in err, err[-2000:]
    assert lines and lines[-1].startswith('error: '), err[-2000:]
    for name in [names] if isinstance(names, str) else names:
        assert str(name) in lines[-1], (name, lines[-1])


def check_refused(main, argv, names, capsys, watched):
    """One table row: main(argv) is refused naming `names`, and nothing under `watched` changes."""
    before = snapshot(*watched)
    code, err = call(main, argv, capsys)
    assert_refused(code, err, names)
    assert snapshot(*watched) == before, f"files changed by {argv}"


def run_with_file_limit(args, limit, timeout=300):
    """A script in a child process whose files cannot grow past `limit` bytes (RLIMIT_FSIZE; SIGXFSZ ignored, so a
    write past it fails with OSError EFBIG instead of killing the process)."""
    def limit_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return subprocess.run([sys.executable, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit_files, env=dict(os.environ, OMP_NUM_THREADS='1'))


def edit_json(path, change):
    """Rewrite the JSON file at path as change(value) leaves the value (it edits in place; what it returns is ignored)."""
    with open(path, encoding='utf-8') as f:
        value = json.load(f)
    change(value)
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(value, f)


@pytest.fixture(scope='session')
def two_seeds(tiny_run, tmp_path_factory):
    """A finished fine-tune of tiny_run: linear s=4, seeds 1 and 2 (2 steps each): out/arms.json, out/seed1, out/seed2."""
    import finetune_long
    out = tmp_path_factory.mktemp('two_seeds') / 'ft'
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=linear', '--seeds=1,2', f'--out_dir={out}', *FT])
    return str(out)


@pytest.fixture(scope='session')
def bad_datasets(char_data, tmp_path_factory):
    """Damaged copies of the fixture dataset: 'other_chars' (two characters swapped in meta.json's itos, same size) and
    'no_val' (val.bin missing)."""
    root, out = tmp_path_factory.mktemp('bad_datasets'), {}
    for name in ('other_chars', 'no_val'):
        out[name] = str(root / name)
        shutil.copytree(char_data, out[name])
    os.remove(os.path.join(out['no_val'], 'val.bin'))

    def swap(meta):
        meta['itos'][5], meta['itos'][6] = meta['itos'][6], meta['itos'][5]
    edit_json(os.path.join(out['other_chars'], 'meta.json'), swap)
    return out

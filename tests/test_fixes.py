"""Defects a review of the restructured lab found, each pinned by a test that failed before its fix: the CI script and
the Makefile on a fresh machine, a LongRoPE search resumed by another spelling of its folder, settings that were
silently ignored, and plot.py on a damaged summary.json."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import eval as ev
import search_longrope as sl
from conftest import ROOT, run
from lab.measure.arm_specs import parse_arms

SMALL = ['--factor=4', '--search_population=4', '--search_parents=2', '--search_windows=1', '--batch_size=1',
         '--eval_iters=1', '--progress=False', '--device=cpu', "--search_seeds=linear,yarn"]


def test_ci_script_finds_python3_where_python_is_missing(tmp_path):
    """.ci/run called `python` (exit 127 where only python3 exists); it now takes python3 when python is missing."""
    (tmp_path / 'python3').symlink_to(sys.executable)
    with open(os.path.join(ROOT, '.ci', 'run')) as f:
        chooser = [line for line in f if line.startswith('PY=')]
    assert chooser, ".ci/run does not choose its interpreter"
    out = subprocess.run(['/bin/bash', '-c', chooser[0] + 'echo "$PY"'], env={'PATH': str(tmp_path)},
                         capture_output=True, text=True)
    assert out.stdout.strip() == str(tmp_path / 'python3')


@pytest.mark.skipif(shutil.which('make') is None, reason='make is not installed')
def test_make_ape_builds_the_base_it_compares_against(tmp_path):
    """`make ape` evaluated against out/char-base, which `make demo` never builds: it failed after ~15 minutes of
    training. In a folder without that run, its plan now starts by training it."""
    plan = subprocess.run(['make', '-n', '-f', os.path.join(ROOT, 'Makefile'), 'ape'], cwd=tmp_path,
                          capture_output=True, text=True).stdout.replace('\\\n', '').splitlines()  # (continuation lines joined)
    assert plan[0].endswith('train.py config/train_shakespeare_char_cpu.py --overwrite=True')
    assert 'eval.py --ckpt=out/char-base,' in plan[-1]


def test_search_resumes_by_folder_not_by_spelling(tiny_run, tmp_path):
    """A resumed search compared out_dir as a string (a trailing slash or a moved folder was 'another setting') and
    stored init_from as typed (relative). Now the folder holding the state is the search, and init_from is absolute."""
    out = tmp_path / 'a'
    rel = os.path.relpath(tiny_run)
    sl.main([f'--init_from={rel}', f'--out_dir={out}', '--search_generations=0', *SMALL])
    with open(out / 'search_state.json') as f:
        assert json.load(f)['config']['init_from'] == os.path.abspath(tiny_run)
    best, state = sl.main(['--init_from=resume', f'--out_dir={out}/', '--search_generations=1'])
    assert state['generation'] == 1
    moved = tmp_path / 'moved'
    shutil.move(str(out), moved)
    best, state = sl.main(['--init_from=resume', f'--out_dir={moved}', '--search_generations=2'])
    assert state['generation'] == 2 and os.path.isfile(moved / 'ckpt.pt')


def test_a_flag_no_arm_uses_is_refused():
    """--beta_fast with only linear arms was dropped without a word."""
    with pytest.raises(ValueError, match='--beta_fast=8.0 is used by none of the arms'):
        parse_arms('default,linear', 4.0, 32, flags={'beta_fast': 8.0, 'beta_slow': None})
    assert parse_arms('linear,yarn', 4.0, 32, flags={'beta_fast': 8.0})[1][1]['beta_fast'] == 8.0


@pytest.mark.parametrize('args, msg', [
    (['finetune_long.py', '--rope_type=keep', '--beta_fast=8'], 'rope_type=keep uses the checkpoint'),
    (['finetune_long.py', '--rope_type=keep', '--factor=8'], 'rope_type=keep uses the checkpoint'),
    (['sample.py', '--factor=2'], '--factor=2.0 scales a --rope_type and there is none'),
    (['sample.py', '--factor=2', '--rope_type=rerope:window=8'], 'a position map'),
    (['eval.py', '--factor=4', '--rope_types=rerope:window=8'], '--factor=4.0 sets the scale of the zero-shot'),
], ids=['keep+beta_fast', 'keep+factor', 'sample-factor', 'sample-map-factor', 'eval-factor'])
def test_settings_that_would_be_ignored_are_refused(tiny_run, tmp_path, args, msg):
    flag = '--init_from' if args[0] == 'finetune_long.py' else '--ckpt'
    out = tmp_path / 'out'
    extra = {'finetune_long.py': [f'--out_dir={out}', '--max_iters=1'], 'eval.py': [f'--out_dir={out}'],
             'sample.py': ['--max_new_tokens=2', '--progress=False']}[args[0]]
    r = run([*args, f'{flag}={tiny_run}', *extra])
    assert r.returncode == 2 and msg in r.stderr.strip().splitlines()[-1] and 'Traceback' not in r.stderr
    assert not out.exists()


@pytest.fixture(scope='module')
def evaldir(tiny_run, tmp_path_factory):
    out = tmp_path_factory.mktemp('eval')
    ev.main([f'--ckpt={tiny_run}', '--rope_types=yarn', '--eval_len=64', '--num_windows=2', '--batch_size=2',
             '--entropy_windows=1', '--retrieval_examples=2', '--retrieval_len=8', '--retrieval_cue=2',
             '--retrieval_pos=2', f'--out_dir={out}', '--progress=False', '--device=cpu'])
    return out


def damaged(evaldir, tmp_path, drop):
    """A copy of the eval folder whose summary.json lacks one field (a dotted path)."""
    out = tmp_path / 'damaged'
    shutil.copytree(evaldir, out)
    with open(out / 'summary.json') as f:
        summary = json.load(f)
    *parents, last = drop.split('.')
    node = summary
    for p in parents:
        node = node[int(p)] if p.isdigit() else node[p]
    del node[last]
    with open(out / 'summary.json', 'w') as f:
        json.dump(summary, f)
    for png in out.glob('*.png'):
        png.unlink()
    return out


def test_plot_only_names_a_missing_field(evaldir, tmp_path):
    """A summary.json missing one field crashed plot.py with a KeyError traceback."""
    out = damaged(evaldir, tmp_path, 'arms.0.head_dim')
    r = run(['eval.py', '--plot_only=True', f'--out_dir={out}'])
    assert r.returncode == 2 and 'Traceback' not in r.stderr
    assert 'lacks arms[0].head_dim' in r.stderr and 'summary.json' in r.stderr


def test_a_missing_entropy_field_skips_only_its_picture(evaldir, tmp_path):
    """Without settings.entropy the loss plot died with the entropy plot; now only attention_entropy.png is skipped."""
    out = damaged(evaldir, tmp_path, 'settings.entropy')
    r = run(['eval.py', '--plot_only=True', f'--out_dir={out}'])
    assert r.returncode == 0, r.stderr
    assert 'skipped attention_entropy.png' in r.stdout
    assert (out / 'loss_vs_position.png').is_file() and not (out / 'attention_entropy.png').exists()


def test_plot_only_as_its_docstring_writes_it(evaldir):
    """plot.py's docstring showed a bare `--plot_only`, which the one argument syntax refuses: the documented
    command must run."""
    import plot
    doc = next(line for line in plot.__doc__.splitlines() if '--plot_only' in line)
    cmd = doc[doc.index('`') + 1:doc.rindex('`')].split()
    assert cmd[:2] == ['python', 'eval.py']
    args = [a.replace('<dir>', str(evaldir)) for a in cmd[2:]]
    assert run(['eval.py', *args]).returncode == 0

"""The Makefile a person reads (issue 61 item 4): the main targets in Makefile, the studies in studies.mk (included
by it), every line within 120 columns, `make help` on one screen, and every target the docs name still there.
Nothing here runs a target: make -qp reads the rules, make help only prints."""
import glob
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which('make') is None, reason='make is not installed')
FILES = ('Makefile', 'studies.mk')
MAIN = ['quick', 'demo', 'install', 'data', 'train-copy', 'finetune', 'pose', 'longrope', 'eval', 'train', 'eval-test',
        'bases-test', 'designs-test', 'real-model-data', 'real-model', 'real-model-maps', 'bridge', 'gpu-check',
        'real-model-gpu', 'test', 'help', 'help-studies']
# `make X` as the docs write it: inline code (`make X`, `make -j2 X`) and README's command lines
NAMED = re.compile(r'`make (?:-\S+ )*([a-z][-a-z0-9]*)`|^make ([a-z][-a-z0-9]*)', re.M)


def make(*args, cwd=ROOT):
    return subprocess.run(['make', *args], cwd=cwd, capture_output=True, text=True)


def targets():
    """Every target make knows (its database, read with make -qp: no recipe runs), pattern rules and files that
    make only read (the Makefile itself, `# Not a target:`) left out."""
    out, prev, found = make('-qp').stdout.splitlines(), '', set()
    for ln in out:
        m = re.match(r'^([^\s#:=%][^\s:=]*):(?!=)', ln)
        if m and prev != '# Not a target:' and not m.group(1).startswith('.'):
            found.add(m.group(1))
        prev = ln
    return found


def phony(name):
    """The .PHONY targets a file declares (one or more .PHONY: lines)."""
    with open(os.path.join(ROOT, name), encoding='utf-8') as f:
        return [t for ln in f if ln.startswith('.PHONY:') for t in ln.split()[1:]]


@pytest.mark.parametrize('name', FILES)
def test_every_line_fits_in_120_columns(name):
    with open(os.path.join(ROOT, name), encoding='utf-8') as f:
        widths = {i: len(ln.rstrip('\n').expandtabs(8)) for i, ln in enumerate(f, start=1)}
    assert max(widths.values()) <= 120, {i: w for i, w in widths.items() if w > 120}


def test_make_help_lists_the_main_targets_on_one_screen():
    out = make('help')
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    listed = [ln.split()[0] for ln in lines if ln.startswith('  ')]
    assert listed == [t for t in MAIN]  # in the Makefile's order, every one with its `## ` line
    assert sorted(phony('Makefile')) == sorted(MAIN)
    assert len(lines) <= 40 and max(len(ln) for ln in lines) <= 120
    assert f"lists the {len(phony('studies.mk'))} others" in lines[-1]


def test_make_help_studies_lists_every_study():
    out = make('help-studies')
    assert out.returncode == 0, out.stderr
    listed = [ln.split()[0] for ln in out.stdout.splitlines() if ln.startswith('  ')]
    assert sorted(listed) == sorted(phony('studies.mk')) and len(listed) > 50
    assert max(len(ln) for ln in out.stdout.splitlines()) <= 120
    assert not set(listed) & set(MAIN)


def test_every_phony_target_is_a_rule():
    known = targets()
    assert set(phony('Makefile')) | set(phony('studies.mk')) <= known
    assert len(known) > 80


def test_every_target_the_docs_name_exists():
    """README.md, docs/*.md, assets/**/*.md and .ci/run name targets; each must still be one."""
    known, missing = targets(), {}
    docs = ['README.md', '.ci/run', *glob.glob('docs/*.md', root_dir=ROOT),
            *glob.glob('assets/**/*.md', root_dir=ROOT, recursive=True)]
    for doc in docs:
        with open(os.path.join(ROOT, doc), encoding='utf-8') as f:
            names = {a or b for a, b in NAMED.findall(f.read())}
        if names - known:
            missing[doc] = sorted(names - known)
    assert not missing, missing
    with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
        readme = {a or b for a, b in NAMED.findall(f.read())}
    assert {'quick', 'demo', 'real-model', 'help'} <= readme  # the pattern still reads README's commands


def test_the_studies_are_found_from_another_folder(tmp_path):
    """make -f path/to/Makefile includes studies.mk from the Makefile's folder, not from the current one."""
    out = make('-n', '-f', os.path.join(ROOT, 'Makefile'), 'knobs', 'PY=python', cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == 'python eval.py config/studies/eval_knobs_cpu.py'

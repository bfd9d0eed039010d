"""No committed file names a path of the machine that made it (DEVELOPERS.md: committed files hold no absolute path;
issue 61's count found 63 files under assets/ that did): every text file git tracks is scanned for an absolute path
under the usual home, scratch and work roots."""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MACHINE_PATH = re.compile(r'(?<![\w.~$])/(?:root|home|tmp|work|Users|mnt|scratch)/[\w.-]+')
BINARY = ('.png', '.npz', '.pt', '.gguf', '.whl', '.safetensors')


def test_the_pattern_finds_a_machine_path_and_leaves_the_rest():
    tmp, home = '/' + 'tmp/rmclone', '/' + 'root/.cache'  # (built, so that this file holds neither)
    text = f'wrote {tmp}/data; "{home}/longctx"; ~/.cache/x; a/tmp/b; out/hf; $HOME/tmp/x'
    assert MACHINE_PATH.findall(text) == [tmp, home]


def test_no_committed_file_names_a_machine_path():
    try:
        files = subprocess.run(['git', '-C', ROOT, 'ls-files'], capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip('not a git checkout')
    found = {}
    for f in files:
        if f.endswith(BINARY) or not os.path.isfile(os.path.join(ROOT, f)):
            continue
        try:
            with open(os.path.join(ROOT, f), encoding='utf-8') as fh:
                hits = MACHINE_PATH.findall(fh.read())
        except UnicodeDecodeError:
            continue
        if hits:
            found[f] = hits[:3]
    assert not found, f"committed files naming a machine's path (write them relative to the repository): {found}"


def test_the_log_is_newest_first():
    """docs/log.md promises dated entries, newest first (issue 61 found one out of order)."""
    with open(os.path.join(ROOT, 'docs', 'log.md'), encoding='utf-8') as f:
        dates = [line[3:13] for line in f if line.startswith('## ')]
    assert dates and all(a >= b for a, b in zip(dates, dates[1:])), dates

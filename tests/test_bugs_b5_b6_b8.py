"""Three fixed defects. B5: lab.engine.cli.cli shows a traceback for a bug (Python's own ValueError from a main, with no
file or line in its message) and keeps one line for the project's errors. B6: data.common.doc_windows draws
windows that share no token (the demo's 32 evaluation windows held 3 overlapping pairs). B8: lab/engine/bench.py's MFU is per
device (the tokens of every process were counted against one device's peak)."""
import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import configurator
from conftest import ROOT
from data.common import DataError, doc_windows
from lab.engine import bench


# ----------------------------------------------------------------------------- B5: cli, bugs against bad inputs

def run_main(tmp_path, body, env=None):
    """A script in the repository's own style (main(argv) run through lab.engine.cli.cli), in a child process."""
    script = tmp_path / 'script.py'
    script.write_text(f"import sys\nsys.path.insert(0, {ROOT!r})\nfrom configurator import ConfigError\nfrom lab.engine.cli import cli\n\n\n"
                      f"def main(argv):\n{textwrap.indent(body, '    ')}\n\nif __name__ == '__main__':\n    cli(main)\n")
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, OMP_NUM_THREADS='1', **(env or {})))


def test_a_bug_in_main_shows_its_traceback(tmp_path):
    p = run_main(tmp_path, 'a, b = [1, 2, 3]\n')
    assert p.returncode not in (0, 2), p.stderr
    assert 'Traceback' in p.stderr, p.stderr
    assert 'script.py", line 8, in main' in p.stderr and 'a, b = [1, 2, 3]' in p.stderr, p.stderr
    assert 'too many values to unpack' in p.stderr.strip().splitlines()[-1]


def test_a_value_error_from_a_library_shows_its_traceback(tmp_path):
    p = run_main(tmp_path, "import numpy\nnumpy.random.default_rng(-1)\n")
    assert p.returncode not in (0, 2) and 'Traceback' in p.stderr, p.stderr


def test_project_errors_stay_one_line(tmp_path):
    for body, names in (("raise ConfigError('seed=-1 is out of range; pass a seed >= 0')\n", 'seed=-1'),
                        ("from data.common import doc_windows\ndoc_windows([['a', 0, 10]], 100, 1, 0)\n",
                         'longer than 99 tokens'),
                        ("import rope_config\nrope_config.check_scaling({'rope_type': 'bogus'})\n", "'bogus' is missing or unknown"),
                        ("open('/nonexistent/dir/file.txt')\n", 'file.txt')):
        p = run_main(tmp_path, body)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and 'Traceback' not in p.stderr, p.stderr
        assert len(lines) == 1 and lines[0].startswith('error: ') and names in lines[0], p.stderr


def test_debug_variable_shows_the_traceback_of_a_project_error(tmp_path):
    p = run_main(tmp_path, "raise ConfigError('seed=-1 is out of range')\n", env={'LONGCTX_DEBUG': '1'})
    assert p.returncode not in (0, 2) and 'Traceback' in p.stderr and 'ConfigError: seed=-1' in p.stderr, p.stderr


def test_is_input_error_needs_a_raise_in_the_project():
    def caught(fn):
        try:
            fn()
        except ValueError as e:
            return e

    def unpack():
        a, b = [1, 2, 3]

    def deliberate():
        raise ValueError("factor=0.5 must be >= 1")
    assert not configurator.is_input_error(caught(unpack))
    assert not configurator.is_input_error(caught(lambda: int('x')))
    assert configurator.is_input_error(caught(deliberate))
    assert configurator.is_input_error(DataError('made, never raised'))


# ----------------------------------------------------------------------------- B6: windows that share no token

def demo_like_docs():
    """Four long held-out documents, about the size of the demo's val plays (shakespeare_char: 4 plays, ~430k chars)."""
    docs, pos = [], 0
    for i, size in enumerate([120000, 105000, 110000, 95000]):
        docs.append([f'play{i}', pos, pos + size])
        pos += size
    return docs


def old_doc_windows(docs, T, n, seed):
    """The former draw (with replacement), kept here to show the defect and what is unchanged."""
    room = np.array([max(0, end - start - T) for _, start, end in docs], dtype=np.float64)
    rng = np.random.default_rng(seed)
    which = rng.choice(len(docs), size=n, p=room / room.sum())
    return [int(docs[d][1] + rng.integers(0, room[d] + 1)) for d in which]


def assert_apart(starts, T, docs, n):
    assert len(starts) == n and all(isinstance(s, int) for s in starts)
    s = sorted(starts)
    assert all(b - a >= T for a, b in zip(s, s[1:])), [(a, b) for a, b in zip(s, s[1:]) if b - a < T]
    for x in starts:
        assert any(a <= x and x + T <= b for _, a, b in docs), x


def test_eval_windows_share_no_token():
    """eval.py's 32 windows of T = 1024 (+1 target) and seed 1337: the former draw overlaps 3 times, the new one not."""
    docs, T, n = demo_like_docs(), 1024 + 1, 32
    old = sorted(old_doc_windows(docs, T, n, 1337))
    assert sum(b - a < T for a, b in zip(old, old[1:])) == 3  # the defect, as in the demo
    for seed in (1337, 0, 1, 2, 3):
        starts = doc_windows(docs, T, n, seed)
        assert_apart(starts, T, docs, n)
        assert starts == doc_windows(docs, T, n, seed)
    assert doc_windows(docs, T, n, 1) != doc_windows(docs, T, n, 2)


def test_a_draw_without_overlap_is_unchanged():
    docs, T, n = demo_like_docs(), 1025, 32
    old = old_doc_windows(docs, T, n, 1331)
    assert all(b - a >= T for a, b in zip(sorted(old), sorted(old)[1:]))  # this seed never overlapped
    assert doc_windows(docs, T, n, 1331) == old
    kept = doc_windows(docs, T, n, 1337)  # the overlapping ones drawn again, the others kept
    assert len(set(kept) & set(old_doc_windows(docs, T, n, 1337))) >= n - 3


def test_as_many_windows_as_fit_and_one_more_is_refused():
    """Capacity is sum(len // T) over the documents, the count eval.py's validate checks num_windows against."""
    docs, T = [['a', 0, 1000], ['b', 1000, 1350], ['c', 1350, 1390], ['d', 1390, 1490]], 100  # 10 + 3 + 0 + 1 windows
    for seed in range(5):
        assert_apart(doc_windows(docs, T, 14, seed), T, docs, 14)
        assert_apart(doc_windows(docs, T, 12, seed), T, docs, 12)
    assert sorted(doc_windows([['x', 0, 300]], 100, 3, 0)) == [0, 100, 200]
    with pytest.raises(DataError, match='15 windows of 100 tokens .* hold 14 such windows; ask for fewer'):
        doc_windows(docs, T, 15, 0)


# ----------------------------------------------------------------------------- B8: MFU per device

def fake_model():
    cfg = types.SimpleNamespace(n_layer=2, n_embd=64)
    return types.SimpleNamespace(config=cfg, get_num_params=lambda: 1_000_000)


def test_mfu_is_per_device(monkeypatch):
    monkeypatch.setattr(bench.torch.cuda, 'get_device_name', lambda device=None: 'NVIDIA H100 80GB HBM3')
    model, T, per_device = fake_model(), 128, 5e6  # tokens/s of one device
    one = bench.mfu(model, T, per_device, 'cuda:0')
    assert one == pytest.approx(bench.flops_per_token(model, T) * per_device / bench.PEAK_FLOPS['H100'])
    two = bench.mfu(model, T, 2 * per_device, 'cuda:0', world=2)  # two devices, each as fast: the same utilisation
    assert two == pytest.approx(one)
    assert bench.mfu(model, T, per_device, 'cpu', world=2) is None

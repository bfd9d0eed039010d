"""The module commands (`python -m lab....`) and the top-level scripts all end in lab.engine.cli.cli, so a bad input
is one line and a non-zero exit there as in the scripts (issue 45: four of them printed tracebacks or returned 2
without the handler)."""
import ast
import glob
import os

import pytest

from badinput import assert_refused, call
from conftest import ROOT


def commands():
    """Every .py file of the project with an `if __name__ == '__main__':` block (tests and data/ preparers aside)."""
    files = glob.glob(os.path.join(ROOT, '*.py')) + glob.glob(os.path.join(ROOT, 'lab', '**', '*.py'), recursive=True)
    return sorted(os.path.relpath(f, ROOT) for f in files if "__name__ == '__main__'" in open(f, encoding='utf-8').read())


@pytest.mark.parametrize('path', commands())
def test_every_command_runs_its_main_through_the_one_line_handler(path):
    tree = ast.parse(open(os.path.join(ROOT, path), encoding='utf-8').read())
    block = next(n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test))
    assert 'cli(' in ast.unparse(block), f"{path}: its __main__ block does not call lab.engine.cli.cli"


def test_the_module_commands_refuse_bad_arguments_in_one_line(tmp_path, capsys):
    from lab import rope_table
    from lab.pictures import redraw
    from lab.verdicts import claims
    assert_refused(*call(rope_table.main, ['--base=0.5'], capsys), ['base'])
    assert_refused(*call(rope_table.main, ['--factor=0.5'], capsys), ['factor'])
    assert_refused(*call(redraw.main, ['nosuch'], capsys), ['nosuch'])
    assert_refused(*call(claims.main, ['--check', 'nosuch'], capsys), ['nosuch'])


def test_a_truncated_claim_record_is_one_line_not_a_json_traceback(tmp_path, capsys, monkeypatch):
    from lab.verdicts import claims
    c = claims.CLAIMS[0]
    rec = tmp_path / f"{c['id']}.json"
    rec.write_text('{"id": "x", "comparison": {')
    monkeypatch.setattr(claims, 'OUT', str(tmp_path))
    assert_refused(*call(claims.main, ['--check', c['id']], capsys), [rec.name, 'not valid JSON'])


def _refuse_in_worker(arm):
    if arm['name'] == 'b':
        raise ValueError(f"window={arm['w']} must be shorter than L")  # a refusal raised in this repository's code
    return arm['name']


def test_a_refusal_inside_a_worker_process_reaches_the_user_as_its_line():
    """eval.py measures arms in forked workers; a ValueError raised on purpose there came back wrapped in the pool's
    remote traceback, which cli printed whole; now it is a ConfigError naming the arm."""
    from configurator import ConfigError, is_input_error
    from lab.measure.workers import map_arms
    arms = [dict(name='a', w=1, runs=[0]), dict(name='b', w=99, runs=[0])]
    with pytest.raises(ConfigError, match=r"arm 'b': window=99 must be shorter than L") as e:
        map_arms(_refuse_in_worker, arms, (), workers=2, progress=False)
    assert is_input_error(e.value) and '\n' not in str(e.value)


def test_an_eval_past_this_machines_memory_is_refused_before_any_arm_runs():
    """SmolLM2-135M at T = 12,288 peaked at 8.95 GB (make real-model-core); the estimate is of that size, and a T
    whose logits cannot fit is refused in one line naming eval_len and what to lower."""
    import torch
    from configurator import ConfigError
    from lab.measure.workers import check_memory, memory_needed
    arm = dict(ckpt=dict(model={'w': torch.zeros(135_000_000 // 1000, 1000, device='meta')}, model_args=dict(vocab_size=49152)))
    est = (memory_needed([arm], 12288, 1, 2) - 135e6 * 4) / 2  # one worker's share
    assert 8.5e9 < est < 1.05e10
    check_memory([arm], 12288, 1, 1, 'cuda')  # a GPU's memory is not this machine's: not checked here
    with pytest.raises(ConfigError, match=r"eval_len=10000000: 2 worker\(s\) x batch_size=1 need about .* lower "
                                          r"--eval_len, --batch_size or --workers"):
        check_memory([arm], 10_000_000, 1, 2, 'cpu')

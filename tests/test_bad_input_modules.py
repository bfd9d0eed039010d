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

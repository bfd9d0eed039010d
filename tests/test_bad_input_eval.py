"""eval.py on bad inputs (issue 23): arm lists, retrieval settings, damaged run files (log.jsonl, arms.json), datasets
and, under --plot_only, damaged outputs are refused before anything is measured or drawn (exit 2, no traceback, one last
line naming the setting or the file, no file touched); an output that cannot be written is named, the old one kept."""
import os
import shutil

import pytest

import eval as ev
from badinput import assert_refused, bad_datasets, check_refused, edit_json, run_with_file_limit, snapshot  # noqa: F401
from badinput import two_seeds  # noqa: F401

SMALL = ['--eval_len=64', '--num_windows=2', '--batch_size=2', '--entropy_windows=1', '--retrieval_examples=2',
         '--retrieval_len=8', '--retrieval_cue=2', '--retrieval_pos=2', '--progress=False', '--device=cpu']


@pytest.fixture(scope='module')
def evaldir(tiny_run, two_seeds, tmp_path_factory):  # noqa: F811
    """An eval of tiny_run (+ yarn zero-shot) and the two-seed fine-tune: the outputs --plot_only redraws."""
    out = tmp_path_factory.mktemp('bad_eval') / 'eval'
    ev.main([f'--ckpt={tiny_run},{two_seeds}', '--rope_types=yarn', f'--out_dir={out}', *SMALL, '--plot=False'])
    return out


def truncate(path):
    with open(path, 'rb') as f:
        data = f.read()
    with open(path, 'wb') as f:
        f.write(data[:len(data) // 2])


def write_lines(path, change):
    """Rewrite a text file's lines as change(list of lines) leaves them."""
    with open(path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    change(lines)
    with open(path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines) + '\n')


SETTINGS = [  # (extra argv, {ft}: the two-seed run, {data}: damaged datasets, {file}: a file; what the line must name)
    (['--rope_types=yarn,yarn'], 'given twice'),
    (['--rope_types=bogus'], "'bogus'"),
    (['--ckpt={ft}', '--position_map=rerope:window=0'], 'window'),
    (['--rope_types=yarn', '--factor=0.5'], 'factor=0.5'),
    (['--retrieval_cue=8'], 'retrieval_cue=8'),
    (['--retrieval_pos=20'], 'retrieval_pos'),
    (['--retrieval_len=0'], 'retrieval_len=0'),
    (['--retrieval_examples=-1'], 'retrieval_examples=-1'),
    (['--entropy_windows=3'], 'entropy_windows=3'),
    (['--passkey_text=1'], 'passkey_text=1'),  # a paired test needs 2: this failed at the run's end, after every arm
    (['--retrieval_examples=1'], 'retrieval_examples=1'),
    (['--grid=0'], 'grid=0'),
    (['--samples=-1'], 'samples=-1'),
    (['--word_needles=-2'], 'word_needles=-2'),
    (['--mv_values=-1'], 'mv_values=-1'),
    (['--tracking=maybe'], 'tracking'),
    (['--margin_loss=0'], 'margin_loss=0'),
    (['--split=test'], "split='test'"),
    (['--contrasts=base (L=32) | nobody'], "no arm is named 'nobody'"),
    (['--contrasts=base (L=32)'], "joined by '|'"),
    (['--smooth=100'], 'smooth=100'),
    (['--eval_len=100000'], 'num_windows=2 windows of 100001 tokens'),
    (['--seed=-1'], 'seed=-1'),
    (['--dataset={data[other_chars]}'], 'different characters'),
    (['--dataset={data[no_val]}'], 'val.bin not found'),
    (['--dataset={file}/nowhere'], 'nowhere'),
    (['--out_dir={file}/sub'], 'which is a file'),
]


@pytest.mark.parametrize('argv, names', SETTINGS, ids=[' '.join(a) for a, _ in SETTINGS])
def test_a_bad_setting_is_refused_before_measuring(tiny_run, two_seeds, bad_datasets, tmp_path, capsys,  # noqa: F811
                                                   argv, names):
    a_file = tmp_path / 'a_file'
    a_file.write_text('not a folder')
    args = [a.format(ft=two_seeds, data=bad_datasets, file=a_file) for a in argv]
    check_refused(ev.main, [f'--ckpt={tiny_run}', f'--out_dir={tmp_path / "out"}', *SMALL, *args], names, capsys,
                  [tmp_path, tiny_run, two_seeds, *bad_datasets.values()])


RUN_FILES = [  # (what to damage in a copy of the two-seed run; what the line must name)
    (lambda d: write_lines(d / 'seed1' / 'log.jsonl', lambda ls: ls.__setitem__(1, ls[1][:len(ls[1]) // 2])),
     (os.path.join('seed1', 'log.jsonl') + ' line 2: not valid JSON',)),
    (lambda d: write_lines(d / 'seed2' / 'log.jsonl', lambda ls: ls.__setitem__(0, ls[0].replace('"iter": 0', '"iter": "0"'))),
     (os.path.join('seed2', 'log.jsonl') + ' line 1: not an evaluation row',)),
    (lambda d: write_lines(d / 'seed2' / 'log.jsonl', lambda ls: ls.__setitem__(1, '[1, 2]')),
     (os.path.join('seed2', 'log.jsonl') + ' line 2',)),
    (lambda d: truncate(d / 'arms.json'), ('arms.json is not valid JSON',)),
    (lambda d: edit_json(d / 'arms.json', lambda a: [arm.pop('folder') for arm in a['arms']]),
     ('arms.json', "no 'arms' list")),
]


@pytest.mark.parametrize('damage, names', RUN_FILES, ids=['log torn', 'log iter text', 'log row a list', 'arms.json torn',
                                                          'arms.json no folder'])
def test_a_damaged_run_file_is_named_before_measuring(tiny_run, two_seeds, tmp_path, capsys, damage, names):  # noqa: F811
    run = tmp_path / 'ft'
    shutil.copytree(two_seeds, run)
    damage(run)
    check_refused(ev.main, [f'--ckpt={tiny_run},{run}', f'--out_dir={tmp_path / "out"}', *SMALL], names, capsys,
                  [tmp_path, tiny_run])


OUTPUTS = [  # (what to damage in a copy of an eval's outputs, redrawn with --plot_only; what the line must name)
    (lambda d: truncate(d / 'summary.json'), 'summary.json is not readable JSON'),
    (lambda d: write_lines(d / 'position_loss.csv', lambda ls: ls.__setitem__(3, ls[3] + 'x')),
     'position_loss.csv holds a cell that is not a number'),
    (lambda d: write_lines(d / 'position_loss.csv', lambda ls: ls.__setitem__(0, ls[0].replace('base', 'bass'))),
     'position_loss.csv has no column for arm'),
    (lambda d: write_lines(d / 'retrieval.csv', lambda ls: ls.__setitem__(1, ','.join(ls[1].split(',')[:6]))),
     'retrieval.csv and summary.json'),
    (lambda d: write_lines(d / 'finetune_curves.csv', lambda ls: ls.__setitem__(1, ls[1].replace(',0,', ',zero,'))),
     'finetune_curves.csv'),
    (lambda d: edit_json(d / 'summary.json', lambda s: s['arms'][0].update(train_len='32')), 'summary.json'),
]


@pytest.mark.parametrize('damage, names', OUTPUTS, ids=['summary torn', 'csv cell', 'csv column', 'retrieval row',
                                                        'finetune iter', 'summary type'])
def test_plot_only_names_the_damaged_output_and_draws_nothing(evaldir, tmp_path, capsys, damage, names):
    out = tmp_path / 'eval'
    shutil.copytree(evaldir, out)
    damage(out)
    check_refused(ev.main, ['--plot_only=True', f'--out_dir={out}'], names, capsys, [tmp_path])


def test_plot_only_refuses_a_negative_smooth(evaldir, capsys):
    check_refused(ev.main, ['--plot_only=True', f'--out_dir={evaldir}', '--smooth=-2'], 'smooth=-2', capsys, [evaldir])


def test_an_output_that_cannot_be_written_is_named_and_the_old_one_kept(tiny_run, evaldir, tmp_path):
    """Files limited to 3 kB: the CSVs fit, summary.json does not; the error names it and the cause, the old
    summary.json is as it was, and no temp file is left."""
    out = tmp_path / 'eval'
    shutil.copytree(evaldir, out)
    before = snapshot(out / 'summary.json')
    r = run_with_file_limit(['eval.py', f'--ckpt={tiny_run}', f'--out_dir={out}', *SMALL], 3000)
    assert_refused(r.returncode, r.stderr, (f"could not write {out / 'summary.json'}", 'File too large'))
    assert snapshot(out / 'summary.json') == before
    assert sorted(os.listdir(out)) == sorted(os.listdir(evaldir))

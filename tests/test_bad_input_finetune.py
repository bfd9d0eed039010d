"""finetune_long.py on bad inputs (issue 23): PoSE, the copy mix, seed lists, LongRoPE lists, the device, the data and
a damaged multi-arm run are all refused before arms.json or any arm is written (exit 2, no traceback, one last line
naming the setting or the file, no file touched); and a checkpoint that cannot be written (a file-size limit) ends in
one line naming it, with the previous checkpoint and log as they were and no temp file left."""
import json
import os
import shutil

import pytest

import finetune_long
from badinput import FT, assert_refused, check_refused, edit_json, run_with_file_limit, snapshot, two_seeds  # noqa: F401


@pytest.fixture(scope='module')
def conf(tmp_path_factory):
    d = tmp_path_factory.mktemp('ft_conf')
    (d / 'nan_share.py').write_text("copy_share = float('nan')\n")
    return d


FRESH = [  # (extra argv; what the last line must name): a new run in a folder that must stay absent
    (['--copy_share=-0.5', '--seeds=1,2'], 'copy_share=-0.5'),
    (['--copy_fixed_iters=-3', '--rope_type=linear,yarn'], 'copy_fixed_iters=-3'),
    (['{conf}/nan_share.py', '--seeds=1,2'], 'copy_share=nan'),
    (['--pose=True', '--pose_len=16', '--copy_share=0.5', '--copy_span_lo=4', '--copy_span_hi=9', '--seeds=1,2'],
     ('copy_span_hi=9', 'the window trained is 16 tokens')),
    (['--pose=True', '--pose_chunks=0', '--seeds=1,2'], 'pose_chunks=0'),
    (['--pose=True', '--pose_len=1000', '--rope_type=linear,yarn'], 'pose_len=1000'),
    (['--seeds=1337,-1'], "seeds='1337,-1': seed=-1"),
    (['--seeds=1337,99999999999999999999'], 'seed=99999999999999999999'),
    (['--seeds=1337,,1338'], "seeds='1337,,1338'"),
    (['--seeds=1337;1338'], "seeds='1337;1338'"),
    (['--seeds=7,7'], 'lists a seed twice'),
    (['--seed=-2'], 'seed=-2'),
    (['--rope_type=longrope', '--short_factor=[1.0,1.0]', '--long_factor=[2.0,2.0]', '--seeds=1,2'],
     ("arm 'longrope s=4'", 'short_factor', 'head_dim = 32')),
    (['--rope_type=longrope', '--long_factor=[2.0,2.0]', '--seeds=1,2'], 'needs short_factor'),
    (['--rope_type=linear,longrope', '--short_factor=[1.0]', '--long_factor=[-1.0]'], 'long_factor'),
    (['--dtype=float16', '--seeds=1,2'], 'dtype=float16'),
    (['--factor=300', '--seeds=1,2'], ('block_size=9600', 'held-out document')),
    (['--factor=1000', '--rope_type=linear,yarn'], 'block_size=32000'),
    (['--eval_interval=0', '--seeds=1,2'], 'eval_interval=0'),
]


@pytest.mark.parametrize('argv, names', FRESH, ids=[' '.join(a) for a, _ in FRESH])
def test_a_bad_setting_is_refused_before_anything_is_written(tiny_run, char_data, conf, tmp_path, capsys, argv, names):
    fresh = tmp_path / 'fresh'
    base = [f'--init_from={tiny_run}', f'--out_dir={fresh}', *FT]
    check_refused(finetune_long.main, base + [a.format(conf=conf) for a in argv], names, capsys,
                  [tmp_path, tiny_run, char_data])
    assert not fresh.exists()


def truncate(path):
    with open(path, 'rb') as f:
        data = f.read()
    with open(path, 'wb') as f:
        f.write(data[:len(data) // 2])


RESUMED = [  # (what to damage in a copy of the two-seed run; what the last line must name)
    (lambda d: truncate(d / 'arms.json'), ('arms.json', 'not valid JSON')),
    (lambda d: edit_json(d / 'arms.json', lambda a: a['config'].update(max_iters='abc')), ('max_iters', 'arms.json')),
    (lambda d: edit_json(d / 'arms.json', lambda a: a.pop('config')), ('arms.json', "no 'config' object")),
    (lambda d: edit_json(d / 'arms.json', lambda a: a['config'].update(seeds='1,-2')), 'seed=-2'),
    (lambda d: truncate(d / 'seed2' / 'ckpt.pt'), os.path.join('seed2', 'ckpt.pt')),
]


@pytest.mark.parametrize('damage, names', RESUMED, ids=['arms.json torn', 'config max_iters', 'no config',
                                                        'stored seeds', 'seed2 ckpt torn'])
def test_a_damaged_run_is_named_before_any_arm_trains(two_seeds, tmp_path, capsys, damage, names):
    """Resuming with more steps would train seed1 first: the damage is found before that."""
    run = tmp_path / 'ft'
    shutil.copytree(two_seeds, run)
    damage(run)
    check_refused(finetune_long.main, ['--init_from=resume', f'--out_dir={run}', '--max_iters=4'], names, capsys,
                  [tmp_path, two_seeds])


def test_a_checkpoint_that_cannot_be_written_is_one_line_and_keeps_the_last(two_seeds, tmp_path):
    """Files limited to 50 kB (the checkpoint is larger): the resumed arm trains to its next evaluation, its save fails;
    the error names the file and the cause, ckpt.pt and log.jsonl are as they were (the log has no row for the step
    whose checkpoint was not saved), and no temp file is left."""
    run = tmp_path / 'seed1'
    shutil.copytree(os.path.join(two_seeds, 'seed1'), run)
    with open(run / 'log.jsonl') as f:
        rows = [json.loads(line) for line in f]
    before = snapshot(tmp_path)
    r = run_with_file_limit(['finetune_long.py', '--init_from=resume', f'--out_dir={run}', '--max_iters=4'], 50_000)
    assert_refused(r.returncode, r.stderr, (f"could not write {run / 'ckpt.pt'}", 'File too large',
                                            'the previous file is kept'))
    assert snapshot(tmp_path) == before
    assert [row['iter'] for row in rows] == [0, 2]

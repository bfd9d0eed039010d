"""The settings every script reads through configurator.get_config (issue 23): seeds are whole numbers in [0, 2**63)
whatever the script, config files and --key=value are checked by type, and an out_dir under a file is refused; each bad
one ends in exit 2, no traceback, one last line naming the setting or the file, and no file touched. The largest seed
accepted does run."""
import pytest

import configurator
import eval as ev
import finetune_long
import search_longrope
import train
from badinput import check_refused

FAST = ['--block_size=16', '--batch_size=4', '--n_layer=1', '--n_head=2', '--n_embd=32', '--eval_iters=1',
        '--eval_interval=1', '--max_iters=1', '--progress=False', '--device=cpu']


@pytest.fixture(scope='module')
def confs(tmp_path_factory):
    d = tmp_path_factory.mktemp('confs')
    (d / 'neg_seed.py').write_text('seed = -3\n')
    (d / 'typo.py').write_text('batch_size = 8\nlearning_rate = 1e-3 +\n')
    (d / 'text_batch.py').write_text("batch_size = '8'\n")
    (d / 'nan_share.py').write_text("copy_share = float('nan')\n")
    (d / 'a_file').write_text('not a folder')
    return d


CASES = [  # (script, extra argv with {c} for the config folder, what the last line must name)
    ('train', ['--seed=-1'], 'seed=-1'),
    ('train', ['--seed=99999999999999999999'], 'seed=99999999999999999999'),
    ('train', ['--seed=1.5'], 'seed=1.5'),
    ('train', ['--seed=True'], 'seed=True'),
    ('train', ['{c}/neg_seed.py'], 'seed=-3'),
    ('train', ['{c}/typo.py'], 'typo.py'),
    ('train', ['{c}/text_batch.py'], ("batch_size='8'", 'text_batch.py')),
    ('train', ['{c}/missing.py'], 'missing.py does not exist'),
    ('train', ['--max_iters'], '--max_iters should look like --key=value'),
    ('train', ['--learning_rate=fast'], 'learning_rate'),
    ('train', ['--dropout=1.5'], 'dropout=1.5'),
    ('train', ['--copy_share=-0.5'], 'copy_share=-0.5'),
    ('train', ['--copy_fixed_iters=-1'], 'copy_fixed_iters=-1'),
    ('train', ['{c}/nan_share.py'], 'copy_share=nan'),
    ('train', ['--out_dir={c}/a_file/run'], 'which is a file'),
    ('eval', ['--seed=-7'], 'seed=-7'),
    ('finetune', ['--seed=18446744073709551616'], 'seed=18446744073709551616'),
    ('search', ['--seed=-9'], 'seed=-9'),
]
MAINS = {'train': train.main, 'eval': ev.main, 'finetune': finetune_long.main, 'search': search_longrope.main}


@pytest.mark.parametrize('script, argv, names', CASES, ids=[f"{s} {' '.join(a)}" for s, a, _ in CASES])
def test_a_bad_setting_is_refused_naming_it(char_data, tiny_run, confs, tmp_path, capsys, script, argv, names):
    out = tmp_path / 'out'
    base = {'train': [f'--dataset={char_data}', f'--out_dir={out}', *FAST],
            'eval': [f'--ckpt={tiny_run}', f'--out_dir={out}', '--device=cpu', '--progress=False'],
            'finetune': [f'--init_from={tiny_run}', f'--out_dir={out}', '--device=cpu', '--progress=False'],
            'search': [f'--init_from={tiny_run}', f'--out_dir={out}', '--device=cpu', '--progress=False']}[script]
    check_refused(MAINS[script], base + [a.format(c=confs) for a in argv], names, capsys,
                  [tmp_path, confs, char_data, tiny_run])
    assert not out.exists()


def test_the_largest_seed_runs(char_data, tmp_path):
    """2**63 - 1 is accepted and trains (torch and numpy take it); 2**63 is the first seed refused."""
    top = 2 ** 63 - 1
    cfg = configurator.get_config([f'--dataset={char_data}', f'--out_dir={tmp_path}', *FAST, f'--seed={top}'],
                                  train.DEFAULTS)
    assert train.train(cfg)['iter'] == 1
    with pytest.raises(configurator.ConfigError, match=f'seed={top + 1} is out of range'):
        configurator.get_config([f'--seed={top + 1}'], train.DEFAULTS)

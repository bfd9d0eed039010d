"""finetune_long.py: every rope type extends, saves and reloads exactly; zero-shot arms; fair multi-arm runs."""
import json
import os

import pytest
import torch

import finetune_long
import train as train_mod
from conftest import run
from data.checkpoints import load_checkpoint, model_from_checkpoint
from rope_config import ROPE_TYPES

FT = ['--max_iters=3', '--eval_interval=3', '--eval_iters=2', '--batch_size=4', '--progress=False']


def files_of(d):
    return sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs) if os.path.isdir(d) else []


@pytest.mark.parametrize('rope_type', [t for t in ROPE_TYPES if t not in ('default', 'longrope')])  # longrope: below
def test_each_type_trains_saves_and_reloads(tiny_run, tmp_path, rope_type):
    out = tmp_path / rope_type
    finetune_long.main([f'--init_from={tiny_run}', f'--rope_type={rope_type}', '--factor=4', f'--out_dir={out}', *FT])
    ck = load_checkpoint(str(out))
    sc = ck['model_args']['rope_scaling']
    assert sc['rope_type'] == rope_type and sc['factor'] == 4.0 and sc['original_max_position_embeddings'] == 32
    assert ck['model_args']['block_size'] == 128 and ck['iter_num'] == 3
    assert ck['lineage'] == dict(train_len=32, seq_len=128, base_checkpoint=tiny_run, rope_type=rope_type,
                                 factor=4.0, finetune_steps=3, pose=None)
    assert ck['log'][-1]['val_loss_beyond_L'] is not None
    model = model_from_checkpoint(ck).eval()
    assert model.config.rope_scaling == sc
    # the reloaded model computes what the saved weights + config say: compare with a rebuild from scratch
    base = model_from_checkpoint(load_checkpoint(tiny_run)).eval()
    base.load_state_dict(ck['model'])
    base.set_rope_scaling(sc)
    x = torch.randint(0, ck['model_args']['vocab_size'], (2, 128))
    assert torch.equal(model(x)[0], base(x)[0])
    # and the fine-tuning moved the weights
    assert not torch.equal(ck['model']['lm_head.weight'], load_checkpoint(tiny_run)['model']['lm_head.weight'])


def test_zero_shot_equals_scaling_in_memory(tiny_run, tmp_path):
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', '--beta_fast=8', '--max_iters=0',
                        f'--out_dir={tmp_path}', '--progress=False', '--eval_iters=2'])
    ck = load_checkpoint(str(tmp_path))
    assert ck['iter_num'] == 0 and ck['lineage']['finetune_steps'] == 0
    base_ck = load_checkpoint(tiny_run)
    assert all(torch.equal(ck['model'][k], base_ck['model'][k]) for k in base_ck['model'])
    mem = model_from_checkpoint(base_ck).eval()
    mem.set_rope_scaling({'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 32, 'beta_fast': 8.0})
    x = torch.randint(0, 68, (1, 128))
    assert torch.equal(model_from_checkpoint(ck).eval()(x)[0], mem(x)[0])


def spy_batches(monkeypatch):
    """[[each step's micro-batches] for each run]: train.batch_function spied on, from now on."""
    runs, real = [], train_mod.batch_function

    def spied(*a, **kw):
        (get_batch, W, note), steps = real(*a, **kw), []
        runs.append(steps)
        return (lambda it: steps.append(get_batch(it)) or steps[-1]), W, note
    monkeypatch.setattr(train_mod, 'batch_function', spied)
    return runs


def test_arms_share_seed_and_data_order(tiny_run, tmp_path, monkeypatch):
    runs = spy_batches(monkeypatch)
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=linear,yarn:beta_fast=8', '--plain=True',
                        f'--out_dir={tmp_path}', *FT])
    arms = json.load(open(tmp_path / 'arms.json'))
    assert [a['name'] for a in arms['arms']] == ['default', 'linear s=4', 'yarn s=4 β_fast=8']
    first = [steps[0][0][0] for steps in runs]  # each run's first micro-batch's inputs
    assert len(first) == 3 and all(torch.equal(first[0], f) for f in first[1:])
    assert {a['seed'] for a in arms['arms']} == {1337} and {a['steps'] for a in arms['arms']} == {3}
    expected = {'default': None, 'linear s=4': {'rope_type': 'linear', 'factor': 4.0, 'original_max_position_embeddings': 32},
                'yarn s=4 β_fast=8': {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 32,
                                      'beta_fast': 8.0, 'beta_slow': 1.0, 'truncate': True}}
    for a in arms['arms']:
        ck = load_checkpoint(str(tmp_path / a['folder']))
        assert ck['model_args']['rope_scaling'] == a['rope_scaling'] == expected[a['name']]
    # arms started from the same weights, so their iter-0 validation losses differ only through RoPE
    logs = {a['name']: load_checkpoint(str(tmp_path / a['folder']))['log'] for a in arms['arms']}
    assert logs['default'][0]['val_loss'] != logs['linear s=4'][0]['val_loss']


@pytest.mark.parametrize('args,msg', [
    (['--rope_type=pi'], 'rope type .pi. is unknown'),
    (['--factor=0.5'], 'factor'),
    (['--block_size=16'], 'shorter than'),
    (['--rope_type=yarn', '--beta_fast=1', '--beta_slow=2'], 'beta_fast'),
    (['--rope_type=yarn,yarn'], 'twice'),
])
def test_bad_inputs_fail_before_training(tiny_run, tmp_path, args, msg):
    with pytest.raises(ValueError, match=msg):
        finetune_long.main([f'--init_from={tiny_run}', f'--out_dir={tmp_path / "x"}', *args, *FT])
    assert files_of(tmp_path / 'x') == []


def test_refuses_learned_positions_and_existing_runs(char_data, tiny_run, tmp_path):
    from conftest import tiny_cfg
    train_mod.train(tiny_cfg(char_data, tmp_path / 'learned', pos_emb='learned', max_iters=2, eval_interval=2))
    p = run(['finetune_long.py', f'--init_from={tmp_path / "learned"}', f'--out_dir={tmp_path / "y"}'])
    assert p.returncode == 2 and 'needs a rope model' in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert files_of(tmp_path / 'y') == []
    # an existing run is not overwritten without --overwrite
    before = open(tmp_path / 'learned' / 'ckpt.pt', 'rb').read()
    p = run(['finetune_long.py', f'--init_from={tiny_run}', f'--out_dir={tmp_path / "learned"}'])
    assert p.returncode == 2 and 'already holds a run' in p.stderr
    assert open(tmp_path / 'learned' / 'ckpt.pt', 'rb').read() == before


def test_resume_an_arm(tiny_run, tmp_path):
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=ntk', f'--out_dir={tmp_path}', *FT])
    finetune_long.main(['--init_from=resume', f'--out_dir={tmp_path}', '--max_iters=6'])
    ck = load_checkpoint(str(tmp_path))
    assert ck['iter_num'] == 6 and ck['lineage']['finetune_steps'] == 6
    assert ck['model_args']['rope_scaling']['rope_type'] == 'ntk' and ck['config']['block_size'] == 128


def test_resume_a_multi_arm_run(tiny_run, tmp_path):
    """arms.json is written before the first arm: an interrupted multi-arm run resumes as a whole, finished
    arms continue from their checkpoints and arms that never started start from the base."""
    import shutil
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', '--plain=True', f'--out_dir={tmp_path}', *FT])
    shutil.rmtree(tmp_path / 'yarn_s4')  # as if the run had been killed before its second arm
    finetune_long.main(['--init_from=resume', f'--out_dir={tmp_path}', '--max_iters=6'])
    arms = json.load(open(tmp_path / 'arms.json'))
    assert arms['config']['init_from'] == tiny_run and [a['steps'] for a in arms['arms']] == [6, 6]
    plain, yarn = (load_checkpoint(str(tmp_path / a['folder'])) for a in arms['arms'])
    assert plain['iter_num'] == yarn['iter_num'] == 6
    assert [r['iter'] for r in plain['log']] == [0, 3, 6]  # continued from its step-3 checkpoint
    assert [r['iter'] for r in yarn['log']] == [0, 3, 6]   # started afresh (eval_interval 3)
    assert yarn['model_args']['rope_scaling']['rope_type'] == 'yarn'
    assert arms['arms'][1]['val_loss'] == yarn['log'][-1]['val_loss']


def test_base_checkpoint_and_data_are_stored_absolute(tiny_run, tmp_path, monkeypatch):
    """A path typed relative to the user's folder resolves from anywhere later (eval run from elsewhere)."""
    monkeypatch.chdir(os.path.dirname(tiny_run))
    rel = os.path.basename(tiny_run)
    finetune_long.main([f'--init_from={rel}', '--rope_type=yarn', f'--out_dir={tmp_path / "ft"}', *FT])
    ck = load_checkpoint(str(tmp_path / 'ft'))
    assert ck['lineage']['base_checkpoint'] == tiny_run and os.path.isabs(ck['dataset']['data_dir'])
    monkeypatch.chdir(tmp_path)
    from lab.measure import arms
    found, base, _ = arms.plan_arms(dict(__import__('eval').DEFAULTS, ckpt=str(tmp_path / 'ft'), rope_types='ntk'))
    assert base['checkpoint'] == tiny_run and [a['kind'] for a in found] == ['fine-tuned', 'zero-shot']


def test_longrope_arm_from_flags_then_keep(tiny_run, tmp_path):
    """Per-pair lists come as --short_factor/--long_factor; --rope_type=keep fine-tunes a checkpoint's own scaling
    at its own factor (here s=2, so 64 tokens, not the default 4 x 32)."""
    long_ = [1.0] * 4 + [1.25, 1.5, 1.75] + [2.0] * 9  # 16 pairs (head_dim 32), non-decreasing
    zs, ft = tmp_path / 'zs', tmp_path / 'ft'
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=longrope', '--factor=2', f'--short_factor={[1.0] * 16}',
                        f'--long_factor={long_}', '--max_iters=0', f'--out_dir={zs}', *FT[-3:]])
    sc = load_checkpoint(str(zs))['model_args']['rope_scaling']
    assert sc == {'rope_type': 'longrope', 'factor': 2.0, 'original_max_position_embeddings': 32,
                  'short_factor': [1.0] * 16, 'long_factor': long_}
    finetune_long.main([f'--init_from={zs}', '--rope_type=keep', f'--out_dir={ft}', *FT])
    ck = load_checkpoint(str(ft))
    assert ck['model_args']['rope_scaling'] == sc and ck['model_args']['block_size'] == 64
    assert ck['lineage'] == dict(train_len=32, seq_len=64, base_checkpoint=os.path.abspath(zs), rope_type='longrope',
                                 factor=2.0, finetune_steps=3, pose=None)
    with pytest.raises(ValueError, match='needs short_factor and long_factor'):
        finetune_long.main([f'--init_from={tiny_run}', '--rope_type=longrope', f'--out_dir={tmp_path / "x"}', *FT])
    with pytest.raises(ValueError, match='drop --plain'):
        finetune_long.main([f'--init_from={zs}', '--rope_type=keep', '--plain=True', f'--out_dir={tmp_path / "y"}', *FT])
    assert files_of(tmp_path / 'x') == files_of(tmp_path / 'y') == []

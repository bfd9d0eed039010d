"""PoSE (Zhu et al. 2023): the position ids, the model's explicit positions, the seeded batches, PoSE without skips =
ordinary training bit for bit, and a PoSE fine-tune end to end at the short length (evaluated at the long one)."""
import json
import os

import pytest
import torch

import finetune_long
import train as train_mod
from arms import ckpt_arm
from configurator import ConfigError
from lab.pose import pose_positions
from model import GPT, GPTConfig, load_checkpoint
from rope import rope_cos_sin
from rope_config import rope_inv_freq

FT = ['--max_iters=3', '--eval_interval=3', '--eval_iters=2', '--batch_size=4', '--progress=False']


def chunk_starts(W, chunks):
    lens = [W // chunks + (k < W % chunks) for k in range(chunks)]
    return [sum(lens[:k]) for k in range(chunks)], lens


@pytest.mark.parametrize('chunks', [1, 2, 3, 5])
def test_position_ids(chunks):
    W, T = 32, 128
    ids = pose_positions(torch.Generator().manual_seed(0), (3, 5), W, T, chunks)
    assert ids.shape == (3, 5, W) and ids.dtype == torch.long
    assert (ids[..., 0] == 0).all() and ids.min() == 0 and ids.max() < T
    starts, lens = chunk_starts(W, chunks)
    skips = torch.stack([ids[..., s] - s for s in starts], -1)  # u_k = first id of piece k - its offset
    assert (skips[..., 0] == 0).all() and (skips.diff(dim=-1) >= 0).all()  # u_1 = 0, non-decreasing
    for s, n, k in zip(starts, lens, range(chunks)):  # contiguous inside a piece: its offsets + u_k
        assert torch.equal(ids[..., s:s + n], torch.arange(s, s + n) + skips[..., k:k + 1])
    if chunks == 1:
        assert torch.equal(ids, torch.arange(W).expand(3, 5, W))
    # reproducible from the generator's seed
    assert torch.equal(ids, pose_positions(torch.Generator().manual_seed(0), (3, 5), W, T, chunks))
    if chunks > 1:
        assert not torch.equal(ids, pose_positions(torch.Generator().manual_seed(1), (3, 5), W, T, chunks))


def test_skips_are_uniform_as_in_the_paper():
    """u_2 ~ U{0..T-W}; u_3 ~ U{u_2..T-W}: with T - W = 96, E[u_2] = 48 and E[u_3] = 48 + 24 = 72, both ends reached."""
    ids = pose_positions(torch.Generator().manual_seed(0), (20000,), 30, 126, 3)  # pieces of 10
    u2, u3 = ids[:, 10] - 10, ids[:, 20] - 20
    assert u2.min() == 0 and u2.max() == 96 and u3.max() == 96
    assert abs(u2.float().mean() - 48) < 1.0 and abs(u3.float().mean() - 72) < 1.0
    assert ids[:, -1].max() == 125  # the last id reaches T - 1


def test_no_room_draws_nothing_and_bad_input():
    gen = torch.Generator().manual_seed(0)
    state = gen.get_state()
    assert torch.equal(pose_positions(gen, (2,), 16, 16, 4), torch.arange(16).expand(2, 16))
    assert torch.equal(gen.get_state(), state)  # so PoSE at T = W keeps the ordinary data order
    for W, T, chunks in ((16, 8, 2), (4, 16, 5), (16, 32, 0)):
        with pytest.raises(ValueError, match='pose_chunks'):
            pose_positions(gen, (2,), W, T, chunks)


def test_model_reads_position_ids():
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=16, vocab_size=50, n_layer=2, n_head=2, n_embd=32)).eval()
    x = torch.randint(0, 50, (3, 16))
    plain = m(x)[0]
    skipped = pose_positions(torch.Generator().manual_seed(0), (1,), 16, 64, 2)[0]
    pos = torch.stack([torch.arange(16), torch.arange(16) + 7, skipped])  # one row of ids per sequence
    out = m(x, pos=pos)[0]
    assert torch.equal(out[0], plain[0])  # the ordinary ids give the ordinary forward bit for bit
    assert torch.allclose(out[1], plain[1], atol=1e-5)  # plain RoPE sees only i - j: a shift changes nothing
    # PoSE ids 0..7, then 8 + u: the first piece sees what it saw; the second sees the first u tokens farther away
    assert torch.equal(skipped[:8], torch.arange(8)) and skipped[8] > 8 and torch.equal(out[2, :8], plain[2, :8])
    assert (out[2, 8:] - plain[2, 8:]).abs().max() > 100 * (out[1] - plain[1]).abs().max()
    assert torch.equal(m(x[2:], pos=skipped)[0], out[2:])  # ids (T,) = the same ids in every row
    with pytest.raises(ValueError, match=r'pos must be an integer tensor of shape \(16,\)'):
        m(x, pos=torch.arange(15))
    # a dynamic type scales for max(pos) + 1 tokens, not for the window length
    m.set_rope_scaling({'rope_type': 'dynamic', 'factor': 1.0, 'original_max_position_embeddings': 16})
    inv_freq, af = rope_inv_freq(16, 10000.0, m.config.rope_scaling, seq_len=int(skipped.max()) + 1)
    assert torch.equal(m.rope_tables(skipped)[0], rope_cos_sin(inv_freq, skipped, af)[0])


def test_batches_draw_ids_from_their_seeded_generator():
    data = torch.arange(1000).numpy()
    a, b = (train_mod.Batches(data, 16, 3, 7, 'cpu', pose=(64, 2)) for _ in range(2))
    step_a, step_b = a.step(4), b.step(4)
    for (xa, ya, pa), (xb, yb, pb) in zip(step_a, step_b):
        assert torch.equal(xa, xb) and torch.equal(pa, pb) and pa.shape == (3, 16) and pa.max() < 64
        assert torch.equal(ya, xa + 1)  # targets are the next tokens, as without PoSE
    # DDP: rank 1 of 2 gets micro-batches 1 and 3 of the single-process step, ids included
    c = train_mod.Batches(data, 16, 3, 7, 'cpu', pose=(64, 2))
    ranked = c.step(4, rank=1, world=2)
    assert all(torch.equal(r[2], s[2]) and torch.equal(r[0], s[0]) for r, s in zip(ranked, step_a[1::2]))
    assert train_mod.Batches(data, 16, 3, 7, 'cpu').step(1)[0][2] is None  # no PoSE: no ids


def test_pose_without_skips_equals_ordinary_training(tiny_run, tmp_path):
    """pose_len = the target length leaves no room to skip: the same weights, losses and data order, bit for bit."""
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', f'--out_dir={tmp_path / "full"}', *FT])
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', '--pose=True', '--pose_len=128',
                        f'--out_dir={tmp_path / "pose"}', *FT])
    full, pose = load_checkpoint(str(tmp_path / 'full')), load_checkpoint(str(tmp_path / 'pose'))
    assert pose['lineage']['pose'] == {'len': 128, 'chunks': 2} and full['lineage']['pose'] is None
    assert full['model'].keys() == pose['model'].keys()
    assert all(torch.equal(full['model'][k], pose['model'][k]) for k in full['model'])
    assert [(r['train_loss'], r['val_loss']) for r in full['log']] == [(r['train_loss'], r['val_loss']) for r in pose['log']]


def test_pose_finetune_runs_at_the_short_length(tiny_run, tmp_path, monkeypatch):
    seen = []
    orig = train_mod.Batches.step
    monkeypatch.setattr(train_mod.Batches, 'step', lambda self, *a, **kw: seen.append(orig(self, *a, **kw)) or seen[-1])
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', '--plain=True', '--pose=True', '--factor=4',
                        f'--out_dir={tmp_path}', *FT])
    arms = json.load(open(tmp_path / 'arms.json'))
    assert [(a['name'], a['folder']) for a in arms['arms']] == [('default pose', 'default_pose'),
                                                                ('yarn s=4 pose', 'yarn_s4_pose')]
    assert len(seen) == 6  # 2 arms x 3 steps, each one micro-batch of 4 windows of L = 32 tokens, ids in [0, 128)
    for (x, y, pos), in seen:
        assert x.shape == pos.shape == (4, 32) and (pos[:, 0] == 0).all() and pos.max() < 128
    assert max(int(pos.max()) for (_, _, pos), in seen) > 64  # the ids do reach past L
    ck = load_checkpoint(str(tmp_path / 'yarn_s4_pose'))
    assert ck['lineage']['pose'] == {'len': 32, 'chunks': 2} and ck['lineage']['seq_len'] == 128
    assert ck['config']['pose'] and ck['config']['pose_len'] == 32 and ck['model_args']['block_size'] == 128
    assert ck['model_args']['rope_scaling']['factor'] == 4.0
    assert all(r['val_loss_beyond_L'] is not None for r in ck['log'])  # evaluated at 128 with ordinary ids
    assert ckpt_arm(str(tmp_path / 'yarn_s4_pose'), ck)['name'] == 'yarn s=4 pose ft3'


@pytest.mark.parametrize('args,msg', [(['--pose_len=256'], 'pose_len=256'), (['--pose_chunks=0'], 'pose_chunks=0'),
                                      (['--pose_len=4', '--pose_chunks=5'], 'pose_chunks=5')])
def test_bad_pose_settings_fail_before_anything_is_written(tiny_run, tmp_path, args, msg):
    with pytest.raises(ConfigError, match=msg):
        finetune_long.main([f'--init_from={tiny_run}', '--rope_type=linear,yarn', '--pose=True', *args,
                            f'--out_dir={tmp_path / "x"}', *FT])
    assert not os.path.exists(tmp_path / 'x')


def files_of(d):
    return sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs) if os.path.isdir(d) else []


def test_copy_spans_must_fit_the_pose_window(tiny_run, tmp_path):
    """Found in the restructure (failed on commit 6c97447): the copy mix was checked against block_size (128 here)
    while PoSE trains windows of pose_len = L = 32 tokens, so spans of 20 passed the check and the run failed at its
    first step, after arms.json and the step-0 checkpoint were written. Now it is refused before anything is written."""
    out = tmp_path / 'x'
    with pytest.raises(ValueError, match=r'copy_span_hi=20 <= \(window\+1\)/2 = 16 \(the window trained is 32 tokens\)'):
        finetune_long.main([f'--init_from={tiny_run}', '--rope_type=linear,yarn', '--pose=True', '--copy_share=0.5',
                            '--copy_span_lo=4', '--copy_span_hi=20', f'--out_dir={out}', *FT])
    assert files_of(out) == [] and not os.path.exists(out)
    # the same spans fit a full-length fine-tune's windows (2 x 20 <= 128 + 1): accepted there
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', '--copy_share=0.5', '--copy_span_lo=4',
                        '--copy_span_hi=20', f'--out_dir={tmp_path / "full"}', *FT])
    assert load_checkpoint(str(tmp_path / 'full'))['config']['copy_span_hi'] == 20

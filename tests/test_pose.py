"""PoSE (Zhu et al. 2023): the position ids, the model's explicit positions, the seeded batches, PoSE without skips =
ordinary training bit for bit, and a PoSE fine-tune end to end at the short length (evaluated at the long one)."""
import json
import os

import numpy as np
import pytest
import torch

import finetune_long
import train as train_mod
from lab.measure.arms import ckpt_arm
from configurator import ConfigError
from data.common import load_meta
from lab.engine.batches import Batches
from lab.pose import PoseDraw, pose_draw, pose_offsets, pose_positions, random_positions
from model import GPT, GPTConfig
from data.checkpoints import load_checkpoint
from rope import rope_cos_sin
from rope_config import rope_inv_freq
from test_finetune import spy_batches
from test_train import plain_step, seeded

FT = ['--max_iters=3', '--eval_interval=3', '--eval_iters=2', '--batch_size=4', '--progress=False']


def draw(d):
    return PoseDraw(*(torch.tensor(v) for v in d))


def test_a_known_window():
    """W = 8, first chunk 3 tokens, 5 tokens of text skipped, ids skipped by 2 (independent of the text skip)."""
    d = draw((3, 5, 2))
    assert pose_offsets(d, 8).tolist() == [0, 1, 2, 8, 9, 10, 11, 12, 13]  # 9 tokens: inputs [:8], targets [1:]
    assert pose_positions(d, 8).tolist() == [0, 1, 2, 5, 6, 7, 8, 9]
    raw = torch.arange(100, 114)  # a raw span of T + 1 = 14 tokens (T = 13 = W + 5)
    seq = raw[pose_offsets(d, 8)]
    x, y = seq[:-1], seq[1:]
    assert x.tolist() == [100, 101, 102, 108, 109, 110, 111, 112]
    # the reference's labels = input_ids (shifted in the model): chunk 1's last token predicts chunk 2's first
    assert y.tolist() == [101, 102, 108, 109, 110, 111, 112, 113]


@pytest.mark.parametrize('W,T,span', [(32, 128, None), (32, 128, 160), (31, 40, None), (1, 8, None), (2, 2, None)])
def test_draws_offsets_and_ids(W, T, span):
    d = pose_draw(torch.Generator().manual_seed(0), (3, 500), W, T, span)
    L = T if span is None else span
    assert all(v.shape == (3, 500) and v.dtype == torch.long for v in d)
    assert d.first.min() >= 1 and d.first.max() <= (W + 1) // 2  # the reference's randint(1, (W+1)//2)
    assert d.text_skip.min() >= 0 and d.text_skip.max() <= L - W and d.id_skip.min() >= 0 and d.id_skip.max() <= T - W
    ids, off = pose_positions(d, W), pose_offsets(d, W)
    assert ids.shape == (3, 500, W) and off.shape == (3, 500, W + 1)
    assert (ids[..., 0] == 0).all() and (ids.diff(dim=-1) >= 1).all() and ids.max() <= T - 1  # strictly increasing
    assert (off[..., 0] == 0).all() and (off.diff(dim=-1) >= 1).all() and off.max() <= L  # inside the raw span
    j = torch.arange(W + 1)
    for i in range(500):
        l, v, u = d.first[0, i], d.text_skip[0, i], d.id_skip[0, i]
        assert torch.equal(ids[0, i, :l], j[:l]) and torch.equal(ids[0, i, l:], j[l:W] + u)  # contiguous per chunk
        assert torch.equal(off[0, i, :l], j[:l]) and torch.equal(off[0, i, l:], j[l:] + v)
    # reproducible from the generator's seed, and a different seed draws differently
    again = pose_draw(torch.Generator().manual_seed(0), (3, 500), W, T, span)
    assert all(torch.equal(a, b) for a, b in zip(d, again))
    if W > 2:
        assert not torch.equal(d.first, pose_draw(torch.Generator().manual_seed(1), (3, 500), W, T, span).first)


def test_draws_are_uniform_and_independent():
    """l ~ U{1..16} (W = 31), v ~ U{0..96} (span 127), u ~ U{0..64} (T = 95): both ends reached, the means in the
    middle, and the text skip uncorrelated with the id skip (the reference draws them separately)."""
    d = pose_draw(torch.Generator().manual_seed(0), (40000,), 31, 95, 127)
    for v, hi, lo in ((d.first, 16, 1), (d.text_skip, 96, 0), (d.id_skip, 64, 0)):
        assert v.min() == lo and v.max() == hi and abs(v.double().mean() - (lo + hi) / 2) < 0.01 * hi
    assert abs(torch.corrcoef(torch.stack([d.text_skip, d.id_skip]).double())[0, 1]) < 0.02
    assert pose_positions(d, 31)[:, -1].max() == 94  # the last id reaches T - 1


def test_without_room_nothing_is_skipped():
    """T = W (and so a raw span of W): the text is contiguous and the ids are 0..W-1, whatever the first chunk."""
    d = pose_draw(torch.Generator().manual_seed(0), (200,), 16, 16)
    assert (d.text_skip == 0).all() and (d.id_skip == 0).all() and d.first.unique().numel() == 8
    assert torch.equal(pose_offsets(d, 16), torch.arange(17).expand(200, 17))
    assert torch.equal(pose_positions(d, 16), torch.arange(16).expand(200, 16))
    for W, T, span in ((16, 8, None), (16, 32, 8), (0, 16, None)):
        with pytest.raises(ValueError, match='window length'):
            pose_draw(torch.Generator(), (2,), W, T, span)


def test_model_reads_position_ids():
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=16, vocab_size=50, n_layer=2, n_head=2, n_embd=32)).eval()
    x = torch.randint(0, 50, (3, 16))
    plain = m(x)[0]
    skipped = pose_positions(draw((8, 0, 20)), 16)
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


DOCS = [('a', 0, 300), ('b', 300, 360), ('c', 360, 1000)]  # 'b' (60 tokens) cannot hold a span of T + 1 = 65


def pose_batches(data, seed=7, T=64, copy=None):
    return Batches(data, 16, 3, seeded(seed), 'cpu', pose=(T, DOCS), copy=copy)


def test_batches_read_two_chunks_of_one_document():
    """Windows of W = 16 for T = 64: a raw span of 65 tokens inside one document, chunk 2 taken from later in it."""
    data = torch.arange(1000).numpy().astype(np.uint16)  # every token is its own offset
    b = pose_batches(data)
    step = b.step(200)
    starts, d = b.drawn
    assert starts.shape == d.first.shape == (200, 3)
    doc = [next(i for i, (_, s, e) in enumerate(DOCS) if s <= v < e) for v in starts.flatten().tolist()]
    assert 1 not in doc and {0, 2} <= set(doc)  # never the short document, both long ones
    assert all(starts.flatten()[i] + 65 <= DOCS[k][2] for i, k in enumerate(doc))  # the span stays inside it
    assert d.text_skip.max() == 48 and d.id_skip.max() == 48 and d.first.max() == 8 and d.first.min() == 1
    j = torch.arange(16)
    for m, (x, y, pos) in enumerate(step):
        for i in range(3):
            s, l, v, u = starts[m, i], d.first[m, i], d.text_skip[m, i], d.id_skip[m, i]
            assert torch.equal(x[i, :l], s + j[:l]) and torch.equal(x[i, l:], s + v + j[l:])  # chunk 2 skips v tokens
            assert torch.equal(pos[i, :l], j[:l]) and torch.equal(pos[i, l:], j[l:] + u)
            assert y[i, -1] == s + v + 16  # the raw token after chunk 2
        assert torch.equal(y[:, :-1], x[:, 1:])  # the next token of the assembled window: chunk 2's first at the seam
    # on real-looking text too: x and y are the raw tokens at the reported offsets
    rnd = torch.randint(0, 65, (1000,), generator=torch.Generator().manual_seed(3)).numpy().astype(np.uint16)
    b = pose_batches(rnd)
    (x, y, pos), = b.step(1)
    starts, d = b.drawn
    off = starts[0].unsqueeze(-1) + pose_offsets(PoseDraw(*(t[0] for t in d)), 16)
    assert torch.equal(x, torch.from_numpy(rnd[off[:, :-1].numpy()]).long())
    assert torch.equal(y, torch.from_numpy(rnd[off[:, 1:].numpy()]).long())


def test_batches_are_seeded():
    data = torch.randint(0, 65, (1000,), generator=torch.Generator().manual_seed(3)).numpy().astype(np.uint16)
    a, b, c = pose_batches(data), pose_batches(data), pose_batches(data, seed=8)
    step_a, step_b, step_c = a.step(4), b.step(4), c.step(4)
    assert all(torch.equal(p, q) for sa, sb in zip(step_a, step_b) for p, q in zip(sa, sb))  # same seed: same batches
    assert not all(torch.equal(p[2], q[2]) for p, q in zip(step_a, step_c))
    # DDP: rank 1 of 2 gets micro-batches 1 and 3 of the single-process step, ids included
    ranked = pose_batches(data).step(4, rank=1, world=2)
    assert all(torch.equal(p, q) for r, s in zip(ranked, step_a[1::2]) for p, q in zip(r, s))
    assert plain_step(data, 16, 3, seeded(7), 1)[0][2] is None  # no PoSE: no ids


def test_batches_without_room_are_the_ordinary_ones():
    """T = W: the ordinary windows and data order, ids 0..W-1 (what makes PoSE at pose_len = T ordinary training)."""
    data = torch.randint(0, 65, (1000,), generator=torch.Generator().manual_seed(3)).numpy().astype(np.uint16)
    gen, pose = seeded(7), pose_batches(data, T=16)
    for (x, y, _), (px, py, pos) in zip(plain_step(data, 16, 3, gen, 2), pose.step(2)):
        assert torch.equal(x, px) and torch.equal(y, py) and torch.equal(pos, torch.arange(16).expand(3, 16))
    assert torch.equal(gen.get_state(), pose.gen.get_state()) and pose.drawn is None
    with pytest.raises(ConfigError, match='PoSE reads 1001 tokens'):
        pose_batches(data, T=1000)


def test_batches_write_copies_into_pose_windows(char_data):
    from lab.copy_mix import settings
    data = torch.randint(0, 65, (1000,), generator=torch.Generator().manual_seed(3)).numpy().astype(np.uint16)
    mix = settings(dict(train_mod.DEFAULTS, block_size=16, copy_share=1.0, copy_span_lo=3, copy_span_hi=6),
                   load_meta(char_data), 16)
    plain, copied = pose_batches(data).step(2), pose_batches(data, copy=mix).step(2)
    for (x, y, pos), (cx, cy, cpos) in zip(plain, copied):
        assert torch.equal(pos, cpos) and torch.equal(cx[:, 1:], cy[:, :-1]) and (cx != x).any(1).all()


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
    runs = spy_batches(monkeypatch)
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', '--plain=True', '--pose=True', '--factor=4',
                        f'--out_dir={tmp_path}', *FT])
    arms = json.load(open(tmp_path / 'arms.json'))
    assert [(a['name'], a['folder']) for a in arms['arms']] == [('default pose', 'default_pose'),
                                                                ('yarn s=4 pose', 'yarn_s4_pose')]
    seen = [step for steps in runs for step in steps]
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
                                      (['--pose_len=4', '--pose_chunks=5'], 'pose_chunks=5'),
                                      (['--pose_chunks=3'], 'pose_chunks=3')])
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


# ------------------------------------------- PoSE over windowed and chunked layers: their masks of the positions given

import lab.gated, lab.sinks, lab.temperature  # noqa: E401,E402,F401  register the attention classes below


def local_model(layers, attention='causal', n_kv_head=None):
    """A random 3-layer RoPE model, every layer windowed or chunked by `layers`, attention sharp enough (q, k x 10)
    that a key seen or not moves the logits."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=64, vocab_size=40, n_layer=3, n_head=4, n_embd=32, layers=layers,
                      attention=attention, n_kv_head=n_kv_head)).eval()
    with torch.no_grad():
        for block in m.transformer.h:
            block.attn.c_attn.weight.mul_(10.0)
    return m


@pytest.mark.parametrize('layers', ['3*rope:w=4', '3*rope:c=4'])
@pytest.mark.parametrize('attention', ['causal', 'gated', 'sinks'])  # (smeared keys mix in the previous token's
# key, across PoSE's skip too: the chunks are one sequence of text to the model)
@torch.no_grad()
def test_pose_ids_move_the_window_of_a_local_layer(layers, attention):
    """Issue 60: PoSE's chunks at positions 0..2 and 40..44 (a skip of 37) through layers of window (or chunk) 4: the
    second chunk is more than 4 positions past the first, so no query of it may see the first chunk's keys and each
    chunk's logits are those of the chunk run alone at contiguous positions (RoPE is relative: 40..44 or 0..4 give
    one answer). Before, the masks counted token indices: the query at position 40 saw the keys at 0..2 (logits off by
    ~1). Chunks: 40..43 is one chunk of 4 and 44 starts the next, as 0..3 and 4 in the chunk run alone."""
    m = local_model(layers, attention)
    ids = torch.randint(0, 40, (2, 8), generator=torch.Generator().manual_seed(1))
    pos = torch.tensor([0, 1, 2, 40, 41, 42, 43, 44])
    got = m(ids, pos=pos)[0]
    assert (got[:, :3] - m(ids[:, :3])[0]).abs().max() < 1e-5
    assert (got[:, 3:] - m(ids[:, 3:])[0]).abs().max() < 1e-4  # (RoPE at 40..44 against 0..4: round-off only)
    assert (m(ids)[0][:, 3:] - got[:, 3:]).abs().max() > 1e-2  # (the contiguous ids see the first chunk: not vacuous)


@pytest.mark.parametrize('layers', ['3*rope:w=4', 'rope:c=4,rope:w=3,rope'])
@torch.no_grad()
def test_pose_masks_equal_the_masked_softmax_of_the_positions(layers):
    """Per-row PoSE ids (B, T) whose skips are smaller than the window (a query sees part of the other chunk): the
    forward equals attention written out with the mask of the positions (j <= i in token order, i - j < w and one
    chunk in position ids), also for the last layer run only at some queries (at=, eval's scoring)."""
    m = local_model(layers, n_kv_head=2)
    ids = torch.randint(0, 40, (2, 10), generator=torch.Generator().manual_seed(2))
    pos = torch.tensor([[0, 1, 2, 3, 5, 6, 7, 8, 9, 10], [0, 1, 4, 5, 6, 7, 8, 11, 12, 13]])

    def written_out(layer, q, k, v):
        attn, n = m.transformer.h[layer].attn, q.size(2)
        pi, pj, i = pos[:, None, :, None], pos[:, None, None, :], torch.arange(n)
        ok = (i[None, :] <= i[:, None]) & ((pi - pj < attn.window) if attn.window else True)
        ok = ok & (pi // attn.chunk == pj // attn.chunk) if attn.chunk else ok
        att = (q @ k.transpose(-2, -1) / q.size(-1) ** 0.5).masked_fill(~ok, float('-inf'))
        return att.softmax(-1) @ v

    want = m(ids, pos=pos, attend=written_out)[0]
    assert (m(ids, pos=pos)[0] - want).abs().max() < 1e-5
    at = torch.tensor([[4, 9], [2, 7]])
    assert (m(ids, pos=pos, at=at)[0] - want.gather(1, at[..., None].expand(-1, -1, want.size(-1)))).abs().max() < 1e-5


@torch.no_grad()
def test_pose_default_path_is_unchanged_and_ssmax_on_a_window_refuses():
    """Ids 0..T-1 given or not: one answer on a windowed model (the masks of the positions are the masks of the
    indices). SSMax counts the keys a window sees by token index, so PoSE ids on its windowed layers are refused."""
    m = local_model('rope:w=4,rope:c=4,rope')
    ids = torch.randint(0, 40, (2, 12))
    assert (m(ids)[0] - m(ids, pos=torch.arange(12))[0]).abs().max() < 1e-5
    with pytest.raises(ValueError, match="SSMax counts the keys a windowed or chunked layer sees"):
        local_model('3*rope:w=4', 'ssmax')(ids, pos=torch.tensor([0, 1, 2] + list(range(20, 29))))


def test_random_positions_are_sorted_distinct_and_reach_the_target():
    """Randomized positions (Ruoss et al. 2023; issue 63): W distinct ids of 0..T-1 in increasing order per window,
    every id possible, seeded by the generator."""
    gen = torch.Generator().manual_seed(0)
    ids = random_positions(gen, (200, 3), 16, 64)
    assert ids.shape == (200, 3, 16) and ids.dtype == torch.int64
    assert (ids.diff(dim=-1) > 0).all() and ids.min() >= 0 and ids.max() <= 63
    assert len(ids.unique()) == 64  # every id of 0..63 is drawn somewhere
    assert torch.equal(ids, random_positions(torch.Generator().manual_seed(0), (200, 3), 16, 64))
    assert torch.equal(random_positions(gen, (2,), 8, 8), torch.arange(8).expand(2, 8))  # W = T: the plain ids
    with pytest.raises(ValueError, match='window length'):
        random_positions(gen, (1,), 9, 8)


def test_a_randomized_position_finetune_trains_contiguous_text_at_random_ids(tiny_run, tmp_path, monkeypatch):
    runs = spy_batches(monkeypatch)
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', '--pose=True', '--pose_ids=random',
                        '--factor=4', f'--out_dir={tmp_path}', *FT])
    seen = [step for steps in runs for step in steps]
    assert len(seen) == 3
    for (x, y, pos), in seen:
        assert x.shape == pos.shape == (4, 32) and (pos.diff(dim=-1) > 0).all() and pos.max() < 128
        assert torch.equal(x[:, 1:], y[:, :-1])  # the text is contiguous: one window of 33 tokens each
    assert max(int(pos.max()) for (_, _, pos), in seen) > 64
    ck = load_checkpoint(str(tmp_path))
    assert ck['lineage']['pose'] == {'len': 32, 'chunks': 2, 'ids': 'random'}
    assert ckpt_arm(str(tmp_path), ck)['name'] == 'yarn s=4 pose random ft3'


@pytest.mark.parametrize('args,msg', [(['--pose_ids=uniform'], "pose_ids='uniform'"),
                                      (['--pose=False', '--pose_ids=random'], 'needs pose=True')])
def test_bad_position_id_settings_are_refused(tiny_run, tmp_path, args, msg):
    with pytest.raises(ConfigError, match=msg):
        finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', '--pose=True', *args,
                            f'--out_dir={tmp_path / "x"}', *FT])
    assert not os.path.exists(tmp_path / 'x')

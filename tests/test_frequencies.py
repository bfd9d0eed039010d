"""Issue 33, which frequencies matter: p-RoPE ('proportional', Hugging Face's definition), clipped RoPE ('clip'),
ABF ('abf') and Men et al.'s base bound, Dual Chunk Attention as a position map, learned attention sinks and the sink
strength. Each against hand-worked numbers or a direct construction."""
import math

import pytest
import torch

import lab.sinks  # noqa: F401  registers 'sinks' / 'smear_keys_sinks'
from lab.attention import chunked_attention
from lab.crop import window_attention
from lab.measure.diagnostics import attention_entropy
from lab.position_maps import check_position_map, dca_positions, mapped_attention, mapped_logits, position_map_name
from model import GPT, GPTConfig
from rope import base_bound, clipped_inv_freq, critical_dimension, plain_inv_freq, proportional_inv_freq
from rope_config import check_scaling, rope_inv_freq
from test_position_maps import V, make, rotation

THETA = [1.0, 10 ** -0.25, 10 ** -0.5, 10 ** -0.75, 0.1, 10 ** -1.25]  # b = 1e4, d = 32: theta_i = 10^(-i/4)


def test_proportional_by_hand():
    """p = 0.25 of d = 32: floor(0.25 * 32 / 2) = 4 pairs turn at full RoPE's theta_i = 1e4^(-2i/32) (over d = 32,
    not over the rotary width 8), the other 12 not at all; factor 2 halves the turning ones."""
    inv, af = rope_inv_freq(32, 1e4, {'rope_type': 'proportional', 'partial_rotary_factor': 0.25, 'factor': 2.0})
    assert af == 1.0 and torch.allclose(inv[:4], torch.tensor(THETA[:4]) / 2) and torch.equal(inv[4:], torch.zeros(12))
    assert torch.equal(proportional_inv_freq(32, 1e4, 1.0), plain_inv_freq(32, 1e4))  # p = 1: plain RoPE
    assert torch.equal(proportional_inv_freq(32, 1e4, 0.0), torch.zeros(16, dtype=torch.float64))  # p = 0: NoPE
    assert int((proportional_inv_freq(32, 1e4, 0.3) > 0).sum()) == 4  # floor(4.8)
    # Hugging Face's form: rope_parameters with rope_theta and partial_rotary_factor inside
    assert check_scaling({'rope_type': 'proportional', 'rope_theta': 1e4, 'partial_rotary_factor': 0.25}, 1e4) == \
        {'rope_type': 'proportional', 'partial_rotary_factor': 0.25, 'factor': 1.0}


def test_proportional_matches_hugging_face():
    """Against transformers' own _compute_proportional_rope_parameters (5.23+), where it is installed."""
    rope_utils = pytest.importorskip('transformers.modeling_rope_utils')
    if not hasattr(rope_utils, '_compute_proportional_rope_parameters'):
        pytest.skip('this transformers has no proportional rope type (5.23+)')

    class Config:  # the attributes the function reads
        head_dim, hidden_size, num_attention_heads = 32, 128, 4
        rope_parameters = {'rope_type': 'proportional', 'rope_theta': 1e4, 'partial_rotary_factor': 0.25,
                           'factor': 2.0}

        def standardize_rope_params(self):
            pass
    theirs, af = rope_utils._compute_proportional_rope_parameters(Config())
    ours, our_af = rope_inv_freq(32, 1e4, {'rope_type': 'proportional', 'partial_rotary_factor': 0.25, 'factor': 2.0})
    assert af == our_af == 1.0 and torch.allclose(theirs.float(), ours, rtol=1e-6, atol=0)


def test_clip_stops_the_pairs_that_never_turned_in_L():
    """d = 32, b = 1e4, L = 128: wavelengths 2*pi*10^(i/4); pair 5 (99.4) turns within L, pair 6 (198.7) does not:
    pairs 6-15 stop, the 12 dimensions critical_dimension counts keep turning."""
    inv, af = rope_inv_freq(32, 1e4, {'rope_type': 'clip', 'original_max_position_embeddings': 128})
    assert af == 1.0 and torch.allclose(inv[:6], torch.tensor(THETA)) and torch.equal(inv[6:], torch.zeros(10))
    assert critical_dimension(32, 1e4, 128)[0] == 2 * int((inv > 0).sum())
    assert int((clipped_inv_freq(32, 1e4, 198.0) > 0).sum()) == 6 and int((clipped_inv_freq(32, 1e4, 199.0) > 0).sum()) == 7
    wide = rope_inv_freq(32, 1e4, {'rope_type': 'clip', 'original_max_position_embeddings': 128, 'max_wavelength': 1e9})
    assert torch.equal(wide[0], plain_inv_freq(32, 1e4).float())


def test_arm_names():
    from lab.measure.arms import arm_id
    from lab.measure.arm_specs import parse_arms
    names = [n for n, _ in parse_arms('abf:new_base=1e5,abf,proportional:partial_rotary_factor=0.25:factor=1,clip',
                                      4.0, 128)]
    assert names == ["abf s=4 b'=1e5", "abf s=4 b'=1e6", 'proportional s=1 p=0.25', 'clip s=4']
    assert arm_id(names[0] + ' ft100') == 'abf_s4_b_1e5_ft100'


def test_abf_and_the_base_bound():
    """ABF is plain RoPE at the raised base: theta_i = b'^(-2i/d); b' = 1e6 at pair 8 of 16: 1e6^(-1/2) = 1e-3.
    Men et al.'s bound 0.0424 L^1.628: 114.26 at L = 128; b = 1e4 is enough up to L' ~ 1,996."""
    inv, _ = rope_inv_freq(32, 1e4, {'rope_type': 'abf', 'new_base': 1e6, 'factor': 4.0})
    assert math.isclose(inv[8].item(), 1e-3, rel_tol=1e-6) and torch.equal(inv, plain_inv_freq(32, 1e6).float())
    assert math.isclose(base_bound(128), 0.0424 * 128 ** 1.628) and round(base_bound(128), 2) == 114.26
    assert math.isclose(base_bound(1996), 1e4, rel_tol=1e-3)


@pytest.mark.parametrize('bad, match', [({'rope_type': 'abf', 'new_base': 1.0}, "new_base.*> 1"),
                                        ({'rope_type': 'proportional', 'partial_rotary_factor': 1.5}, r"\[0, 1\]"),
                                        ({'rope_type': 'clip', 'max_wavelength': 100.0}, 'original_max_position'),
                                        ({'rope_type': 'clip', 'max_wavelength': -1.0,
                                          'original_max_position_embeddings': 128}, 'max_wavelength.*> 0'),
                                        ({'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 8,
                                          'partial_rotary_factor': 0.5}, "rope_type 'proportional'")])
def test_bad_frequency_settings_name_the_fix(bad, match):
    with pytest.raises(ValueError, match=match):
        check_scaling(bad, 1e4)


def test_a_stopped_pair_carries_no_position():
    """With every pair stopped (p = 0) scores do not depend on position: the model is NoPE in RoPE's clothes."""
    m = make(rope_scaling={'rope_type': 'proportional', 'partial_rotary_factor': 0.0})
    n = make(pos_emb='none')
    n.load_state_dict(m.state_dict())
    x = torch.randint(0, V, (2, 12))
    assert torch.allclose(m(x)[0], n(x)[0], atol=1e-6)


# ----------------------------------------------------------------------------- Dual Chunk Attention

def dca_relative(i, j, S, w):
    """DCA's relative position of query i and key j, from the paper's three cases (chunks of c = S - w tokens)."""
    c = S - w
    if i // c == j // c:
        return i - j
    if i // c == j // c + 1:
        return min(i % c + c, S) - j % c
    return min(2 * c - 1, S) - j % c


@pytest.mark.parametrize('S, w', [(7, 2), (6, 3), (9, 1)])
def test_dca_scores_equal_direct_construction(S, w):
    m, T = make(), 16
    x = torch.randint(0, V, (2, T))
    h, rope = m.transformer.h[0].ln_1(m.transformer.wte(x)), m.rope_tables(T)
    attn = m.transformer.h[0].attn
    q, k, v = attn.qkv(h, None)
    qr, kr, _ = attn.qkv(h, rope)
    inv = rope_inv_freq(16, 1e4)[0]
    direct = torch.full((2, 2, T, T), float('-inf'), dtype=torch.float64)
    for i in range(T):
        for j in range(i + 1):
            direct[:, :, i, j] = ((q[:, :, i].double() @ rotation(dca_relative(i, j, S, w), inv).T)
                                  * k[:, :, j].double()).sum(-1) / math.sqrt(16)
    pm = {'method': 'dca', 'chunk': S, 'window': w}
    logits = mapped_logits(m, pm)
    for s, e in ((0, T), (5, 11)):
        got, want = logits(0, qr, kr, s, e).double(), direct[:, :, s:e, :e]
        assert torch.equal(got.isinf(), want.isinf()) and torch.allclose(got[want.isfinite()], want[want.isfinite()],
                                                                          atol=1e-5)
    y = mapped_attention(m, pm, chunk=4)(0, qr, kr, v)
    merged = lambda t: t.transpose(1, 2).reshape(2, T, 32)
    assert torch.allclose(merged(y).double(), merged(direct.softmax(-1) @ v.double()), atol=1e-6)


def test_dca_reach_and_names():
    """ChunkLlama's defaults at L = 128 (S = 96, w = 8, chunks of 88): no distance past S = 96 at any length; the
    successive chunk is exact for its first w + 1 queries; inside one chunk everything is exact."""
    i = torch.arange(4096)
    qp, kp = dca_positions(i, i, 96, 8)
    rel = (qp - kp)[torch.tril(torch.ones(4096, 4096, dtype=torch.bool))]
    assert rel.max().item() == 96 and rel.min().item() == 0
    assert dca_relative(88 + 8, 87, 96, 8) == 9 and dca_relative(88 + 9, 87, 96, 8) == 96 - 87
    assert position_map_name(check_position_map({'method': 'dca', 'chunk': 96, 'window': 8})) == 'dca S=96 w=8'
    with pytest.raises(ValueError, match='below chunk'):
        check_position_map({'method': 'dca', 'chunk': 8, 'window': 8})
    with pytest.raises(ValueError, match='set chunk < 16'):
        mapped_logits(make(), {'method': 'dca', 'chunk': 16, 'window': 2})


# ----------------------------------------------------------------------------- learned sinks

def sink_model(**kw):
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=16, vocab_size=V, n_layer=2, n_head=2, n_embd=32, attention='sinks', **kw)).eval()
    for b in m.transformer.h:
        b.attn.sink.data = torch.tensor([1.5, -0.5])
    return m


def test_sink_attention_is_softmax_with_one_more_logit():
    """softmax over [q.k_0 .. q.k_i, z_h], the sink's column dropped: rows sum to 1 - p_sink."""
    m, T = sink_model(), 10
    x = torch.randint(0, V, (2, T))
    attn = m.transformer.h[0].attn
    q, k, v = attn.qkv(m.transformer.h[0].ln_1(m.transformer.wte(x)), m.rope_tables(T))
    att = (q @ k.transpose(-2, -1)).double() / math.sqrt(16)
    att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float('-inf'))
    z = torch.tensor([1.5, -0.5], dtype=torch.float64).view(1, 2, 1, 1).expand(2, 2, T, 1)
    p = torch.cat((att, z), -1).softmax(-1)[..., :-1]
    assert torch.allclose(attn.attend(q, k, v).double(), p @ v.double(), atol=1e-6)
    assert torch.allclose(p.sum(-1)[0, 0, 0], torch.tensor(1 / (1 + math.exp(1.5 - att[0, 0, 0, 0].item())),
                                                            dtype=torch.float64))
    ent, first = attention_entropy(m, x, chunk=4, first_key=True)
    assert torch.allclose(first[0].double(), p[..., 0], atol=1e-6)  # the weight on token 0, the sink's share excluded


def test_sinks_are_counted_per_head_so_one_sink_head_does_not_hide_under_the_mean():
    """entropy_at(heads=True): each layer's and head's weight on token 0, windows averaged, whose mean over layers and
    heads is the sink strength; a head whose queries are zero attends uniformly, 1/(p+1) on token 0. In the summary
    one head at 0.5 among 15 at 0.01 (mean 0.04, far under any sink) is counted: 1 of 16 heads past 0.3, max 0.5."""
    import numpy as np
    from contextlib import nullcontext
    from lab.measure.diagnostics import entropy_at
    from lab.verdicts.summary_json import sink_head_buckets
    m, T = make(), 12
    with torch.no_grad():  # layer 0, head 1: q = 0, so every key scores 0 (uniform attention)
        m.transformer.h[0].attn.c_attn.weight[16:32].zero_()
        if m.transformer.h[0].attn.c_attn.bias is not None:
            m.transformer.h[0].attn.c_attn.bias[16:32].zero_()
    x = torch.randint(0, V, (2, T))
    ps = list(range(T))
    ent, first, heads = entropy_at(m, x, ps, 8, 4, nullcontext(), heads=True)
    assert heads.shape == (m.config.n_layer, m.config.n_head, T)
    assert np.allclose(heads.mean(axis=(0, 1)), first, atol=1e-6)
    assert np.allclose(heads[0, 1], 1 / (np.arange(T) + 1), atol=1e-6)
    assert np.allclose(entropy_at(m, x, ps, 8, 4, nullcontext())[1], first)  # the scalar path unchanged
    w = np.full((4, 4, 32), 0.01)
    w[2, 3] = 0.5
    got = sink_head_buckets([dict(sink_heads=w)], 16, [16, 32])
    assert got['0-16']['heads'] == got['16-32']['heads'] == 1 and got['16-32']['of'] == 16
    assert got['16-32']['max'] == pytest.approx(0.5) and np.mean(got['16-32']['weights']) == pytest.approx(0.040625)
    w[..., 16:] = np.nan  # not measured there (the truncated crop's form)
    assert sink_head_buckets([dict(sink_heads=w)], 16, [16, 32])['16-32'] is None


def test_rooms_carry_the_sink():
    """The crop (sliding window wider than the input), a position map that maps nothing (ReRoPE w >= T) and the
    model's own attention agree: the sink goes through lab.attention.attention_probs everywhere."""
    m, T = sink_model(), 12
    x = torch.randint(0, V, (2, T))
    ref = m(x)[0]
    assert torch.allclose(m(x, attend=window_attention(m, 64))[0], ref, atol=1e-5)
    assert torch.allclose(m(x, attend=mapped_attention(m, {'method': 'rerope', 'window': 64, 'log_scale': 0}))[0], ref,
                          atol=1e-5)
    plain = make()
    plain.load_state_dict({k: v for k, v in m.state_dict().items() if 'sink' not in k})
    assert not torch.allclose(plain(x)[0], ref, atol=1e-3)  # the sink changes the output
    q = torch.randn(1, 2, 5, 16)
    y = chunked_attention(q, q, q, lambda s, e: torch.zeros(1, 2, e - s, e), chunk=2, sink=torch.tensor([0.0, 0.0]))
    assert torch.allclose(y[0, 0, 4], q[0, 0, :5].sum(0) / 6)  # five keys and the sink share 1/6 each


# ----------------------------------------------------------------------------- LongRoPE2

def test_needle_rows_score_the_values_of_needles_past_L(char_data):
    """One needle example per window, its asked record at a distance >= L (cycling over the far buckets), rows padded
    with eot; the scored positions predict exactly the asked value's tokens."""
    import numpy as np
    from data.common import doc_windows, load_meta, load_split
    from lab.longrope_search import needle_rows
    meta, data = load_meta(char_data), load_split(char_data, 'train')
    L, T = 32, 128
    starts = doc_windows(meta['docs']['train'], T + 1, 6, 1337)
    rows, where = needle_rows(data, starts, T, L, meta['vocab_size'], meta['eot_token'], 1337)
    assert rows.shape[0] == 6 and rows.shape[1] <= T + 1 and all(len(w) == 4 for w in where)
    for r, w in enumerate(where):
        query_key = rows[r, w[0] - 3:w[0] + 1].tolist()  # the key asked at the end (4 tokens, no separator)
        at = next(p for p in range(w[0] - 4) if rows[r, p:p + 4].tolist() == query_key)  # the needle itself
        assert w[0] - 3 - at >= L  # the asked record sits at least L before its query
        assert rows[r, [p + 1 for p in w]].tolist() == rows[r, at + 4:at + 8].tolist()  # the scored tokens: its value
    again = needle_rows(data, starts, T, L, meta['vocab_size'], meta['eot_token'], 1337)
    assert torch.equal(again[0], rows) and again[1] == where and np.all(np.diff([len(w) for w in where]) == 0)


def test_search_with_the_needle_objective_scores_the_answer_tokens(tiny_run, tmp_path):
    """search_objective=needle: a seed arm's reference score is the mean NLL of the value tokens, recomputed here."""
    import search_longrope as sl
    from data.common import doc_windows, load_meta, load_split
    from data.checkpoints import load_checkpoint, model_from_checkpoint
    from lab.longrope_search import needle_rows
    from lab.measure.arm_specs import parse_arms
    small = ['--factor=4', '--search_population=6', '--search_parents=2', '--search_windows=3', '--batch_size=2',
             '--eval_iters=1', '--progress=False', '--device=cpu', '--search_generations=1']
    best, state = sl.main([f'--init_from={tiny_run}', f'--out_dir={tmp_path / "s"}', '--search_objective=needle',
                           *small])
    base = load_checkpoint(tiny_run)
    data_dir = base['dataset']['dataset']
    meta, data = load_meta(data_dir), load_split(data_dir, 'train')
    starts = doc_windows(meta['docs']['train'], 129, 3, 1337)
    rows, where = needle_rows(data, starts, 128, 32, meta['vocab_size'], meta['eot_token'], 1337)
    m = model_from_checkpoint(base).eval()
    m.set_rope_scaling(dict(parse_arms('linear', 4.0, 32))['linear s=4'])
    with torch.no_grad():
        nll = torch.nn.functional.cross_entropy(m(rows[:, :-1])[0].transpose(1, 2), rows[:, 1:], reduction='none')
    want = torch.cat([nll[r, w] for r, w in enumerate(where)]).mean().item()
    assert math.isclose(state['references']['linear s=4'], want, rel_tol=1e-4)
    assert best['loss'] == min(c['loss'] for c in state['candidates']) and math.isfinite(best['loss'])
    from lab.measure.arms import ckpt_arm
    run = load_checkpoint(str(tmp_path / 's'))
    assert run['lineage']['search_objective'] == 'needle'
    assert ckpt_arm(str(tmp_path / 's'), run)['name'].startswith('longrope s=4') and \
        ckpt_arm(str(tmp_path / 's'), run)['name'].endswith(' needles zero-shot')
    with pytest.raises(ValueError, match='search_objective'):
        sl.main([f'--init_from={tiny_run}', f'--out_dir={tmp_path / "b"}', '--search_objective=ruler', *small])


def test_mixed_windows_alternate_L_and_the_long_length():
    """LongRoPE2's mixed-window fine-tune: mixed_short of the steps train windows of L tokens, evenly spread."""
    import numpy as np
    from lab.engine.batches import Batches
    data = np.arange(5000, dtype=np.uint16) % 50
    b = Batches(data, 128, 2, torch.Generator().manual_seed(0), 'cpu', short=(32, 0.5, False))
    assert [b.step(1, it=it)[0][0].size(1) for it in range(6)] == [128, 32, 128, 32, 128, 32]
    b = Batches(data, 128, 2, torch.Generator().manual_seed(0), 'cpu', short=(32, 0.25, False))
    assert [b.step(1, it=it)[0][0].size(1) for it in range(8)] == [128, 128, 128, 32] * 2


def test_mixed_in_step_keeps_every_long_window_and_weighs_each_token_once():
    """LongRoPE2's batches (mixed_in_step): every step holds the plain fine-tune's long micro-batches and, beside them,
    short windows of L (share 0.5: as many sequences; 0.25: a third as many), each rank its own; the step's loss counts
    every token once, so one step on [long, short] equals one step on the same tokens with the loss averaged by hand."""
    import numpy as np
    import train
    from lab.engine.batches import Batches
    data = np.arange(5000, dtype=np.uint16) % 50
    for share, bs in ((0.5, 6), (0.25, 2)):
        b = Batches(data, 128, 6, torch.Generator().manual_seed(0), 'cpu', short=(32, share, True))
        for it in range(3):
            assert [tuple(x.shape) for x, _, _ in b.step(2, it=it)] == [(6, 128)] * 2 + [(bs, 32)] * 2
    b = Batches(data, 128, 6, torch.Generator().manual_seed(0), 'cpu', short=(32, 0.5, True))
    assert [tuple(x.shape) for x, _, _ in b.step(2, rank=1, world=2)] == [(6, 128), (6, 32)]

    class Tiny(torch.nn.Module):  # a per-token loss whose gradient is easy to state: mean of w * x over the tokens
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(()))

        def forward(self, x, y, pos=None):
            return None, (self.w * x.float()).mean()
    x1, x2 = torch.ones(2, 8), torch.full((2, 2), 4.0)  # 16 tokens of 1, 4 tokens of 4: per token 32 / 20 = 1.6
    m = Tiny()
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    train.train_step(m, opt, [(x1, x1, None), (x2, x2, None)], torch.enable_grad(), 0, False)
    assert m.w.item() == pytest.approx(1 - 1.6)  # (averaging the two micro-batches' means would give 1 - 2.5)


def test_mixed_fine_tune_runs_and_refuses_what_it_cannot_mix(tiny_run, tmp_path):
    import finetune_long
    from data.checkpoints import load_checkpoint
    ft = ['--max_iters=4', '--eval_interval=4', '--eval_iters=1', '--batch_size=2', '--progress=False']
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', '--factor=4', '--mixed_short=0.5',
                        f'--out_dir={tmp_path / "m"}', *ft])
    ck = load_checkpoint(str(tmp_path / 'm'))
    from lab.measure.arms import ckpt_arm
    assert ck['iter_num'] == 4 and ckpt_arm(str(tmp_path / 'm'), ck)['name'] == 'yarn s=4 mixed ft4'
    with pytest.raises(ValueError, match='finetune_long.py sets each arm'):
        finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', "--rope_scaling={'rope_type': 'clip'}",
                            f'--out_dir={tmp_path / "r"}', *ft])
    with pytest.raises(Exception, match='mixed_short'):
        finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', '--factor=4', '--mixed_short=0.5',
                            '--pose=True', f'--out_dir={tmp_path / "p"}', *ft])
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', '--factor=4', '--mixed_short=0.5',
                        '--mixed_in_step=True', f'--out_dir={tmp_path / "i"}', *ft])
    assert ckpt_arm(str(tmp_path / 'i'), load_checkpoint(str(tmp_path / 'i')))['name'] == 'yarn s=4 mixed in-step ft4'
    with pytest.raises(Exception, match='mixed_in_step=True mixes short windows'):
        finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', '--factor=4', '--mixed_in_step=True',
                            f'--out_dir={tmp_path / "q"}', *ft])
    assert not (tmp_path / 'q').exists()


# ----------------------------------------------------------------------------- in an eval

def test_frequency_arms_and_sink_bases_in_an_eval(char_data, tmp_path):
    """A sink base (trained a few steps) and a p-RoPE base next to a plain one; zero-shot clip, p-RoPE and DCA on the
    plain one: names, the sink strength beside every arm (none for the truncated crop), DCA's inside-the-chunk losses
    equal to the base's (one chunk holds every distance there)."""
    import eval as ev
    from conftest import tiny_cfg
    from train import train
    runs = {}
    for name, kw in (('plain', {}), ('sinks', dict(attention='sinks')),
                     ('prope', dict(rope_scaling={'rope_type': 'proportional', 'partial_rotary_factor': 0.25}))):
        runs[name] = tmp_path / name
        train(dict(tiny_cfg(char_data, runs[name], max_iters=30, eval_interval=30, **kw), block_size=16))
    s = ev.main([f'--ckpt={runs["plain"]},{runs["sinks"]},{runs["prope"]}', f'--base={runs["plain"]}',
                 '--rope_types=default,crop:form=truncated,clip,proportional:partial_rotary_factor=0.5:factor=1,'
                 'proportional:partial_rotary_factor=0.25:factor=1,'
                 'dca:chunk=12:window=2', '--eval_len=64', '--num_windows=6', '--retrieval_examples=0',
                 '--depth_len=0', '--needles=0', '--recall_len=0', '--word_needles=0', '--mv_values=0',
                 '--tracking=False', f'--out_dir={tmp_path / "e"}', '--device=cpu', '--progress=False', '--workers=1'])
    by = {a['name']: a for a in s['arms']}
    for want in ('base (L=16)', 'base sinks (L=16)', 'base proportional p=0.25 (L=16)', 'clip s=4 zero-shot',
                 'proportional s=1 p=0.5 zero-shot', 'dca S=12 w=2 zero-shot', 'crop w=16 (truncated)'):
        assert want in by, list(by)
    assert all(v is None for v in by['crop w=16 (truncated)']['first_token_buckets'].values())
    for name in ('base (L=16)', 'base sinks (L=16)', 'dca S=12 w=2 zero-shot'):
        got = by[name]['first_token_buckets']
        assert set(got) == {'0-16', '16-32', '32-64'} and all(0 < v < 1 for v in got.values()), (name, got)
    # inside the first chunk (10 tokens) DCA is exact: its per-window loss there is the base's
    import numpy as np
    import csv
    rows = list(csv.DictReader(open(tmp_path / 'e' / 'position_loss.csv')))
    base, dca = (np.array([float(r[n]) for r in rows[:10]]) for n in ('base (L=16)', 'dca S=12 w=2 zero-shot'))
    assert np.allclose(base, dca, atol=1e-5) and 'Sink strength' in open(tmp_path / 'e' / 'summary.md').read()
    # sinks counted per head: the heads' weights average to the sink strength; none for the truncated crop
    assert all(v is None for v in by['crop w=16 (truncated)']['sink_heads'].values())
    for name in ('base (L=16)', 'base sinks (L=16)'):
        for c, h in by[name]['sink_heads'].items():
            w = np.array(h['weights'])
            assert w.shape == (2, 2) and h['of'] == 4 and h['heads'] == int((w > 0.3).sum()), (name, c, h)
            assert w.mean() == pytest.approx(by[name]['first_token_buckets'][c], abs=2e-4) and h['max'] >= w.max() - 1e-4
    assert 'Sink heads' in open(tmp_path / 'e' / 'summary.md').read()
    from lab.pictures.method_plots import sweep_arms
    assert [k for k, _ in sweep_arms(s)] == [4, 8, 16] and (tmp_path / 'e' / 'clip_sweep.png').stat().st_size > 10000


def test_hugging_face_export_of_the_frequency_types():
    """ABF exports as plain RoPE at the raised base; stopped pairs are refused (GPT-NeoX's partial rotation is another
    function)."""
    from lab.hf.export import check_exportable, hf_rope
    abf = check_scaling({'rope_type': 'abf', 'new_base': 1e6, 'factor': 4.0}, 1e4)
    assert hf_rope(32, 1e4, abf, 128, 512) == ({'rope_type': 'default', 'rope_theta': 1e6, 'partial_rotary_factor': 1.0},
                                               512)
    args = dict(n_layer=2, n_head=2, n_embd=32, block_size=16, rope_base=1e4, pos_emb='rope', attention='causal')
    for sc in ({'rope_type': 'proportional', 'partial_rotary_factor': 0.25, 'factor': 1.0},
               {'rope_type': 'clip', 'factor': 1.0, 'original_max_position_embeddings': 16}):
        with pytest.raises(ValueError, match='stops pairs from turning'):
            check_exportable(dict(args, rope_scaling=sc))

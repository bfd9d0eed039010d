"""Issue 63: FoPE (lab/fope.py), clipped RoPE whose cos/sin each key/value head mixes across the pairs that turn. The
rotation against a construction by hand (cos' = cos C_h, sin' = sin S_h on the kept pairs, the stopped ones at 1 and 0,
query heads taking their group's tables) at PoSE-like position ids; no longer relative once mixed; identity mixing is
the clipped-RoPE model bit for bit; the shipped init; exact under the KV cache; a training step reaches the learned
mixing and leaves the shipped (fixed) one; and the refusals, one line each. Tiny models, one thread, a few seconds."""
import math

import pytest
import torch

from lab.crop import window_attention
from lab.fope import fope_tables
from lab.kv_cache import KVCache, generate
from lab.position_maps import check_position_map, mapped_logits
from model import GPT, GPTConfig

V, L = 40, 32
CLIP = {'rope_type': 'clip', 'original_max_position_embeddings': L}
# head_dim 16, base 100: wavelengths 2 pi 10^(i/4) = 6.3, 11.2, 19.9, 35.3, ...: pairs 0-2 turn within L = 32, F = 3
CFG = dict(block_size=L, vocab_size=V, n_layer=2, n_head=4, n_kv_head=2, n_embd=64, rope_base=100.0, rope_scaling=CLIP)


def build(attention='fope', seed=0, **kw):
    torch.manual_seed(seed)
    m = GPT(GPTConfig(**{**CFG, 'attention': attention, **kw})).eval()
    with torch.no_grad():
        for b in m.transformer.h:
            b.attn.c_attn.weight.mul_(4.0)  # sharper attention: a wrong rotation shows in the logits
    return m


def set_mixing(m, scale, seed=5):
    """Every RoPE layer's deltas (C - I, S - I) drawn N(0, scale^2), its own per layer and head."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for b in m.transformer.h:
            if b.attn.n_pairs:
                for t in (b.attn.cos_delta, b.attn.sin_delta):
                    t.copy_(torch.randn(t.shape, generator=g) * scale)


def tokens(B=2, n=20, seed=1):
    return torch.randint(0, V, (B, n), generator=torch.Generator().manual_seed(seed))


def by_hand(x, attn, pos, base=100.0):
    """q and k of one layer, float64, by hand: c_attn's rows, then per head h (query head j uses key/value head
    j // 2) and position p each pair i (x[i], x[i + 8]) turned by c'_i = sum_D cos(p theta_D) C[h, D, i],
    s'_i = sum_D sin(p theta_D) S[h, D, i] for i < F, by (1, 0) for the stopped pairs."""
    B, T, C = x.shape
    w = attn.c_attn.weight.double()
    q = (x.double() @ w[:C].T).view(B, T, 4, 16)
    k = (x.double() @ w[C:C + 32].T).view(B, T, 2, 16)
    F = attn.n_pairs
    Cm = torch.eye(F, dtype=torch.float64) + attn.cos_delta.double()
    Sm = torch.eye(F, dtype=torch.float64) + attn.sin_delta.double()
    theta = [base ** (-2 * i / 16) for i in range(F)]
    assert 2 * math.pi / theta[-1] <= L < 2 * math.pi * base ** (2 * F / 16)  # the clip keeps exactly F pairs

    def turn(vec, h, p):
        cs = [math.cos(p * t) for t in theta]
        sn = [math.sin(p * t) for t in theta]
        out = vec.clone()
        for i in range(8):
            c = sum(cs[D] * Cm[h, D, i] for D in range(F)) if i < F else 1.0
            s = sum(sn[D] * Sm[h, D, i] for D in range(F)) if i < F else 0.0
            out[i], out[i + 8] = vec[i] * c - vec[i + 8] * s, vec[i + 8] * c + vec[i] * s
        return out
    qr = torch.stack([torch.stack([torch.stack([turn(q[b, t, j], j // 2, int(pos[b, t])) for t in range(T)])
                                   for j in range(4)]) for b in range(B)])
    kr = torch.stack([torch.stack([torch.stack([turn(k[b, t, j // 2], j // 2, int(pos[b, t])) for t in range(T)])
                                   for j in range(4)]) for b in range(B)])
    return qr, kr


def test_the_rotation_is_the_mixed_tables_by_hand_at_given_position_ids():
    """Hand-made C_h, S_h (identity + N(0, 0.5^2)): the layer's q and k, and one score q_m . k_n, equal the
    construction by hand to 1e-5, at PoSE-like ids (B, T) (tables (B, 1, T, d)) and at 0..T-1 (tables (T, d))."""
    m = build()
    set_mixing(m, 0.5)
    attn, T = m.transformer.h[0].attn, 10
    assert attn.n_pairs == 3 and attn.cos_delta.shape == (2, 3, 3)
    x = torch.randn(2, T, 64, generator=torch.Generator().manual_seed(2))
    ids = torch.stack([torch.tensor([0, 1, 2, 9, 10, 11, 40, 41, 42, 43]), torch.arange(5, 5 + T)])
    for pos in (ids, torch.arange(T).expand(2, T)):
        rope = m.rope_tables(pos if pos is ids else T)
        with torch.no_grad():
            q, k, _ = attn.qkv(x, rope)
        qh, kh = by_hand(x, attn, pos)
        assert (q.double() - qh).abs().max() < 1e-5 and (k.double() - kh).abs().max() < 1e-5
        score, want = q[0, 3, 7] @ k[0, 3, 2], qh[0, 3, 7] @ kh[0, 3, 2]
        assert abs(score.item() - want.item()) < 1e-4 and abs(want.item()) > 0.1


def test_mixed_scores_depend_on_both_positions_not_only_their_distance():
    """One q and one k vector at (m, n) and at (m + 37, n + 37): the same score with C = S = I (RoPE is relative),
    different ones once mixed (FoPE is not: why position maps are refused and its own crop is the truncated one)."""
    m = build()
    attn = m.transformer.h[0].attn
    q, k = torch.randn(2, 1, 16, generator=torch.Generator().manual_seed(3)).unbind(0)
    cos, sin = m.rope_tables(torch.tensor([20, 5, 57, 42]))

    def scores(cm, sm):
        c, s = fope_tables(cos, sin, cm, sm)  # (H, 4, d)
        turned = lambda x, i: x * c[0, i] + torch.cat((-x[..., 8:], x[..., :8]), -1) * s[0, i]  # noqa: E731
        return (turned(q, 0) @ turned(k, 1).T).item(), (turned(q, 2) @ turned(k, 3).T).item()
    eye = torch.eye(3).expand(2, 3, 3)
    a, b = scores(eye, eye)
    assert abs(a - b) < 1e-5
    a, b = scores(*(eye + torch.randn(2, 3, 3, generator=torch.Generator().manual_seed(s)) * 0.5 for s in (4, 6)))
    assert abs(a - b) > 1e-2
    assert attn.rope_relative is False


@pytest.mark.parametrize('attention,kw', [('fope', {}), ('fope', dict(layers='rope:w=6,nope,rope:base=1000',
                                                                      n_layer=3)),
                                          ('smear_keys_fope', {})])
def test_identity_mixing_is_the_clipped_rope_model_bit_for_bit(attention, kw):
    """C = S = I: the FoPE model is the pos_emb='rope', rope_type 'clip' model with the same weights, bit for bit,
    at 0..T-1 and at PoSE's ids; the FoPE draw takes nothing from the global generator (the same seed builds the same
    other weights); a NoPE layer has no mixing."""
    m = build(attention, **kw)
    twin = build(attention.replace('fope', '').rstrip('_') or 'causal', **kw)
    own = {k: v for k, v in m.state_dict().items() if 'delta' not in k}
    assert own.keys() == twin.state_dict().keys()
    assert all(torch.equal(v, twin.state_dict()[k]) for k, v in own.items())
    set_mixing(m, 0.0)
    x, ids = tokens(), torch.sort(torch.randperm(60, generator=torch.Generator().manual_seed(7))[:20]).values
    with torch.no_grad():
        assert torch.equal(m(x)[0], twin(x)[0])
        assert torch.equal(m(x, pos=ids)[0], twin(x, pos=ids)[0])
        set_mixing(m, 0.3)
        assert (m(x)[0] - twin(x)[0]).abs().max() > 1e-3  # the mixing is live
    if 'layers' in kw:
        assert [b.attn.n_pairs for b in m.transformer.h] == [3, 0, 2]  # base 1000: wavelengths 6.3, 14.9, 35.3
        assert not hasattr(m.transformer.h[1].attn, 'cos_delta')


def test_the_init_is_identity_plus_xaviers_noise_one_draw_for_every_layer():
    """As xtuner draws it: xavier_normal_(gain 0.3) on the (H, F, F) tensor, std 0.3 sqrt(2 / (F*F + H*F)), sin's
    first, from a generator seeded 123; every layer the same draw. 'fope': buffers in the checkpoint, not parameters;
    'fope_learned': parameters."""
    H, F = 2, 3
    g = torch.Generator().manual_seed(123)
    std = 0.3 * math.sqrt(2 / (F * F + H * F))
    sin, cos = torch.randn(H, F, F, generator=g) * std, torch.randn(H, F, F, generator=g) * std
    for attention in ('fope', 'fope_learned'):
        m = build(attention)
        for b in m.transformer.h:
            assert torch.allclose(b.attn.sin_delta, sin, atol=1e-7) and torch.allclose(b.attn.cos_delta, cos, atol=1e-7)
        params = {n for n, _ in m.named_parameters()}
        assert ('transformer.h.0.attn.cos_delta' in params) == (attention == 'fope_learned')
        assert 'transformer.h.1.attn.sin_delta' in m.state_dict()


@pytest.mark.parametrize('attention,kw', [('fope', dict(layers='rope:w=6,nope,rope:base=1000', n_layer=3)),
                                          ('smear_keys_fope_learned', {})])
def test_the_kv_cache_is_exact_with_the_mixing_on(attention, kw):
    """Mixing far from identity (N(0, 1) deltas), grouped heads, a windowed, a NoPE and another base's layer, smeared
    keys: the cache's logits, a prompt then one token a step, equal a full forward's; kv_cache.generate ==
    model.generate, sampled with the same generator."""
    m = build(attention, **kw)
    set_mixing(m, 1.0)
    x = tokens(n=24)
    cache = KVCache()
    steps = [cache.forward(m, x[:, :10])]
    steps += [cache.forward(m, x[:, i:i + 1]) for i in range(10, 24)]
    with torch.no_grad():
        full = m(x)[0]
    assert (torch.cat(steps, 1) - full).abs().max() < 1e-4
    a = generate(m, x[:, :5], 30, generator=torch.Generator().manual_seed(0))
    b = m.generate(x[:, :5], 30, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b)


def test_a_training_step_reaches_the_learned_mixing_and_leaves_the_shipped_one():
    """'fope_learned': the deltas get gradients and move in one AdamW step (in the decayed group: weight decay pulls
    them to 0, clipped RoPE); 'fope': they are buffers, in no optimizer group, unchanged."""
    for attention in ('fope_learned', 'fope'):
        m = build(attention).train()
        opt = m.configure_optimizers(0.1, 1e-2, (0.9, 0.99), 'cpu')
        before = m.transformer.h[0].attn.cos_delta.detach().clone()
        x = tokens(n=L + 1)
        m(x[:, :-1], x[:, 1:])[1].backward()
        opt.step()
        delta = m.transformer.h[0].attn.cos_delta
        in_opt = any(p is delta for group in opt.param_groups for p in group['params'])
        if attention == 'fope_learned':
            assert in_opt and delta.grad.abs().max() > 0 and (delta - before).abs().max() > 1e-3
            assert any(p is delta for p in opt.param_groups[0]['params'])  # (weight_decay 0.1)
        else:
            assert not in_opt and torch.equal(delta, before)


def test_bad_inputs_are_refused_in_one_line():
    """No clip (plain RoPE, or a NoPE model), a clip aimed at some layers, a clip that leaves no pair turning, a
    scaling switched on over the clip, a position map, the sink-kept crop at=cache: each a one-line ValueError."""
    for kw, want in ((dict(rope_scaling=None), "'rope_type': 'clip'"),
                     (dict(rope_scaling=None, pos_emb='none'), "pos_emb='rope'"),
                     (dict(rope_scaling={**CLIP, 'layers': 'full'}, layers='rope:w=6,rope'), "drop the 'layers'"),
                     (dict(rope_scaling={**CLIP, 'max_wavelength': 3.0}), 'leaves 0 pairs')):
        with pytest.raises(ValueError, match=want) as e:
            GPT(GPTConfig(**{**CFG, 'attention': 'fope', **kw}))
        assert '\n' not in str(e.value)
    m = build()
    x = tokens()
    m.set_rope_scaling({'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': L})
    with pytest.raises(ValueError, match='turn its stopped pairs again'):
        m(x)
    m.set_rope_scaling(CLIP)
    m(x)  # (its own clip again: runs)
    with pytest.raises(ValueError, match='re-rotates queries and keys by plain RoPE'):
        mapped_logits(m, check_position_map({'method': 'rerope', 'window': 4}))
    with pytest.raises(ValueError, match='use at=true'):
        m(x, attend=window_attention(m, 8, sink=2, at='cache'))

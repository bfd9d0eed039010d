"""
Where the temperature goes (issue 47, item 3): YaRN's attention factor on every dim of the logit (the softmax scale,
DeepSeek-V3 / torchtitan; the lab's default) or only on the pairs that turn ('attention_factor_on': 'rotary', what
Hugging Face's cos/sin do under a partial rotation), and the same choice for the query temperatures (qtemp ...:on=).
GPT-NeoX's partial rotation (partial_rotary_factor) is built here too: the method runs on the first p * d dims.
Checked against direct constructions: the two placements are one model where every pair turns, and on a partial
rotation the rotary-only logit is af^2 * (turning part) + (pass-through part), by hand.
"""
import math

import pytest
import torch

import lab.temperature  # noqa: F401
from lab.kv_cache import KVCache
from lab.temperature import parse_temperature, scaled_queries, temperature_name
from model import GPT, GPTConfig
from rope import apply_rope, plain_inv_freq, rope_cos_sin
from rope_config import check_scaling, rope_inv_freq

V, T, L = 50, 40, 16


def yarn(on=None, s=4.0):
    return dict({'rope_type': 'yarn', 'factor': s, 'original_max_position_embeddings': L},
                **({'attention_factor_on': on} if on else {}))


def gpt(**kw):
    torch.manual_seed(0)
    m = GPT(GPTConfig(**dict(dict(block_size=L, vocab_size=V, n_layer=2, n_head=2, n_embd=32), **kw))).eval()
    with torch.no_grad():
        for b in m.transformer.h:
            b.attn.c_attn.weight.mul_(4.0)  # sharp attention: a temperature that went to the wrong dims shows
    return m


def logits(m, x, sc):
    m.set_rope_scaling(sc)
    return m(x)[0]


def test_neox_partial_rotation_runs_the_method_on_the_first_dims():
    """p = 0.25 of d = 32: pairs 0-3 turn at b^(-2i/8) (1, 0.1, 0.01, 0.001), the other 12 never; YaRN's theta' is
    the one YaRN computes for an 8-dim head, padded; the model's pass-through dims leave RoPE unchanged."""
    inv, af = rope_inv_freq(32, 1e4, None, rotary_dim=8)
    assert torch.allclose(inv[:4], torch.tensor([1.0, 0.1, 0.01, 0.001])) and (inv[4:] == 0).all() and af == 1.0
    y8, af8 = rope_inv_freq(8, 1e4, yarn())
    y, afy = rope_inv_freq(32, 1e4, yarn(), rotary_dim=8)
    assert torch.equal(y[:4], y8) and (y[4:] == 0).all() and afy == af8 == pytest.approx(0.1 * math.log(4) + 1)
    m = gpt(partial_rotary_factor=0.25, n_head=1)
    assert m.rotary_dim == 8 and torch.equal(m.rope_inv_freq, inv)
    cos, sin = m.rope_tables(T)
    x = torch.randn(T, 32)
    r = apply_rope(x, cos, sin)
    still = torch.cat((torch.arange(4, 16), torch.arange(20, 32)))
    assert torch.equal(r[:, still], x[:, still]) and not torch.allclose(r[5:, :4], x[5:, :4])
    with pytest.raises(ValueError, match='partial_rotary_factor'):
        gpt(partial_rotary_factor=0.02)  # 0 dims would turn


def test_the_placements_are_one_model_where_every_pair_turns():
    """Full rotation: 'rotary' puts the factor on every dim, the same tables, the same logits bit for bit."""
    m, x = gpt(), torch.randint(0, V, (2, T))
    assert torch.equal(logits(m, x, yarn('all')), logits(m, x, yarn('rotary')))
    assert torch.equal(logits(m, x, yarn()), logits(m, x, yarn('all')))
    t_all, t_rot = parse_temperature('qtemp:shape=logn'), parse_temperature('qtemp:shape=logn:on=rotary')
    q = torch.randn(2, 2, T, 16)
    assert torch.equal(scaled_queries(t_all, m, 0, q, L), scaled_queries(t_rot, m, 0, q, L))


def test_rotary_only_is_the_turning_part_times_af_squared_by_hand():
    """On a partial rotation, q.k under 'all' is af^2 (turning + pass-through) and under 'rotary' af^2 * turning +
    pass-through, with the turning part the plain rotated dot product: by hand from rope_cos_sin and apply_rope."""
    d, pos = 16, torch.arange(T)
    inv = torch.cat((plain_inv_freq(4, 1e4).float(), torch.zeros(6)))  # 2 of 8 pairs turn
    af = 1.3
    q, k = torch.randn(T, d), torch.randn(T, d)
    turn = torch.tensor([0, 1, 8, 9])
    rest = torch.tensor([i for i in range(d) if i not in (0, 1, 8, 9)])
    plain = rope_cos_sin(inv, pos)
    qr, kr = apply_rope(q, *plain), apply_rope(k, *plain)
    turning, passing = qr[:, turn] @ kr[:, turn].T, q[:, rest] @ k[:, rest].T
    assert torch.allclose(qr[:, rest], q[:, rest])
    whole = rope_cos_sin(inv, pos, af)
    only = rope_cos_sin(inv, pos, af, rotary_only=True)
    got_all = apply_rope(q, *whole) @ apply_rope(k, *whole).T
    got_rot = apply_rope(q, *only) @ apply_rope(k, *only).T
    assert torch.allclose(got_all, af ** 2 * (turning + passing), atol=1e-4)
    assert torch.allclose(got_rot, af ** 2 * turning + passing, atol=1e-4)
    assert not torch.allclose(got_all, got_rot, atol=1e-2)


@pytest.mark.parametrize('kw', [dict(partial_rotary_factor=0.25),
                                dict(rope_scaling={'rope_type': 'proportional', 'partial_rotary_factor': 0.25})])
def test_the_placements_differ_on_a_partial_rotation_and_go_through_the_cache(kw):
    """NeoX partial (YaRN on top) and p-RoPE (a query temperature on top): the two placements give other logits,
    'rotary' scales only the turning dims of q, and the KV cache's steps reproduce the full forward."""
    m, x = gpt(**kw), torch.randint(0, V, (2, T))
    t_rot = parse_temperature('qtemp:shape=logn:on=rotary')
    assert temperature_name(t_rot) == 'qtemp logn rotary-only'
    q = torch.ones(1, 2, T, 16)
    got = scaled_queries(t_rot, m, 0, q, L)
    whole = scaled_queries(parse_temperature('qtemp:shape=logn'), m, 0, q, L)
    turning = (m.rope_inv_freq != 0).repeat(2)
    assert torch.equal(got[..., ~turning], q[..., ~turning]) and torch.equal(got[..., turning], whole[..., turning])
    assert whole[0, 0, -1, 0] > 1.2  # (past L the factor is ln(40)/ln(16) = 1.33)
    if 'rope_scaling' in kw:
        return
    a, r = logits(m, x, yarn('all')), logits(m, x, yarn('rotary'))
    assert (a - r).abs().max() > 1e-3 and torch.equal(a[:, :1], a[:, :1])
    cache, seq = KVCache(), x[:1]
    steps = [cache.forward(m, seq[:, :9])] + [cache.forward(m, seq[:, i:i + 1]) for i in range(9, T)]
    assert torch.allclose(torch.cat(steps, 1), r[:1], atol=1e-5)


def test_bad_placements_are_one_line_errors():
    with pytest.raises(ValueError, match="attention_factor_on.*'all'.*'rotary'"):
        check_scaling(yarn('dims'))
    with pytest.raises(ValueError, match="on='dims'"):
        parse_temperature('qtemp:shape=logn:on=dims')
    with pytest.raises(ValueError, match='not used by rope_type'):
        check_scaling({'rope_type': 'linear', 'factor': 2.0, 'attention_factor_on': 'rotary'})


def test_a_partial_or_gated_base_says_so_in_its_arm_name():
    """Bases are told apart in every table: the NeoX partial rotation and gated attention (on smeared keys too)."""
    from lab.measure.arms import ckpt_arm
    args = dict(block_size=128, pos_emb='rope', attention='smear_keys_gated')
    assert ckpt_arm('x', {'model_args': args})['name'] == 'base gated (L=128)'
    assert ckpt_arm('x', {'model_args': dict(args, attention='causal', partial_rotary_factor=0.25)})['name'] == \
        'base neox p=0.25 (L=128)'

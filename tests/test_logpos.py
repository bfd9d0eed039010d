"""Issue 63, first part: a learned per-head log-position query scale (Mistral Large 4's, lab.temperature.logpos_class):
queries at position i times a_h ln(i + 1) + b_h, the plain model at init, exact under the KV cache, refused with
PoSE's skipped ids."""
import math

import pytest
import torch
from torch.nn import functional as F

from configurator import ConfigError
from lab import kv_cache
from conftest import twins

CFG = dict(block_size=32, vocab_size=20, n_layer=2, n_head=2, n_embd=16)


def pair(**kw):
    """The model and its plain twin (the same weights), q and k x10 so that the attention, and its scale, shows."""
    return twins(CFG, 'attention', ('logpos', 'causal'), **kw)


def test_at_init_it_is_the_plain_model_bit_for_bit():
    m, plain = pair()
    x = torch.randint(0, 20, (2, 48))
    with torch.no_grad():
        assert torch.equal(m(x)[0], plain(x)[0])
    assert all(b.attn.logpos_scale.requires_grad and (b.attn.logpos_bias == 1).all() for b in m.transformer.h)


def test_the_scale_is_a_h_ln_i_plus_1_plus_b_h_on_the_queries():
    m, plain = pair()
    a, b = torch.tensor([[0.3], [-0.1]]), torch.tensor([[0.7], [1.2]])
    with torch.no_grad():
        for blk in m.transformer.h:
            blk.attn.logpos_scale.copy_(a)
            blk.attn.logpos_bias.copy_(b)
    x = torch.randint(0, 20, (2, 40))
    f = (a * torch.log(torch.arange(40.0) + 1) + b).unsqueeze(-1)  # (H, T, 1), by hand: ln(i + 1), not log1p
    direct = lambda layer, q, k, v: F.scaled_dot_product_attention(q * f, k, v, is_causal=True)  # noqa: E731
    with torch.no_grad():
        got, want = m(x)[0], plain(x, attend=direct)[0]
    assert torch.allclose(got, want, atol=1e-6) and (got - plain(x)[0]).abs().max() > 0.01  # (it moves them)
    assert math.isclose(float(f[0, 9, 0]), 0.3 * math.log(10) + 0.7, rel_tol=1e-6)


def test_the_kv_cache_is_exact():
    m, _ = pair()
    with torch.no_grad():
        for blk in m.transformer.h:
            blk.attn.logpos_scale.fill_(0.4)
            blk.attn.logpos_bias.fill_(0.8)
    assert kv_cache.blocker(m) is None
    x = torch.randint(0, 20, (2, 6))
    assert torch.equal(kv_cache.generate(m, x, 24, top_k=1), m.generate(x, 24, top_k=1))


def test_pose_ids_are_refused():
    m, _ = pair(layers='2*rope:w=8')
    with pytest.raises(ValueError, match="token index"):
        m(torch.randint(0, 20, (1, 16)), pos=torch.arange(16) * 2)
    from lab.engine.batches import DEFAULTS, check
    with pytest.raises(ConfigError, match="attention='logpos'"):
        check(dict(DEFAULTS, pose=True, block_size=64, attention='logpos'), {'vocab_size': 20}, 32)

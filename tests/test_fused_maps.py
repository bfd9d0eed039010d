"""lab/position_maps.py's fused attention (fused_mapped: banded near keys, far keys and DCA's three tables merged by
their log-sum-exp) against the chunked scores it replaces (mapped_attention(..., fused=False)): the model's logits
for every map, grouped heads, YaRN, blocks that do not divide T, a window past T, layers that fall back."""
import pytest
import torch

from lab import position_maps
from lab.position_maps import check_position_map, fused_mapped, mapped_attention
from model import GPT, GPTConfig

V, T = 40, 48
ARMS = {'rerope': {'method': 'rerope', 'window': 8, 'log_scale': 0},
        'rerope_log': {'method': 'rerope', 'window': 8, 'log_scale': 1},
        'leaky_rerope': {'method': 'leaky_rerope', 'window': 8, 'k': 2.5},
        'self_extend': {'method': 'self_extend', 'window': 8, 'group': 4},
        'self_extend_log': {'method': 'self_extend', 'window': 8, 'group': 4, 'log_scale': 1},
        'dca': {'method': 'dca', 'chunk': 12, 'window': 2}}  # chunks of 10 tokens: 5 of them in T = 48
YARN = {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 16}


def make(**kw):
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=16, vocab_size=V, n_layer=2, n_head=2, n_embd=32, **kw)).eval()


def both(m, pm, x, **kw):
    """The model's logits under pm, fused and chunked (the reference), and their max abs difference."""
    with torch.no_grad():
        fused = m(x, attend=mapped_attention(m, pm, **kw))[0]
        chunked = m(x, attend=mapped_attention(m, pm, fused=False))[0]
    return fused, chunked, (fused - chunked).abs().max().item()


@pytest.mark.parametrize('config', [{}, {'n_kv_head': 1}, {'rope_scaling': YARN}], ids=['plain', 'gqa', 'yarn'])
@pytest.mark.parametrize('arm', ARMS)
def test_fused_equals_chunked(arm, config):
    """Every map, on plain, grouped-head and YaRN models: the fused logits are the chunked ones (blocks of 16, 7 and
    one query: aligned with T, not dividing it, and every query its own block), and the map acts (they differ from
    the plain forward's past the window)."""
    m, x = make(**config), torch.randint(0, V, (2, T))
    for block in (16, 7, 1):
        fused, chunked, err = both(m, ARMS[arm], x, block=block)
        assert err <= 1e-5, (block, err)
    assert (fused - m(x)[0]).abs().max() > 1e-4


@pytest.mark.parametrize('arm', ['rerope_log', 'leaky_rerope', 'self_extend'])
def test_window_past_T_has_no_far_keys(arm):
    """w >= T: every key is near, the fused path is the banded (here causal) call alone; without the log scale the
    plain forward, with it the chunked path."""
    pm = check_position_map(dict(ARMS[arm], window=T if arm != 'self_extend' else 52,
                                 **({'log_scale': 0} if arm == 'leaky_rerope' else {})))
    m, x = make(), torch.randint(0, V, (2, T))
    fused, chunked, err = both(m, pm, x, block=5)
    assert err <= 1e-5
    if not pm['log_scale']:
        assert torch.allclose(fused, m(x)[0], atol=1e-5)


def test_dca_shorter_than_a_chunk_and_one_more_token():
    """DCA with T inside one chunk (intra only: the plain forward) and one token past it (successive: one query)."""
    m, pm = make(), ARMS['dca']
    x = torch.randint(0, V, (1, 11))
    assert both(m, pm, x[:, :10])[2] <= 1e-5 and torch.allclose(both(m, pm, x[:, :10])[0], m(x[:, :10])[0], atol=1e-5)
    assert both(m, pm, x, block=3)[2] <= 1e-5


def test_fallback_layers_and_gradients(monkeypatch):
    """A NoPE layer and a windowed layer take the chunked path, the RoPE layer beside them the fused one (counted):
    equal to the chunked forward. With gradients the whole forward is the chunked one (the CPU kernel's log-sum-exp
    has no gradient): identical to fused=False."""
    calls = []
    monkeypatch.setattr(position_maps, 'fused_mapped', lambda *a, **kw: calls.append(1) or fused_mapped(*a, **kw))
    x = torch.randint(0, V, (2, T))
    both(make(), ARMS['dca'], x)
    assert len(calls) == 2  # both layers fused
    for layers in ('rope,nope', 'rope:w=12,rope'):
        m = make(layers=layers)
        for arm in ('rerope_log', 'dca'):
            calls.clear()
            assert both(m, ARMS[arm], x, block=7)[2] <= 1e-5, (layers, arm)
            assert len(calls) == 1  # the plain RoPE layer only
    m = make().train()
    grads = []
    calls.clear()
    for fused in (True, False):
        m.zero_grad()
        m(x, x, attend=mapped_attention(m, ARMS['self_extend'], fused=fused))[1].backward()
        grads.append(m.transformer.h[0].attn.c_attn.weight.grad.clone())
    assert torch.equal(*grads) and not calls


def test_fused_mapped_on_tensors():
    """The layer function alone, on random q, k, v with a dimension and heads of their own: the seam's result."""
    torch.manual_seed(1)
    m = make()
    q, k, v = (torch.randn(1, 3, 37, 16) for _ in range(3))
    inv_freq = m.rope_freqs(37)[0]
    for arm, pm in ARMS.items():
        pm = dict({'log_scale': 0}, **pm)
        ref = mapped_attention(m, pm, fused=False, chunk=5)(0, q, k, v)
        assert (fused_mapped(q, k, v, pm, inv_freq, L=16, block=6) - ref).abs().max() <= 1e-5, arm

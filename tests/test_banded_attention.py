"""lab/attention.py's fused masked attention (issue 58): banded_attention against an explicit masked softmax for
windows, sinks, chunks and block sizes (log-sum-exp too), merge_lse exact over disjoint key sets, and the crop's
window_attention (lab/crop.py) fused equal to its chunked scores, with and without the kept sink; the sink-kept crop
equals the plain crop where the first keys get no attention and differs where they take it."""
import math

import pytest
import torch

from lab.attention import attention_lse, banded_attention, chunked_attention, key_parts, merge_lse, visible
from lab.crop import crop_name, parse_crop, window_attention, window_logits
from model import GPT, GPTConfig


def reference(q, k, v, mask):
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    att = att.masked_fill(~mask, float('-inf'))
    return torch.softmax(att, -1) @ v, torch.logsumexp(att, -1)


@pytest.fixture(scope='module')
def qkv():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, 3, 50, 8, generator=g, dtype=torch.float64) for _ in range(3))


@pytest.mark.parametrize('window', [None, 1, 2, 5, 10, 49, 60])
@pytest.mark.parametrize('sink', [0, 1, 4])
@pytest.mark.parametrize('chunk', [None, 7, 12])
def test_banded_is_the_masked_softmax(qkv, window, sink, chunk):
    q, k, v = qkv
    i = torch.arange(50)
    y_ref, l_ref = reference(q, k, v, visible(i, i, window, sink, chunk))
    for block in (1, 3, 7, 64):
        y, lse = banded_attention(q, k, v, window, sink, chunk, block, lse=True)
        assert (y - y_ref).abs().max() < 1e-6 and (lse - l_ref).abs().max() < 1e-5  # (the kernel's LSE is float32)


def test_key_parts_visit_only_visible_keys():
    """Every key a block's queries see is in its full range or its edges, and every key there is seen by one."""
    for window, sink, chunk in ((10, 0, None), (10, 4, None), (None, 0, 12), (9, 2, 12), (3, 3, None)):
        for s, e in ((25, 29), (30, 31), (36, 40)):  # (a block never crosses a chunk edge)
            full, edges = key_parts(s, e, window, sink, chunk)
            keys = set(range(*full)) if full else set()
            for a, b in edges:
                keys |= set(range(a, b))
            seen = visible(torch.arange(s, e), torch.arange(e), window, sink, chunk)
            assert keys == set(torch.nonzero(seen.any(0)).flatten().tolist())
            if full:
                assert bool(seen[:, full[0]:full[1]].all())


def test_merge_is_exact_and_empty_rows_weigh_nothing(qkv):
    q, k, v = qkv
    i = torch.arange(50)
    near, far = visible(i, i, 10), visible(i, i) & ~visible(i, i, 10)  # queries < 10 see no far key
    y, lse = merge_lse([attention_lse(q, k, v, near), attention_lse(q, k, v, far)])
    y_ref, l_ref = reference(q, k, v, visible(i, i))
    assert (y - y_ref).abs().max() < 1e-6 and (lse - l_ref).abs().max() < 1e-5
    part = attention_lse(q, k, v, far)
    assert torch.isneginf(part[1][..., :10]).all() and (part[0][..., :10, :] == 0).all()


def make(**kw):
    torch.manual_seed(0)
    return GPT(GPTConfig(**dict(dict(block_size=16, vocab_size=40, n_layer=2, n_head=2, n_embd=32), **kw))).eval()


@pytest.mark.parametrize('kw', [{}, {'n_kv_head': 1}, {'layers': 'rope:w=6,rope'}, {'layers': 'rope:c=8,rope'}])
@pytest.mark.parametrize('window, sink', [(5, 0), (5, 4), (12, 1), (40, 4)])
def test_crop_fused_equals_its_chunked_scores(kw, window, sink):
    m = make(**kw)
    x = torch.randint(0, 40, (2, 40), generator=torch.Generator().manual_seed(1))
    logits = window_logits(m, window, sink)
    chunked = lambda layer, q, k, v: chunked_attention(q, k, v, lambda s, e: logits(layer, q, k, s, e), 7)  # noqa
    with torch.no_grad():
        fused = m(x, attend=window_attention(m, window, sink=sink))[0]
        ref = m(x, attend=chunked)[0]
    assert (fused - ref).abs().max() < 1e-5


def test_crop_with_gradients_takes_the_chunked_path():
    """The fused kernel's log-sum-exp carries no gradient: a training forward takes the chunked scores."""
    m = make()
    x = torch.randint(0, 40, (1, 30), generator=torch.Generator().manual_seed(2))
    logits = window_logits(m, 6, 2)
    m(x, attend=window_attention(m, 6, sink=2))[0].sum().backward()
    got = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    m(x, attend=lambda layer, q, k, v: chunked_attention(q, k, v, lambda s, e: logits(layer, q, k, s, e)))[0] \
        .sum().backward()
    assert all(torch.allclose(a, p.grad, atol=1e-5) for a, p in zip(got, m.parameters()))


def test_sink_kept_crop_equals_the_crop_without_a_sink():
    """With the first keys scored far below the rest (no head is a sink) the kept sink changes nothing; when they
    take most of the attention (a sink) it changes the output."""
    g = torch.Generator().manual_seed(3)
    q = torch.rand(1, 2, 40, 8, generator=g, dtype=torch.float64) + 0.5
    k = torch.rand(1, 2, 40, 8, generator=g, dtype=torch.float64)
    v = torch.randn(1, 2, 40, 8, generator=g, dtype=torch.float64)
    for scale, same in ((-20.0, True), (20.0, False)):
        k2 = k.clone()
        k2[:, :, :4] = scale
        plain, kept = banded_attention(q, k2, v, 10), banded_attention(q, k2, v, 10, sink=4)
        assert ((plain - kept).abs().max() < 1e-9) == same


def test_sink_in_the_spec_and_name():
    assert parse_crop('crop:form=sliding:sink=4', 128) == [{'window': 128, 'form': 'sliding', 'sink': 4}]
    assert parse_crop('crop:form=sliding', 128) == [{'window': 128, 'form': 'sliding'}]
    assert crop_name({'window': 8192, 'form': 'sliding', 'sink': 4}) == 'crop w=8192 sink=4 (sliding)'
    with pytest.raises(ValueError, match=r"sink=4 is the sliding form's.*crop:form=sliding:sink=4"):
        parse_crop('crop:sink=4', 128)
    with pytest.raises(ValueError, match='sink=-1 must be an int >= 0'):
        parse_crop('crop:form=sliding:sink=-1', 128)


@pytest.mark.parametrize('kw', [{}, {'n_kv_head': 1}, {'rope_scaling': {'rope_type': 'yarn', 'factor': 2.0, 'original_max_position_embeddings': 16}}])
def test_cache_positions_fused_equal_their_scores_and_stay_inside_the_window(kw):
    """at=cache (StreamingLLM's positions): the fused path equals its chunked scores; and every kept key past the band
    is scored at distance window + sink - 1 - j, built here by hand from q and k rotated at those positions."""
    from rope import apply_rope, rope_cos_sin
    m = make(**kw)
    x = torch.randint(0, 40, (2, 40), generator=torch.Generator().manual_seed(4))
    logits = window_logits(m, 8, 3, 'cache')
    chunked = lambda layer, q, k, v: chunked_attention(q, k, v, lambda s, e: logits(layer, q, k, s, e), 7)  # noqa
    with torch.no_grad():
        fused = m(x, attend=window_attention(m, 8, sink=3, at='cache'))[0]
        assert (fused - m(x, attend=chunked)[0]).abs().max() < 1e-5
        g = torch.Generator().manual_seed(5)
        raw_q, raw_k = torch.randn(1, 2, 20, 16, generator=g), torch.randn(1, 2, 20, 16, generator=g)
        inv = m.rope_freqs(20)[0]
        turn = lambda x, p: apply_rope(x, *rope_cos_sin(inv, p.double()))  # noqa: E731
        pos = torch.arange(20)
        q, k = turn(raw_q, pos), turn(raw_k, pos)
        got = logits(0, q, k, 0, 20)
        for i in range(8, 20):
            for j in range(3):
                if j <= i - 8:  # out of the band: at the cache distance, whatever i is
                    want = (turn(raw_q, torch.full((20,), 10 - j))[..., i, :] * raw_k[..., j, :]).sum(-1) / 4
                    assert torch.allclose(got[..., i, j], want, atol=1e-4)
    assert crop_name(parse_crop('crop:form=sliding:sink=4:at=cache', 64)[0]) == 'crop w=64 sink=4 cache (sliding)'
    with pytest.raises(ValueError, match="'cache' needs sink >= 1"):
        parse_crop('crop:form=sliding:at=cache', 64)


@pytest.mark.parametrize('window,chunk', [(5, None), (1, None), (49, None), (None, 7), (None, 12), (10, 7), (60, 12)])
@pytest.mark.parametrize('block', [4, 16, 64])
def test_model_local_attention_is_the_masked_softmax_with_its_gradient(qkv, window, chunk, block):
    """model.local_attention (a windowed or chunked layer's own path, no T x T mask, training included): each query
    block against only the keys its first query reaches equals the full-mask softmax, and so do q, k, v's gradients."""
    from model import allowed, local_attention
    q, k, v = (t.clone().requires_grad_() for t in qkv)
    T = q.size(2)
    mask = allowed(torch.arange(T), T, window, chunk)
    want, _ = reference(q, k, v, mask)
    got = local_attention(q, k, v, window, chunk, block=block)
    assert (got - want).abs().max() < 1e-10
    g = torch.randn_like(want)
    dw = torch.autograd.grad((want * g).sum(), (q, k, v))
    dg = torch.autograd.grad((got * g).sum(), (q, k, v))
    assert max((a - b).abs().max().item() for a, b in zip(dw, dg)) < 1e-10


def test_a_windowed_model_runs_its_blocks_and_keeps_its_logits():
    """A model with a windowed and a chunked layer at T = 300 with 64-query blocks gives the logits of the same
    model attending through the full mask (the path before issue 58)."""
    import functools

    import model as M
    torch.manual_seed(0)
    cfg = GPTConfig(block_size=64, vocab_size=50, n_layer=2, n_head=2, n_embd=32, layers='rope:w=16,rope:c=24')
    net = GPT(cfg).double().eval()
    x = torch.randint(0, 50, (1, 300))
    full = lambda q, k, v, window, chunk, dropout_p=0.0, block=0, pos=None: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731,E501
        q, k, v, attn_mask=M.allowed(torch.arange(q.size(2)), k.size(2), window, chunk))
    old = M.local_attention
    blocks = functools.partial(old, block=64)
    try:
        M.local_attention = full
        want = net(x)[0]
        M.local_attention = blocks
        got = net(x)[0]
    finally:
        M.local_attention = old
    assert (got - want).abs().max() < 1e-9

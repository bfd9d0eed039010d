"""Issue 63: convolution as the local position source (LFM2 / LFM3, lab/conv.py): the layer kind 'conv' in the pattern,
the gated short convolution against its formula written out by hand, causal with a reach of k - 1 tokens, beside
sliding and p-RoPE ('proportional') full layers, exact under the KV cache, through forward(at=), the crop, position
maps and PoSE's ids, trained, refused by the export; and eval's crop arm on a trained conv model."""
import math

import pytest
import torch
import torch.nn.functional as F

from lab.conv import ShortConv
from lab.crop import truncated_scores, window_attention
from lab.hf.config import to_hf_layers
from lab.hf.export import check_exportable
from lab.kv_cache import KVCache, blocker, generate
from lab.position_maps import mapped_attention
from data.checkpoints import model_args
from model import GPT, GPTConfig
from rope_config import LayerSpec, parse_layers

V, L = 40, 16
P_ROPE = {'rope_type': 'proportional', 'partial_rotary_factor': 0.5, 'layers': 'full'}  # LFM3's full layers (p = 0.5)
LFM3 = 'conv,rope:w=5,conv,rope'  # LFM3's layers 3-6 in miniature: conv, sliding RoPE, conv, full p-RoPE


def tiny(layers=LFM3, scaling=P_ROPE, seed=0, **kw):
    """A 4-layer model whose attention logits (q/k x10) and conv gates (in_proj x3, taps x20) are of order 1."""
    torch.manual_seed(seed)
    m = GPT(GPTConfig(block_size=L, vocab_size=V, n_layer=4, n_head=2, n_embd=32, layers=layers, rope_scaling=scaling,
                      **kw)).eval()
    with torch.no_grad():
        for block in m.transformer.h:
            if isinstance(block.attn, ShortConv):
                block.attn.in_proj.weight.mul_(3.0)
                block.attn.conv.weight.mul_(20.0)
            else:
                block.attn.c_attn.weight.mul_(10.0)
    return m


def test_the_pattern_reads_conv_layers_with_their_kernel():
    specs = parse_layers('conv,rope:w=8,conv:k=5,rope:base=1e6', 4, 1e4, L)
    assert specs == [LayerSpec(False, None, None, None, 3), LayerSpec(True, 8, 1e4), LayerSpec(False, conv=5),
                     LayerSpec(True, None, 1e6)]
    assert [s.conv for s in parse_layers('3*conv,rope', 4, 1e4, L)] == [3, 3, 3, None]  # k = 3: LFM2's L_cache
    m = tiny()
    assert m.rope_index == [None, 0, None, 1] and [type(b.attn).__name__ for b in m.transformer.h] == \
        ['ShortConv', 'CausalSelfAttention', 'ShortConv', 'CausalSelfAttention']
    assert [b.attn.conv.weight.shape for b in m.transformer.h[::2]] == [torch.Size([32, 1, 3])] * 2  # depthwise


@pytest.mark.parametrize('kw, match', [
    (dict(layers='conv:w=4,rope,rope,rope'), "has a setting 'w'; a conv layer takes k"),
    (dict(layers='conv:base=1e6,3*rope'), "has a setting 'base'; a conv layer takes k"),
    (dict(layers='rope:k=3,3*rope'), "has a setting 'k'; a rope layer takes w or c, and base"),
    (dict(layers='conv:k=1,3*rope'), 'kernel k=1 must be a whole number in 2..15'),
    (dict(layers='conv:k=16,3*rope'), 'kernel k=16 must be'),
    (dict(layers='conv:k=3:k=5,3*rope'), 'gives k twice'),
    (dict(layers='4*conv'), 'every layer is a conv layer; keep an attention layer'),
    (dict(layers='conv,3*rope', attention='sinks'), "beside attention='causal' only"),
    (dict(attention='conv'), "a short convolution is a layer kind"),
    (dict(layers='conv,rope:w=4,conv,rope:w=4', rope_scaling=dict(P_ROPE, layers='full')),
     "aimed at layers='full', but no such layer has RoPE"),                      # the convs are not RoPE layers
    (dict(layers='conv,rope,conv,rope', rope_scaling=dict(P_ROPE, layers='window')), "aimed at layers='window'")])
def test_bad_conv_entries_are_one_line(kw, match):
    with pytest.raises(ValueError, match=match) as e:
        GPTConfig(block_size=L, **kw)
    assert '\n' not in str(e.value)


def direct_conv(x, w_in, b_in, taps, b_conv, w_out, b_out):
    """LFM2's block written out token by token: [B; C; h] = W_in x_t + b_in, u_t = B_t h_t,
    z_t = sum_j taps[c, j] u_{t-k+1+j} + b_conv (u_s = 0 for s < 0), y_t = W_out (C_t z_t) + b_out."""
    T, n = x.size(1), x.size(2)
    k = taps.size(1)
    proj = x @ w_in.T + b_in
    B, C, h = proj[..., :n], proj[..., n:2 * n], proj[..., 2 * n:]
    u = B * h
    z = torch.stack([sum(taps[:, j] * u[:, t - k + 1 + j] for j in range(k) if t - k + 1 + j >= 0) + b_conv
                     for t in range(T)], dim=1)
    return (C * z) @ w_out.T + b_out


@pytest.mark.parametrize('bias', [False, True])
def test_the_block_is_lfm2s_formula(bias):
    """Hand-made weights (biases with config.bias, LFM's conv_bias), k = 4, against the loop above. (The same block
    was checked once against transformers' Lfm2ShortConv and Lfm3ShortConv with copied weights: 0.0 apart.)"""
    g = torch.Generator().manual_seed(3)
    n, k = 8, 4
    blk = ShortConv(GPTConfig(block_size=L, n_head=2, n_embd=n, bias=bias, n_layer=2, layers='conv:k=4,rope'),
                    LayerSpec(False, conv=k))
    w_in, taps, w_out = (torch.randn(*shape, generator=g) for shape in ((3 * n, n), (n, k), (n, n)))
    b_in, b_conv, b_out = (torch.randn(m, generator=g) if bias else torch.zeros(m) for m in (3 * n, n, n))
    with torch.no_grad():
        blk.in_proj.weight.copy_(w_in), blk.conv.weight.copy_(taps[:, None]), blk.c_proj.weight.copy_(w_out)
        if bias:
            blk.in_proj.bias.copy_(b_in), blk.conv.bias.copy_(b_conv), blk.c_proj.bias.copy_(b_out)
        x = torch.randn(2, 9, n, generator=g)
        torch.testing.assert_close(blk(x, None, None), direct_conv(x, w_in, b_in, taps, b_conv, w_out, b_out),
                                   atol=1e-4, rtol=1e-5)
    assert blk.reach == 3 and (blk.in_proj.bias is not None) == bias


def test_causal_with_a_reach_of_k_minus_1():
    """Token t0 changed: the block's outputs before t0 stay bit for bit, t0 .. t0 + k - 1 move, later ones stay (the
    block alone sees k - 1 tokens back); through the model every later position moves (the attention layers)."""
    m = tiny('conv:k=3,rope,conv,rope')
    blk, t0 = m.transformer.h[0].attn, 6
    x = torch.randn(1, 14, 32, generator=torch.Generator().manual_seed(4))
    y = x.clone()
    y[:, t0] += 1.0
    with torch.no_grad():
        a, b = blk(x), blk(y)
        moved = (a - b).abs().amax(-1)[0]
        assert torch.equal(a[:, :t0], b[:, :t0]) and (moved[t0:t0 + 3] > 1e-3).all() and torch.equal(a[:, t0 + 3:],
                                                                                                       b[:, t0 + 3:])
        ids = torch.randint(0, V, (1, 14), generator=torch.Generator().manual_seed(5))
        jd = ids.clone()
        jd[0, t0] = (ids[0, t0] + 1) % V
        la, lb = m(ids)[0], m(jd)[0]
        assert torch.equal(la[:, :t0], lb[:, :t0]) and ((la - lb).abs().amax(-1)[0, t0:] > 1e-4).all()


def test_a_proportional_full_layer_beside_conv_layers():
    """LFM3's full layers: p-RoPE (partial_rotary_factor 0.5) aimed at the full layer only; the sliding layer keeps
    plain RoPE. The full layer's frequencies are theta_i = b^(-2i/d) for i < p d/2 = 4, then 0; p = 0 is the same
    model with a NoPE full layer, bit for bit (cos 1, sin 0)."""
    m = tiny()
    assert [sc and sc['rope_type'] for _, sc in m.rope_groups] == [None, 'proportional']
    want = torch.tensor([1e4 ** (-2 * i / 16) if i < 4 else 0.0 for i in range(8)])
    torch.testing.assert_close(m.rope_freqs(None, 1)[0], want)
    torch.testing.assert_close(m.rope_freqs(None, 0)[0], torch.tensor([1e4 ** (-2 * i / 16) for i in range(8)]))
    x = torch.randint(0, V, (2, 30), generator=torch.Generator().manual_seed(6))
    p0 = tiny(scaling=dict(P_ROPE, partial_rotary_factor=0.0))
    nope = tiny('conv,rope:w=5,conv,nope', None)
    with torch.no_grad():
        assert torch.equal(p0(x)[0], nope(x)[0]) and (m(x)[0] - p0(x)[0]).abs().max() > 1e-3
    yarn = {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': L, 'layers': 'window'}
    nope.set_rope_scaling(yarn)  # switched on later, it finds the sliding layer alone (the conv layers have no RoPE)
    assert nope.rope_index == [None, 0, None, None] and nope.rope_groups[0][1]['rope_type'] == 'yarn'


@pytest.mark.parametrize('layers', [LFM3, 'rope:w=5,conv:k=4,rope,conv'])  # the second ends on a conv layer
def test_the_kv_cache_is_exact(layers):
    """Step by step the cached logits equal a full forward; greedy decoding equals model.generate. The conv layers'
    reach (k - 1 tokens each, summed) is fed again; without it the cache is wrong."""
    m = tiny(layers)
    assert blocker(m) is None
    x = torch.randint(0, V, (2, 30), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        ref = m(x)[0]
        cache = KVCache()
        got = torch.cat([cache.forward(m, x[:, :9])] + [cache.forward(m, x[:, t:t + 1]) for t in range(9, 30)], 1)
        assert (got - ref).abs().max() < 1e-5
        assert torch.equal(generate(m, x[:, :5], 25, top_k=1), m.generate(x[:, :5], 25, top_k=1))
        for b in m.transformer.h:
            if isinstance(b.attn, ShortConv):
                b.attn.reach = 0  # (what the cache would do without it)
        cache = KVCache()
        cache.forward(m, x[:, :9])
        assert (cache.forward(m, x[:, 9:10]) - ref[:, 9:10]).abs().max() > 1e-3


def test_at_the_crop_and_position_maps_act_on_the_attention_layers():
    """forward(at=) with a conv layer last keeps its rows at `at`; the truncated crop is a forward of just its window;
    the sliding crop of w >= T is the model, a narrower one moves only positions >= w; ReRoPE with its window past T
    is plain RoPE (the conv layers ignore every attend seam)."""
    m = tiny('rope:w=5,conv,rope,conv')
    x = torch.randint(0, V, (2, 30), generator=torch.Generator().manual_seed(8))
    at = torch.tensor([[0, 17, 29], [4, 4, 20]])
    with torch.no_grad():
        ref = m(x)[0]
        torch.testing.assert_close(m(x, at=at)[0], ref[torch.arange(2)[:, None], at], atol=1e-5, rtol=0)
        loss, _ = truncated_scores(m, x, [[20, 28], [9]], window=8)
        assert abs(loss[0][1] - float(F.cross_entropy(m(x[:1, 21:29])[0][0, -1], x[0, 29]))) < 1e-5
        assert (m(x, attend=window_attention(m, 30))[0] - ref).abs().max() < 1e-5
        crop = m(x, attend=window_attention(m, 8))[0]
        assert (crop[:, :8] - ref[:, :8]).abs().max() < 1e-5 and (crop - ref).abs().max() > 1e-3
        pm = {'method': 'rerope', 'window': 64, 'log_scale': 0}
        assert (m(x, attend=mapped_attention(m, pm))[0] - ref).abs().max() < 1e-5


def test_pose_ids_leave_the_conv_alone():
    """PoSE's skipped ids: the conv reads the token order (the text, contiguous), not the ids. A model of conv and
    NoPE layers gives the same logits at any ids, bit for bit; a RoPE layer beside them is moved by them."""
    x = torch.randint(0, V, (2, 12), generator=torch.Generator().manual_seed(9))
    skip = torch.cat((torch.arange(6), torch.arange(20, 26)))
    with torch.no_grad():
        m = tiny('conv,nope,conv,nope', None)
        assert torch.equal(m(x, pos=skip)[0], m(x)[0])
        r = tiny()
        assert (r(x, pos=skip)[0] - r(x)[0]).abs().max() > 1e-4


def test_a_training_step_reaches_the_conv_weights():
    m = tiny().train()
    opt = m.configure_optimizers(0.1, 1e-2, (0.9, 0.99), 'cpu')
    conv = m.transformer.h[0].attn
    before = {n: p.detach().clone() for n, p in conv.named_parameters()}
    x = torch.randint(0, V, (4, L), generator=torch.Generator().manual_seed(10))
    m(x[:, :-1], x[:, 1:])[1].backward()
    assert all(p.grad is not None and p.grad.abs().max() > 0 for p in conv.parameters())
    assert any(p is conv.conv.weight for p in opt.param_groups[0]['params'])  # (a matrix: weight decay, as LFM's)
    opt.step()
    assert all(not torch.equal(before[n], p) for n, p in conv.named_parameters())
    fresh = GPT(GPTConfig(block_size=L, n_layer=2, n_embd=32, n_head=2, layers='conv,rope')).transformer.h[0].attn
    assert math.isclose(float(fresh.c_proj.weight.detach().std()), 0.02 / math.sqrt(4), rel_tol=0.1)  # GPT-2's residual init
    assert math.isclose(float(fresh.conv.weight.detach().std()), 0.02, rel_tol=0.25)  # transformers' init of a Conv1d


def test_the_export_refuses_a_conv_model_in_one_line():
    args = model_args(tiny())
    with pytest.raises(ValueError, match=r"\(conv layers, sliding windows\) has no GPT-NeoX counterpart") as e:
        check_exportable(args)
    assert '\n' not in str(e.value)
    hf = to_hf_layers(tiny().config)  # the port by hand it points to: LFM3's own layer_types and conv_L_cache
    assert hf['layer_types'] == ['conv', 'sliding_attention', 'conv', 'full_attention'] and hf['conv_L_cache'] == 3
    assert set(hf['rope_parameters']) == {'sliding_attention', 'full_attention'}
    assert hf['rope_parameters']['full_attention']['rope_type'] == 'proportional'


def test_eval_runs_a_conv_base_and_its_crops(char_data, tmp_path):
    """train.py --layers with conv layers, then eval.py on it: the base and its sliding and truncated crops (inside L
    the base itself), the attention entropy and sink heads over the attention layer alone (2 heads)."""
    import eval as ev
    from conftest import tiny_cfg
    from train import train
    base = tmp_path / 'base'
    train(tiny_cfg(char_data, base, max_iters=10, eval_interval=10, layers='conv,rope:w=8'))
    s = ev.main([f'--base={base}', '--rope_types=default,crop:form=both', '--eval_len=48', '--num_windows=2',
                 '--entropy_windows=1', '--retrieval_examples=0', f'--out_dir={tmp_path / "eval"}', '--device=cpu',
                 '--progress=False', '--plot=False'])
    base_arm, *crops = s['arms']
    assert len(crops) == 2 and all(math.isfinite(v) for a in s['arms'] for v in a['buckets'].values())
    assert all(abs(c['buckets']['0-32'] - base_arm['buckets']['0-32']) < 1e-4 for c in crops)
    assert all(math.isfinite(v) for v in base_arm['entropy_buckets'].values())
    assert base_arm['sink_heads']['0-32']['of'] == 2

"""Inkling-2's attention (attention='inkling', lab/inkling.py): the layer against a direct construction (double
precision, one (i, j) at a time: convolved keys and values, clipped mixing weights, the profile bias, the per-query
sink column), zero bias past the reach, the convolution's causality, the KV cache and cached decoding with
non-init parameters, the crop and the diagnostics taking the per-query sink, a training step reaching every new
parameter, a tiny train.py run reloaded, and the refusals (one line each, naming the fix)."""
import math

import pytest
import torch
import torch.nn.functional as F

import lab.inkling as ink
from lab.inkling import InklingAttention, profile_bias, short_conv
from model import GPT, GPTConfig

V = 40


def make(layers=None, n_head=2, n_kv_head=None, n_embd=32, n_layer=2, block_size=16, scramble=True, seed=0):
    """A small inkling model; scramble: the new parameters drawn far from their init (bias, sink and taps matter)."""
    torch.manual_seed(seed)
    kw = dict(pos_emb='none') if layers is None else dict(layers=layers)
    mdl = GPT(GPTConfig(block_size=block_size, vocab_size=V, n_layer=n_layer, n_head=n_head, n_kv_head=n_kv_head,
                        n_embd=n_embd, attention='inkling', **kw)).eval()
    if scramble:
        with torch.no_grad():
            for name, p in mdl.named_parameters():
                if any(k in name for k in ('rel_', 'taps', 'sink_proj')):
                    p.copy_(torch.randn_like(p) * (1.0 if 'scale' not in name else 0.5) + ('scale' in name))
    return mdl


def direct(attn, x):
    """The layer's output for x (B, T, C) from the formulas, in float64, one (i, j) at a time (lab/inkling.py's
    docstring): k = (conv(W_k x) + W_k x) / sqrt(5), r = clip_8(s * W_r x), b = r . P[:, i - j] (i - j < R),
    z = W_z x, softmax over [scores + b, z], the sink's value 0, then c_proj."""
    d = lambda t: t.detach().double()  # noqa: E731
    B, T, C = x.shape
    H, hd, kv = attn.n_head, C // attn.n_head, attn.kv_dim
    W = d(attn.c_attn.weight)
    q, k, v = (d(x) @ W[a:b].t() for a, b in ((0, C), (C, C + kv), (C + kv, C + 2 * kv)))

    def conv(u, taps):
        out = torch.zeros_like(u)
        for t in range(T):
            out[:, t] = u[:, t] + sum(taps[m] * u[:, t - m] for m in range(ink.KERNEL) if t - m >= 0)
        return out / math.sqrt(ink.KERNEL + 1)
    k, v = conv(k, d(attn.k_taps)), conv(v, d(attn.v_taps))
    g = attn.n_head // attn.n_kv_head
    r = (d(x) @ d(attn.rel_mix.weight).t() * d(attn.rel_scale)).view(B, T, H, -1)
    r = r * (ink.CLIP / (r.norm(dim=-1, keepdim=True) + 1e-6)).clamp(max=1.0)
    z, P, R = d(x) @ d(attn.sink_proj.weight).t(), d(attn.rel_profiles), attn.reach
    y = torch.zeros(B, T, C, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            kh = slice((h // g) * hd, (h // g + 1) * hd)
            for i in range(T):
                seen = [j for j in range(i + 1) if not attn.window or i - j < attn.window]
                s = [float(q[b, i, h * hd:(h + 1) * hd] @ k[b, j, kh]) / math.sqrt(hd)
                     + (float(r[b, i, h] @ P[:, i - j]) if i - j < R else 0.0) for j in seen]
                e = torch.tensor(s + [float(z[b, i, h])], dtype=torch.float64).softmax(0)
                y[b, i, h * hd:(h + 1) * hd] = sum(e[n] * v[b, j, kh] for n, j in enumerate(seen))
    return y @ d(attn.c_proj.weight).t()


@pytest.mark.parametrize('layers, n_kv_head, reach', [(None, None, 4), ('nope:w=5,nope', 1, 64)])
def test_the_layer_equals_a_direct_construction(monkeypatch, layers, n_kv_head, reach):
    """T = 9 past a reach of 4 (a full layer) or a window of 5 (its reach), grouped-query heads: the layer's output,
    through its own attend and through the model's at= path, equals the formulas built by hand."""
    monkeypatch.setattr(ink, 'REACH', reach)
    mdl = make(layers, n_kv_head=n_kv_head)
    attn = mdl.transformer.h[0].attn
    assert attn.reach == (5 if layers else 4)
    x = torch.randn(2, 9, 32)
    want = direct(attn, x)
    assert (attn(x, None).double() - want).abs().max() < 1e-5
    at = torch.tensor([[0, 8], [4, 6]])
    got = attn(x, None, lambda q, k, v: attn.attend(q.gather(2, at[:, None, :, None].expand(-1, q.size(1), -1,
                                                                                          q.size(-1))), k, v, at))
    assert (got.double() - want.gather(1, at[..., None].expand(-1, -1, 32))).abs().max() < 1e-5
    with torch.no_grad():  # the bias and the sink matter: without them the layer moves
        attn.rel_profiles.zero_()
        attn.sink_proj.weight.fill_(-30.0 if layers else 0.0)
    assert (attn(x, None).double() - want).abs().max() > 1e-3


def test_bias_is_zero_past_the_reach_and_the_profile_inside(monkeypatch):
    """R = 4, T = 10, one head: a key at distance >= 4 gets exactly the plain score q.k/sqrt(d) (the layer's logits),
    one at distance d < 4 the plain score plus r . P[:, d]; a future key -inf. profile_bias by hand, too."""
    monkeypatch.setattr(ink, 'REACH', 4)
    mdl = make(n_head=1, n_layer=1)
    attn, x, got = mdl.transformer.h[0].attn, torch.randint(0, V, (1, 10)), {}

    def grab(q, k, v):
        got.update(att=attn.logits(q, k, 0, 10), plain=(q @ k.transpose(-2, -1)).float() / math.sqrt(q.size(-1)),
                   r=attn._mix.clone())
        return attn.attend(q, k, v)
    mdl(x, attend=lambda layer, q, k, v: grab(q, k, v))
    att, plain, r = got['att'][0, 0], got['plain'][0, 0], got['r'][0, 0]
    P = attn.rel_profiles.detach()
    for i in range(10):
        for j in range(10):
            if j > i:
                assert att[i, j] == float('-inf')
            elif i - j >= 4:
                assert att[i, j] == plain[i, j], (i, j)  # exactly: a zero bias
            else:
                assert att[i, j].item() == pytest.approx((plain[i, j] + r[i] @ P[:, i - j]).item(), abs=1e-5)
    # by hand: K = 2 profiles over R = 3 distances, a query at 5 with r = (1, -2), and one at 1 (keys 0..5)
    prof = torch.tensor([[1.0, 2.0, 3.0], [0.5, 0.25, -1.0]])
    b = profile_bias(torch.tensor([[[[1.0, -2.0], [2.0, 1.0]]]]), prof, torch.tensor([5, 1]), 6)
    assert b[0, 0, 0].tolist() == [0.0, 0.0, 0.0, 5.0, 1.5, 0.0]  # distances 5, 4, 3 | 2, 1, 0: 3 + 2, 2 - 0.5, 0
    assert b[0, 0, 1].tolist() == [4.25, 2.5] + [float('-inf')] * 4  # distance 1: 4 + 0.25, 0: 2 + 0.5; then future
    w = profile_bias(torch.tensor([[[[1.0, -2.0]]]]), prof, torch.tensor([5]), 6, window=2)  # the window's mask in it
    assert w[0, 0, 0].tolist() == [float('-inf')] * 4 + [1.5, 0.0]


def test_the_short_convolution_is_causal_and_reaches_three_tokens_back():
    """short_conv by hand (taps (1, 2, 3, 4) on one channel: (u_t + u_t + 2 u_{t-1} + 3 u_{t-2} + 4 u_{t-3}) / sqrt 5);
    changing token 6 changes outputs 6..9 only; and in the model no earlier logit moves."""
    u = torch.arange(1.0, 9.0).view(1, 8, 1)
    out = short_conv(u, torch.tensor([[1.0], [2.0], [3.0], [4.0]]))[0, :, 0] * math.sqrt(5)
    assert out.tolist() == pytest.approx([2, 4 + 2, 6 + 4 + 3, 8 + 6 + 6 + 4, 10 + 8 + 9 + 8, 12 + 10 + 12 + 12,
                                          14 + 12 + 15 + 16, 16 + 14 + 18 + 20])
    u = torch.randn(2, 12, 6)
    taps = torch.randn(4, 6)
    moved = u.clone()
    moved[:, 6] += 1.0
    diff = (short_conv(moved, taps) - short_conv(u, taps)).abs().amax(dim=(0, 2))
    assert (diff[:6] == 0).all() and (diff[6:10] > 0).all() and (diff[10:] == 0).all()
    mdl = make(layers='nope:w=4,nope')
    x = torch.randint(0, V, (2, 20))
    y = x.clone()
    y[:, 11] = (y[:, 11] + 1) % V
    a, b = mdl(x)[0], mdl(y)[0]
    assert torch.equal(a[:, :11], b[:, :11]) and (a[:, 11:] - b[:, 11:]).abs().max() > 1e-4


@pytest.mark.parametrize('layers, n_kv_head', [(None, None), ('3*nope:w=5,nope', 1)])
def test_kv_cache_is_exact_and_cached_decoding_agrees(layers, n_kv_head):
    """Non-init parameters: the cache (feeding back the last 3 tokens for the convolutions, the layer's attend at
    the new queries' positions) equals a full forward, in steps of 1, 2 and 34 tokens past the reach, the window and
    L, as forward(at=) does; greedy and sampled generation equal model.generate."""
    from lab.kv_cache import KVCache, blocker, generate
    mdl = make(layers, n_kv_head=n_kv_head, n_layer=4)
    assert blocker(mdl) is None and InklingAttention.lookback == 3
    x = torch.randint(0, V, (2, 75))
    full = mdl(x)[0]
    cache = KVCache()
    steps = [(0, 2), (2, 3), (3, 5), (5, 40), (40, 41), (41, 75)]
    got = torch.cat([cache.forward(mdl, x[:, a:b]) for a, b in steps], 1)
    assert (got - full).abs().max() < 1e-4
    at = torch.tensor([[0, 9, 74], [3, 40, 41]])  # forward(at=): the last layer runs only these queries
    assert (mdl(x, at=at)[0] - full.gather(1, at[..., None].expand(-1, -1, V))).abs().max() < 1e-5
    prompt = x[:, :5]
    assert torch.equal(generate(mdl, prompt, 30, top_k=1), mdl.generate(prompt, 30, top_k=1))
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(generate(mdl, prompt, 20, generator=g1), mdl.generate(prompt, 20, generator=g2))


def test_the_crop_and_the_diagnostics_take_the_per_query_sink():
    """The sliding crop at w >= T is the model itself (its scores and its per-query sink through lab.attention's
    chunked_attention, in chunks of 7); the attention entropy equals the direct one over [scores + bias, sink]."""
    from lab.crop import window_attention
    from lab.measure.diagnostics import attention_entropy
    mdl = make(layers='nope:w=6,nope')
    x = torch.randint(0, V, (2, 20))
    with torch.no_grad():
        assert (mdl(x, attend=window_attention(mdl, 20, chunk=7))[0] - mdl(x)[0]).abs().max() < 1e-5
        ent = attention_entropy(mdl, x, chunk=7)
    attn, got = mdl.transformer.h[1].attn, {}

    def grab(layer, q, k, v):
        if layer == 1:
            got['p'] = ink.sink_softmax(attn.logits(q, k, 0, 20), attn.sink)
        return mdl.transformer.h[layer].attn.attend(q, k, v)
    with torch.no_grad():
        mdl(x, attend=grab)
    p = got['p']
    assert (p.sum(-1) < 1 - 1e-3).any()  # the sink takes a share
    assert (ent[1] - (-(p * p.clamp_min(1e-30).log()).sum(-1))).abs().max() < 1e-4


def test_a_training_step_reaches_every_new_parameter():
    """Every parameter of every layer gets a gradient (the bank at every distance, the gains, the taps, the sink's
    projection), and an AdamW step (GPT's groups: the gains undecayed) moves them all."""
    mdl = make(layers='nope:w=8,nope', scramble=False).train()
    x = torch.randint(0, V, (4, 16))
    mdl(x, x)[1].backward()
    for name, p in mdl.named_parameters():
        assert p.grad is not None and (p.grad != 0).any(), name
    reached = [(b.attn.rel_profiles.grad != 0).all(dim=0) for b in mdl.transformer.h]
    assert reached[0].all() and reached[1][:16].all() and not reached[1][16:].any()  # R = 8; the full layer's
    # R = 64 > T = 16: only the distances a query of 16 tokens reaches get a gradient
    opt = mdl.configure_optimizers(0.1, 1e-2, (0.9, 0.99), 'cpu')
    undecayed = {id(p) for p in opt.param_groups[1]['params']}
    assert all(id(b.attn.rel_scale) in undecayed for b in mdl.transformer.h)
    before = {n: p.detach().clone() for n, p in mdl.named_parameters()}
    opt.step()
    assert all(not torch.equal(before[n], p) for n, p in mdl.named_parameters())


def test_init_sizes_and_the_default_model_untouched():
    """As shipped: s = 1, bank (16, R) with R = the window (or 64 in a full layer), taps (4, kv_dim); the plain
    NoPE model's parameters plus these; the default config is still causal."""
    mdl = make(layers='nope:w=8,nope', scramble=False, n_kv_head=1)
    a0, a1 = (b.attn for b in mdl.transformer.h)
    assert type(a0) is InklingAttention and a0.reach == 8 and a1.reach == 64
    assert torch.equal(a0.rel_scale, torch.ones(32)) and a0.rel_profiles.shape == (16, 8)
    assert a0.k_taps.shape == (4, 16) and 0.01 < a0.rel_profiles.std().item() < 0.03
    none = GPT(GPTConfig(block_size=16, vocab_size=V, n_layer=2, n_head=2, n_kv_head=1, n_embd=32, pos_emb='none'))
    extra = sum(p.numel() for p in mdl.parameters()) - sum(p.numel() for p in none.parameters())
    per = 32 * 32 + 32 + 32 * 2 + 2 * 4 * 16  # W_r, s, W_z, the taps
    assert extra == 2 * per + 16 * 8 + 16 * 64
    assert GPTConfig().attention_class == 'causal'


def test_trains_and_reloads(char_data, tmp_path):
    """A tiny run of train.py (the miniature's pattern: windowed layers and a full one): the loss falls and the
    checkpoint reloads into the same logits, 3 x L long."""
    import train
    from conftest import tiny_cfg
    from data.common import load_meta
    from data.checkpoints import load_checkpoint, model_from_checkpoint
    torch.manual_seed(0)
    mdl = GPT(GPTConfig(block_size=32, vocab_size=load_meta(char_data)['vocab_size'], n_layer=2, n_head=2, n_embd=64,
                        attention='inkling', layers='nope:w=16,nope'))
    run = tmp_path / 'inkling'
    train.train(tiny_cfg(char_data, run, attention='inkling', layers='nope:w=16,nope', max_iters=30,
                         eval_interval=15), model=mdl)
    log = [r['val_loss'] for r in load_checkpoint(str(run))['log']]
    assert len(log) == 3 and log[-1] < log[0] - 0.5, log
    again = model_from_checkpoint(torch.load(run / 'ckpt.pt', map_location='cpu', weights_only=True)).eval()
    x = torch.randint(0, mdl.config.vocab_size, (2, 96))
    assert type(again.transformer.h[0].attn) is InklingAttention and torch.equal(again(x)[0], mdl.eval()(x)[0])


@pytest.mark.parametrize('case, fix', [
    ('rope', "use pos_emb='none' or nope layers only (layers='3*nope:w=64,nope')"),
    ('rope layer', "gives this layer RoPE"),
    ('sinusoidal', "an absolute embedding; use pos_emb='none'"),
    ('position ids', "run without position ids"),
    ('outside a forward', "call its attend or logits inside the layer's forward"),
    ('queries without positions', "pass at= (the KV cache does)")])
def test_refusals_are_one_line_naming_the_fix(case, fix):
    cfg = dict(block_size=16, vocab_size=V, n_layer=2, n_head=2, n_embd=32, attention='inkling')
    mdl = make(layers='nope:w=4,nope')
    q = torch.zeros(1, 2, 5, 16)
    cases = {'rope': lambda: GPT(GPTConfig(**cfg)),
             'rope layer': lambda: GPT(GPTConfig(**cfg, layers='nope:w=4,rope')),
             'sinusoidal': lambda: GPT(GPTConfig(**cfg, pos_emb='sinusoidal')),
             'position ids': lambda: mdl(torch.zeros(1, 8, dtype=torch.long), pos=torch.arange(8)),
             'outside a forward': lambda: mdl.transformer.h[0].attn.attend(q, q, q),
             'queries without positions': lambda: mdl(torch.zeros(1, 5, dtype=torch.long), attend=lambda i, q, k, v:
                                                      mdl.transformer.h[i].attn.attend(q[:, :, -1:], k, v))}
    with pytest.raises(ValueError) as e:
        cases[case]()
    assert fix in str(e.value) and '\n' not in str(e.value), str(e.value)

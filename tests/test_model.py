"""model.py: shapes, per-token loss, running past the training length, switching RoPE scaling, RoPE tables off the
hot path, the attention seams (qkv/logits/attend), attention entropy (lab/measure/diagnostics.py), smeared keys
(lab/smeared_keys.py, attention='smear_keys')."""
import math

import pytest
import torch
import torch.nn.functional as F

import lab.smeared_keys  # noqa: F401  registers attention='smear_keys'
import model as model_mod
import rope
import rope_config
from lab.measure.diagnostics import attention_entropy
from model import GPT, GPTConfig, sinusoidal_table
from data.checkpoints import load_checkpoint, model_args, model_from_checkpoint
from lab.attention import chunked_attention

V = 50


def make(pos_emb='rope', **kw):
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=16, vocab_size=V, n_layer=2, n_head=2, n_embd=32, pos_emb=pos_emb, **kw)).eval()


@pytest.mark.parametrize('pos_emb', ['rope', 'sinusoidal', 'learned', 'none'])
def test_shapes_and_per_token_loss(pos_emb):
    m = make(pos_emb)
    x, y = torch.randint(0, V, (3, 16)), torch.randint(0, V, (3, 16))
    logits, loss = m(x, y)
    assert logits.shape == (3, 16, V) and loss.shape == ()
    _, per_tok = m(x, y, reduction='none')
    assert per_tok.shape == (3, 16)
    assert torch.allclose(per_tok.mean(), loss, atol=1e-6)
    # per-token loss is the NLL of each target under the logits
    ref = -torch.log_softmax(logits, -1).gather(-1, y[..., None])[..., 0]
    assert torch.allclose(per_tok, ref, atol=1e-5)
    assert m(x)[1] is None
    # an untrained model predicts about uniformly: loss near ln(V)
    assert abs(loss.item() - math.log(V)) < 0.3


def test_rope_runs_at_4x_training_length_and_learned_refuses():
    x = torch.randint(0, V, (1, 64))  # 4 x block_size
    for pe in ('rope', 'sinusoidal', 'none'):
        assert make(pe)(x)[0].shape == (1, 64, V)
    with pytest.raises(ValueError, match='learned position table'):
        make('learned')(x)


def test_causal():
    """Changing a later token never changes earlier logits."""
    m = make()
    x = torch.randint(0, V, (1, 24))
    x2 = x.clone()
    x2[0, 15] = (x2[0, 15] + 1) % V
    a, b = m(x)[0], m(x2)[0]
    assert torch.allclose(a[:, :15], b[:, :15], atol=1e-6) and not torch.allclose(a[:, 15:], b[:, 15:])


def test_set_rope_scaling_touches_no_weight_and_changes_outputs():
    m = make()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    x = torch.randint(0, V, (2, 48))
    plain = m(x)[0]
    m.set_rope_scaling({'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 16})
    scaled = m(x)[0]
    after = m.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert not any('inv_freq' in k or 'cos' in k for k in after)  # rope tables are not weights
    assert (plain - scaled).abs().max() > 1e-5  # small: an untrained model attends almost uniformly
    m.set_rope_scaling(None)
    assert torch.allclose(m(x)[0], plain)
    with pytest.raises(ValueError, match='rope_type'):
        m.set_rope_scaling({'rope_type': 'bogus', 'factor': 2.0})
    with pytest.raises(ValueError, match='pos_emb'):
        make('learned').set_rope_scaling({'rope_type': 'linear', 'factor': 2.0})


def test_linear_scaling_equals_plain_at_divided_positions():
    """PI through the model: with linear s = 4, a token at position 4m is rotated exactly like a token at m in the
    plain model (theta/4 * 4m = theta * m); with s = 1 nothing changes."""
    m = make()
    with torch.no_grad():  # sharper attention, so that positions matter in the logits
        for block in m.transformer.h:
            block.attn.c_attn.weight.mul_(10)
    x = torch.randint(0, V, (1, 40))
    plain = m(x)[0]
    m.set_rope_scaling({'rope_type': 'linear', 'factor': 4.0})
    pi = m(x, pos=4 * torch.arange(40))[0]
    assert torch.allclose(pi, plain, atol=1e-5)
    assert not torch.allclose(m(x)[0], plain, atol=1e-3)  # at the ordinary positions PI does change the logits
    m.set_rope_scaling({'rope_type': 'linear', 'factor': 1.0})
    assert torch.allclose(m(x)[0], plain, atol=1e-6)


def test_dynamic_scaling_is_recomputed_per_length():
    """Dynamic NTK: a short input after a long one gets plain RoPE again (no stale base)."""
    m = make()
    short = torch.randint(0, V, (1, 12))
    plain_short = m(short)[0]
    m.set_rope_scaling({'rope_type': 'dynamic', 'factor': 1.0, 'original_max_position_embeddings': 16})
    m(torch.randint(0, V, (1, 64)))  # a long forward first
    assert torch.allclose(m(short)[0], plain_short, atol=1e-6)


def scaling(rope_type, L=16):
    """A valid rope_scaling of each type: static types at s = 4, dynamic ones at factor 1 (plain up to L)."""
    if rope_type == 'default':
        return None
    if rope_type == 'longrope':  # head_dim 16 (make()): 8 pairs; plain up to L, a PI-like ramp past it
        return {'rope_type': 'longrope', 'factor': 4.0, 'original_max_position_embeddings': L,
                'short_factor': [1.0] * 8, 'long_factor': [1.0, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 4.0]}
    return {'rope_type': rope_type, 'factor': 1.0 if rope_type in rope_config.DYNAMIC_TYPES else 4.0,
            'original_max_position_embeddings': L}


def reference_logits(m, x):
    """The model's blocks fed cos/sin built straight from rope_config.rope_inv_freq / rope.rope_cos_sin for this
    length (what GPT.forward computed per call before the tables moved into a buffer)."""
    c, T = m.config, x.size(1)
    inv, af = rope_config.rope_inv_freq(m.head_dim, c.rope_base, c.rope_scaling,
                                        seq_len=T if rope_config.is_dynamic(c.rope_scaling) else None)
    tables = rope.rope_cos_sin(inv, torch.arange(T), af)
    h = m.transformer.wte(x)
    for block in m.transformer.h:
        h = block(h, tables)
    return m.lm_head(m.transformer.ln_f(h))


@pytest.mark.parametrize('rope_type', rope_config.ROPE_TYPES)
def test_stored_rope_tables_are_bit_identical_to_direct_construction(rope_type):
    """Built in the config (constructor) or switched on (set_rope_scaling): the same bits as computing the tables
    from the config at every length; dynamic types cross L = 16 (plain below, scaled above)."""
    built = make(rope_scaling=scaling(rope_type))
    switched = make()
    switched.set_rope_scaling(scaling(rope_type))
    for T in (5, 16, 17, 40):
        x = torch.randint(0, V, (2, T))
        ref = reference_logits(built, x)
        assert torch.equal(built(x)[0], ref) and torch.equal(switched(x)[0], ref)


def test_rope_buffer_is_not_saved_follows_the_device_and_stays_float32():
    m = make()
    keys = set(m.state_dict())
    assert not any('rope' in k for k in keys) and 'rope_inv_freq' in dict(m.named_buffers())
    m.set_rope_scaling(scaling('yarn'))
    assert set(m.state_dict()) == keys  # the same checkpoint format for every scaling
    inv = m.rope_inv_freq.clone()
    m.to(torch.bfloat16)  # a cast must not round theta: rebuilt in float32 with the same values
    assert m.rope_inv_freq.dtype == torch.float32 and torch.equal(m.rope_inv_freq, inv)
    assert m.to('meta').rope_inv_freq.device.type == 'meta'  # it moves with the model


def test_static_forward_does_no_rope_config_work(monkeypatch):
    """Static types never call rope_config.rope_inv_freq (validation, float64 host math) in a forward; dynamic types
    call it once per forward, for the forward's length."""
    m = make(rope_scaling=scaling('yarn'))
    d = make(rope_scaling=scaling('dynamic'))
    calls = []
    monkeypatch.setattr(model_mod, 'rope_inv_freq', lambda *a, **kw: calls.append(kw['seq_len']) or
                        rope_config.rope_inv_freq(*a, **kw))
    m(torch.randint(0, V, (1, 40)))
    assert calls == []
    d(torch.randint(0, V, (1, 40)))
    assert calls == [40]


@pytest.mark.parametrize('rope_type', ['yarn', 'dynamic'])
def test_forward_has_no_graph_break_under_compile(rope_type):
    """torch.compile captures the whole forward as one graph. Static types: the tables are the buffer times
    positions. Dynamic types: dynamo traces rope_inv_freq's host math on the (symbolic) length, so no break
    either; a new length costs a guard failure and one recompile with T dynamic, not a graph break."""
    torch._dynamo.reset()
    out = torch._dynamo.explain(make(rope_scaling=scaling(rope_type)))(torch.randint(0, V, (2, 24)))
    assert out.graph_break_count == 0 and out.graph_count == 1


def peaky(m, scale=10.0):
    """Scale the q/k/v projections so attention logits are of order 1: at init (std 0.02) q.k is ~1e-3, attention is
    nearly uniform and positions barely move the logits, which would let a position test pass by accident."""
    with torch.no_grad():
        for block in m.transformer.h:
            block.attn.c_attn.weight.mul_(scale)
    return m


@pytest.mark.parametrize('pos_emb, rope_type', [('rope', 'default'), ('rope', 'yarn'), ('rope', 'dynamic'),
                                                ('sinusoidal', None), ('learned', None), ('none', None)])
def test_explicit_positions_arange_equal_the_default(pos_emb, rope_type):
    m = peaky(make(pos_emb, rope_scaling=scaling(rope_type) if rope_type else None))
    x = torch.randint(0, V, (2, 16))
    ref = m(x)[0]
    assert torch.equal(m(x, pos=torch.arange(16))[0], ref)
    assert torch.equal(m(x, pos=torch.arange(16).expand(2, 16))[0], ref)  # per-row ids (B, T)


def test_rope_is_relative_sinusoidal_is_not():
    """Shifting every position by a constant leaves RoPE logits unchanged (q.k depends on m - n only), per row
    too; spreading them out (PoSE-style skips) does change them; an absolute encoding changes with any shift."""
    m = peaky(make())
    x = torch.randint(0, V, (2, 24))
    ref, p = m(x)[0], torch.arange(24)
    for shift in (7, 1000):
        assert torch.allclose(m(x, pos=p + shift)[0], ref, atol=1e-5, rtol=0)
    assert torch.allclose(m(x, pos=torch.stack([p, p + 300]))[0], ref, atol=1e-5, rtol=0)
    skipped = torch.cat([p[:12], p[12:] + 40])  # two chunks 40 positions apart
    assert (m(x, pos=skipped)[0][:, 12:] - ref[:, 12:]).abs().max() > 1e-2
    assert torch.equal(m(x, pos=skipped)[0][:, :12], ref[:, :12])  # causal: the first chunk is untouched
    s = peaky(make('sinusoidal'))
    assert (s(x, pos=p + 7)[0] - s(x)[0]).abs().max() > 1e-3


def test_dynamic_type_scales_for_the_span_of_explicit_positions():
    """Dynamic NTK (factor 1, L = 16) at positions 32..39 spans 40 tokens: the scale of s = 40/16, the same
    frequencies as static NTK at factor 2.5 (which is relative, so its own positions do not matter)."""
    dyn = peaky(make(rope_scaling=scaling('dynamic')))
    ntk = peaky(make(rope_scaling={'rope_type': 'ntk', 'factor': 2.5}))
    x = torch.randint(0, V, (1, 8))
    far = dyn(x, pos=torch.arange(32, 40))[0]
    assert torch.allclose(far, ntk(x)[0], atol=1e-5, rtol=0)
    assert (far - dyn(x)[0]).abs().max() > 1e-3  # at positions 0..7 it is plain RoPE


def test_bad_positions():
    x = torch.randint(0, V, (2, 10))
    with pytest.raises(ValueError, match=r'pos must be an integer tensor of shape \(10,\) or \(2, 10\)'):
        make()(x, pos=torch.arange(10.0))
    with pytest.raises(ValueError, match='pos must be'):
        make()(x, pos=torch.arange(9))
    with pytest.raises(ValueError, match='pos must be'):
        make()(x, pos=list(range(10)))
    learned = make('learned')
    with pytest.raises(ValueError, match=r'positions reach 19, outside the learned position table \(0\.\.15\)'):
        learned(x, pos=torch.arange(10, 20))
    with pytest.raises(ValueError, match='positions reach -1, outside'):
        learned(x, pos=torch.arange(-1, 9))
    inside = learned(x, pos=torch.arange(6, 16))[0][:, 0]  # the first token, alone, at position 6
    assert torch.allclose(inside, learned(x[:, :1], pos=torch.tensor([6]))[0][:, 0], atol=1e-6)


def test_attention_entropy_matches_direct_computation():
    m = make()
    x = torch.randint(0, V, (2, 20))
    ent = attention_entropy(m, x, chunk=7)  # chunks that do not divide T
    assert ent.shape == (2, 2, 2, 20)
    # direct: first layer's probabilities from the full causal softmax
    blk = m.transformer.h[0]
    h = blk.ln_1(m.transformer.wte(x))
    q, k, v = blk.attn.qkv(h, m.rope_tables(20))
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    att = att.masked_fill(torch.triu(torch.ones(20, 20, dtype=torch.bool), 1), float('-inf')).softmax(-1)
    direct = -(att * torch.log(att.clamp_min(1e-30))).sum(-1)
    assert torch.allclose(ent[0], direct, atol=1e-5)
    assert torch.allclose(ent[:, :, :, 0], torch.zeros(2, 2, 2), atol=1e-6)  # the first query sees one key
    assert (ent[:, :, :, 1:] <= torch.log(torch.arange(2, 21).float()) + 1e-5).all()  # at most ln(#keys)
    # the manual path (the layer's score function, chunked) gives SDPA's output
    y = chunked_attention(q, k, v, lambda s, e: blk.attn.logits(q, k, s, e), 7)
    assert torch.allclose(y, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5)
    assert torch.allclose(blk.attn.attend(q, k, v), y, atol=1e-5)  # the layer's own attention: SDPA
    # the logits seam: queries s..e-1 against keys 0..e-1, scaled, -inf above the diagonal
    raw = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    lg = blk.attn.logits(q, k, 5, 12)
    assert lg.shape == (2, 2, 7, 12) and lg.dtype == torch.float32
    assert torch.equal(lg.isinf(), torch.triu(torch.ones(20, 20, dtype=torch.bool), 1)[5:12, :12].expand_as(lg))
    assert torch.allclose(lg.masked_fill(lg.isinf(), 0), raw[:, :, 5:12, :12].masked_fill(lg.isinf(), 0), atol=1e-6)


def test_yarn_temperature_sharpens_attention():
    """mscale multiplies every logit by mscale^2, so attention gets sharper (lower entropy)."""
    m = make()
    x = torch.randint(0, V, (1, 64))
    sc = {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 16}
    m.set_rope_scaling(dict(sc, attention_factor=1.0))
    flat = attention_entropy(m, x)
    m.set_rope_scaling(sc)  # default mscale = 0.1 ln 4 + 1
    sharp = attention_entropy(m, x)
    assert sharp[0, :, :, 8:].mean() < flat[0, :, :, 8:].mean()


def sdpa_inputs_and_output(m, x, layer=0):
    """Run m on x and capture, in one layer, the (q, k, v) that CausalSelfAttention.qkv returns (rotated, as SDPA
    gets them) and SDPA's output (the input of c_proj, heads merged)."""
    attn, got = m.transformer.h[layer].attn, {}
    qkv = attn.qkv
    attn.qkv = lambda h, rope: got.setdefault('qkv', qkv(h, rope))
    hook = attn.c_proj.register_forward_pre_hook(lambda mod, args: got.setdefault('y', args[0]))
    try:
        m(x)
    finally:
        hook.remove()
        del attn.qkv
    return (*got['qkv'], got['y'])


def test_yarn_temperature_is_applied_exactly_once_on_the_sdpa_path():
    """Issue 10: YaRN multiplies cos and sin by mscale, so the model's q.k logits are mscale^2 times those of the
    same frequencies with attention_factor=1, and SDPA turns exactly those logits (/sqrt(hd), causal) into its
    output. Applying the temperature twice (say, also through SDPA's scale=) gives mscale^4 and fails here."""
    sc = {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 16}
    mscale = 0.1 * math.log(4.0) + 1  # 1.1386
    m = peaky(make())
    x = torch.randint(0, V, (2, 40))
    m.set_rope_scaling(sc)
    q, k, v, y = sdpa_inputs_and_output(m, x)  # layer 0: its input does not depend on the scaling
    m.set_rope_scaling(dict(sc, attention_factor=1.0))
    q1, k1, v1, _ = sdpa_inputs_and_output(m, x)
    logits, flat = q @ k.transpose(-2, -1), q1 @ k1.transpose(-2, -1)
    assert torch.allclose(logits, mscale ** 2 * flat, rtol=1e-5, atol=1e-5) and torch.equal(v, v1)
    assert (logits - flat).abs().max() > 0.1  # the temperature is really there
    causal = torch.triu(torch.ones(40, 40, dtype=torch.bool), 1)

    def attend(z):
        return (z / math.sqrt(q.size(-1))).masked_fill(causal, float('-inf')).softmax(-1) @ v1
    merged = lambda t: t.transpose(1, 2).reshape(2, 40, -1)
    assert torch.allclose(y, merged(attend(mscale ** 2 * flat)), atol=1e-5)
    assert (y - merged(attend(mscale ** 4 * flat))).abs().max() > 1e-3  # what a double application would give


def test_sinusoidal_table():
    pe = sinusoidal_table(5, 8)
    assert torch.allclose(pe[1, 0], torch.tensor(math.sin(1.0))) and torch.allclose(pe[1, 1], torch.tensor(math.cos(1.0)))
    assert torch.allclose(pe[3, 2], torch.tensor(math.sin(3 / 10000 ** (2 / 8))))
    assert torch.equal(pe[0, 1::2], torch.ones(4))


def test_checkpoint_roundtrip(tmp_path):
    m = make(rope_scaling={'rope_type': 'ntk', 'factor': 2.0})
    path = tmp_path / 'ckpt.pt'
    torch.save({'model': m.state_dict(), 'model_args': model_args(m)}, path)
    m2 = model_from_checkpoint(load_checkpoint(str(tmp_path))).eval()
    assert m2.config == m.config
    x = torch.randint(0, V, (1, 30))
    assert torch.equal(m(x)[0], m2(x)[0])


def test_bad_config():
    with pytest.raises(ValueError, match='pos_emb'):
        GPTConfig(pos_emb='xpos')
    with pytest.raises(ValueError, match='n_head'):
        GPTConfig(n_embd=30, n_head=4)
    with pytest.raises(ValueError, match='factor'):
        GPTConfig(rope_scaling={'rope_type': 'linear', 'factor': 0.5})


def test_longrope_model_switches_per_forward_length_and_checks_list_length():
    """head_dim 16 (8 pairs), L = 16: short factors 1 (plain) up to 16 tokens, long factors 4 (PI's curve) past it."""
    lr = {'rope_type': 'longrope', 'factor': 4.0, 'original_max_position_embeddings': 16, 'attention_factor': 1.0,
          'short_factor': [1.0] * 8, 'long_factor': [4.0] * 8}
    m, plain, pi = make(rope_scaling=lr), make(), make(rope_scaling={'rope_type': 'linear', 'factor': 4.0})
    with torch.no_grad():  # the same weights in all three (seed 0); sharper attention, so positions show
        for model in (m, plain, pi):
            for block in model.transformer.h:
                block.attn.c_attn.weight.mul_(20)
    x = torch.randint(0, V, (2, 40))
    assert torch.allclose(m(x)[0], pi(x)[0], atol=1e-6) and not torch.allclose(m(x)[0], plain(x)[0], atol=1e-3)
    assert torch.allclose(m(x[:, :16])[0], plain(x[:, :16])[0], atol=1e-6)  # l <= L: the short factors again
    with pytest.raises(ValueError, match='long_factor.*7 values.*8 pairs'):
        make(rope_scaling=dict(lr, long_factor=[4.0] * 7))  # checked when the model is built, not mid-run
    with pytest.raises(ValueError, match='short_factor.*16 values.*8 pairs'):
        m.set_rope_scaling(dict(lr, short_factor=[1.0] * 16))
    assert m.config.rope_scaling['short_factor'] == [1.0] * 8  # a refused switch leaves the model as it was


def test_smear_keys_option():
    """Off by default (no new weight, so older checkpoints load unchanged); on (attention='smear_keys', registered by
    lab/smeared_keys.py), each head's key at t mixes in the key of t-1 with a learned per-head gate, before RoPE, and the
    model stays causal. The gate sits at the state-dict key it always had, and a checkpoint of the old format
    (model_args smear_keys=True, position_map=None) loads as attention='smear_keys'."""
    from lab.smeared_keys import SmearedKeyAttention
    assert not any('smear' in k for k in make().state_dict())
    m = make(attention='smear_keys')
    assert all(isinstance(b.attn, SmearedKeyAttention) for b in m.transformer.h)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items() if 'smear' in k] == \
        [(f'transformer.h.{i}.attn.smear', (2, 1, 1)) for i in range(2)]
    x = torch.randint(0, V, (2, 16))
    attn, h = m.transformer.h[0].attn, torch.randn(2, 16, 32)
    with torch.no_grad():
        attn.smear.fill_(-30.0)  # gate ~0: plain keys
        k0 = attn.qkv(h, None)[1]
        attn.smear.fill_(30.0)   # gate ~1: each key is the previous position's (zero at position 0)
        k1 = attn.qkv(h, None)[1]
    assert torch.allclose(k1[:, :, 1:], k0[:, :, :-1], atol=1e-6) and torch.allclose(k1[:, :, 0], torch.zeros(1), atol=1e-6)
    m = make(attention='smear_keys')
    x2 = x.clone()
    x2[:, 10] = (x[:, 10] + 1) % V
    assert torch.equal(m(x)[0][:, :10], m(x2)[0][:, :10]) and not torch.equal(m(x)[0][:, 11], m(x2)[0][:, 11])
    assert model_from_checkpoint({'model': m.state_dict(), 'model_args': model_args(m)}).config.attention == 'smear_keys'
    old_args = {k: v for k, v in model_args(m).items() if k != 'attention'}
    for smear, attention in ((True, 'smear_keys'), (False, 'causal')):
        state = m.state_dict() if smear else make().state_dict()
        old = model_from_checkpoint({'model': state, 'model_args': dict(old_args, smear_keys=smear, position_map=None)})
        assert old.config.attention == attention
        if smear:
            assert torch.equal(old.eval()(x)[0], m(x)[0])
    with pytest.raises(ValueError, match="attention='bogus' is unknown"):
        GPTConfig(attention='bogus')

"""model.py: shapes, per-token loss, running past the training length, switching RoPE scaling, attention entropy."""
import math

import pytest
import torch
import torch.nn.functional as F

from model import GPT, GPTConfig, sinusoidal_table, load_checkpoint, model_from_checkpoint, model_args

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
    """PI through the model: scaling positions by 1/s is what the model sees. With s = 1 nothing changes."""
    m = make()
    x = torch.randint(0, V, (1, 40))
    plain = m(x)[0]
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


def test_attention_entropy_matches_direct_computation():
    m = make()
    x = torch.randint(0, V, (2, 20))
    ent = m.attention_entropy(x, chunk_size=7)  # chunks that do not divide T
    assert ent.shape == (2, 2, 2, 20)
    # direct: first layer's probabilities from the full causal softmax
    blk = m.transformer.h[0]
    h = blk.ln_1(m.transformer.wte(x))
    q, k, v = blk.attn.qkv(h, m.rope_tables(20, x.device))
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    att = att.masked_fill(torch.triu(torch.ones(20, 20, dtype=torch.bool), 1), float('-inf')).softmax(-1)
    direct = -(att * torch.log(att.clamp_min(1e-30))).sum(-1)
    assert torch.allclose(ent[0], direct, atol=1e-5)
    assert torch.allclose(ent[:, :, :, 0], torch.zeros(2, 2, 2), atol=1e-6)  # the first query sees one key
    assert (ent[:, :, :, 1:] <= torch.log(torch.arange(2, 21).float()) + 1e-5).all()  # at most ln(#keys)
    # the manual path gives SDPA's output
    y = torch.cat([p for _, p in blk.attn.attention_probs(h, m.rope_tables(20, x.device), 7)], dim=2) @ v
    assert torch.allclose(y, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5)


def test_yarn_temperature_sharpens_attention():
    """mscale multiplies every logit by mscale^2, so attention gets sharper (lower entropy)."""
    m = make()
    x = torch.randint(0, V, (1, 64))
    sc = {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 16}
    m.set_rope_scaling(dict(sc, attention_factor=1.0))
    flat = m.attention_entropy(x)
    m.set_rope_scaling(sc)  # default mscale = 0.1 ln 4 + 1
    sharp = m.attention_entropy(x)
    assert sharp[0, :, :, 8:].mean() < flat[0, :, :, 8:].mean()


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
        GPTConfig(pos_emb='alibi')
    with pytest.raises(ValueError, match='n_head'):
        GPTConfig(n_embd=30, n_head=4)
    with pytest.raises(ValueError, match='factor'):
        GPTConfig(rope_scaling={'rope_type': 'linear', 'factor': 0.5})


def test_smear_keys_option():
    """Off by default (no new weight, so older checkpoints load unchanged); on, each head's key at t mixes in the
    key of t-1 with a learned per-head gate, before RoPE, and the model stays causal."""
    assert not any('smear' in k for k in make().state_dict())
    m = make(smear_keys=True)
    assert [tuple(v.shape) for k, v in m.state_dict().items() if 'smear' in k] == [(2, 1, 1)] * 2
    x = torch.randint(0, V, (2, 16))
    attn, h = m.transformer.h[0].attn, torch.randn(2, 16, 32)
    with torch.no_grad():
        attn.smear.fill_(-30.0)  # gate ~0: plain keys
        k0 = attn.qkv(h, None)[1]
        attn.smear.fill_(30.0)   # gate ~1: each key is the previous position's (zero at position 0)
        k1 = attn.qkv(h, None)[1]
    assert torch.allclose(k1[:, :, 1:], k0[:, :, :-1], atol=1e-6) and torch.allclose(k1[:, :, 0], torch.zeros(1), atol=1e-6)
    m = make(smear_keys=True)
    x2 = x.clone()
    x2[:, 10] = (x[:, 10] + 1) % V
    assert torch.equal(m(x)[0][:, :10], m(x2)[0][:, :10]) and not torch.equal(m(x)[0][:, 11], m(x2)[0][:, 11])
    assert model_from_checkpoint({'model': m.state_dict(), 'model_args': model_args(m)}).config.smear_keys

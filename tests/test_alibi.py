"""ALiBi (pos_emb='alibi'): the head slopes, the bias against a direct construction, the chunked attention path
(lab.attention.chunked_attention over ALiBiAttention.logits, lab/alibi.py) against plain softmax attention, zero slopes = no position
encoding, causality, and a trained checkpoint through eval.py."""
import math

import pytest
import torch
import torch.nn.functional as F

import lab.alibi as alibi_mod
from lab.measure.diagnostics import attention_entropy
from model import GPT, GPTConfig
from lab.alibi import alibi_bias, alibi_slopes
from lab.attention import chunked_attention

V = 50


def query_chunk(monkeypatch, chunk):
    """The query chunk of the ALiBi path (ALiBiAttention.attend -> chunked_attention; 256 by default)."""
    whole = alibi_mod.chunked_attention
    monkeypatch.setattr(alibi_mod, 'chunked_attention',
                        lambda q, k, v, logits, _=None, dropout=0.0: whole(q, k, v, logits, chunk, dropout))


def make(pos_emb='alibi', n_head=2, **kw):
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=16, vocab_size=V, n_layer=2, n_head=n_head, n_embd=16 * n_head, pos_emb=pos_emb,
                         **kw)).eval()


@pytest.mark.parametrize('H,expected', [
    (4, [1 / 4, 1 / 16, 1 / 64, 1 / 256]),                                   # 2^(-8h/4)
    (8, [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]),     # 2^(-8h/8)
    (6, [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8]),                     # the 4 of H=4, then h = 1, 3 of H=8
    (12, [2 ** -h for h in range(1, 9)] + [2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5]),  # 8 of H=8, h=1,3,5,7 of 16
    (1, [1 / 256]),
])
def test_slopes(H, expected):
    assert torch.allclose(alibi_slopes(H), torch.tensor(expected), rtol=1e-7, atol=0)


def test_bias_equals_direct_construction():
    m = torch.tensor([0.5, 0.125, 2 ** -0.5])
    bias = alibi_bias(m, 5, 9, 9)  # queries 5..8 (a later chunk) against keys 0..8
    direct = torch.tensor([[[-m[h].item() * (i - j) if j <= i else -math.inf for j in range(9)] for i in range(5, 9)]
                           for h in range(3)], dtype=torch.float32)
    assert bias.shape == (3, 4, 9) and torch.equal(bias, direct)
    assert bias[1, 0, 5] == 0 and bias[0, 3, 0] == -4.0  # own position: no bias; 8 tokens back at slope 1/2: -4


def direct_attention(q, k, v, slopes):
    """softmax(q·k/√hd - m_h·(i - j), causal) · v with the bias from two loops."""
    T = q.size(2)
    bias = torch.tensor([[[-s * (i - j) if j <= i else -math.inf for j in range(T)] for i in range(T)]
                         for s in slopes.tolist()])
    return ((q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1)) + bias).softmax(-1) @ v


@pytest.mark.parametrize('chunk', [7, 512])
def test_attention_matches_direct_softmax(monkeypatch, chunk):
    """The chunked path (chunks that do not divide T, and one chunk) and the score function attention_entropy
    reads (CausalSelfAttention.logits) both give softmax attention with the bias added; keys past a chunk's last
    query are never needed."""
    query_chunk(monkeypatch, chunk)
    mdl = make(n_head=4)
    blk, x = mdl.transformer.h[0], torch.randint(0, V, (2, 20))
    h = blk.ln_1(mdl.transformer.wte(x))
    q, k, v = blk.attn.qkv(h, None)
    direct = direct_attention(q, k, v, blk.attn.alibi_slopes)
    assert torch.allclose(blk.attn.attend(q, k, v), direct, atol=1e-6)
    manual = torch.cat([F.pad(blk.attn.logits(q, k, s, min(s + 6, 20)).softmax(-1), (0, 20 - min(s + 6, 20)))
                        for s in range(0, 20, 6)], dim=2) @ v
    assert torch.allclose(manual, direct, atol=1e-6)
    assert torch.allclose(chunked_attention(q, k, v, lambda s, e: blk.attn.logits(q, k, s, e), 6), direct, atol=1e-6)
    # queries that are the last rows of the keys (as with a KV cache) get the same rows
    assert torch.allclose(blk.attn.logits(q, k, 17, 20).softmax(-1) @ v, direct[:, :, -3:], atol=1e-6)
    # the bias matters: without it the output differs
    assert not torch.allclose(F.scaled_dot_product_attention(q, k, v, is_causal=True), direct, atol=1e-3)


def test_zero_slopes_equal_no_position_encoding(monkeypatch):
    """The same weights with every slope 0 compute what pos_emb='none' computes: the manual (float32) attention of
    the first layer bit for bit; through SDPA to float32 rounding (a float mask and is_causal take different kernels,
    which sum in different orders)."""
    query_chunk(monkeypatch, 16)
    alibi, none = make('alibi'), make('none')
    none.load_state_dict(alibi.state_dict())  # ALiBi adds no parameter and no stored buffer
    for blk in alibi.transformer.h:
        blk.attn.alibi_slopes.zero_()
    x = torch.randint(0, V, (2, 40))
    ent_alibi, ent_none = attention_entropy(alibi, x, chunk=16), attention_entropy(none, x, chunk=16)
    assert torch.equal(ent_alibi[0], ent_none[0]) and (ent_alibi - ent_none).abs().max() < 1e-5
    assert (alibi(x)[0] - none(x)[0]).abs().max() < 1e-6
    assert (make('alibi')(x)[0] - none(x)[0]).abs().max() > 1e-3  # with its slopes, ALiBi changes the output


def test_causal_across_chunks(monkeypatch):
    """Changing a token never changes the logits before it, also when it sits in a later query chunk."""
    query_chunk(monkeypatch, 7)
    mdl = make()
    x = torch.randint(0, V, (1, 24))
    x2 = x.clone()
    x2[0, 15] = (x2[0, 15] + 1) % V
    a, b = mdl(x)[0], mdl(x2)[0]
    assert torch.equal(a[:, :15], b[:, :15]) and not torch.allclose(a[:, 15:], b[:, 15:])


def test_runs_past_training_length_and_refuses_position_ids():
    mdl = make()
    assert mdl(torch.randint(0, V, (1, 64)))[0].shape == (1, 64, V)  # 4 x block_size
    with pytest.raises(ValueError, match="ALiBi reads distances from the token order: pass none"):
        mdl(torch.randint(0, V, (1, 8)), pos=torch.arange(8))
    assert sum(p.numel() for p in mdl.parameters()) == sum(p.numel() for p in make('none').parameters())


def test_trains_and_evaluates(char_data, tmp_path):
    """A tiny ALiBi model trains with train.py and eval.py scores it past L as a base arm (entropy included)."""
    import eval as ev
    import train
    from conftest import tiny_cfg
    run = tmp_path / 'alibi'
    row = train.train(tiny_cfg(char_data, run, pos_emb='alibi', max_iters=60, eval_interval=60))
    assert row['val_loss'] < 3.0  # from ln(68) = 4.2 at the start
    s = ev.main([f'--ckpt={run}', '--eval_len=96', '--num_windows=4', '--retrieval_examples=2', '--retrieval_len=6',
                 '--retrieval_pos=2', '--entropy_windows=1', f'--out_dir={tmp_path / "eval"}', '--device=cpu',
                 '--progress=False', '--plot=False'])
    (a,) = s['arms']
    assert a['name'] == 'alibi (L=32)' and a['kind'] == 'base' and a['pos_emb'] == 'alibi' and a['rope_type'] is None
    assert list(a['buckets']) == ['0-32', '32-64', '64-96'] and all(math.isfinite(v) for v in a['buckets'].values())
    assert all(math.isfinite(v) for v in a['entropy_buckets'].values())


@pytest.mark.parametrize('attention', ['ssmax', 'sinks', 'smear_keys'])
def test_alibi_with_another_attention_class_is_refused(attention):
    """pos_emb='alibi' takes the layer's one attention class, so an SSMax / sinks / smeared-key class beside it was
    dropped without a word (the model built plain ALiBi); GPTConfig now refuses the pair, naming both."""
    import lab.smeared_keys, lab.sinks, lab.temperature  # noqa: E401,F401  register the classes
    with pytest.raises(ValueError, match=f"attention='{attention}' would be dropped"):
        GPTConfig(block_size=16, vocab_size=V, n_layer=1, n_head=2, n_embd=32, pos_emb='alibi', attention=attention)
    assert GPTConfig(block_size=16, vocab_size=V, n_layer=1, n_head=2, n_embd=32, pos_emb='alibi').attention_class == 'alibi'

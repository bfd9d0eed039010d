"""Gated attention (lab/gated.py, issue 47 item 1): the layer is the paper's G1 formula, built here by hand; a gate
held at 1 is plain attention; the gate rides on whatever the attend seam returns (a crop, a position map, the
KV cache's attention) and on the rows GPT._last_layer_at asks for (at=); --attention=gated trains, saves and reloads;
the HF export refuses it in one line. Tiny random models, one thread, a few seconds."""
import math

import pytest
import torch
import torch.nn.functional as F

import lab.gated  # noqa: F401  registers attention='gated'
from lab.crop import window_attention
from lab.kv_cache import KVCache, blocker, generate
from lab.position_maps import check_position_map, mapped_attention
from model import GPT, GPTConfig

V, T = 40, 16


def tiny(spread=20.0, **kw):
    """A random gated GPT; its gate weights x spread, so gates reach across (0, 1) token by token (not all ~0.5) and a
    gate taken from the wrong row, or dropped, shows."""
    torch.manual_seed(0)
    cfg = dict(dict(block_size=T, vocab_size=V, n_layer=2, n_head=2, n_embd=32, attention='gated'), **kw)
    m = GPT(GPTConfig(**cfg)).eval()
    with torch.no_grad():
        for block in m.transformer.h:
            block.attn.c_attn.weight.mul_(5.0)  # sharper attention: a crop or map that went wrong would show
            block.attn.c_gate.weight.mul_(spread)
    return m


def tokens(B=3, n=T, seed=1):
    return torch.randint(0, V, (B, n), generator=torch.Generator().manual_seed(seed))


def close(a, b, tol=1e-6):
    return (a - b).abs().max().item() < tol


def test_the_layer_is_the_papers_formula_by_hand():
    """o = c_proj(SDPA(q, k, v) * sigmoid(X W_g + b_g)), the gate per head and per channel: built head by head from
    c_attn's rows, softmax by hand, the gate's rows of head h on head h's channels, to 1e-6. The gate is live: the
    layer without it differs."""
    m = tiny(bias=True)
    attn = m.transformer.h[0].attn
    with torch.no_grad():
        attn.c_gate.bias.normal_(0, 1.0)
        x = torch.randn(2, T, 32, generator=torch.Generator().manual_seed(3))
        rope = m.rope_tables(T)
        got = attn(x, rope)
        q, k, v = attn.qkv(x, rope)
        hd, heads = 32 // 2, []
        for h in range(2):
            s = q[:, h] @ k[:, h].transpose(-1, -2) / math.sqrt(hd)
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float('-inf'))
            g = torch.sigmoid(x @ attn.c_gate.weight[h * hd:(h + 1) * hd].T + attn.c_gate.bias[h * hd:(h + 1) * hd])
            heads.append((F.softmax(s, -1) @ v[:, h]) * g)
        want = attn.c_proj(torch.cat(heads, -1))
        ungated = attn.c_proj(torch.cat([F.softmax((q[:, h] @ k[:, h].transpose(-1, -2) / math.sqrt(hd)).masked_fill(
            torch.ones(T, T, dtype=torch.bool).triu(1), float('-inf')), -1) @ v[:, h] for h in range(2)], -1))
    assert close(got, want)
    assert not close(got, ungated, 1e-3)


def test_a_gate_held_open_is_plain_attention_and_a_fresh_one_is_half_open():
    """Gate weights 0 and bias +40: sigmoid = 1 in float32, so the gated model is the causal model with the same
    weights, to 1e-6. A freshly initialised gate (GPT's N(0, 0.02) init, no bias) sits at ~0.5, as lab/gated.py says."""
    m = tiny(bias=True)
    with torch.no_grad():
        for block in m.transformer.h:
            block.attn.c_gate.weight.zero_()
            block.attn.c_gate.bias.fill_(40.0)
    plain = GPT(GPTConfig(**dict(vars(m.config), attention='causal'))).eval()
    state = {k: v for k, v in m.state_dict().items() if 'c_gate' not in k}
    plain.load_state_dict(state)
    x = tokens()
    assert close(m(x)[0], plain(x)[0])
    torch.manual_seed(0)
    fresh = GPT(GPTConfig(block_size=T, vocab_size=V, n_layer=2, n_head=2, n_embd=128, attention='gated'))
    g = fresh.transformer.h[0].attn.gate(fresh.transformer.h[0].ln_1(fresh.transformer.wte(x)))
    assert abs(g.mean().item() - 0.5) < 0.01 and 0.04 < g.std().item() < 0.08  # 0.5 +- 0.06 at n_embd = 128


def test_the_gate_composes_with_a_crop_and_a_position_map():
    """Through the attend seam: a sliding crop (lab/crop.py) with window >= T and ReRoPE with window >= T
    (lab/position_maps.py) give the model's own logits, gate included; a window < T changes them past it."""
    m, x = tiny(layers='rope:w=6,rope'), tokens()
    own = m(x)[0]
    for attend in (window_attention(m, T), mapped_attention(m, check_position_map({'method': 'rerope', 'window': T}))):
        assert close(m(x, attend=attend)[0], own, 1e-5)
    short = m(x, attend=window_attention(m, 4))[0]
    assert close(short[:, :4], own[:, :4], 1e-5) and not close(short[:, 4:], own[:, 4:], 1e-3)


def test_at_gates_the_rows_it_asks_for():
    """forward(at=): the last layer runs only the queries at `at` (GPT._last_layer_at), unsorted, repeated, not the
    last positions; each is gated by its own token's row: the full forward's logits at those positions."""
    m, x = tiny(), tokens()
    at = torch.tensor([[3, 0, 15, 3], [7, 8, 1, 2], [15, 14, 0, 9]])
    full = m(x)[0]
    assert close(m(x, at=at)[0], full.gather(1, at[..., None].expand(-1, -1, V)), 1e-5)


@pytest.mark.parametrize('kw', [{}, dict(layers='rope:w=5,nope', n_kv_head=1), dict(attention='smear_keys_gated')])
def test_cached_greedy_generation_is_uncached(kw):
    """The KV cache covers a gated model (its attention is causal attention's, the gate comes after the seam): step
    logits equal the full forward's, and greedy decoding with the cache (sample.py's path) is model.generate's; on
    smeared keys too (the copy mix's gated base: the cache feeds the previous token again, the gate takes its row)."""
    m = tiny(**kw)
    assert blocker(m) is None
    prompt, cache = tokens(B=2, n=5), KVCache()
    seq = torch.cat((prompt, tokens(B=2, n=6, seed=2)), 1)
    steps = [cache.forward(m, prompt)] + [cache.forward(m, seq[:, i:i + 1]) for i in range(5, 11)]
    assert close(torch.cat(steps, 1), m(seq)[0], 1e-5)
    assert torch.equal(generate(m, prompt, 8, top_k=1), m.generate(prompt, 8, top_k=1))


def test_trains_saves_reloads_and_the_export_refuses_it(char_data, tmp_path, monkeypatch):
    """python train.py --attention=gated trains (2 steps; the gate's weights move), its checkpoint reloads as a gated
    model with the trained model's logits, and lab.hf.export refuses it in one line naming 'gated'."""
    import train
    from conftest import TINY
    from data.checkpoints import load_checkpoint, model_from_checkpoint
    from lab.hf import export as hf_export
    built = {}

    def build_model(*a, **k):
        model, lineage = real(*a, **k)
        built.update(model=model, gate=model.transformer.h[0].attn.c_gate.weight.detach().clone())
        return model, lineage
    real = train.build_model
    monkeypatch.setattr(train, 'build_model', build_model)
    out = tmp_path / 'gated'
    cfg = dict(TINY, dataset=char_data, out_dir=str(out), attention='gated', max_iters=2, eval_interval=2, eval_iters=1)
    train.main([f'--{k}={v}' for k, v in cfg.items()])
    model = built['model'].eval()
    assert not torch.equal(model.transformer.h[0].attn.c_gate.weight, built['gate'])
    back = model_from_checkpoint(load_checkpoint(str(out))).eval()
    assert back.config.attention == 'gated' and all(hasattr(b.attn, 'c_gate') for b in back.transformer.h)
    x = torch.randint(0, back.config.vocab_size, (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(back(x)[0], model(x)[0])
    from lab.measure.arms import ckpt_arm
    assert ckpt_arm(str(out), load_checkpoint(str(out)))['name'] == 'base gated (L=32)'  # told apart from a plain base
    with pytest.raises(ValueError) as e:
        hf_export.main([f'--ckpt={out}', f'--out_dir={tmp_path / "hf"}'])
    assert "attention='gated'" in str(e.value) and 'gated attention' in str(e.value) and '\n' not in str(e.value)

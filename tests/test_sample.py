"""KV cache (lab/kv_cache.py) exactness for every position encoding, rope type and smeared keys, GPT.generate and
kv_cache.generate, and sample.py's command line."""
import pytest
import torch

import sample
from conftest import run
from lab import kv_cache
from lab.kv_cache import KVCache
from lab.position_maps import mapped_attention
from model import GPT, GPTConfig
from data.checkpoints import model_args
from rope_config import DYNAMIC_TYPES, ROPE_TYPES

V, L = 40, 8  # a tiny L, so 26 tokens cross L and go past 2L and 3L


def tiny(pos_emb='rope', rope_type='default', factor=None, block_size=L, attention='causal'):
    """A 2-layer model whose attention logits are of order 1 (q/k/v weights x10): at init they are ~1e-3, attention
    is almost uniform and a wrong position or a stale scale would hardly move the logits. attention='smear_keys':
    gates away from 0.5 and different per head and layer (sigmoid(-1.5) .. sigmoid(2))."""
    torch.manual_seed(0)
    sc = None if rope_type == 'default' else {
        'rope_type': rope_type, 'factor': factor or (1.0 if rope_type in ('dynamic', 'dynamic_yarn') else 4.0),
        'original_max_position_embeddings': L}
    if rope_type == 'longrope':  # per-pair factors (searched, in real use): short ones up to L, long ones past it
        sc.update(short_factor=[1.0] * 8, long_factor=[1.0 + 3.0 * i / 7 for i in range(8)])
    m = GPT(GPTConfig(block_size=block_size, vocab_size=V, n_layer=2, n_head=2, n_embd=32, pos_emb=pos_emb,
                      rope_scaling=sc, attention=attention)).eval()
    with torch.no_grad():
        for i, block in enumerate(m.transformer.h):
            block.attn.c_attn.weight.mul_(10.0)
            if attention == 'smear_keys':
                block.attn.smear.copy_(torch.tensor([-1.5 + i, 2.0 - i]).view(2, 1, 1))
    return m


ARMS = [('rope', t, None) for t in ROPE_TYPES] + [('rope', 'dynamic_yarn', 2.0), ('sinusoidal', 'default', None),
                                                  ('none', 'default', None), ('learned', 'default', None)]


@pytest.mark.parametrize('pos_emb, rope_type, factor', ARMS)
@torch.no_grad()
def test_cached_logits_equal_a_full_forward_at_every_step(pos_emb, rope_type, factor):
    """Feed 26 tokens through the cache in pieces (3 at once, then 2, then one by one): after every piece the
    logits of its tokens equal a full forward of the whole prefix. Dynamic types change scale past L (8) and
    again with every token; dynamic_yarn at factor 2 holds its scale up to 2L."""
    m = tiny(pos_emb, rope_type, factor, block_size=32 if pos_emb == 'learned' else L)
    ids = torch.randint(0, V, (2, 26))
    cache, past = KVCache(), 0
    for n in (3, 2) + (1,) * 21:
        cached = cache.forward(m, ids[:, past:past + n])
        past += n
        full = m(ids[:, :past])[0][:, -n:]
        assert cache.length == past
        assert torch.allclose(cached, full, atol=1e-5, rtol=0), f"{rope_type} at length {past}"


@pytest.mark.parametrize('pos_emb, rope_type, factor', ARMS)
@torch.no_grad()
def test_generate_gives_the_same_text_with_and_without_the_cache(pos_emb, rope_type, factor):
    """kv_cache.generate (the cache) and GPT.generate (the whole prefix at every step) give the same text."""
    m = tiny(pos_emb, rope_type, factor, block_size=32 if pos_emb == 'learned' else L)
    prompt = torch.randint(0, V, (2, 3))
    greedy = kv_cache.generate(m, prompt, 23, top_k=1)
    assert greedy.shape == (2, 26) and torch.equal(greedy[:, :3], prompt)
    assert torch.equal(m.generate(prompt, 23, top_k=1), greedy)
    drawn = [gen(m, prompt, 23, generator=torch.Generator().manual_seed(5)) for gen in (kv_cache.generate, GPT.generate)]
    assert torch.equal(drawn[0], drawn[1]) and not torch.equal(drawn[0], greedy)


@pytest.mark.parametrize('rope_type, factor, fed', [
    ('yarn', None, [3] + [1] * 19),                         # static: every token is computed once
    ('dynamic', None, [3] + [1] * 5 + list(range(9, 23))),  # plain up to L = 8, then the scale moves every step
    ('dynamic_yarn', 2.0, [3] + [1] * 13 + list(range(17, 23))),  # holds s = 2 up to 2L = 16
    ('longrope', None, [3] + [1] * 5 + [9] + [1] * 13),  # short factors up to L, long ones (fixed) past it
])
@torch.no_grad()
def test_cache_recomputes_the_prefix_only_when_the_scale_moves(rope_type, factor, fed):
    """The lengths of the forwards generate runs through the embedding: the prompt once, then one token per step
    while the rope tables hold still; a dynamic type recomputes all l tokens once l's frequencies differ."""
    m = tiny('rope', rope_type, factor)
    seen = []
    m.transformer.wte.register_forward_hook(lambda mod, args, out: seen.append(args[0].size(1)))
    kv_cache.generate(m, torch.randint(0, V, (1, 3)), 20, top_k=1)
    assert seen == fed


@torch.no_grad()
def test_dynamic_states_go_stale_so_rotating_cached_keys_is_not_enough():
    """Why the dynamic cache recomputes instead of re-rotating keys (Hugging Face's fix, transformers #25104): the
    hidden state of token 5 after layer 1, which makes layer 2's key AND value, depends on the total length l for
    a dynamic type (its attention ran at l's scale); for a static type it does not (causality)."""
    ids = torch.randint(0, V, (1, 20))
    for rope_type, stale in (('dynamic', True), ('yarn', False)):
        m, states = tiny('rope', rope_type), []
        m.transformer.h[0].register_forward_hook(lambda mod, args, out: states.append(out[0, 5]))
        m(ids[:, :L])
        m(ids)
        assert ((states[0] - states[1]).abs().max() > 1e-3) == stale, rope_type


@torch.no_grad()
def test_switching_the_scaling_mid_cache_recomputes_the_prefix():
    m = tiny()
    ids = torch.randint(0, V, (1, 12))
    cache = KVCache()
    cache.forward(m, ids[:, :10])
    m.set_rope_scaling({'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': L})
    assert torch.allclose(cache.forward(m, ids[:, 10:]), m(ids)[0][:, 10:], atol=1e-5, rtol=0)


@torch.no_grad()
def test_learned_positions_refuse_to_run_past_their_table():
    m = tiny('learned')
    prompt = torch.randint(0, V, (1, 6))
    for generate in (GPT.generate, kv_cache.generate):
        with pytest.raises(ValueError, match=r'prompt \(6\) \+ max_new_tokens \(3\) run past the learned '
                                             r'position table \(block_size=8\); ask for at most 2 new tokens'):
            generate(m, prompt, 3)
        assert generate(m, prompt, 2).shape == (1, 8)
    cache = KVCache()
    cache.forward(m, prompt)
    cache.forward(m, prompt[:, :2])
    with pytest.raises(ValueError, match='positions reach 8, outside the learned position table'):
        cache.forward(m, prompt[:, :1])
    assert cache.length == 8  # the refused token was not taken in


@torch.no_grad()
def test_bad_generate_and_cache_use():
    m = tiny()
    x = torch.randint(0, V, (2, 4))
    for generate in (GPT.generate, kv_cache.generate):
        with pytest.raises(ValueError, match='temperature=0 must be > 0'):
            generate(m, x, 5, temperature=0)
        with pytest.raises(ValueError, match='top_k=0 must be >= 1'):
            generate(m, x, 5, top_k=0)
    cache = KVCache()
    cache.forward(m, x)
    with pytest.raises(ValueError, match='kv_cache holds 2 sequences but idx has 1'):
        cache.forward(m, x[:1])
    with pytest.raises(TypeError, match='pos'):  # the cache numbers positions itself: there is no pos to combine
        cache.forward(m, x, pos=torch.arange(4))
    assert cache.length == 4
    alibi = tiny('alibi')
    with pytest.raises(ValueError, match='the KV cache does not cover pos_emb=alibi'):
        KVCache().forward(alibi, x)
    assert kv_cache.blocker(alibi) == 'pos_emb=alibi' and kv_cache.blocker(m) is None
    assert torch.equal(kv_cache.generate(alibi, x, 5, top_k=1), alibi.generate(x, 5, top_k=1))  # recomputes instead


SMEAR_ARMS = [('rope', t, None) for t in ROPE_TYPES if t not in DYNAMIC_TYPES] + [
    ('rope', 'dynamic', None), ('sinusoidal', 'default', None), ('none', 'default', None)]


@pytest.mark.parametrize('pos_emb, rope_type, factor', SMEAR_ARMS)
@torch.no_grad()
def test_cache_covers_smeared_keys(pos_emb, rope_type, factor):
    """Smeared keys (a key mixes in the previous token's, lookback = 1): decoded one token at a time through the
    cache, every step's logits equal a full forward of the prefix (the last cached token is fed again, so the new key
    mixes in the right previous key); generate gives the text of the uncached path. The gates matter: the same
    weights with causal attention give other logits."""
    m = tiny(pos_emb, rope_type, factor, attention='smear_keys')
    plain = tiny(pos_emb, rope_type, factor)
    plain.load_state_dict(m.state_dict(), strict=False)  # the same weights, without the smear gates
    ids = torch.randint(0, V, (2, 20))
    assert (m(ids)[0] - plain(ids)[0]).abs().max() > 1e-2
    cache = KVCache()
    for past in range(20):
        cached = cache.forward(m, ids[:, past:past + 1])
        assert cache.length == past + 1 and torch.equal(cache.ids, ids[:, :past + 1])
        assert torch.allclose(cached, m(ids[:, :past + 1])[0][:, -1:], atol=1e-5, rtol=0), f"{rope_type} at {past + 1}"
    prompt = ids[:, :3]
    assert torch.equal(kv_cache.generate(m, prompt, 17, top_k=1), m.generate(prompt, 17, top_k=1))


@pytest.mark.parametrize('rope_type, attention', [('default', 'causal'), ('dynamic', 'causal'),
                                                  ('yarn', 'smear_keys')])
@torch.no_grad()
def test_a_failing_forward_leaves_the_cache_as_it_was(rope_type, attention):
    """A forward that raises half-way (here: the second layer's attention, once) takes nothing in: length, ids,
    every layer's keys and values and the frequencies are those of before, and the next forward is exact. Also for
    the prompt of an empty cache, for a batch of the wrong size, and for a dynamic type at a length where the scale
    moves (the cache would be refilled from scratch)."""
    m = tiny('rope', rope_type, attention=attention)
    ids = torch.randint(0, V, (2, 12))
    attn = m.transformer.h[1].attn

    def fail_once(*args, **kw):
        del attn.forward  # the class's forward again from the next call on
        raise RuntimeError('layer 1 failed')

    def snapshot(c):
        return (c.length, None if c.ids is None else c.ids.clone(), [k.clone() for k in c.keys],
                [v.clone() for v in c.values], c.freqs)

    def same(a, b):
        return (a[0] == b[0] and (a[1] is None and b[1] is None or torch.equal(a[1], b[1])) and
                len(a[2]) == len(b[2]) and all(torch.equal(x, y) for x, y in zip(a[2] + a[3], b[2] + b[3])) and
                (a[4] is None and b[4] is None or a[4] is not None and b[4] is not None and len(a[4]) == len(b[4])
                 and all(x[1] == y[1] and torch.equal(x[0], y[0]) for x, y in zip(a[4], b[4]))))  # per RoPE group

    cache, past = KVCache(), 0
    for n in (3, 1, 4, 1, 1, 2):  # crosses L = 8: the dynamic type's scale moves from length 9 on
        before = snapshot(cache)
        attn.forward = fail_once
        with pytest.raises(RuntimeError, match='layer 1 failed'):
            cache.forward(m, ids[:, past:past + n])
        assert same(snapshot(cache), before), f"cache changed by a failed forward at length {past}"
        if past:
            with pytest.raises(ValueError, match='kv_cache holds 2 sequences but idx has 1'):
                cache.forward(m, ids[:1, past:past + n])
            assert same(snapshot(cache), before)
        cached = cache.forward(m, ids[:, past:past + n])
        past += n
        assert cache.length == past and torch.equal(cache.ids, ids[:, :past])
        assert torch.allclose(cached, m(ids[:, :past])[0][:, -n:], atol=1e-5, rtol=0), f"at length {past}"


# ----------------------------------------------------------------------------- sample.py

ITOS = ['\x00', '\n', ' ', ':', 'A', 'B', 'C', 'M', 'O', 'R', 'E'] + [chr(c) for c in range(ord('a'), ord('z') + 1)]


def write_ckpt(folder, pos_emb='rope', block_size=16, attention='causal', rope_scaling=None, base_checkpoint=None):
    """A checkpoint with the fields sample.py reads: weights, model_args, the dataset's vocabulary, the lineage."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=block_size, vocab_size=len(ITOS), n_layer=1, n_head=2, n_embd=16, pos_emb=pos_emb,
                      attention=attention, rope_scaling=rope_scaling))
    torch.save({'model': m.state_dict(), 'model_args': model_args(m),
                'dataset': {'data_dir': str(folder), 'dataset': 'tiny_char', 'vocab_size': len(ITOS),
                            'tokenizer': 'char', 'itos': ITOS},
                'lineage': {'train_len': block_size, 'seq_len': block_size, 'base_checkpoint': base_checkpoint}},
               folder / 'ckpt.pt')
    return m


def test_sample_command_line(tmp_path):
    """Two greedy samples of 30 new characters with zero-shot YaRN, whose factor defaults to (2 + 30) / L = 2."""
    m = write_ckpt(tmp_path)
    r = run(['sample.py', f'--ckpt={tmp_path}', '--start=AB', '--num_samples=2', '--max_new_tokens=30', '--top_k=1',
             '--rope_type=yarn:beta_fast=8', '--device=cpu', '--progress=False'], timeout=120)
    assert r.returncode == 0, r.stderr
    assert 'rope yarn s=2 β_fast=8' in r.stderr and 'prompt 2 tokens + 30 new' in r.stderr
    samples = r.stdout.split('---------------\n')
    assert len(samples) == 3 and samples[2] == ''
    m.set_rope_scaling({'rope_type': 'yarn', 'factor': 2.0, 'original_max_position_embeddings': 16, 'beta_fast': 8.0})
    expected = m.eval().generate(torch.tensor([[4, 5]]), 30, top_k=1)[0]
    assert samples[0] == samples[1] == ''.join(ITOS[i] for i in expected) + '\n'


def test_sample_reads_a_prompt_file_and_scales_dynamic_types_with_factor_1(tmp_path, capsys):
    write_ckpt(tmp_path)
    (tmp_path / 'prompt.txt').write_text('ROMEO:\n', encoding='utf-8')
    sample.main([f'--ckpt={tmp_path}', f'--start=FILE:{tmp_path / "prompt.txt"}', '--num_samples=1',
                 '--max_new_tokens=20', '--rope_type=dynamic', '--device=cpu', '--progress=False'])
    out = capsys.readouterr()
    assert out.out.startswith('ROMEO:\n') and len(out.out) == len('ROMEO:\n') + 20 + len('\n---------------\n')
    assert 'rope dynamic;' in out.err  # factor 1: plain up to L, then s = l / L


@pytest.mark.parametrize('args, message', [
    (['--ckpt=MISSING'], 'does not exist'),
    (['--start='], '--start is empty'),
    (['--start=FILE:nowhere.txt'], 'prompt file nowhere.txt does not exist'),
    (['--start=ROMEO!'], "character '!' is not in the vocabulary"),
    (['--rope_type=bogus'], "rope type 'bogus' is unknown"),
    (['--rope_type=yarn', '--factor=0.5'], 'must be >= 1'),
    (['--temperature=-1'], r'temperature=-1.0 must be a number >= 0'),  # 0 is greedy (tests/test_bad_input_sample.py)
    (['--colour=red'], "unknown setting 'colour'"),
])
def test_sample_bad_input(tmp_path, args, message):
    write_ckpt(tmp_path)
    with pytest.raises(ValueError, match=message):
        sample.main([f'--ckpt={tmp_path}', '--device=cpu', '--progress=False'] + args)


CLIP = {'rope_type': 'clip', 'original_max_position_embeddings': 16}
PROPE = {'rope_type': 'proportional', 'partial_rotary_factor': 0.25}


@pytest.mark.parametrize('own, base, rope_type', [(CLIP, None, 'linear'), (CLIP, None, 'yarn:beta_fast=8'),
                                                  (CLIP, None, 'default'), (PROPE, None, 'linear'),
                                                  (PROPE, None, 'proportional:partial_rotary_factor=0.5'),
                                                  (CLIP, 'out/base', 'linear')])  # a fine-tune that kept clip
def test_sample_refuses_to_replace_a_trained_in_rope_type(tmp_path, capsys, own, base, rope_type):
    """Before, --rope_type=linear on a clipped or p-RoPE base sampled with PI over every pair (the stopped ones turning
    again) without a word, where eval.py and finetune_long.py refuse it. Now the same check (check_over_trained_in)
    refuses it in one line naming both types; the base's own type with a new factor and a position map still run."""
    from badinput import check_refused
    write_ckpt(tmp_path, rope_scaling=own, base_checkpoint=base)
    args = [f'--ckpt={tmp_path}', '--start=AB', '--num_samples=1', '--max_new_tokens=4', '--device=cpu',
            '--progress=False']
    check_refused(sample.main, args + [f'--rope_type={rope_type}'],
                  [f"'{own['rope_type']}'", f"--rope_type={rope_type}", 'would replace it'], capsys, [tmp_path])
    own_type = ':'.join([own['rope_type']] + [f'{k}={v}' for k, v in own.items() if k == 'partial_rotary_factor'])
    for ok in ([], [f'--rope_type={own_type}', '--factor=2'], ['--rope_type=rerope:window=4']):
        sample.main(args + ok)
        assert capsys.readouterr().out.count('---------------') == 1


def test_sample_learned_model(tmp_path, capsys):
    write_ckpt(tmp_path, pos_emb='learned')
    base = [f'--ckpt={tmp_path}', '--start=AB', '--device=cpu', '--progress=False', '--num_samples=1']
    with pytest.raises(ValueError, match='no RoPE to scale'):
        sample.main(base + ['--rope_type=yarn'])
    with pytest.raises(ValueError, match='run past the learned position table'):
        sample.main(base + ['--max_new_tokens=15'])
    sample.main(base + ['--max_new_tokens=14'])
    assert len(capsys.readouterr().out.split('\n---------------\n')[0]) == 16


def resave(folder, m):
    """Store m's (edited) weights in the checkpoint write_ckpt wrote."""
    torch.save(dict(torch.load(folder / 'ckpt.pt', weights_only=True), model=m.state_dict()), folder / 'ckpt.pt')


def sample_fed(monkeypatch, capsys, args):
    """sample.main(args) in this process -> (stdout, first stderr line, the model, the length of every forward its
    embedding ran)."""
    fed, built = [], []

    def load(ckpt, _load=sample.model_from_checkpoint):
        m = _load(ckpt)
        m.transformer.wte.register_forward_hook(lambda mod, a, out: fed.append(a[0].size(1)))
        built.append(m)
        return m
    monkeypatch.setattr(sample, 'model_from_checkpoint', load)
    sample.main(args)
    out = capsys.readouterr()
    return out.out, out.err.splitlines()[0], built[0], fed


def test_sample_keeps_the_cache_on_for_smeared_keys(tmp_path, monkeypatch, capsys):
    """A smear-keys checkpoint samples with the KV cache, and says so: after the prompt every step feeds the new
    token and the one before it (lookback 1), and the text is that of the uncached path."""
    m = write_ckpt(tmp_path, attention='smear_keys')
    with torch.no_grad():
        m.transformer.h[0].attn.smear.copy_(torch.tensor([-1.0, 1.5]).view(2, 1, 1))
    resave(tmp_path, m)
    args = [f'--ckpt={tmp_path}', '--start=ROMEO:', '--num_samples=1', '--max_new_tokens=10', '--top_k=1',
            '--device=cpu', '--progress=False']
    out, first, model, fed = sample_fed(monkeypatch, capsys, args)
    assert model.config.attention == 'smear_keys' and 'kv_cache on' in first
    assert fed == [6] + [2] * 9
    expected = m.eval().generate(torch.tensor([[ITOS.index(c) for c in 'ROMEO:']]), 10, top_k=1)[0]
    assert out == ''.join(ITOS[i] for i in expected) + '\n---------------\n'
    out, first, _, fed = sample_fed(monkeypatch, capsys, args + ['--kv_cache=False'])
    assert 'kv_cache off (--kv_cache=False)' in first and fed == list(range(6, 16))
    write_ckpt(tmp_path, pos_emb='alibi')
    _, first, _, fed = sample_fed(monkeypatch, capsys, args)
    assert 'kv_cache off (pos_emb=alibi recomputes the prefix)' in first and fed == list(range(6, 16))


def test_sample_takes_a_position_map(tmp_path, monkeypatch, capsys):
    """--rope_type=rerope:window=4 runs the model under ReRoPE (recomputing the prefix: the cache does not cover a
    map, and the first line says so): the text of GPT.generate under the map's attention."""
    m = write_ckpt(tmp_path)
    with torch.no_grad():  # attention logits of order 1, so that the map changes the greedy text
        m.transformer.h[0].attn.c_attn.weight.mul_(30.0)
    resave(tmp_path, m)
    args = [f'--ckpt={tmp_path}', '--start=ROMEO:', '--num_samples=1', '--max_new_tokens=20', '--top_k=1',
            '--device=cpu', '--progress=False', '--rope_type=rerope:window=4']
    out, first, model, fed = sample_fed(monkeypatch, capsys, args)
    assert 'rope default + rerope w=4;' in first and 'kv_cache off (a position map recomputes the prefix)' in first
    assert fed == list(range(6, 26)) and model.config.rope_scaling is None
    prompt = torch.tensor([[ITOS.index(c) for c in 'ROMEO:']])
    pm = {'method': 'rerope', 'window': 4}
    expected = m.eval().generate(prompt, 20, top_k=1, attend=mapped_attention(m, pm))[0]
    assert out == ''.join(ITOS[i] for i in expected) + '\n---------------\n'
    assert not torch.equal(expected, m.generate(prompt, 20, top_k=1)[0])  # the map is really applied


GROUPED = ['causal', 'smear_keys', 'gated', 'smear_keys_gated']  # (the classes the cache covers: kv_cache.blocker)


@pytest.mark.parametrize('layers', [None, 'rope:w=5,rope:c=6'])
@pytest.mark.parametrize('attention', GROUPED)
@torch.no_grad()
def test_cache_is_exact_with_grouped_heads(attention, layers):
    """Issue 60: grouped-query heads (4 query heads, 2 key/value heads) under every attention class the cache covers.
    Smeared keys' gate is per query head and acts after the repeat, so the keys of one group differ: the cache keeps
    every query head's key (keys_per_head). Before, it kept one key per group: logits off by ~2.5 after a few steps."""
    import lab.gated  # noqa: F401  registers attention='gated' (and 'smear_keys_gated')
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=L, vocab_size=V, n_layer=2, n_head=4, n_kv_head=2, n_embd=32, layers=layers,
                      attention=attention)).eval()
    with torch.no_grad():
        for i, block in enumerate(m.transformer.h):
            block.attn.c_attn.weight.mul_(10.0)
            if hasattr(block.attn, 'smear'):  # gates that differ inside each group of query heads
                block.attn.smear.copy_(torch.tensor([-3.0 + i, 3.0, 2.0 - i, -2.0]).view(4, 1, 1))
    assert kv_cache.blocker(m) is None
    ids = torch.randint(0, V, (2, 16), generator=torch.Generator().manual_seed(3))
    cache = KVCache()
    for past, n in zip((0, 3, 5) + tuple(range(6, 16)), (3, 2, 1) + (1,) * 10):
        cached = cache.forward(m, ids[:, past:past + n])
        full = m(ids[:, :past + n])[0][:, -n:]
        assert (cached - full).abs().max() <= 1e-5, f"{attention} at {past + n}"
    assert torch.equal(kv_cache.generate(m, ids[:, :3], 10, top_k=1), m.generate(ids[:, :3], 10, top_k=1))

"""KV cache exactness for every position encoding and rope type, GPT.generate, and sample.py's command line."""
import pytest
import torch

import sample
from conftest import run
from model import GPT, GPTConfig, KVCache, model_args
from rope import ROPE_TYPES

V, L = 40, 8  # a tiny L, so 26 tokens cross L and go past 2L and 3L


def tiny(pos_emb='rope', rope_type='default', factor=None, block_size=L):
    """A 2-layer model whose attention logits are of order 1 (q/k/v weights x10): at init they are ~1e-3, attention
    is almost uniform and a wrong position or a stale scale would hardly move the logits."""
    torch.manual_seed(0)
    sc = None if rope_type == 'default' else {
        'rope_type': rope_type, 'factor': factor or (1.0 if rope_type in ('dynamic', 'dynamic_yarn') else 4.0),
        'original_max_position_embeddings': L}
    if rope_type == 'longrope':  # per-pair factors (searched, in real use): short ones up to L, long ones past it
        sc.update(short_factor=[1.0] * 8, long_factor=[1.0 + 3.0 * i / 7 for i in range(8)])
    m = GPT(GPTConfig(block_size=block_size, vocab_size=V, n_layer=2, n_head=2, n_embd=32, pos_emb=pos_emb,
                      rope_scaling=sc)).eval()
    with torch.no_grad():
        for block in m.transformer.h:
            block.attn.c_attn.weight.mul_(10.0)
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
        cached = m(ids[:, past:past + n], kv_cache=cache)[0]
        past += n
        full = m(ids[:, :past])[0][:, -n:]
        assert cache.length == past
        assert torch.allclose(cached, full, atol=1e-5, rtol=0), f"{rope_type} at length {past}"


@pytest.mark.parametrize('pos_emb, rope_type, factor', ARMS)
@torch.no_grad()
def test_generate_gives_the_same_text_with_and_without_the_cache(pos_emb, rope_type, factor):
    m = tiny(pos_emb, rope_type, factor, block_size=32 if pos_emb == 'learned' else L)
    prompt = torch.randint(0, V, (2, 3))
    greedy = m.generate(prompt, 23, top_k=1)
    assert greedy.shape == (2, 26) and torch.equal(greedy[:, :3], prompt)
    assert torch.equal(m.generate(prompt, 23, top_k=1, kv_cache=False), greedy)
    drawn = [m.generate(prompt, 23, kv_cache=kv, generator=torch.Generator().manual_seed(5)) for kv in (True, False)]
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
    m.generate(torch.randint(0, V, (1, 3)), 20, top_k=1)
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
    m(ids[:, :10], kv_cache=cache)
    m.set_rope_scaling({'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': L})
    assert torch.allclose(m(ids[:, 10:], kv_cache=cache)[0], m(ids)[0][:, 10:], atol=1e-5, rtol=0)


@torch.no_grad()
def test_learned_positions_refuse_to_run_past_their_table():
    m = tiny('learned')
    prompt = torch.randint(0, V, (1, 6))
    with pytest.raises(ValueError, match=r'prompt \(6\) \+ max_new_tokens \(3\) = 9 tokens run past the learned '
                                         r'position table \(block_size=8\); ask for at most 2 new tokens'):
        m.generate(prompt, 3)
    assert m.generate(prompt, 2).shape == (1, 8)
    cache = KVCache()
    m(prompt, kv_cache=cache)
    m(prompt[:, :2], kv_cache=cache)
    with pytest.raises(ValueError, match='position 8 is outside the learned position table'):
        m(prompt[:, :1], kv_cache=cache)
    assert cache.length == 8  # the refused token was not taken in


@torch.no_grad()
def test_bad_generate_and_cache_use():
    m = tiny()
    x = torch.randint(0, V, (2, 4))
    with pytest.raises(ValueError, match='temperature=0 must be > 0'):
        m.generate(x, 5, temperature=0)
    with pytest.raises(ValueError, match='top_k=0 must be >= 1'):
        m.generate(x, 5, top_k=0)
    cache = KVCache()
    m(x, kv_cache=cache)
    with pytest.raises(ValueError, match='kv_cache holds 2 sequences but idx has 1'):
        m(x[:1], kv_cache=cache)
    with pytest.raises(ValueError, match='pos and kv_cache cannot be combined'):
        m(x, pos=torch.arange(4), kv_cache=cache)


# ----------------------------------------------------------------------------- sample.py

ITOS = ['\x00', '\n', ' ', ':', 'A', 'B', 'C', 'M', 'O', 'R', 'E'] + [chr(c) for c in range(ord('a'), ord('z') + 1)]


def write_ckpt(folder, pos_emb='rope', block_size=16):
    """A checkpoint with the fields sample.py reads: weights, model_args, the dataset's vocabulary, the lineage."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=block_size, vocab_size=len(ITOS), n_layer=1, n_head=2, n_embd=16, pos_emb=pos_emb))
    torch.save({'model': m.state_dict(), 'model_args': model_args(m),
                'dataset': {'data_dir': str(folder), 'dataset': 'tiny_char', 'vocab_size': len(ITOS),
                            'tokenizer': 'char', 'itos': ITOS},
                'lineage': {'train_len': block_size, 'seq_len': block_size, 'base_checkpoint': None}},
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
    (['--temperature=0'], r'temperature=0.0 must be > 0'),
    (['--colour=red'], "unknown setting 'colour'"),
])
def test_sample_bad_input(tmp_path, args, message):
    write_ckpt(tmp_path)
    with pytest.raises(ValueError, match=message):
        sample.main([f'--ckpt={tmp_path}', '--device=cpu', '--progress=False'] + args)


def test_sample_learned_model(tmp_path, capsys):
    write_ckpt(tmp_path, pos_emb='learned')
    base = [f'--ckpt={tmp_path}', '--start=AB', '--device=cpu', '--progress=False', '--num_samples=1']
    with pytest.raises(ValueError, match='no RoPE to scale'):
        sample.main(base + ['--rope_type=yarn'])
    with pytest.raises(ValueError, match='run past the learned position table'):
        sample.main(base + ['--max_new_tokens=15'])
    sample.main(base + ['--max_new_tokens=14'])
    assert len(capsys.readouterr().out.split('\n---------------\n')[0]) == 16
